"""Long work on the event loop in slices: a yield to the loop each time a slice has run its time.

A worker's event loop serves the HTTP API, the consumers' heartbeats and every stage. A piece of work
that runs for tens of milliseconds without an ``await`` makes all of them wait that long: at 10,000
groups on two workers under live commits, applying a batch of derived events (up to 57 ms), rewriting a
chunk of lag entries with its changelog flush (up to 40 ms) and appending a flush's records to record
batches were what the slowest ``GET /api/groups`` requests waited behind. Such loops ask
:meth:`LoopSlices.over` between two of their pieces and yield when it says so.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["SLICE", "LoopSlices"]

SLICE = 0.005
"""Seconds a slice of work runs before it lets the event loop run the rest."""


class LoopSlices:
    """The slices of one long piece of work on the event loop: ``if slices.over(): await slices.next()``
    between two of its steps. Cheap enough to ask after every step of a few microseconds (a clock read
    and a comparison)."""

    __slots__ = ("_every", "_started")

    def __init__(self, every: float = SLICE) -> None:
        self._every = every
        self._started = time.perf_counter()

    def over(self) -> bool:
        """Whether this slice has run ``every`` seconds: time to let the loop run the rest."""
        return time.perf_counter() - self._started >= self._every

    async def next(self) -> None:
        """Let the event loop run everything else that is ready, then start the next slice."""
        await asyncio.sleep(0)
        self._started = time.perf_counter()
