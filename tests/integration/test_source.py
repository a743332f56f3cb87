"""The offsets-topic source against the embedded broker: its own consumer group, at least once."""

from __future__ import annotations

import asyncio
import json
import uuid

import faust
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from kagent.core.consumer_offsets import encode
from kagent.tools.embedded import EmbeddedBroker
from kagent.settings import Settings
from kagent.worker.topology import declare
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.metrics import Metrics
from kagent.worker.offsets_topic import OffsetsTopicSource
from tests.conftest import fail_first_send
from tests.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    offset_commit,
    publish,
)

pytestmark = pytest.mark.integration


async def test_a_batch_whose_sends_fail_is_read_and_sent_again(
    kafka_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker refusing a write cannot be caused on the embedded broker, so the producer's
    first send is made to fail (a fake fault); every group's events must still arrive."""
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
    await publish(kafka_broker.bootstrap_servers, [encode(offset_commit(g, "orders", 0, 7)) for g in sorted(groups)])

    failed = fail_first_send(monkeypatch, app.producer, KafkaError("refused"))
    source = OffsetsTopicSource(
        app,
        settings,
        consumer_offsets=topology.consumer_offsets,
        derived_events=topology.derived_events,
        dead_letters=DeadLetters(app, topology.dead_letters.get_topic_name()),
        metrics=Metrics(),
    )
    reader = AIOKafkaConsumer(
        derived_events, bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest"
    )
    running = asyncio.create_task(source.run())
    await reader.start()
    try:
        seen: set[str] = set()
        async with asyncio.timeout(60):
            while seen != groups:
                assert not running.done(), running
                fetched = await reader.getmany(timeout_ms=500)
                seen |= {json.loads(r.value)["group"] for rs in fetched.values() for r in rs} & groups
        assert failed()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await reader.stop()
        await app.producer.stop()
