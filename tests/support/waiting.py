"""Waiting for a condition with a deadline: the one polling loop of the tests and benchmarks.

A wait calls its probe until the probe returns something truthy, and returns that; once
``timeout`` seconds have passed after a falsy answer it raises :class:`WaitTimedOut`, naming
what it waited for (and, given ``detail``, whatever helps explain why: a worker's log, the last
body seen). The deadline is checked between probes, so each probe must itself return in bounded
time (an HTTP request with a timeout, a ``getmany`` with ``timeout_ms``). The synchronous and
the asynchronous variant share one schedule, :func:`_pauses`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

__all__ = ["WaitTimedOut", "wait_until", "wait_until_async"]

T = TypeVar("T")


class WaitTimedOut(AssertionError):
    """A wait's condition did not hold within its timeout (an ``AssertionError``, so pytest reports a failure)."""


def _pauses(timeout: float, what: str, interval: float, detail: Callable[[], str] | None) -> Iterator[float]:
    """The pause before each probe: none before the first, ``interval`` before each later one;
    raises :class:`WaitTimedOut` instead of a pause once ``timeout`` s have passed since the start."""
    deadline = time.monotonic() + timeout
    yield 0.0
    while time.monotonic() <= deadline:
        yield interval
    message = f"timed out after {timeout:g} s waiting for {what}"
    raise WaitTimedOut(message + (f"\n{detail()}" if detail is not None else ""))


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = 0.1,
    detail: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` every ``interval`` s until it returns something truthy, and return that;
    raise :class:`WaitTimedOut` naming ``what`` (with ``detail()``) after ``timeout`` s."""
    for pause in _pauses(timeout, what, interval, detail):
        time.sleep(pause)
        if value := probe():
            return value
    raise AssertionError("unreachable: _pauses raises when it ends")


async def wait_until_async(
    probe: Callable[[], Awaitable[T | None]],
    timeout: float,
    what: str,
    *,
    interval: float = 0.1,
    detail: Callable[[], str] | None = None,
) -> T:
    """:func:`wait_until` for a coroutine probe, pausing with ``asyncio.sleep``. A probe that
    waits on its own (a consumer's ``getmany``) can be polled with ``interval=0``."""
    for pause in _pauses(timeout, what, interval, detail):
        await asyncio.sleep(pause)
        if value := await probe():
            return value
    raise AssertionError("unreachable: _pauses raises when it ends")
