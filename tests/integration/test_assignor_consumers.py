"""Real aiokafka consumers join a group on the embedded broker with `lag-sticky`
and get the assignment the pure function computes for the lag set up."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Mapping

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import TopicPartition

from kagent.client.assignors import LagStickyPartitionAssignor
from kagent.core.assignors import Member, assign
from kagent.core.lag import partition_lag
from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import produce
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.integration

RECORDS = (40, 25, 12, 6, 3, 1, 0)
"""Records produced to each partition: with nothing committed and
auto.offset.reset=earliest, that is each partition's lag."""

JOIN_TIMEOUT = 120.0


class History(ConsumerRebalanceListener):  # type: ignore[misc]
    """Every assignment a consumer was given, in order, with its generation."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer
        self.assignments: list[frozenset[TopicPartition]] = []
        self.generations: list[int] = []

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self.assignments.append(frozenset(assigned))
        self.generations.append(self.consumer._coordinator.generation)  # no public accessor


async def measure_lag(bootstrap_servers: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The group's lag by KAFKA-5337's rule: nothing committed, reset to earliest."""
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers)
    await reader.start()
    try:
        begin = await reader.beginning_offsets(partitions)
        end = await reader.end_offsets(partitions)
    finally:
        await reader.stop()
    return {tp: partition_lag(None, begin[tp], end[tp], "earliest") for tp in partitions}


def settled(histories: list[History], partitions: set[TopicPartition]) -> bool:
    """Every consumer has been given its assignment in the generation the group
    is in, and together those assignments cover every partition once."""
    generations = {h.consumer._coordinator.generation for h in histories}
    if len(generations) != 1 or not all(h.generations and h.generations[-1] in generations for h in histories):
        return False
    latest = [h.assignments[-1] for h in histories]
    return sum(len(current) for current in latest) == len(partitions) and frozenset().union(*latest) == partitions


async def test_consumers_get_the_lag_sticky_assignment(kafka_broker: EmbeddedBroker) -> None:
    topic = f"assignor-{uuid.uuid4().hex[:8]}"
    partitions = [TopicPartition(topic, p) for p in range(len(RECORDS))]
    await kafka_broker.create_topics({topic: len(RECORDS)})
    await produce(kafka_broker.bootstrap_servers, topic, dict(enumerate(RECORDS)))
    lag = await measure_lag(kafka_broker.bootstrap_servers, partitions)
    assert [lag[tp] for tp in partitions] == list(RECORDS)

    asked: list[frozenset[TopicPartition]] = []

    def lag_source(wanted: Collection[TopicPartition]) -> Mapping[TopicPartition, int]:
        asked.append(frozenset(wanted))
        return lag

    group_id = f"assignor-group-{uuid.uuid4().hex[:8]}"

    def consumer() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=kafka_broker.bootstrap_servers,
            group_id=group_id,
            partition_assignment_strategy=(LagStickyPartitionAssignor(lag_source),),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

    histories: list[History] = []

    async def join(count: int) -> None:
        """Start `count` more consumers, then wait until the group has settled."""
        joining = [History(consumer()) for _ in range(count)]
        await asyncio.gather(*(h.consumer.start() for h in joining))
        for history in joining:
            histories.append(history)
            history.consumer.subscribe([topic], listener=history)

        async def group_settled() -> bool:
            return settled(histories, set(partitions))

        await wait_until_async(
            group_settled,
            JOIN_TIMEOUT,
            f"the group of {len(histories)} to settle",
            interval=0.2,
            detail=lambda: f"assignments so far: {[h.assignments for h in histories]}",
        )

    def check_last_rebalance() -> None:
        """The leader was given each member's previous assignment as owned
        (nothing for a member that had not joined; the claims are disjoint, so
        their generations do not matter): the consumers got what the pure
        function gives for that and the lag set up."""
        members = {
            h.consumer._coordinator.member_id: Member(  # no public accessor for the member id
                [topic], owned=sorted(h.assignments[-2]) if len(h.assignments) > 1 else [], generation=0
            )
            for h in histories
        }
        got = {h.consumer._coordinator.member_id: sorted(h.assignments[-1]) for h in histories}
        assert got == assign("lag-sticky", {topic: len(RECORDS)}, members, lag)
        assert asked[-1] == frozenset(partitions)

    try:
        await join(3)
        check_last_rebalance()
        first = [h.assignments[-1] for h in histories]
        assert sorted(len(tps) for tps in first) == [2, 2, 3]

        await join(1)
        check_last_rebalance()
        kept = sum(len(h.assignments[-1] & before) for h, before in zip(histories, first, strict=False))
        assert kept == len(partitions) - 1  # only the partition the new member must take moves
    finally:
        await asyncio.gather(*(h.consumer.stop() for h in histories))
