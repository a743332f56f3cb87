"""The worker's freezing of its old objects (kagent.worker.garbage_collection.OldObjectsFrozen), on this
process's real collector."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kagent.worker.garbage_collection import OldObjectsFrozen


class _Node:
    """A container the collector tracks, in a reference cycle with itself when asked."""

    def __init__(self, cyclic: bool) -> None:
        self.me = self if cyclic else None


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def frozen(clock: _Clock) -> Iterator[OldObjectsFrozen]:
    freezer = OldObjectsFrozen(frozen_for=60.0, clock=clock)
    freezer.install()
    try:
        yield freezer
    finally:
        freezer.uninstall()


def _old_object(cyclic: bool) -> weakref.ref[_Node]:
    """A weak reference to a node that outlived a middle collection, referenced by nothing else now."""
    node = _Node(cyclic)
    gc.collect(1)
    return weakref.ref(node)


def test_what_outlives_a_middle_collection_is_frozen_and_a_young_collection_freezes_nothing(
    frozen: OldObjectsFrozen,
) -> None:
    gc.collect(1)
    assert gc.get_freeze_count() > 0
    young = [_Node(cyclic=True) for _ in range(10)]
    gc.disable()  # no automatic middle collection between the two lines below to move them on
    try:
        gc.collect(0)
        # A frozen object is in no generation. The freeze count is no measure: a frozen object freed by
        # reference counting meanwhile (left by an earlier test, say) lowers it.
        middle = {id(o) for o in gc.get_objects(generation=1)}
    finally:
        gc.enable()
    assert all(id(node) in middle for node in young), "a young collection froze its survivors"
    del young


def test_a_frozen_object_not_in_a_cycle_is_freed_by_reference_counting(frozen: OldObjectsFrozen) -> None:
    node = _old_object(cyclic=False)
    assert node() is None


def test_garbage_in_a_cycle_among_frozen_objects_waits_for_the_thaw(frozen: OldObjectsFrozen, clock: _Clock) -> None:
    node = _old_object(cyclic=True)
    gc.collect()
    assert node() is not None, "a full collection went over the frozen objects before their time"
    assert frozen.thaws == 0 and frozen.freed_at_thaw is None

    clock.now += 60.0
    gc.collect()
    assert node() is None, "the full collection after the thaw did not free the cycle"
    assert frozen.thaws == 1
    assert frozen.freed_at_thaw is not None and frozen.freed_at_thaw >= 1
    assert gc.get_freeze_count() > 0, "what survived the thawing collection was not frozen again"

    again = _old_object(cyclic=True)
    gc.collect()
    assert again() is not None, "the clock of the next thaw did not start again at the last one"


def test_uninstalling_thaws_everything(clock: _Clock) -> None:
    freezer = OldObjectsFrozen(frozen_for=60.0, clock=clock)
    freezer.install()
    freezer.install()  # once per process: a second call adds no second callback
    try:
        assert gc.callbacks.count(freezer._collected) == 1
        node = _old_object(cyclic=True)
    finally:
        freezer.uninstall()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert node() is None
