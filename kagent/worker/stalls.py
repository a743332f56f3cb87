"""Whether each stage keeps up: the progress it reports, and when a stage has stalled.

A stage that reads records (the source, storage) reports how many it has
applied and how many wait for it (:class:`ReportsProgress`).
:class:`StallDetector` decides, from samples of those two figures, which
stages have stalled: records have been waiting for ``stall_after`` seconds
and none was applied meanwhile. The health stage samples the stages; the
views answer readiness from the detector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

__all__ = ["BatchDelay", "ReportsProgress", "StallDetector"]


class BatchDelay(NamedTuple):
    """How late a stage's batch of records was applied."""

    seconds: float
    """From the timestamp of the batch's newest record to the batch applied, by this worker's clock."""
    applied_at: float
    """When the batch was applied: seconds since the epoch."""


class ReportsProgress(Protocol):
    """A stage that applies records."""

    name: str

    @property
    def applied(self) -> int:
        """Records applied since the worker started."""
        ...

    async def backlog(self) -> int | None:
        """Records waiting to be applied now; None while it cannot be told (not yet assigned)."""
        ...

    @property
    def delay(self) -> BatchDelay | None:
        """How late the last batch applied was; None before the first batch, or when its records carry
        no timestamp. Unlike :meth:`backlog`, it does not rest on the broker's offsets."""
        ...

    async def where(self) -> str:
        """Where the records wait, partition by partition (what a stall's log line says)."""
        ...


@dataclass
class _Watch:
    applied: int
    since: float
    """When ``applied`` last changed, or records last stopped waiting."""


class StallDetector:
    """Which stages have stalled: records waiting for ``stall_after`` seconds with none applied.

    Pure: it decides from the samples it is given (:meth:`observe`), in the
    order of their times.
    """

    def __init__(self, stall_after: float) -> None:
        self.stall_after = stall_after
        self._watches: dict[str, _Watch] = {}
        self._stalled: dict[str, float] = {}

    def observe(self, stage: str, applied: int, backlog: int | None, now: float) -> bool:
        """Take one sample of ``stage``; whether it is stalled now."""
        watch = self._watches.get(stage)
        if watch is None or applied != watch.applied or not backlog:
            self._watches[stage] = _Watch(applied, now)
            self._stalled.pop(stage, None)
            return False
        if now - watch.since >= self.stall_after:
            self._stalled.setdefault(stage, watch.since)
            return True
        return False

    def stalled(self) -> dict[str, float]:
        """The stalled stages, each with the time since which it has applied nothing."""
        return dict(self._stalled)
