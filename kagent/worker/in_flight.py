"""The requests a stage has under way, which its ``stop()`` ends before it closes their client.

aiokafka's client opens a new connection when a request is sent after
``close()``, and nothing closes that one: the worker then ends with
"Unclosed AIOKafkaConnection" and a traceback from the connection's reader.
A stage that polls a cluster on a timer therefore runs each poll's requests
through :class:`InFlight`; its ``stop()`` calls :meth:`InFlight.close` first,
which cancels what is under way and waits until it has ended, and only then
closes the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["InFlight"]

T = TypeVar("T")


class InFlight:
    """At most one run of requests at a time, that :meth:`close` can end.

    Contract: :meth:`run` returns its coroutine's result, or None when
    :meth:`close` was called before or during it (the coroutine is then not
    started, or cancelled); its exceptions propagate. When :meth:`close`
    returns, no coroutine given to :meth:`run` is still running, and none will
    be started.
    """

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self.closed = False

    async def run(self, requests: Coroutine[Any, Any, T]) -> T | None:
        """``requests`` run as a task :meth:`close` can cancel; None if it did."""
        if self.closed:
            requests.close()
            return None
        task: asyncio.Task[T] = asyncio.ensure_future(requests)
        self._task = task
        try:
            await asyncio.wait([task])
        finally:
            if task.done():
                self._task = None
            else:  # the caller was cancelled: its requests go too, and close() still waits for them
                task.cancel()
        return None if task.cancelled() else task.result()

    async def close(self) -> None:
        """Start no more runs; cancel the one under way, if any, and wait until it has ended."""
        self.closed = True
        task = self._task
        if task is not None:
            if not task.cancelling():  # once is enough: another cancel would cut its clean-up short
                task.cancel()
            await asyncio.wait([task])
