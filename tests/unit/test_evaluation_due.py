"""When a group comes due for evaluation (:meth:`kagent.worker.evaluator.Evaluator._due`): the time it is
due from, which ``kagent_evaluation_delay_seconds`` measures each evaluation against."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kagent.core.evaluation import EvaluationState
from kagent.worker.evaluator import Evaluator, RoundPacer
from kagent.worker.group_state import GroupChange, GroupChanged
from tests.support.evaluators import bare_evaluator

INTERVAL = 10.0


class _Changes:
    """The notices storage sent, as the evaluator drains them."""

    def __init__(self, *notices: GroupChanged) -> None:
        self.notices = list(notices)

    def drain(self) -> list[GroupChanged]:
        drained, self.notices = self.notices, []
        return drained


def _evaluator(states: dict[str, bytes] | None = None, *notices: GroupChanged) -> Evaluator:
    """An evaluator of interval :data:`INTERVAL` holding group ``g``, its trigger states ``states``, and
    ``notices`` waiting; nothing else of it is used here."""
    evaluator = bare_evaluator(
        INTERVAL,
        changes=_Changes(*notices),
        states=SimpleNamespace(stored=states or {}),  # a table as the evaluator reads it
    )
    evaluator._held = {"g"}
    return evaluator


def _evaluated_at_100(*notices: GroupChanged, states: dict[str, bytes] | None = None) -> Evaluator:
    """:func:`_evaluator` whose group ``g`` was last evaluated at 100, once it has taken ``notices``."""
    evaluator = _evaluator(states, *notices)
    evaluator._last_evaluated["g"] = 100.0
    asyncio.run(evaluator._take_changes(RoundPacer()))
    return evaluator


def test_a_group_never_evaluated_is_due_half_an_interval_after_it_was_first_seen() -> None:
    evaluator = _evaluator()
    assert evaluator._due("g", 100.0) is None  # not seen yet
    evaluator._first_seen["g"] = 100.0
    assert evaluator._due("g", 104.9) is None
    assert evaluator._due("g", 112.0) == 105.0


def test_an_evaluated_group_is_due_an_interval_after_its_last_evaluation() -> None:
    evaluator = _evaluator()
    evaluator._last_evaluated["g"] = 100.0
    assert evaluator._due("g", 109.9) is None
    assert evaluator._due("g", 130.0) == 110.0  # 20 s late: the delay is measured from 110


def test_a_change_makes_it_due_half_an_interval_after_the_last_evaluation_or_when_it_was_made() -> None:
    early = _evaluated_at_100(GroupChanged("g", GroupChange.COMMITTED, 102.0))
    assert early._due("g", 104.0) is None
    assert early._due("g", 106.0) == 105.0
    late = _evaluated_at_100(GroupChanged("g", GroupChange.COMMITTED, 107.0))
    assert late._due("g", 108.0) == 107.0  # changed after half an interval: due from the change


def test_the_first_change_since_the_last_evaluation_is_the_one_counted() -> None:
    evaluator = _evaluated_at_100(
        GroupChanged("g", GroupChange.COMMITTED, 106.0), GroupChanged("g", GroupChange.ASSIGNED, 108.0)
    )
    assert evaluator._due("g", 109.0) == 106.0


def test_end_offsets_moving_and_a_holding_trigger_do_not_bring_a_group_forward() -> None:
    moved = _evaluated_at_100(GroupChanged("g", GroupChange.END_OFFSETS, 101.0))
    assert moved._due("g", 106.0) is None
    assert moved._due("g", 110.0) == 110.0
    holding = EvaluationState(group="g", held=1).model_dump_json().encode()
    held = _evaluated_at_100(GroupChanged("g", GroupChange.COMMITTED, 101.0), states={"g": holding})
    assert held._due("g", 106.0) is None  # a change must not make a hold count faster
    assert held._due("g", 111.0) == 110.0
