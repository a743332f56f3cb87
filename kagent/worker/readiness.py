"""Readiness: whether a worker serves what it holds, and if not, why (``GET /readyz``).

Ready when Faust has recovered every table of the partitions the worker holds from their changelogs (and
is not recovering again after a rebalance), the source has caught up to within 10,000 records of the log
end of each partition it reads (KMinion gates its readiness the same way: on having consumed
``__consumer_offsets`` up to its end), no stage has stalled (:class:`~kagent.worker.stalls.StallDetector`),
and the end-offset polls answer: not every one has failed for the last ``KAGENT_STALL_AFTER`` seconds (at
least 3 poll intervals; :func:`kagent.worker.end_offsets.unready_after`), since lag can then be measured no more.
"""

from __future__ import annotations

from typing import Protocol

import faust

from kagent.core.api_records import ReadinessReport
from kagent.worker.stalls import StallDetector

__all__ = ["CatchesUp", "PollsEndOffsets", "Readiness"]


class CatchesUp(Protocol):
    """A source, which reads the cluster's group state from its start."""

    async def caught_up(self) -> bool:
        """Whether it has read (nearly) everything there is to read now."""
        ...


class PollsEndOffsets(Protocol):
    """The end-offsets stage, which measures the partitions' offsets."""

    def answering(self) -> bool:
        """Whether its polls have answered lately (some partitions, at least, got their offsets)."""
        ...


class Readiness:
    """Answers ``GET /readyz`` from Faust's table recovery, the source, the stall detector and the end-offset polls."""

    def __init__(self, app: faust.App, source: CatchesUp, stalls: StallDetector, end_offsets: PollsEndOffsets) -> None:
        self._app = app
        self._source = source
        self._stalls = stalls
        self._end_offsets = end_offsets

    def tables_recovered(self) -> bool:
        """Faust's recovery has completed once and is not under way again."""
        recovery = self._app.tables.recovery
        return bool(recovery.completed.is_set() and not recovery.in_recovery)

    async def report(self) -> ReadinessReport:
        recovered = self.tables_recovered()
        caught_up = await self._source.caught_up()
        stalled = tuple(sorted(self._stalls.stalled()))
        polled = self._end_offsets.answering()
        return ReadinessReport(
            ready=recovered and caught_up and polled and not stalled,
            tables_recovered=recovered,
            source_caught_up=caught_up,
            end_offsets_polled=polled,
            stalled_stages=stalled,
        )
