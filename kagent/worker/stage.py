"""The one interface every stage of the worker has.

A stage does one job of the worker (read a source, store group state, poll
end offsets, evaluate, serve pages). It is built from what it needs (its
settings, its tables, the channels it reads and writes, the read interfaces
of the state it consults), never from closures threaded through the app,
and it owns its tables and its writes: nothing else writes them, and only
its own flushes ship them. Stages talk to each other only through typed
channels and read interfaces (:mod:`kagent.worker.group_state`).

``kagent.app`` builds the stages, calls :meth:`Stage.register` on each, awaits
:meth:`Stage.start` of each once the worker runs, and :meth:`Stage.stop` of
each, in reverse order, before the worker's producer stops.
"""

from __future__ import annotations

from abc import ABC
from typing import ClassVar

import faust

__all__ = ["Stage"]


class Stage(ABC):
    """One job of the worker, with a start and a stop.

    Contract:

    - :meth:`register` declares the stage's Faust agents, timers and web pages
      on ``app``; it is called once, before the worker starts, and does no I/O.
    - :meth:`start` is awaited once when the worker runs; it may start
      background work and must return promptly.
    - :meth:`stop` is awaited once at shutdown, while the producer still
      runs: it ends the stage's background work, flushes what it owns as far as
      the broker lets it, and closes its clients. It returns within a bounded
      time whether or not the broker answers, and never raises.
    """

    name: ClassVar[str]
    """The stage's name in logs and metrics."""

    def register(self, app: faust.App) -> None:
        """Declare the stage's agents, timers and pages on ``app`` (none by default)."""
        return None

    async def start(self) -> None:
        """Begin the stage's background work (none by default)."""
        return None

    async def stop(self) -> None:
        """End the stage's background work and release what it holds (nothing by default)."""
        return None
