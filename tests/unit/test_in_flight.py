"""`kagent.worker.in_flight.InFlight`: when close() returns, nothing run through it is still running."""

from __future__ import annotations

import asyncio

import pytest

from kagent.worker.in_flight import InFlight


async def test_a_run_returns_its_result_and_passes_its_exception_on() -> None:
    requests = InFlight()

    async def answer() -> int:
        return 7

    async def fail() -> int:
        raise ValueError("no leader")

    assert await requests.run(answer()) == 7
    with pytest.raises(ValueError, match="no leader"):
        await requests.run(fail())


async def hangs(started: asyncio.Event, ended: asyncio.Event, turns: int) -> int:
    """Waits until cancelled; its clean-up takes ``turns`` turns of the loop, then sets ``ended``."""
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        for _ in range(turns):
            await asyncio.sleep(0)
        ended.set()
    return 1


async def test_close_cancels_the_run_under_way_and_waits_until_it_has_ended() -> None:
    requests = InFlight()
    started, ended = asyncio.Event(), asyncio.Event()
    run = asyncio.create_task(requests.run(hangs(started, ended, turns=1)))
    await started.wait()
    await requests.close()
    assert ended.is_set()
    assert await run is None


async def test_after_close_nothing_is_started() -> None:
    requests = InFlight()
    await requests.close()
    started = False

    async def request() -> int:
        nonlocal started
        started = True
        return 1

    assert await requests.run(request()) is None
    assert not started
    assert requests.closed


async def test_a_cancelled_caller_cancels_its_run_and_close_still_waits_for_it() -> None:
    requests = InFlight()
    started, ended = asyncio.Event(), asyncio.Event()
    caller = asyncio.create_task(requests.run(hangs(started, ended, turns=3)))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await requests.close()
    assert ended.is_set()
