"""Health's sampling never stops a worker (kagent.worker.health.Health).

Faust crashes the whole app when a timer raises, so a stage whose backlog
cannot be read at one sample (its consumer mid-rebalance: ``highwater`` is
None right after an assignment, ``position`` raises for a partition just
revoked) must be skipped, not let through. The stages here are stand-ins of
the :class:`~kagent.worker.stalls.ReportsProgress` interface: the real
fault is a race that cannot be caused on demand.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka.errors import IllegalStateError

from kagent.worker.health import Health
from kagent.worker.metrics import Metrics
from kagent.worker.stalls import StallDetector


class _Stage:
    def __init__(self, name: str, applied: int, backlog: int | None, fails: bool = False) -> None:
        self.name = name
        self.applied = applied
        self.delay: float | None = None
        self._backlog = backlog
        self._fails = fails

    async def backlog(self) -> int | None:
        if self._fails:
            raise IllegalStateError("No current assignment for partition derived-events-0")
        return self._backlog

    async def where(self) -> str:
        return "derived-events[2] applied to 120, position 120, high watermark 150, paused"


def test_a_stage_whose_backlog_cannot_be_read_is_skipped_and_the_others_sampled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    broken = _Stage("storage", applied=5, backlog=None, fails=True)
    health = Health([broken, _Stage("source", applied=7, backlog=3)], StallDetector(stall_after=60), metrics)
    with caplog.at_level(logging.WARNING, logger="kagent.worker.health"):
        asyncio.run(health.sample())
        asyncio.run(health.sample())
    sample = metrics.registry.get_sample_value
    assert sample("kagent_stage_backlog_records", {"stage": "source"}) == 3
    assert sample("kagent_stage_applied_records", {"stage": "source"}) == 7
    assert sample("kagent_stage_applied_records", {"stage": "storage"}) is None
    failures = [r.getMessage() for r in caplog.records]
    assert len(failures) == 1, failures  # logged once, not at every sample
    assert failures[0].startswith("stage storage: backlog not sampled: IllegalStateError"), failures


def test_a_stall_is_logged_with_where_its_records_wait(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    health = Health([_Stage("storage", applied=5, backlog=30)], StallDetector(stall_after=0), metrics)
    with caplog.at_level(logging.ERROR, logger="kagent.worker.health"):
        asyncio.run(health.sample())
        asyncio.run(health.sample())
    assert [r.getMessage() for r in caplog.records] == [
        "stage storage has stalled: 30 records wait and none was applied for 0 s; "
        "derived-events[2] applied to 120, position 120, high watermark 150, paused"
    ]
    assert metrics.registry.get_sample_value("kagent_stage_stalls_total", {"stage": "storage"}) == 1
