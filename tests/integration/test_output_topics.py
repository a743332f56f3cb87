"""A worker creates every topic it writes when it starts, with its own partition count, instead of
leaving them to the broker's auto-creation (which production clusters usually turn off)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaClient

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS
from tests.support.waiting import wait_until_async
from tests.support.worker import Worker

pytestmark = pytest.mark.integration


async def test_the_topics_a_worker_writes_exist_before_it_writes_them(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker]
) -> None:
    app_id = f"topics-{uuid.uuid4().hex[:6]}"
    # As Kafka's coordinator would have it (a worker's source would otherwise auto-create it with four).
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS})
    # Two partitions: Tansu's auto-creation would give four.
    worker = start_worker(app_id, topic_partitions="2")
    wanted = {f"{app_id}-{name}" for name in ("derived-events", "recommendations", "dead-letters")}
    wanted |= {f"{app_id}-applied-offsets-changelog", f"{app_id}-partition-lag-changelog"}
    client = AIOKafkaClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    await client.bootstrap()
    try:

        async def created() -> dict[str, int] | None:
            await client.force_metadata_update()
            counts = {t: len(client.cluster.partitions_for_topic(t) or ()) for t in wanted}
            return counts if all(counts.values()) else None

        counts = await wait_until_async(created, 60, "the worker's topics", detail=lambda: worker.log_tail(60))
    finally:
        await client.close()
    # Nothing was written to recommendations or dead letters: these were made by the worker.
    assert counts == {topic: 2 for topic in wanted}
