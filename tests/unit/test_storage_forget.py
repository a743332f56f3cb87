"""`kagent.worker.storage`: each end-offsets poll drops the groups no longer held from storage's per-group maps,
keeping the others' entries as they are, a slice of the event loop at a time."""

from __future__ import annotations

import asyncio

import pytest

from kagent.worker import storage
from kagent.worker.loop_slices import LoopSlices


def test_only_the_groups_not_held_then_or_now_are_dropped_and_the_loop_runs_between_slices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(storage, "LoopSlices", lambda: LoopSlices(every=0.0))  # every chunk is a slice
    size = 3 * storage.FORGET_CHUNK + 1
    held = {f"g{n}" for n in range(0, size, 2)}
    maps: list[dict[str, object]] = [{f"g{n}": n for n in range(size)}, {"g1": "x", "g2": "y", "g3": "z"}, {}]
    kept_values = [{group: value for group, value in one.items() if group in held or group == "g1"} for one in maps]

    async def run() -> list[str]:
        ran: list[str] = []

        async def other() -> None:
            ran.append("other")

        asyncio.get_running_loop().create_task(other())
        await storage._forget_others(maps, held, lambda group: group == "g1")
        ran.append("forgotten")
        return ran

    assert asyncio.run(run()) == ["other", "forgotten"]
    assert maps == kept_values
    assert maps[1] == {"g1": "x", "g2": "y"}  # g1 came to be held while the poll looked: kept
