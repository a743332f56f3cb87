"""A real Faust worker on the embedded broker: processes a record, shows it, stops on SIGTERM."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaProducer

from kagent.embedded import EmbeddedBroker
from tests.conftest import Worker, get_json, wait_for

pytestmark = pytest.mark.integration


async def test_worker_counts_a_derived_event_and_stops_cleanly(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker]
) -> None:
    app_id = "kagent-worker-test"
    await kafka_broker.create_topics({f"{app_id}-derived-events": 8})
    worker = start_worker(app_id)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(f"{app_id}-derived-events", b"event", key=b"payments")
        await producer.send_and_wait(f"{app_id}-derived-events", b"event", key=b"payments")
    finally:
        await producer.stop()

    def counted() -> dict[str, int] | None:
        body = get_json(worker.url + "groups/")
        return body["groups"] if body and body["groups"].get("payments") == 2 else None

    assert wait_for(counted, 60, "the worker to count both events") == {"payments": 2}
    assert worker.stop() == 0, worker.log()[-3000:]
