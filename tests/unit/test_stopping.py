"""`kagent.tools.stopping.stop_within`: a command's tasks stop within a bound.

The hang it bounds (a simulated member kept in a rebalance the embedded broker never completed, so
``kagent run`` ignored SIGINT for a minute in CI) came back once in fifteen tries to cause it (Ctrl-C a
few seconds into a rebalance), and was bounded then: "the simulator" cancelled 15 s after the signal.
These tests stand in for it with tasks that wait on an event nobody sets, which is what such a member
does as far as the command can tell.
"""

from __future__ import annotations

import asyncio

import pytest

from kagent.tools.stopping import stop_within, unless_set

DEADLINE = 30.0
"""Seconds a test gives stop_within to return; each waits far less unless stop_within ignores its bounds."""


async def _stops(stop: asyncio.Event) -> None:
    await stop.wait()


async def _never_stops() -> None:
    await asyncio.Event().wait()


async def _ignores_its_first_cancel() -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.Event().wait()  # its clean-up hangs too


async def test_tasks_that_stop_are_waited_for_and_none_is_late() -> None:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_stops(stop), name=f"t{i}") for i in range(3)]
    stop.set()
    assert await asyncio.wait_for(stop_within(tasks, grace=DEADLINE), DEADLINE * 2) == []
    assert all(task.done() and not task.cancelled() for task in tasks)


async def test_a_task_that_does_not_stop_is_cancelled_after_the_grace_and_named() -> None:
    stop = asyncio.Event()
    fine = asyncio.create_task(_stops(stop), name="the reader")
    stuck = asyncio.create_task(_never_stops(), name="the simulator")
    stop.set()
    late = await asyncio.wait_for(stop_within([fine, stuck], grace=0.2, cancel_grace=DEADLINE), DEADLINE)
    assert late == ["the simulator"]
    assert stuck.cancelled() and fine.done() and not fine.cancelled()


async def test_a_task_whose_clean_up_hangs_is_cancelled_again_and_left() -> None:
    stuck = asyncio.create_task(_ignores_its_first_cancel(), name="stuck")
    late = await asyncio.wait_for(stop_within([stuck], grace=0.1, cancel_grace=0.1), DEADLINE)
    assert late == ["stuck"]
    # The second cancellation ends its clean-up.
    await asyncio.wait_for(asyncio.wait([stuck]), DEADLINE)
    assert stuck.cancelled()


async def test_hurry_cuts_the_grace_short() -> None:
    hurry = asyncio.Event()
    stuck = asyncio.create_task(_never_stops(), name="stuck")
    waiting = asyncio.create_task(stop_within([stuck], grace=10 * DEADLINE, cancel_grace=DEADLINE, hurry=hurry))
    await asyncio.sleep(0)  # stop_within is waiting
    assert not waiting.done()
    hurry.set()  # a second Ctrl-C
    assert await asyncio.wait_for(waiting, DEADLINE) == ["stuck"]
    assert stuck.cancelled()


# unless_set: the wait a simulated member's poll makes stoppable (aiokafka's getmany waits out a rebalance
# whatever its timeout; a task that never finishes stands in for it).


async def test_unless_set_gives_the_result_when_it_comes_first() -> None:
    async def answer() -> int:
        return 42

    assert await asyncio.wait_for(unless_set(answer(), asyncio.Event()), DEADLINE) == 42


async def test_unless_set_gives_up_a_wait_that_outlasts_the_event_and_cancels_it() -> None:
    stop = asyncio.Event()
    waiting = asyncio.create_task(_never_stops())
    giving_up = asyncio.create_task(unless_set(waiting, stop))
    await asyncio.sleep(0)
    assert not giving_up.done()
    stop.set()
    assert await asyncio.wait_for(giving_up, DEADLINE) is None
    assert waiting.cancelled()


async def test_unless_set_raises_what_the_wait_raises() -> None:
    async def fails() -> None:
        raise ValueError("the poll failed")

    with pytest.raises(ValueError, match="the poll failed"):
        await asyncio.wait_for(unless_set(fails(), asyncio.Event()), DEADLINE)
