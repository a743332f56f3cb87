"""The offsets-topic source against the embedded broker: its own consumer group, at least once."""

from __future__ import annotations

import asyncio
import uuid

import faust
import pytest
from aiokafka.errors import KafkaError

from kagent.core.events import decode_record
from kagent.core.table_keys import partition_of_group
from kagent.settings import Settings
from kagent.tools.embedded import EmbeddedBroker
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.metrics import Metrics
from kagent.worker.offsets_topic import OffsetsTopicSource
from kagent.worker.topology import declare
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    offset_commit,
    publish,
)
from tests.support.faults import fail_first_batch
from tests.support.topics import TopicReader

pytestmark = pytest.mark.integration


async def test_a_batch_whose_sends_fail_is_read_and_sent_again(
    kafka_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker refusing a write cannot be caused on the embedded broker, so the producer's
    first record batch sent is made to fail (a fake fault); every group's events must still arrive."""
    suffix = uuid.uuid4().hex[:6]
    settings = Settings(broker=kafka_broker.bootstrap_servers, app_id=f"source-retry-{suffix}", session_timeout=2)
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
    groups = {f"source-retry-app-{suffix}-{i}" for i in range(3)}
    await publish(kafka_broker.bootstrap_servers, [offset_commit(g, "orders", 0, 7) for g in sorted(groups)])

    failed = fail_first_batch(monkeypatch, KafkaError("refused"))
    source = OffsetsTopicSource(
        app,
        settings,
        consumer_offsets=topology.consumer_offsets,
        derived_events=topology.derived_events,
        dead_letters=DeadLetters(app, topology.dead_letters.get_topic_name()),
        metrics=Metrics(),
    )
    running = asyncio.create_task(source.run())
    try:
        async with TopicReader(kafka_broker.bootstrap_servers, derived_events) as reader:

            def every_group_arrived() -> bool:
                assert not running.done(), running
                arrived = {(r.partition, events.group) for r in reader.records for events in decode_record(r.value)}
                assert {
                    partition == partition_of_group(group, settings.topic_partitions) for partition, group in arrived
                } <= {True}
                return {group for _, group in arrived} >= groups

            await reader.until(every_group_arrived, 60, f"the derived events of {sorted(groups)}")
        assert failed()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await app.producer.stop()
