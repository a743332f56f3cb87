"""The evaluator's round pacer: a long round of evaluations leaves the event loop to the other stages."""

from __future__ import annotations

import asyncio
import time

from kagent.worker.evaluator import RoundPacer

PIECE = 0.003
"""Seconds of work in one piece of the round (one group's evaluation, say)."""


def _work(seconds: float) -> float:
    """Busy for ``seconds`` of wall time; the time it took (at least ``seconds``)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        pass
    return time.monotonic() - started


async def test_a_long_round_leaves_the_loop_idle_as_long_as_it_ran_at_half_share() -> None:
    pacer = RoundPacer(every=0.002, share=0.5)
    started = time.monotonic()
    busy = 0.0
    for _ in range(20):
        busy += _work(PIECE)
        await pacer.pause()
    # Each pause idles at least as long as the piece before it ran: a machine busy with other things
    # only stretches the round further.
    assert time.monotonic() - started >= 2 * busy


async def test_a_round_shorter_than_every_does_not_pause() -> None:
    pacer = RoundPacer(every=10.0, share=0.5)
    started = time.monotonic()
    busy = 0.0
    for _ in range(3):
        busy += _work(0.05)
        await pacer.pause()
    # A pause would have idled as long as the work before it: the round would have taken twice its work.
    assert time.monotonic() - started < 1.5 * busy
    assert pacer.others_cpu == 0.0


async def test_the_other_work_done_in_the_pauses_is_not_the_rounds() -> None:
    other_cpu = 0.0

    async def other_stage() -> None:
        nonlocal other_cpu
        while True:
            cpu = time.thread_time()
            _work(PIECE)
            other_cpu += time.thread_time() - cpu
            await asyncio.sleep(0)

    pacer = RoundPacer(every=0.002, share=0.5)
    other = asyncio.create_task(other_stage())
    for _ in range(10):
        _work(PIECE)
        await pacer.pause()
    other.cancel()  # before the loop runs it again: all it did, it did in the round's pauses
    assert other_cpu > 0
    assert pacer.others_cpu >= other_cpu
