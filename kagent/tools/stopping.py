"""Stopping a command's background tasks within a bound, whatever they wait on.

``kagent run`` stops on Ctrl-C by setting an event its tasks watch (the
simulator's members then commit and leave, the recommendations reader
closes). A task can wait on a broker far longer than a user waits for a
prompt: in CI a simulated member, caught in a rebalance the embedded broker
never completed, kept rejoining and never left, and ``kagent run`` was still
running a minute after SIGINT. :func:`stop_within` bounds that wait.

The contract of :func:`stop_within`, for tasks already asked to stop:

1. It waits up to ``grace`` seconds for all of them to finish, or until
   ``hurry`` is set (a second Ctrl-C), whichever comes first.
2. It cancels those still running (a simulated member cancelled leaves
   without its last commit) and waits up to ``cancel_grace`` seconds more.
3. It cancels those still running once more (a cancellation raised inside
   their clean-up ends it) and returns without waiting for them.

It returns the names of the tasks that did not finish within ``grace``,
cancelled or abandoned, in the order given; empty when all stopped in time.
It never raises the tasks' errors: the caller reads them from the tasks.

:func:`unless_set` is the wait one task makes stoppable: an await given up
when an event is set first (a simulated member's poll, which aiokafka lets
wait out a rebalance whatever its timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

__all__ = ["CANCEL_GRACE", "STOP_GRACE", "stop_within", "unless_set"]

T = TypeVar("T")

STOP_GRACE = 15.0
"""Seconds ``kagent run``'s tasks get to stop cleanly after a stop signal."""
CANCEL_GRACE = 5.0
"""Seconds they get after being cancelled."""


async def stop_within(
    tasks: Sequence[asyncio.Task[Any]],
    grace: float = STOP_GRACE,
    cancel_grace: float = CANCEL_GRACE,
    hurry: asyncio.Event | None = None,
) -> list[str]:
    """Wait for ``tasks`` (asked to stop) to finish, cancelling them when they take too long; the names of
    those that did not finish within ``grace`` s. The rules are the module's."""
    pending = [task for task in tasks if not task.done()]
    if pending:
        waiting = asyncio.wait(pending, timeout=grace)  # given up, it leaves the tasks running
        await (waiting if hurry is None else unless_set(waiting, hurry))
    late = [task for task in tasks if not task.done()]
    for task in late:
        task.cancel()
    if late:
        await asyncio.wait(late, timeout=cancel_grace)
    for task in late:
        if not task.done():
            task.cancel()
    return [task.get_name() for task in late]


async def unless_set(awaitable: Awaitable[T], event: asyncio.Event) -> T | None:
    """``awaitable``'s result, or None when ``event`` is set before it is done: it is then cancelled, and its
    cancellation waited for (what it raises meanwhile is not raised). Its errors are raised."""
    running = asyncio.ensure_future(awaitable)
    setting = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait([running, setting], return_when=asyncio.FIRST_COMPLETED)
    finally:
        setting.cancel()
        if not running.done():
            running.cancel()
            await asyncio.wait([running])
    return None if running.cancelled() else running.result()
