"""Coordinator records on ``__consumer_offsets``, and the traffic whose lag they measure.

Tansu keeps no ``__consumer_offsets`` of its own, so the tests and benchmarks write there what
Kafka's group coordinator would. The records are built by the simulator's builders
(``kagent.tools.simulator.coordinator_records``), here given the defaults a test wants (now as
the timestamp, a consumer group of the range assignor). :func:`publish` writes them to partition 0,
in order, or, with ``by_group``, each to its group's partition by Kafka's rule, as the simulator does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    Assignment,
    GroupMetadata,
    OffsetCommit,
    Record,
    Subscription,
)
from kagent.tools.embedded import ONE_RECORD_BATCH
from kagent.tools.simulator import coordinator_records
from kagent.tools.simulator.coordinator_records import OffsetsTopicMessage
from kagent.tools.simulator.partitioners import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS
from kagent.tools.simulator.rebalance import MemberIdentity, Rebalance, RebalancedMember

__all__ = [
    "OFFSETS_TOPIC",
    "OFFSETS_TOPIC_PARTITIONS",
    "OffsetsTopicMessage",
    "group_metadata",
    "offset_commit",
    "produce",
    "publish",
]

#: A member's timeouts as a Kafka 3+ consumer sends them by default (session.timeout.ms, max.poll.interval.ms).
SESSION_TIMEOUT_MS, REBALANCE_TIMEOUT_MS = 45_000, 300_000


def _now_ms() -> int:
    return int(time.time() * 1000)


def offset_commit(group: str, topic: str, partition: int, offset: int) -> OffsetCommit:
    """``group`` committing ``offset`` on ``topic``-``partition`` now, as Kafka 2.1+ writes it (value v3)."""
    return coordinator_records.offset_commit(group, TopicPartition(topic, partition), offset, "", _now_ms())


def group_metadata(group: str, generation: int, members: Mapping[str, Sequence[TopicPartition]]) -> GroupMetadata:
    """Generation ``generation`` of consumer group ``group`` (range assignor, value v3) now: each member
    (the first one the leader) assigned its partitions and subscribed to every topic the group reads.
    A member id is ``<client id>-<suffix>``, as Kafka forms it; every member is on 127.0.0.1."""
    topics = tuple(sorted({tp.topic for tps in members.values() for tp in tps}))
    rebalance = Rebalance(
        group=group,
        generation=generation,
        protocol="range",
        leader=next(iter(members)),
        members=tuple(
            RebalancedMember(
                MemberIdentity(
                    member_id,
                    member_id.rpartition("-")[0] or member_id,
                    "/127.0.0.1",
                    SESSION_TIMEOUT_MS,
                    REBALANCE_TIMEOUT_MS,
                ),
                Subscription(0, topics),
                Assignment(0, tuple(tps)),
            )
            for member_id, tps in members.items()
        ),
    )
    return coordinator_records.group_metadata(rebalance, _now_ms())


async def publish(
    bootstrap_servers: str,
    messages: Iterable[Record | OffsetsTopicMessage],
    *,
    by_group: bool = False,
    batched: bool = False,
) -> None:
    """Write ``messages`` to ``__consumer_offsets`` (of :data:`OFFSETS_TOPIC_PARTITIONS` partitions) in
    order, and wait until every one is acknowledged. A record is encoded by the codec and goes to
    partition 0 (so all of them are read in the order given), or with ``by_group`` to its group's
    partition as Kafka places it; an :class:`OffsetsTopicMessage` (bytes a codec would not write)
    goes as it is.

    One record per batch by default, so that Tansu's ListOffsets gives the log end
    (``kagent.tools.embedded``); ``batched`` writes large batches, fast, for data sets whose
    ``__consumer_offsets`` end offsets nobody reads.
    """
    producer = (
        AIOKafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=20, max_batch_size=256 * 1024)
        if batched
        else AIOKafkaProducer(bootstrap_servers=bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    )
    await producer.start()
    try:
        pending = []
        for message in messages:
            if not isinstance(message, OffsetsTopicMessage):
                message = coordinator_records.offsets_topic_message(message, OFFSETS_TOPIC_PARTITIONS)
                if not by_group:
                    message = message._replace(partition=0)
            pending.append(
                await producer.send(OFFSETS_TOPIC, message.value, key=message.key, partition=message.partition)
            )
            if len(pending) >= 20_000:  # bounds the memory of the acknowledgements awaited
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


async def produce(bootstrap_servers: str, topic: str, counts: Mapping[int, int]) -> None:
    """Write ``counts[p]`` records to each partition ``p`` of ``topic``, one record per batch (Tansu's
    ListOffsets(latest) is the log end only then, ``kagent.tools.embedded``); waits for every acknowledgement."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        pending = [
            await producer.send(topic, b"x", key=b"%d" % i, partition=partition)
            for partition, count in counts.items()
            for i in range(count)
        ]
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
