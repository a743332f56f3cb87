"""Long work on the event loop in slices: a yield to the loop each time a slice has run its time, and
the slices of several long works ready at once run one a turn of the loop.

A worker's event loop serves the HTTP API, the consumers' heartbeats and every stage. A piece of work
that runs for tens of milliseconds without an ``await`` makes all of them wait that long: at 10,000
groups on two workers under live commits, applying a batch of derived events (up to 57 ms), rewriting a
chunk of lag entries with its changelog flush (up to 40 ms) and appending a flush's records to record
batches were what the slowest ``GET /api/groups`` requests waited behind. Such loops ask
:meth:`LoopSlices.over` between two of their pieces and yield when it says so.

While a request to the worker's web server is under way (:func:`request_under_way`), each slice runs
:data:`URGENT_SLICE` at most: the request's next step (the other worker's answer, its response) waits
for the slice running when it became ready, and with the summaries' sorting gone from the page (see
:mod:`kagent.core.group_ranking`) that wait was most of what a page of 50 took at p99.

A yield alone was not enough: storage, the source and the evaluator each yielded after its slice, and
the next turn of the loop ran a slice of each of them before the request's next step, so a turn lasted
the sum of their slices and a request, which takes several turns on each worker, waited for each. They
yield with :func:`next_turn`, which resumes one of them a turn.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

__all__ = [
    "DROP_CHUNK",
    "SLICE",
    "URGENT_SLICE",
    "LoopSlices",
    "any_request_under_way",
    "drop_entries",
    "next_turn",
    "request_under_way",
    "slice_length",
    "waited",
    "waits_through",
]

SLICE = 0.002
"""Seconds a slice of work runs before it lets the event loop run the rest. A request's first step on each
worker it reaches waits for the slice running there when it arrives (the asking worker's, then the
other's), before :func:`request_under_way` shortens the rest: measured by ``benchmarks/bench_api.py``
(10,000 groups on two workers under 16,000 commits/s, requests first), a page of 50's p99 was 12.5-34.3 ms
in nine runs at 5 ms (six within 20 ms) and 13.3-18.8 ms in four at 2 ms, the whole list's 51.5-89.6 ms
and 42.9-59.0 ms; ``bench_ingest``'s one worker applied its backlog at 8.2 µs of CPU a record and its live
records 4.2 s after the last was published, as at 5 ms (8.4-11.2 µs and 1.3-5.0 s in eight runs)."""

URGENT_SLICE = 0.0005
"""Seconds a slice runs, at most, while a request is under way (:func:`request_under_way`)."""

_under_way = 0
"""Requests under way in this process (a worker serves them on its one event loop)."""


@contextmanager
def request_under_way() -> Iterator[None]:
    """While the block runs, every slice of long work runs :data:`URGENT_SLICE` at most (:func:`slice_length`):
    for the handling of a request whose client waits."""
    global _under_way
    _under_way += 1
    try:
        yield
    finally:
        _under_way -= 1


def any_request_under_way() -> bool:
    """Whether a request is under way (:func:`request_under_way`): work that yields after a count of
    steps rather than a time takes fewer."""
    return _under_way > 0


def slice_length(every: float) -> float:
    """How long a slice of work that runs ``every`` seconds runs now: at most :data:`URGENT_SLICE` while a
    request is under way."""
    return min(every, URGENT_SLICE) if _under_way else every


class LoopSlices:
    """The slices of one long piece of work on the event loop: ``if slices.over(): await slices.next()``
    between two of its steps. Cheap enough to ask after every step of a few microseconds (a clock read
    and a comparison)."""

    __slots__ = ("_every", "_started")

    def __init__(self, every: float = SLICE) -> None:
        self._every = every
        self._started = time.perf_counter()

    def over(self) -> bool:
        """Whether this slice has run ``every`` seconds (:func:`slice_length`): time to let the loop run
        the rest."""
        ran = time.perf_counter() - self._started
        return ran >= self._every or (_under_way > 0 and ran >= URGENT_SLICE)

    async def next(self) -> None:
        """Let the event loop run everything else that is ready, then start the next slice."""
        await next_turn()
        self._started = time.perf_counter()


class _Turns:
    """The waiters of one event loop for a turn of their own (:func:`next_turn`), woken one a turn. It
    keeps no reference to its loop: the loop is the key it is kept under, weakly."""

    __slots__ = ("_waiters", "_waking")

    def __init__(self) -> None:
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._waking = False

    def wait(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        waiter = loop.create_future()
        self._waiters.append(waiter)
        if not self._waking:
            self._waking = True
            loop.call_soon(self._wake_one)
        return waiter

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break
        if self._waiters:
            asyncio.get_running_loop().call_soon(self._wake_one)  # the next waiter a turn later
        else:
            self._waking = False


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def next_turn() -> None:
    """Yield the event loop between two slices of long work, and resume in a turn of the loop no other
    long work resumes in: the slices of the worker's long pieces of work (storage's, the source's, the
    evaluator's rounds) that are ready at once run one a turn, with everything else that is ready (an
    API request, a heartbeat, a fetch's answer) between two of them, instead of all in one turn with the
    rest waiting for the sum of their slices. A waiter cancelled while it waits gives its turn up.

    Measured by ``benchmarks/bench_api.py`` (10,000 groups on two workers under 16,000 commits/s), the
    p99 of a page of 50, beside a bare aiohttp server's under the same load: with bare yields, 64 and
    70 ms (3.4x and 3.7x); resumed one a turn, 68 and 77 ms (2.5x, 4.2x), as the evaluator's steps of
    5-10 ms still filled most turns; with those at 2 ms too (:data:`kagent.worker.evaluator.YIELD_EVERY`),
    40 and 43 ms (2.0x, 1.7x), and the whole list's p99 75 and 106 ms, from 125 and 165 ms. Most of
    that gain is the shorter steps: every slice at 2 ms with bare yields gave 42 and 48 ms (2.7x,
    3.0x). Storage's and the source's slices at 2 ms as well, one a turn, gained nothing more then (25-46
    ms in four runs, 1.9-2.8x): each page still sorted its worker's groups (see :data:`SLICE` for now)."""
    loop = asyncio.get_running_loop()
    turns = _turns.get(loop)
    if turns is None:
        turns = _turns[loop] = _Turns()
    await turns.wait(loop)


DROP_CHUNK = 2_000
"""Keys :func:`drop_entries` looks at between two looks at the clock."""


async def drop_entries(maps: Iterable[dict[str, object]], keep: Callable[[str], bool]) -> None:
    """Drop each entry of ``maps`` whose key ``keep`` refuses, a slice of the event loop at a time: what a
    worker keeps per group loses the groups it no longer holds without a copy of the rest (tens of thousands
    of groups). Each map's keys are those it has when its turn comes; ``keep`` is asked when a key's run
    of :data:`DROP_CHUNK` is looked at, so it may say what holds by then."""
    slices = LoopSlices()
    for entries in maps:
        keys = list(entries)
        for start in range(0, len(keys), DROP_CHUNK):
            if slices.over():
                await slices.next()
            for key in [key for key in keys[start : start + DROP_CHUNK] if not keep(key)]:
                entries.pop(key, None)


T = TypeVar("T")

_ELSEWHERE: ContextVar[Callable[[Awaitable[Any]], Awaitable[Any]] | None] = ContextVar("elsewhere", default=None)
"""How :func:`waited` awaits in the current task: set by :func:`waits_through`."""


@contextmanager
def waits_through(elsewhere: Callable[[Awaitable[Any]], Awaitable[Any]]) -> Iterator[None]:
    """While in it, :func:`waited` in this task awaits through ``elsewhere`` (a round of evaluations'
    :meth:`~kagent.worker.evaluator.RoundPacer.elsewhere`, which leaves what the loop runs meanwhile out
    of the round's CPU)."""
    token = _ELSEWHERE.set(elsewhere)
    try:
        yield
    finally:
        _ELSEWHERE.reset(token)


async def waited(step: Awaitable[T]) -> T:
    """Await ``step``, a wait in which the event loop runs other work (a changelog flush, a broker's
    acknowledgement): through :func:`waits_through`'s ``elsewhere`` when one is set in this task, as is
    otherwise. An evaluation that sends an incident or a recommendation waits twice on the broker, and
    storage and the source ran meanwhile: counted as the round's own, they tripled
    ``kagent_evaluation_cpu_seconds`` in ``benchmarks/bench_ingest.py``'s live line (8.7 s counted,
    about 2.9 s sampled)."""
    elsewhere = _ELSEWHERE.get()
    if elsewhere is None:
        return await step
    return cast(T, await elsewhere(step))
