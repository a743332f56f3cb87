"""The offsets-topic source against the embedded broker: its own consumer group, at least once."""

from __future__ import annotations

import asyncio
import gc
import uuid
from dataclasses import dataclass

import faust
import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from kagent.core.events import decode_record
from kagent.core.table_keys import partition_of_group
from kagent.settings import Settings
from kagent.tools.embedded import EmbeddedBroker
from kagent.worker import offsets_topic
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.metrics import Metrics
from kagent.worker.offsets_topic import OffsetsTopicSource
from kagent.worker.topology import declare
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    offset_commit,
    produce,
    publish,
)
from tests.support.faults import fail_first_batch
from tests.support.topics import TopicReader
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.integration


@dataclass
class _SourceUnderTest:
    """An offsets-topic source of its own app, reading the embedded broker."""

    app: faust.App
    settings: Settings
    derived_events: str
    source: OffsetsTopicSource


async def _source(kafka_broker: EmbeddedBroker, app_id: str) -> _SourceUnderTest:
    """A source (not started) of a new app ``app_id``, its topics created."""
    settings = Settings(broker=kafka_broker.bootstrap_servers, app_id=app_id, session_timeout=2)
    app = faust.App(settings.app_id, broker=kafka_broker.url, store="memory://")
    topology = declare(app, settings)
    derived_events = topology.derived_events.get_topic_name()
    await kafka_broker.create_topics(
        {
            OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS,
            derived_events: settings.topic_partitions,
            topology.dead_letters.get_topic_name(): settings.topic_partitions,
        }
    )
    metrics = Metrics()
    source = OffsetsTopicSource(
        app,
        settings,
        consumer_offsets=topology.consumer_offsets,
        derived_events=topology.derived_events,
        dead_letters=DeadLetters(app, topology.dead_letters.get_topic_name(), metrics),
        metrics=metrics,
    )
    return _SourceUnderTest(app, settings, derived_events, source)


async def test_a_batch_whose_sends_fail_is_read_and_sent_again(
    kafka_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker refusing a write cannot be caused on the embedded broker, so the producer's
    first record batch sent is made to fail (a fake fault); every group's events must still arrive."""
    suffix = uuid.uuid4().hex[:6]
    it = await _source(kafka_broker, f"source-retry-{suffix}")
    groups = {f"source-retry-app-{suffix}-{i}" for i in range(3)}
    await publish(kafka_broker.bootstrap_servers, [offset_commit(g, "orders", 0, 7) for g in sorted(groups)])

    failed = fail_first_batch(monkeypatch, KafkaError("refused"))
    running = asyncio.create_task(it.source.run())
    try:
        async with TopicReader(kafka_broker.bootstrap_servers, it.derived_events) as reader:

            def every_group_arrived() -> bool:
                assert not running.done(), running
                arrived = {(r.partition, events.group) for r in reader.records for events in decode_record(r.value)}
                assert {
                    partition == partition_of_group(group, it.settings.topic_partitions) for partition, group in arrived
                } <= {True}
                return {group for _, group in arrived} >= groups

            await reader.until(every_group_arrived, 60, f"the derived events of {sorted(groups)}")
        assert failed()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await it.app.producer.stop()


def _fetched_records_alive() -> int:
    """ConsumerRecords of ``__consumer_offsets`` alive in this process (after a full collection)."""
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is ConsumerRecord and obj.topic == OFFSETS_TOPIC)


async def test_a_quiet_topic_keeps_no_fetched_record_alive(kafka_broker: EmbeddedBroker) -> None:
    """Once its batches are sent, the source keeps none of their records while it waits for the next
    fetch: a batch is up to MAX_RECORDS records (tens of MB), and a quiet ``__consumer_offsets`` must
    not hold the last one for as long as it stays quiet."""
    suffix = uuid.uuid4().hex[:6]
    it = await _source(kafka_broker, f"source-quiet-{suffix}")
    groups = [f"source-quiet-app-{suffix}-{i}" for i in range(50)]
    await publish(kafka_broker.bootstrap_servers, [offset_commit(g, "orders", p, 7) for g in groups for p in range(4)])
    running = asyncio.create_task(it.source.run())

    async def read_to_the_end() -> bool:
        assert not running.done(), running
        return it.source.applied > 0 and await it.source.backlog() == 0

    async def released() -> bool:
        assert not running.done(), running
        return _fetched_records_alive() == 0

    try:
        await wait_until_async(read_to_the_end, 60, "the source to read __consumer_offsets to its end")
        await wait_until_async(
            released, 10, "the fetched records to be released", detail=lambda: f"{_fetched_records_alive()} alive"
        )
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await it.app.producer.stop()


async def test_a_batch_is_taken_a_slice_at_a_time_every_record_once_in_order(
    kafka_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's batch gathers what the consumer has fetched FETCH_SLICE records at a time (each take
    unpacked in one stretch of the event loop), up to MAX_RECORDS: several takes make one batch, no batch
    is larger, and every record comes once, each partition's in offset order."""
    topic = f"source-slices-{uuid.uuid4().hex[:6]}"
    await kafka_broker.create_topics({topic: 2})
    await produce(kafka_broker.bootstrap_servers, topic, {0: 1500, 1: 1000})
    monkeypatch.setattr(offsets_topic, "FETCH_SLICE", 100)
    monkeypatch.setattr(offsets_topic, "MAX_RECORDS", 700)
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    await consumer.seek_to_beginning()
    offsets: dict[int, list[int]] = {0: [], 1: []}
    sizes: list[int] = []

    async def everything_taken() -> bool:
        batch = await offsets_topic._fetch(consumer)
        sizes.append(sum(map(len, batch.values())))
        for tp, records in batch.items():
            offsets[tp.partition] += [record.offset for record in records]
        return len(offsets[0]) + len(offsets[1]) >= 2500

    try:
        await wait_until_async(everything_taken, 60, "every record to be taken", interval=0.0)
    finally:
        await consumer.stop()
    assert offsets == {0: list(range(1500)), 1: list(range(1000))}
    assert 100 < max(sizes) <= 700, sizes
