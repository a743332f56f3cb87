"""A real worker reports each stage's progress and answers readiness (issue 17, item 5), false while a stage
has stalled (issue 35)."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    publish,
)
from tests.support.waiting import wait_until
from tests.support.web import get_answer, get_json
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration


STAGES = ("offsets-topic-source", "storage")


def metric(worker: Worker, name: str, stage: str) -> float | None:
    return (worker.metrics() or {}).get(f'{name}{{stage="{stage}"}}')


async def test_stages_report_what_they_applied_and_the_worker_is_ready(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker]
) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"health-{suffix}", f"health-group-{suffix}"
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, topic: 2})
    worker = start_worker(f"health-{suffix}", end_offset_interval="0.5", evaluate_interval="0.5")
    members = {"a-1": [TopicPartition(topic, 0)], "b-1": [TopicPartition(topic, 1)]}
    await publish(
        kafka_broker.bootstrap_servers,
        [group_metadata(group, 1, members), offset_commit(group, topic, 0, 0)],
    )
    wait_until(
        lambda: group in (get_json(worker.url + "api/local/groups") or {}).get("groups", {}),
        90,
        f"{group} on the worker",
    )
    wait_until(lambda: (metric(worker, "kagent_stage_applied_records", "storage") or 0) >= 1, 30, "storage's progress")
    assert (metric(worker, "kagent_stage_applied_records", "offsets-topic-source") or 0) >= 2
    # How long the newest record of each stage's last batch waited, by its timestamp: the source's from the
    # record written to __consumer_offsets, storage's from the derived event the source sent.
    wait_until(
        lambda: all(metric(worker, "kagent_stage_delay_seconds", stage) is not None for stage in STAGES),
        30,
        "each stage's delay",
    )
    for stage in STAGES:
        delay = metric(worker, "kagent_stage_delay_seconds", stage)
        assert delay is not None and 0 <= delay < 60, (stage, delay)
    assert metric(worker, "kagent_stage_stalled", "storage") == 0
    # Asked for by name, as Prometheus' name[] filter does: those samples only, no per-group figures.
    asked = worker.metrics("kagent_stage_applied_records", "kagent_evaluations_total")
    assert asked is not None and asked.keys() == {
        'kagent_stage_applied_records{stage="offsets-topic-source"}',
        'kagent_stage_applied_records{stage="storage"}',
        "kagent_evaluations_total",
    }, asked
    assert any(name.startswith("kafka_consumergroup_group_lag{") for name in worker.metrics() or {})
    assert get_json(worker.url + "readyz") == {
        "ready": True,
        "tables_recovered": True,
        "source_caught_up": True,
        "end_offsets_polled": True,
        "stalled_stages": [],
    }


def test_a_stage_stalled_by_a_broker_that_stops_answering_turns_readiness_false_until_it_moves_again(
    tmp_path: Path,
) -> None:
    """The worker starts on a backlog of 300,000 commits, three of the source's fetches, and while it
    works through them the broker stops answering (its process is stopped with SIGSTOP: a hung broker,
    or a network dropping packets). The source knows records wait (its last fetch's high watermark)
    and can apply none: its sends get no answer and it fetches no more. Once that has lasted
    ``stall_after`` (2 s), ``/readyz`` answers 503 naming the stage, and the stall is counted and
    logged; once the broker answers again the stage moves and the worker is ready."""
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        asyncio.run(broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, "stalled-orders": 8}))
        backlog = [
            offset_commit(f"stalled-{g}", "stalled-orders", p, r)
            for r in range(15)
            for g in range(2_500)
            for p in range(8)
        ]
        asyncio.run(publish(broker.bootstrap_servers, backlog, batched=True))
        worker = Worker(broker.bootstrap_servers, tmp_path, "stall-test", stall_after="2", **FAST).start()
        assert broker.pid is not None
        try:
            wait_until(
                lambda: _source_backlog(worker) > 0, 120, "the source's backlog", interval=0.05, detail=worker.log_tail
            )
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                status, stalled = wait_until(
                    lambda: (answer := get_answer(worker.url + "readyz"))[1]["stalled_stages"] and answer,
                    30,
                    "the source to stall",
                    interval=0.2,
                    detail=worker.log_tail,
                )
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            assert (status, stalled["ready"], stalled["stalled_stages"]) == (503, False, ["offsets-topic-source"])
            worker.wait_ready(120)  # the stage moves again once the broker answers
            samples = worker.metrics() or {}
            assert samples.get('kagent_stage_stalls_total{stage="offsets-topic-source"}', 0) >= 1, samples
            assert samples.get('kagent_stage_stalled{stage="offsets-topic-source"}') == 0, samples
            log = worker.log()
            assert "stage offsets-topic-source has stalled: " in log, worker.log_tail(80)
            assert "stage offsets-topic-source makes progress again" in log, worker.log_tail(80)
            assert worker.stop() == 0
        finally:
            worker.kill()


def _source_backlog(worker: Worker) -> float:
    """The source's backlog at the worker's last sample (0 before one)."""
    worker.check_alive()
    samples = worker.metrics("kagent_stage_backlog_records") or {}
    return samples.get('kagent_stage_backlog_records{stage="offsets-topic-source"}', 0)
