"""Drill: the broker restarts under a running worker, which reconnects and carries on (issue 17).

Tansu keeps its data across a restart only with ``s3://`` storage, here
against moto's S3 server on loopback, so the worker comes back to the same
topics, offsets and groups, as it would on a real cluster whose broker
restarted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.structs import TopicPartition

from kagent.connections import KafkaConnection
from kagent.tools.embedded import (
    create_topics,
)
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    produce,
    publish,
)
from tests.support.processes import process_alive
from tests.support.s3_broker import S3Broker
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.worker import Worker

pytestmark = pytest.mark.integration


@pytest.fixture
def s3_broker(tmp_path: Path) -> Iterator[S3Broker]:
    with S3Broker(tmp_path) as broker:
        yield broker


def held(worker: Worker) -> dict[str, dict[str, object]]:
    return (get_json(worker.url + "api/local/groups") or {}).get("groups", {})


def successful_polls(worker: Worker) -> float:
    return (worker.metrics() or {}).get('kagent_end_offset_polls_total{outcome="ok"}', 0.0)


async def test_the_worker_reconnects_after_its_broker_restarts(s3_broker: S3Broker, tmp_path: Path) -> None:
    """Tansu's ``s3://`` engine answers ListOffsets(latest) with neither the log end nor the last
    batch's base + 1 (10 one-record batches read as 8), so this drill checks what does not depend
    on it: records written after the restart reach the tables, and end-offset polls succeed again."""
    suffix = uuid.uuid4().hex[:6]
    topic, group, later = f"restart-{suffix}", f"restart-group-{suffix}", f"after-restart-{suffix}"
    await create_topics(
        KafkaConnection(s3_broker.bootstrap_servers), {OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, topic: 2}
    )
    worker = Worker(
        s3_broker.bootstrap_servers, tmp_path, f"restart-{suffix}", end_offset_interval="0.5", evaluate_interval="0.5"
    )
    worker.start()
    try:
        await produce(s3_broker.bootstrap_servers, topic, {0: 30, 1: 10})
        one = {"a-1": [TopicPartition(topic, 0)], "b-1": [TopicPartition(topic, 1)]}
        await publish(s3_broker.bootstrap_servers, [group_metadata(group, 1, one)])
        wait_until(lambda: held(worker).get(group, {}).get("generation") == 1, 120, "the group before the restart")

        s3_broker.stop()
        s3_broker.start()
        polls = successful_polls(worker)

        two = {"a-2": [TopicPartition(topic, 0), TopicPartition(topic, 1)]}
        await publish(
            s3_broker.bootstrap_servers,
            [group_metadata(group, 2, two), group_metadata(later, 1, one)],
        )
        wait_until(
            lambda: held(worker).get(group, {}).get("generation") == 2 and later in held(worker),
            120,
            "records written after the restart in the worker's tables",
        )
        wait_until(lambda: successful_polls(worker) > polls, 60, "an end-offset poll to succeed after the restart")
        assert worker.process is not None and process_alive(worker.process.pid)  # carried on, no restart
        assert get_json(worker.url + "readyz") == {
            "ready": True,
            "tables_recovered": True,
            "source_caught_up": True,
            "end_offsets_polled": True,
            "stalled_stages": [],
        }
    finally:
        assert worker.stop(timeout=15) == 0, worker.log()[-3000:]
