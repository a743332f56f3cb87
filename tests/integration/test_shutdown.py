"""A worker told to stop ends within a bound, with exit 0, whether its broker answers or is gone;
and while the broker is gone it logs at a bounded rate (issue 17, items 3 and 4)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import GroupMetadata, OffsetCommit
from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    publish,
)
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.worker import Worker

pytestmark = pytest.mark.integration

SIGTERM_BOUND = 15.0
"""Seconds from SIGTERM to the worker's exit, at most."""


def sigterm(worker: Worker) -> tuple[int, float]:
    """SIGTERM the worker; its exit code and how long it took (fails past the bound)."""
    started = time.monotonic()
    code = worker.stop(timeout=SIGTERM_BOUND)
    return code, time.monotonic() - started


def test_a_worker_whose_broker_is_gone_logs_at_a_bounded_rate_and_stops_on_sigterm(
    tmp_path: Path, drill_figures: Callable[[str], None]
) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        worker = Worker(broker.bootstrap_servers, tmp_path, f"broker-gone-{uuid.uuid4().hex[:6]}").start()
        # Ready, not only serving: a broker gone while Faust still creates its topics stops the
        # start-up, which is not the case this test is about.
        worker.wait_ready()
        broker.stop()
        before = len(worker.log().splitlines())
        # A measurement window, not a synchronisation: lines logged in 10 s of a broker that is gone.
        time.sleep(10)
        lines = len(worker.log().splitlines()) - before
        assert lines <= 60, f"{lines} lines in 10 s while the broker was gone:\n{worker.log()[-3000:]}"
        wait_until(lambda: "more like it" in worker.log(), 15, "a line counting the errors held back")
        code, took = sigterm(worker)
    log = worker.log()
    assert code == 0, log[-3000:]
    assert took <= SIGTERM_BOUND
    drill_figures(f"broker gone: {lines} log lines in 10 s; SIGTERM -> exit {code} in {took:.1f} s")


async def test_sigterm_during_ingest_and_evaluation_stops_cleanly(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker], drill_figures: Callable[[str], None]
) -> None:
    suffix = uuid.uuid4().hex[:6]
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, f"orders-{suffix}": 12})
    worker = start_worker(f"sigterm-load-{suffix}", evaluate_interval="0.2", end_offset_interval="0.2")
    await asyncio.to_thread(worker.wait_serving)
    topic = f"orders-{suffix}"
    load: list[GroupMetadata | OffsetCommit] = [
        group_metadata(
            f"load-{suffix}-{g}",
            1,
            {f"m{m}-{g}": [TopicPartition(topic, p) for p in range(4 * m, 4 * m + 4)] for m in range(3)},
        )
        for g in range(200)
    ]
    load += [
        offset_commit(f"load-{suffix}-{g}", topic, round_ % 12, round_) for round_ in range(40) for g in range(200)
    ]
    await publish(kafka_broker.bootstrap_servers, load, by_group=True, batched=True)

    def holds_load_groups() -> bool:
        answer = get_json(worker.url + "api/local/groups") or {}
        return any(group.startswith(f"load-{suffix}") for group in answer.get("groups", {}))

    await asyncio.to_thread(wait_until, holds_load_groups, 60, "the worker to hold the load's groups")
    code, took = await asyncio.to_thread(sigterm, worker)
    log = worker.log()
    assert code == 0, log[-3000:]
    assert took <= SIGTERM_BOUND
    assert "We experienced a crash" not in log, log[-5000:]
    assert "Traceback" not in log, log[-5000:]
    drill_figures(f"SIGTERM under ingest and evaluation -> exit {code} in {took:.1f} s")
