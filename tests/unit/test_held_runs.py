"""``held_runs``: the held groups a run at a time, each run from a bounded look at the stored groups."""

from __future__ import annotations

from kagent.worker.group_state import held_runs


def odd(group: str) -> bool:
    return int(group.removeprefix("g")) % 2 == 1


def test_each_held_group_comes_once_those_with_an_assignment_first() -> None:
    assigned = [f"g{n}" for n in range(10)]
    committed = [f"g{n}" for n in range(5, 15)]  # g5-g9 have both

    runs = list(held_runs(assigned, committed, odd, run=3))

    groups = [group for run in runs for group in run]
    assert groups == ["g1", "g3", "g5", "g7", "g9", "g11", "g13"]


def test_a_run_looks_at_no_more_than_its_size_of_the_stored_groups_however_few_are_held() -> None:
    """The caller may let the event loop go between runs: a long stretch of groups this worker does not
    hold, or of groups with commits already produced with their assignment, still ends a run every
    ``run`` groups looked at (it was one uninterrupted look at a million group-partitions)."""
    assigned = [f"g{n}" for n in range(0, 20, 2)]  # none held
    committed = [*assigned, "g1"]  # all but the last seen already

    looked: list[str] = []

    def holds(group: str) -> bool:
        looked.append(group)
        return odd(group)

    runs = held_runs(assigned, committed, holds, run=4)
    sizes = []
    for run in runs:
        sizes.append((len(looked), run))
        looked.clear()

    # ceil(10 / 4) runs of the assigned, ceil(11 / 4) of the committed (whose seen groups need no look)
    assert sizes == [(4, []), (4, []), (2, []), (0, []), (0, []), (1, ["g1"])]


def test_nothing_stored_gives_no_run() -> None:
    assert list(held_runs([], [], odd)) == []
