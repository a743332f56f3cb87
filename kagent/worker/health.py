"""Health: samples each record-applying stage's progress and notices a stall.

Every ``interval`` seconds it asks each watched stage how many records it
has applied, how many wait and how long its last batch's newest record waited
(:class:`~kagent.worker.stalls.ReportsProgress`), exports them
(``kagent_stage_applied_records``, ``kagent_stage_backlog_records``,
``kagent_stage_delay_seconds``),
and feeds them to the :class:`~kagent.worker.stalls.StallDetector`. A stage
that stalls is logged as an error (once, then once a minute while it lasts),
counted (``kagent_stage_stalls``), marked (``kagent_stage_stalled`` = 1) and
turns the worker's readiness false (``GET /readyz``); its recovery is logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import faust

from kagent.worker.metrics import Metrics
from kagent.worker.stage import Stage
from kagent.worker.stalls import ReportsProgress, StallDetector

__all__ = ["Health"]

log = logging.getLogger(__name__)

REPEAT_AFTER = 60.0
"""Seconds between error lines about a stall that lasts."""


class Health(Stage):
    """Watches the progress of ``stages``."""

    name = "health"

    def __init__(self, stages: Sequence[ReportsProgress], detector: StallDetector, metrics: Metrics) -> None:
        self._stages = stages
        self._detector = detector
        self._metrics = metrics
        self._interval = min(5.0, detector.stall_after / 4)
        self._logged: dict[str, float] = {}
        self._unsampled: dict[str, float] = {}
        """Stage -> when a failed sample of it was last logged."""
        self._stopped = False

    def register(self, app: faust.App) -> None:
        @app.timer(self._interval, name="watch-progress")
        async def watch_progress() -> None:
            if not self._stopped:
                await self.sample()

    async def stop(self) -> None:
        self._stopped = True

    async def sample(self) -> None:
        """Sample every watched stage once. A stage whose backlog cannot be read this time
        (its consumer is mid-rebalance, say) is skipped and the failure logged; it never raises,
        because Faust's timers crash the whole worker on an exception."""
        now = time.time()
        for stage in self._stages:
            try:
                backlog = await stage.backlog()
            except Exception as exc:  # noqa: BLE001 -- whatever a sample raises must not stop the worker
                if now - self._unsampled.get(stage.name, float("-inf")) >= REPEAT_AFTER:
                    self._unsampled[stage.name] = now
                    log.warning("stage %s: backlog not sampled: %r", stage.name, exc)
                continue
            applied = stage.applied
            self._metrics.stage_applied.labels(stage.name).set(applied)
            if backlog is not None:
                self._metrics.stage_backlog.labels(stage.name).set(backlog)
            if (delay := stage.delay) is not None:
                self._metrics.stage_delay.labels(stage.name).set(delay.seconds)
            stalled = self._detector.observe(stage.name, applied, backlog, now)
            self._metrics.stage_stalled.labels(stage.name).set(int(stalled))
            if stalled:
                since = self._detector.stalled()[stage.name]
                if stage.name not in self._logged:
                    self._metrics.stage_stalls.labels(stage.name).inc()
                if now - self._logged.get(stage.name, float("-inf")) >= REPEAT_AFTER:
                    self._logged[stage.name] = now
                    try:
                        where = await stage.where()
                    except Exception as exc:  # noqa: BLE001 -- a diagnostic must not stop the worker
                        where = f"(not described: {exc!r})"
                    log.error(
                        "stage %s has stalled: %d records wait and none was applied for %.0f s; %s",
                        stage.name,
                        backlog,
                        now - since,
                        where,
                    )
            elif self._logged.pop(stage.name, None) is not None:
                log.info("stage %s makes progress again (%d records applied)", stage.name, applied)
