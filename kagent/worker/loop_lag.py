"""How late the worker's event loop runs what is due: its loop lag, as a user watches it.

Everything a worker does shares one event loop: ingest, evaluations, the
API, the scrape, and the consumers' heartbeats. While one piece of work holds
the loop, whatever else is due waits. :class:`LoopLag` measures that wait
the way any due work meets it: a timer is due every ``every`` seconds, and
each time it runs the stage reports how late it ran, from the time it was
due to the time its task resumed (the callbacks running when it came due,
and those ready before it in the same turn).

A stall shorter than ``every`` can fall between two timers and go unseen;
a longer one delays at least one of them by at least ``stall - every``. So
the largest lag reported over a window is the window's longest stall, give
or take ``every``; the worker exports them as a histogram
(``kagent_event_loop_lag_seconds``), whose buckets say which stalls it had.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from kagent.worker.stage import Stage

__all__ = ["EVERY", "LoopLag"]

EVERY = 0.05
"""Seconds between two timers: 20 a second, each a few microseconds of the loop's time."""


class LoopLag(Stage):
    """Reports to ``observe`` how late (in seconds, never negative) each of its timers ran, from :meth:`start`
    to :meth:`stop`; each timer is due ``every`` seconds after the one before it ran."""

    name: ClassVar[str] = "loop-lag"

    def __init__(self, observe: Callable[[float], None], every: float = EVERY) -> None:
        if not every > 0:
            raise ValueError(f"need every > 0, not {every}")
        self._observe = observe
        self._every = every
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = self._task or asyncio.create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self._every
            await asyncio.sleep(self._every)
            self._observe(max(0.0, loop.time() - due))
