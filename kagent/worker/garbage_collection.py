"""The worker's cyclic garbage collector: young collections rare enough that ingest's batches die young.

CPython collects its youngest generation every 700 net allocations of
container objects, and the whole heap once enough objects have survived into
the oldest generation. The ingest path keeps each batch alive across
awaits (the source's fetched records and their decoded forms, storage's
batch of derived-events records and their commits), so at 700 nearly all of a
batch survives two young collections into the oldest generation, and every
few tens of thousands of records read the whole heap is traversed. Measured
by ``benchmarks/bench_ingest.py`` (one worker, 1,000,054 records), at
CPython's defaults: 6,036 young, 548 middle and 50 full collections, 5.0 s
of the worker's 23.0 s of CPU (4.0 s of it the full ones, 78 ms each). With
the youngest threshold at :data:`YOUNG_THRESHOLD`, a batch is freed by
reference counting before any collection sees it: 7 young collections and
one full one, 0.13 s.

The cost: garbage in reference cycles (an exception's traceback, say) waits
longer to be freed, at most :data:`YOUNG_THRESHOLD` container objects' worth
between two young collections, a few MB; and each young collection, which
traverses every young container (a fetched batch's lists included), holds
the event loop for 5-50 ms on a worker at work (the middle and the full
ones for 100-250 ms at 200,000 group-partitions). Every collection is timed
(:data:`PAUSES`, ``kagent_gc_pause_seconds``), so that a stall is seen for
what it is, and what measures the loop's holds can tell the collector's
part from its own.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["PAUSES", "YOUNG_THRESHOLD", "CollectorPauses", "tune"]

YOUNG_THRESHOLD = 50_000
"""Net allocations of container objects between two collections of the youngest generation (CPython: 700)."""
MIDDLE_THRESHOLD = 20
"""Young collections between two collections of the middle generation (CPython: 10)."""
OLDEST_THRESHOLD = 10
"""Middle collections before the oldest generation may be collected (CPython: 10)."""


def tune() -> None:
    """Set this process's collector to the worker's thresholds."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLDEST_THRESHOLD)


class CollectorPauses:
    """How long the cyclic collector has held this process: each collection timed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        """Seconds of collections since :meth:`time_collections`."""
        self._began = 0.0
        self._observe: Callable[[int, float], None] | None = None

    def time_collections(self, observe: Callable[[int, float], None]) -> None:
        """Time every collection from now, each handed to ``observe(generation, seconds)`` too; once per
        process (a second call only changes ``observe``)."""
        if self._observe is None:
            gc.callbacks.append(self._collected)
        self._observe = observe

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        took = time.perf_counter() - self._began
        self.seconds += took
        if self._observe is not None:
            self._observe(info["generation"], took)


PAUSES = CollectorPauses()
"""This process's collector's pauses (one collector, one timer)."""
