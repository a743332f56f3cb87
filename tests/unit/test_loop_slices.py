"""`kagent.worker.loop_slices`: long work yields to the event loop once its slice has run."""

from __future__ import annotations

import asyncio

from kagent.worker.loop_slices import LoopSlices


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
