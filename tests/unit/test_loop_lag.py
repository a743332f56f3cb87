"""`LoopLag` on a real event loop: a stall it is running beside shows in what it reports."""

from __future__ import annotations

import asyncio
import time

import pytest

from kagent.worker.loop_lag import LoopLag
from tests.support.waiting import wait_until_async

EVERY = 0.01
STALL = 0.3


async def test_a_stall_of_the_loop_is_reported_within_one_interval_of_its_length() -> None:
    lags: list[float] = []
    stage = LoopLag(lags.append, every=EVERY)
    await stage.start()
    try:
        await wait_until_async(lambda: asyncio.sleep(0, len(lags) >= 3), 10, "three timers to run")
        seen = len(lags)
        time.sleep(STALL)  # the stall measured: this coroutine holds the loop
        await wait_until_async(lambda: asyncio.sleep(0, len(lags) > seen), 10, "a timer after the stall")
        # The timer due next when the stall began was due at most EVERY into it, and ran after it ended.
        assert max(lags[seen:]) >= STALL - EVERY, lags[seen:]
        assert min(lags) >= 0.0
    finally:
        await stage.stop()


async def test_it_reports_nothing_once_stopped() -> None:
    lags: list[float] = []
    stage = LoopLag(lags.append, every=EVERY)
    await stage.start()
    await wait_until_async(lambda: asyncio.sleep(0, bool(lags)), 10, "a timer to run")
    await stage.stop()
    stopped = len(lags)
    await asyncio.sleep(5 * EVERY)
    assert len(lags) == stopped
    await stage.stop()  # a second stop is no error


def test_an_interval_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="need every > 0, not 0"):
        LoopLag(lambda lag: None, every=0)
