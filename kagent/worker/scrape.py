"""What a ``/metrics`` scrape is made of: the registry's metrics, then the series kept as rendered text.

The worker's own counters, gauges and histograms live in a ``prometheus_client`` registry
(:class:`~kagent.worker.metrics.Metrics`), a few hundred samples formatted at each scrape. The series
there is one of per group (the per-group gauges, :class:`~kagent.worker.metrics.GroupGauges`) or per
group-partition (the lag series, :class:`~kagent.worker.lag_exporter.LagExporter`) are kept as text,
rendered once per change, and follow the registry's in the body, family after family: a
:class:`RenderedSeries` each. The body is handed out a block at a time (:func:`scrape_body`), and what
the scrape itself cost the event loop is kept (:class:`LoopHold`): its CPU, and the longest it held
the loop at once.
"""

from __future__ import annotations

import logging
import sys
import time
from bisect import bisect_left
from collections.abc import AsyncIterator, Collection, Sequence
from itertools import accumulate
from operator import itemgetter
from typing import Protocol, TypeVar

from prometheus_client import CollectorRegistry, generate_latest

from kagent.core.lag_series import Family
from kagent.worker.garbage_collection import PAUSES, CollectorPauses
from kagent.worker.loop_slices import LoopSlices

__all__ = ["BLOCK", "LoopHold", "RenderedSeries", "drop_pieces", "family_blocks", "let_go_of", "scrape_body"]

T = TypeVar("T")

BLOCK = 1 << 20
"""Bytes of text joined before they are handed to the client."""

STRIDE = 1024
"""Rows joined at most between two looks at the clock while writing a family (a few µs each at most)."""

LOGGED_HOLD = 0.02
"""Seconds a scrape may hold the event loop at once (the collector's pauses left out) before it is logged,
with how much of it ran on a core: the bound a scrape keeps to (20 ms), so that a stretch over it, and
whether the thread was working or waiting for a core or the GIL, is seen."""

log = logging.getLogger(__name__)


class LoopHold:
    """What one scrape cost the event loop's thread: the CPU of its own stretches (from when it takes
    the loop to when it lets go: :meth:`let_go`, :meth:`take`), and the longest of them in wall time,
    less the garbage collector's pauses in it (``pauses``: a collection runs when an allocation crosses
    its threshold, whoever makes it). Work other tasks do while the scrape waits is not counted."""

    def __init__(self, pauses: CollectorPauses = PAUSES) -> None:
        self.cpu = 0.0
        """CPU seconds of the scrape's own stretches."""
        self.longest = 0.0
        """Seconds of the longest stretch, the collector's pauses in it left out."""
        self._pauses = pauses
        self._since: tuple[float, float, float] | None = None

    def take(self) -> None:
        """The scrape runs on the loop from now."""
        self._since = (time.perf_counter(), time.thread_time(), self._pauses.seconds)

    def let_go(self) -> None:
        """The scrape lets others run from now (it awaits). A stretch longer than :data:`LOGGED_HOLD` is
        logged, naming where it ended."""
        if self._since is not None:
            wall, cpu, collected = self._since
            paused = self._pauses.seconds - collected
            held = time.perf_counter() - wall - paused
            self.longest = max(self.longest, held)
            used = time.thread_time() - cpu
            self.cpu += used
            self._since = None
            if held > LOGGED_HOLD:
                caller = sys._getframe(1)
                if caller.f_code.co_name == "pause":
                    caller = caller.f_back or caller
                log.warning(
                    "a /metrics scrape held the event loop %.0f ms at once, %.0f ms of it on a core (the rest the "
                    "thread waited for one), up to %s (line %d)",
                    held * 1000,
                    max(0.0, used - paused) * 1000,
                    caller.f_code.co_qualname,
                    caller.f_lineno,
                )

    async def pause(self, slices: LoopSlices) -> None:
        """Let others run once (the next of ``slices``), and take the loop back."""
        self.let_go()
        await slices.next()
        self.take()


class RenderedSeries(Protocol):
    """Series kept as rendered text."""

    @property
    def families(self) -> Sequence[Family]:
        """The families it exports, in exposition order."""
        ...

    def exposition(self, names: Collection[str] | None, hold: LoopHold) -> AsyncIterator[bytes]:
        """The text of its families (only those named in ``names``, when given), each header first, in
        blocks; renders what changed since the last scrape in slices of at most
        :data:`~kagent.worker.loop_slices.SLICE` s, letting the loop go between them with ``hold.pause(slices)``."""
        ...


async def scrape_body(
    registry: CollectorRegistry, series: Sequence[RenderedSeries], hold: LoopHold, names: Collection[str] = ()
) -> AsyncIterator[bytes]:
    """A scrape's body: ``registry`` in Prometheus' text format, then each of ``series``; only the
    families named in ``names`` when any is (``name[]``, as ``prometheus_client``'s exporters do). The
    scrape's stretches on the event loop are counted in ``hold``: the consumer lets go (``hold.let_go()``)
    while it writes a block and takes the loop back (``hold.take()``) before asking for the next."""
    wanted = frozenset(names) or None
    hold.take()
    yield generate_latest(registry.restricted_registry(wanted) if wanted else registry)
    for source in series:
        async for block in source.exposition(wanted, hold):
            yield block
    hold.let_go()


async def family_blocks(
    header: bytes, rows: Sequence[Sequence[bytes]], index: int, hold: LoopHold
) -> AsyncIterator[bytes]:
    """One family's text: ``header``, then piece ``index`` of each of ``rows`` (a group's pieces, one per
    family, empty where it has no sample) in their order, in blocks of :data:`BLOCK` bytes or more (a
    block ends with the first piece that takes it to :data:`BLOCK`).

    The pieces are gone over :data:`STRIDE` rows at a time, each taken out and measured once, by
    ``operator.itemgetter``, ``len`` and ``itertools.accumulate``, and each block joined once by
    ``bytes.join``: no Python step per piece (at a million group-partitions, handing the pieces out one
    by one to a Python loop was a fifth of a scrape's CPU; joining runs of pieces and then the runs into
    a block copied the text twice). Between two runs of rows the loop is let go (``hold.pause``) every
    :data:`~kagent.worker.loop_slices.SLICE` s: at 50,000 groups a family of small or empty pieces makes
    no block for 60-70 ms. ``rows`` must not change while the family is written."""
    piece = itemgetter(index)
    block = [header]
    size = len(header)
    slices = LoopSlices()
    for start in range(0, len(rows), STRIDE):
        run = list(map(piece, rows[start : start + STRIDE]))
        ends = list(accumulate(map(len, run)))  # the run's bytes up to each of its pieces
        taken = joined = 0  # pieces of the run in blocks so far, and their bytes
        while taken < len(run):
            upto = min(bisect_left(ends, joined + BLOCK - size, taken) + 1, len(run))
            block += run[taken:upto]
            size += ends[upto - 1] - joined
            taken, joined = upto, ends[upto - 1]
            if size >= BLOCK:
                yield b"".join(block)
                block, size = [], 0
                slices = LoopSlices()  # the consumer let the loop go while it wrote the block
        if slices.over():
            await hold.pause(slices)
    if size:
        yield b"".join(block)


async def drop_pieces(rows: Sequence[list[bytes]], index: int, hold: LoopHold, slices: LoopSlices) -> None:
    """Empty piece ``index`` of each of ``rows`` (once its family is written), :data:`STRIDE` rows at a
    time, letting the loop go (``hold.pause``) when a slice of ``slices`` is over: text only those rows
    keep is freed a run at a time (one family's text of the groups with lag, freed at once, held the event
    loop 21-28 ms at a million group-partitions)."""
    for start in range(0, len(rows), STRIDE):
        for pieces in rows[start : start + STRIDE]:
            pieces[index] = b""
        if slices.over():
            await hold.pause(slices)


async def let_go_of(items: list[T], hold: LoopHold, slices: LoopSlices) -> None:
    """Empty ``items`` from its end, :data:`STRIDE` at a time, letting the loop go (``hold.pause``) when a
    slice of ``slices`` is over: what only the list keeps is freed a run at a time, not all at once (at a
    million group-partitions, freeing a scrape's groups with lag all at its end held the event loop 24-26
    ms)."""
    while items:
        del items[-STRIDE:]
        if slices.over():
            await hold.pause(slices)
