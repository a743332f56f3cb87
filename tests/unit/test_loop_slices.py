"""`kagent.worker.loop_slices`: long work yields to the event loop once its slice has run."""

from __future__ import annotations

import asyncio
import itertools
import time
from types import SimpleNamespace
from typing import Any

import faust
import pytest

from kagent.worker import loop_slices
from kagent.worker.loop_slices import (
    URGENT_SLICE,
    LoopSlices,
    any_request_under_way,
    drop_entries,
    next_turn,
    request_under_way,
    slice_length,
)
from kagent.worker.request_view import RequestView


def test_a_slice_is_over_once_it_has_run_its_time() -> None:
    assert not LoopSlices(every=3600.0).over()
    assert LoopSlices(every=0.0).over()


def test_the_next_slice_lets_the_rest_of_the_loop_run_first() -> None:
    async def run() -> list[str]:
        ran: list[str] = []

        async def other() -> None:
            ran.append("other")

        slices = LoopSlices(every=0.0)
        asyncio.get_running_loop().create_task(other())
        for step in range(3):
            ran.append(f"step {step}")
            if slices.over():
                await slices.next()
        return ran

    assert asyncio.run(run()) == ["step 0", "other", "step 1", "step 2"]


def test_long_works_ready_at_once_resume_one_a_turn_with_the_rest_of_the_loop_between() -> None:
    """Three long pieces of work each yield between slices: what one slice made ready (here a callback;
    in a worker an API request's next step, a heartbeat) runs before the next slice of any of them, not
    after one slice of each (the loop's turn would last the sum of their slices)."""

    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        ran: list[str] = []

        async def work(name: str) -> None:
            for step in range(2):
                await next_turn()  # each slice is a resumption, as a long work's after its first
                ran.append(f"{name}{step}")
                loop.call_soon(ran.append, f"after {name}{step}")

        await asyncio.wait_for(asyncio.gather(work("a"), work("b"), work("c")), 10)  # a waiter never woken fails
        return ran

    ran = asyncio.run(run())
    slices = [i for i, what in enumerate(ran) if not what.startswith("after")]
    assert len(slices) == 6
    for here, after in itertools.pairwise(slices):
        assert f"after {ran[here]}" in ran[here + 1 : after + 1], ran


def test_a_waiter_cancelled_in_its_wait_leaves_the_others_their_turns() -> None:
    async def run() -> list[str]:
        ran: list[str] = []

        async def work(name: str) -> None:
            await next_turn()
            ran.append(name)

        first = asyncio.ensure_future(work("cancelled"))
        others = [asyncio.ensure_future(work(name)) for name in ("b", "c")]
        await asyncio.sleep(0)  # all three wait for a turn
        first.cancel()
        await asyncio.wait_for(asyncio.gather(*others), 10)  # not left waiting behind the cancelled one
        return ran

    assert asyncio.run(run()) == ["b", "c"]


def test_while_a_request_is_under_way_every_slice_runs_the_urgent_length_at_most() -> None:
    slices = LoopSlices(every=3600.0)
    assert slice_length(0.005) == 0.005 and not any_request_under_way()
    with request_under_way(), request_under_way():
        assert slice_length(0.005) == URGENT_SLICE and slice_length(0.0001) == 0.0001 and any_request_under_way()
        deadline = time.perf_counter() + 10
        while not slices.over():  # an hour's slice, over once it has run the urgent length
            assert time.perf_counter() < deadline, "the slice never ended while a request was under way"
        assert time.perf_counter() - slices._started >= URGENT_SLICE
    assert not slices.over() and not any_request_under_way()  # both requests ended: an hour again
    try:
        with request_under_way():
            raise ValueError("the handler failed")
    except ValueError:
        pass
    assert slice_length(0.005) == 0.005  # a request that failed is no longer under way


def test_a_request_view_handles_its_request_under_way() -> None:
    seen: list[float] = []

    class Page(RequestView):
        async def get(self, request: Any) -> Any:
            seen.append(slice_length(1.0))
            return "answered"

    view = Page(faust.App("test-request-view"), web=None)  # type: ignore[arg-type]  # dispatch needs no server
    request = SimpleNamespace(method="GET", match_info={})
    assert asyncio.run(view.dispatch(request)) == "answered"
    assert seen == [URGENT_SLICE] and slice_length(1.0) == 1.0


def test_dropping_entries_keeps_what_keep_says_and_lets_the_loop_run_between_slices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a worker keeps per group loses the groups ``keep`` refuses, and only those; the rest of the loop
    runs between slices. ``keep`` is asked as each run of keys is looked at, so a group it holds by then
    (one that came while a poll looked at the others) keeps its entries."""
    monkeypatch.setattr(loop_slices, "LoopSlices", lambda: LoopSlices(every=0.0))  # every run is a slice
    size = 3 * loop_slices.DROP_CHUNK + 1
    held = {f"g{n}" for n in range(0, size, 2)}
    maps: list[dict[str, object]] = [{f"g{n}": n for n in range(size)}, {"g1": "x", "g2": "y", "g3": "z"}, {}]
    kept_values = [{group: value for group, value in one.items() if group in held or group == "g1"} for one in maps]

    async def run() -> list[str]:
        ran: list[str] = []

        async def other() -> None:
            ran.append("other")

        asyncio.get_running_loop().create_task(other())
        await drop_entries(maps, lambda group: group in held or group == "g1")
        ran.append("dropped")
        return ran

    assert asyncio.run(run()) == ["other", "dropped"]
    assert maps == kept_values
    assert maps[1] == {"g1": "x", "g2": "y"}
