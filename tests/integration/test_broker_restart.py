"""Drill: the broker goes away under a running worker and comes back, and the worker carries on (issues 17, 35).

Tansu keeps its data across a restart only with ``s3://`` storage, here
against moto's S3 server on loopback, so the worker comes back to the same
topics, offsets and groups, as it would on a real cluster whose broker
restarted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    offset_commit,
    produce,
    publish,
)
from tests.support.processes import process_alive
from tests.support.s3_broker import S3Broker
from tests.support.waiting import wait_until
from tests.support.web import get_answer, get_json
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


OUTAGE = 15.0
"""Seconds the broker stays away: longer than the worker's session timeout (2 s), so its groups' members
expire and the worker joins them again when the broker is back."""

READY = {
    "ready": True,
    "tables_recovered": True,
    "source_caught_up": True,
    "end_offsets_polled": True,
    "stalled_stages": [],
}


def committed(worker: Worker, group: str, partition: int) -> int | None:
    """``group``'s committed offset on ``partition`` in the API; None while it has none there."""
    detail: dict[str, Any] = get_json(f"{worker.url}api/groups/{group}") or {}
    return next((p["committed"] for p in detail.get("partitions", []) if p["partition"] == partition), None)


async def test_the_worker_serves_while_its_broker_is_gone_and_applies_what_comes_after_it_is_back(
    s3_broker: S3Broker, tmp_path: Path
) -> None:
    """Tansu's ``s3://`` engine answers ListOffsets(latest) with neither the log end nor the last
    batch's base + 1 (10 one-record batches read as 8), so this drill checks what does not depend
    on it: committed offsets and assignments written after the broker is back reach the API, and
    end-offset polls succeed again.

    While the broker is gone the worker keeps answering from what it holds, and stays ready: its
    tables are recovered, its source has read what there was, and no stage has records waiting (a
    broker gone alone is not a reason to take a worker out of service; the figures it serves say
    how old their end offsets are)."""
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
        await publish(s3_broker.bootstrap_servers, [group_metadata(group, 1, one), offset_commit(group, topic, 0, 5)])
        wait_until(lambda: committed(worker, group, 0) == 5, 120, "the group's commit before the broker goes")
        worker.wait_ready()

        s3_broker.stop()
        gone = time.monotonic()
        answers = []
        while time.monotonic() - gone < OUTAGE:  # a window the broker is away for, sampled: not a synchronisation
            worker.check_alive()
            answers.append((get_answer(worker.url + "readyz"), committed(worker, group, 0)))
            time.sleep(0.5)
        assert answers and all(answer == ((200, READY), 5) for answer in answers), [
            a for a in answers if a != ((200, READY), 5)
        ]
        s3_broker.start()
        polls = successful_polls(worker)

        two = {"a-2": [TopicPartition(topic, 0), TopicPartition(topic, 1)]}
        await publish(
            s3_broker.bootstrap_servers,
            [group_metadata(group, 2, two), offset_commit(group, topic, 0, 9), group_metadata(later, 1, one)],
        )
        wait_until(
            lambda: held(worker).get(group, {}).get("generation") == 2 and later in held(worker),
            120,
            "records written after the broker is back in the worker's tables",
            detail=worker.log_tail,
        )
        wait_until(lambda: committed(worker, group, 0) == 9, 60, "the commit written after the broker is back")
        wait_until(lambda: successful_polls(worker) > polls, 60, "an end-offset poll to succeed after the restart")
        assert worker.process is not None and process_alive(worker.process.pid)  # carried on, no restart
        worker.wait_ready(60)
    finally:
        assert worker.stop(timeout=15) == 0, worker.log()[-3000:]
    log = worker.log()
    assert "Traceback" not in log and "We experienced a crash" not in log, worker.log_tail(200)
