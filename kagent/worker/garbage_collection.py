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
between two young collections, a few MB.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune"]

YOUNG_THRESHOLD = 50_000
"""Net allocations of container objects between two collections of the youngest generation (CPython: 700)."""
MIDDLE_THRESHOLD = 20
"""Young collections between two collections of the middle generation (CPython: 10)."""
OLDEST_THRESHOLD = 10
"""Middle collections before the oldest generation may be collected (CPython: 10)."""


def tune() -> None:
    """Set this process's collector to the worker's thresholds."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLDEST_THRESHOLD)
