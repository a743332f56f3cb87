"""Derived-events records no storage applied, behind Faust's committed offset, are read from the log start
(kagent.worker.storage, kagent.worker.applied_offsets), through a real worker.

Faust's committed offset on a derived-events partition can move past records no storage applied: records
fetched and skipped around a rebalance are acknowledged anyway, and a worker can die between applying a
partition's first batch and the flush that records how far it applied. A worker that then holds the
partition with no applied position of it starts at Faust's offset. Here that state is made for real: the
records go straight onto the derived-events topic and the app's consumer group commits past them before
the worker starts. On one partition a later record arrives first (storage must not take it as the first
ever); on another nothing more arrives (the repair must find it by the positions alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from kagent.core.events import by_group, derive, packed_records
from kagent.core.table_keys import partition_of_group
from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, group_metadata, offset_commit, produce
from tests.support.web import wait_json
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration

APP_ID = "unapplied-test"
DERIVED_EVENTS = f"{APP_ID}-derived-events"
PARTITIONS = int(FAST["topic_partitions"])
TOPIC = "unapplied-data"


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """A broker of this module's own (overrides the session's, for ``start_worker`` too): its
    ``__consumer_offsets`` stays empty, so the source sends nothing to the derived-events partitions."""
    with EmbeddedBroker() as broker:
        yield broker


def _named(partition: int, count: int, taken: set[str]) -> list[str]:
    """``count`` group names of derived-events ``partition``, none of ``taken``."""
    names = (f"unapplied-app-{n}" for n in range(10_000))
    found = [n for n in names if n not in taken and partition_of_group(n, PARTITIONS) == partition][:count]
    taken.update(found)
    return found


async def _send(bootstrap: str, groups: list[str]) -> dict[int, int]:
    """Each group's assignment (two members, two partitions of :data:`TOPIC` each) and commits at 10, as the
    source packs derived events, onto each group's derived-events partition; the log end of each partition
    written."""
    events = []
    for group in groups:
        members = {f"{group}-{m}": [TopicPartition(TOPIC, 2 * m), TopicPartition(TOPIC, 2 * m + 1)] for m in range(2)}
        events += derive(group_metadata(group, 3, members))
        for partition in range(4):
            events += derive(offset_commit(group, TOPIC, partition, 10))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        ends = {}
        for partition, value in packed_records(by_group(events), PARTITIONS):
            sent = await (await producer.send(DERIVED_EVENTS, value, partition=partition))
            ends[partition] = sent.offset + 1
        return ends
    finally:
        await producer.stop()


async def _commit_faust_offsets(bootstrap: str, offsets: dict[int, int]) -> None:
    """The app's consumer group (Faust's: the app id) commits ``offsets`` of the derived-events topic."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=APP_ID, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(DERIVED_EVENTS, p) for p in offsets]
        consumer.assign(partitions)
        await consumer.commit({TopicPartition(DERIVED_EVENTS, p): offset for p, offset in offsets.items()})
        for tp in partitions:
            assert await consumer.committed(tp) == offsets[tp.partition], tp
    finally:
        await consumer.stop()


def _measured(groups: list[str]) -> Callable[[Any], bool]:
    expected = {f"{g}-{m}": 180 for g in groups for m in range(2)}  # 2 partitions x (100 - 10) each

    def check(body: Any) -> bool:
        lag = {m: v for g in groups for m, v in body["groups"].get(g, {}).get("member_lag", {}).items()}
        return lag == expected

    return check


async def test_records_behind_fausts_offset_that_no_storage_applied_are_read_from_the_log_start(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, TOPIC: 4, DERIVED_EVENTS: PARTITIONS})
    await produce(bootstrap, TOPIC, {p: 100 for p in range(4)})
    taken: set[str] = set()
    first_then_later, nothing_after = _named(0, 2, taken), _named(1, 2, taken)
    later = _named(0, 1, taken)

    skipped = await _send(bootstrap, first_then_later + nothing_after)
    assert sorted(skipped) == [0, 1]
    await _commit_faust_offsets(bootstrap, skipped)
    await _send(bootstrap, later)  # after Faust's offset: on partition 0 it comes first

    worker = start_worker(APP_ID, **FAST)
    await asyncio.to_thread(worker.wait_serving)
    everyone = first_then_later + nothing_after + later
    await wait_json(worker.url + "api/local/groups", _measured(everyone), 60)

    log = worker.log()
    assert (
        "derived-events partition 0: reading again from offset 0, the first not applied: no record of it was "
        "ever applied, and the first one delivered is past its log start"
    ) in log, worker.log_tail(60)
    assert (
        "derived-events partition 1: reading again from offset 0, the first not applied: no record of it was "
        "ever applied, and the consumer is past its log start"
    ) in log, worker.log_tail(60)
