"""The worker's cyclic garbage collector: young collections rare enough that ingest's batches die young,
and the old objects frozen out of the full collections.

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
the event loop for 5-50 ms on a worker at work, and longer on a large heap
where objects are replaced as fast as they are made (a commit's new value
for an old one, a group's series rendered again): the threshold counts
allocations net of deallocations, so the young generation grows past it
(at a million group-partitions, up to 300 ms).

A full collection goes over the whole heap: 2.4-2.6 s at a million
group-partitions, whenever enough objects have outlived the middle
collections since the last. So what outlives a middle or a full collection
is frozen (:class:`OldObjectsFrozen`): out of every collection until the
first full one :data:`FROZEN_FOR` seconds after the last thaw, which goes
over everything. Every collection is timed (:data:`PAUSES`,
``kagent_gc_pause_seconds``), so that a stall is seen for what it is, and
what measures the loop's holds can tell the collector's part from its own.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

__all__ = ["FROZEN_FOR", "PAUSES", "YOUNG_THRESHOLD", "CollectorPauses", "OldObjectsFrozen", "tune"]

YOUNG_THRESHOLD = 50_000
"""Net allocations of container objects between two collections of the youngest generation (CPython: 700)."""
MIDDLE_THRESHOLD = 20
"""Young collections between two collections of the middle generation (CPython: 10)."""
OLDEST_THRESHOLD = 10
"""Middle collections before the oldest generation may be collected (CPython: 10)."""


FROZEN_FOR = 3600.0
"""Seconds at least between two full collections that go over the objects frozen (:class:`OldObjectsFrozen`)."""


def tune() -> None:
    """Set this process's collector to the worker's thresholds, and freeze what outlives a middle or full
    collection (:data:`FROZEN`)."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLDEST_THRESHOLD)
    FROZEN.install()


class OldObjectsFrozen:
    """The objects that outlived a middle or a full collection, frozen (``gc.freeze``) until the first full
    collection :data:`FROZEN_FOR` seconds after the last thaw, which thaws them first (``gc.unfreeze``)
    and so goes over the whole heap.

    Without it, what outlives the middle collections (the tables' entries, each group's layout and
    rendered series) is gone over again by every full collection: 2.4-2.6 s each at a million
    group-partitions. Frozen, a full collection goes over what outlived a middle one since the last
    freeze; the whole heap is gone over again only by the first full collection due :data:`FROZEN_FOR`
    seconds or more after the last thaw (CPython's thresholds still decide when one is due).

    The cost: garbage in reference cycles among frozen objects (a long-lived object that dies in a cycle
    with another) is not freed until that full collection; garbage that is not in a cycle is freed by
    reference counting as ever. :attr:`freed_at_thaw` says how many objects the last thawing collection
    freed: what freezing kept.
    """

    def __init__(self, frozen_for: float = FROZEN_FOR, clock: Callable[[], float] = time.monotonic) -> None:
        self._frozen_for = frozen_for
        self._clock = clock
        self._thawed = 0.0
        """When the last thaw was (:meth:`install` starts the clock)."""
        self._thawing = False
        self._installed = False
        self.thaws = 0
        """Full collections that thawed the frozen objects first."""
        self.freed_at_thaw: int | None = None
        """Objects the last thawing collection freed; None before the first."""
        self._observe: Callable[[int], None] | None = None

    def on_thaw(self, observe: Callable[[int], None]) -> None:
        """Hand each thawing collection's :attr:`freed_at_thaw` to ``observe`` from now on. (How many objects
        are frozen is not counted: ``gc.get_freeze_count()`` walks them all, 300 ms at a million
        group-partitions.)"""
        self._observe = observe

    def install(self) -> None:
        """Freeze from now on; once per process (a second call does nothing)."""
        if not self._installed:
            self._installed = True
            self._thawed = self._clock()
            gc.callbacks.append(self._collected)

    def uninstall(self) -> None:
        """Stop freezing, and thaw what is frozen."""
        if self._installed:
            self._installed = False
            gc.callbacks.remove(self._collected)
            gc.unfreeze()

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            if generation == 2 and self._clock() - self._thawed >= self._frozen_for:
                gc.unfreeze()  # the permanent generation joins the oldest, which this collection goes over
                self._thawing = True
            return
        if self._thawing:
            self._thawing = False
            self._thawed = self._clock()
            self.thaws += 1
            self.freed_at_thaw = info["collected"]
            if self._observe is not None:
                self._observe(self.freed_at_thaw)
        if generation >= 1:
            gc.freeze()  # the survivors of this collection, and none younger: the young generation is empty


FROZEN = OldObjectsFrozen()
"""This process's freezing of its old objects (one collector)."""


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
