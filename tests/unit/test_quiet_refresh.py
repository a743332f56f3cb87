"""How long a quiet group goes without a full evaluation (:func:`kagent.worker.evaluator.refresh_after`, and the
evaluator's use of it): every 10 intervals, unless refreshing the worker's quiet groups that often would take
more than a tenth of a core."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kagent.core.evaluation import EvaluationState
from kagent.core.policy import LagUnit
from kagent.worker.evaluator import QUIET_ROUNDS, REFRESH_SHARE, REFRESH_SPREAD, Evaluator, refresh_after
from tests.support.evaluators import bare_evaluator

INTERVAL = 5.0
NOW = 1_000.0


def test_a_quiet_group_is_refreshed_every_ten_intervals_while_that_is_cheap() -> None:
    assert QUIET_ROUNDS * INTERVAL == 50.0
    assert refresh_after(0, None, INTERVAL, 0.0) == 50.0  # no evaluation measured yet
    # 5,000 quiet groups at 1 ms each, every 50 s: a tenth of a core, the most refreshes may take.
    assert refresh_after(5_000, 0.001, INTERVAL, 0.0) == pytest.approx(50.0)
    assert refresh_after(600, 0.001, INTERVAL, 0.0) == 50.0


def test_each_groups_refresh_comes_up_to_a_quarter_early_at_random_so_groups_evaluated_together_drift_apart() -> None:
    assert REFRESH_SPREAD == 0.25
    assert refresh_after(0, None, INTERVAL, 1.0) == pytest.approx(37.5)
    assert refresh_after(600, 0.001, INTERVAL, 0.5) == pytest.approx(43.75)
    assert refresh_after(50_000, 0.0009, INTERVAL, 1.0) == pytest.approx(450.0 * 0.75)


def test_a_groups_first_refresh_is_drawn_over_the_whole_horizon_so_groups_evaluated_together_spread_at_once() -> None:
    assert refresh_after(0, None, INTERVAL, 0.9, first=True) == pytest.approx(5.0)
    assert refresh_after(0, None, INTERVAL, 0.0, first=True) == pytest.approx(50.0)
    assert refresh_after(50_000, 0.0009, INTERVAL, 0.5, first=True) == pytest.approx(225.0)


def test_refreshes_that_would_take_more_than_a_tenth_of_a_core_are_spaced_out() -> None:
    # bench_scrape's 1M mix: 50,000 quiet groups at 0.9 ms each would be 0.9 of a core every 50 s.
    spaced = 50_000 * 0.0009 / REFRESH_SHARE
    assert spaced == pytest.approx(450.0)
    assert refresh_after(50_000, 0.0009, INTERVAL, 0.0) == pytest.approx(spaced)
    # On average over the spread the refreshes take no more than twice the share.
    mean_horizon = spaced * (1 - REFRESH_SPREAD / 2)
    assert 50_000 * 0.0009 / mean_horizon < 2 * REFRESH_SHARE


class _Groups:
    """A group whose status cannot change with the clock."""

    def status_holds_until(self, snapshot: object) -> float:
        return math.inf


def _evaluator() -> Evaluator:
    return bare_evaluator(INTERVAL, policy=SimpleNamespace(lag_unit=LagUnit.MESSAGES, cooldown=300.0), groups=_Groups())


def _horizon(evaluator: Evaluator, group: str = "g") -> float:
    """Seconds until ``group``, which the evaluator just found quiet, is evaluated in full again."""
    quiet = EvaluationState(group=group)
    until = evaluator._quiet_until_after(cast(Any, None), quiet, False, False, 1.0, NOW)
    assert until is not None
    return until - NOW


def test_the_evaluator_draws_a_groups_first_horizon_over_the_whole_of_it_and_the_next_ones_over_a_quarter() -> None:
    evaluator = _evaluator()
    first = [_horizon(evaluator, f"group-{index}") for index in range(400)]
    assert all(0 < horizon <= 50.0 for horizon in first)
    assert sum(horizon < 25.0 for horizon in first) > 100  # spread over the whole horizon: about half below 25 s
    later = [_horizon(evaluator, f"group-{index}") for index in range(400)]
    assert all(50.0 * (1 - REFRESH_SPREAD) <= horizon <= 50.0 for horizon in later)


def test_the_evaluator_spaces_its_quiet_groups_refreshes_by_its_groups_and_their_measured_cost() -> None:
    evaluator = _evaluator()
    assert 0 < _horizon(evaluator) <= 50.0  # nothing measured yet; the first horizon of "g"
    evaluator._held = {f"group-{index}" for index in range(50_000)}
    for _ in range(3):
        evaluator._note_quiet_cost(0.0009)
    assert 450.0 * (1 - REFRESH_SPREAD) <= _horizon(evaluator) <= 450.0
    evaluator._held = {f"group-{index}" for index in range(500)}
    assert 50.0 * (1 - REFRESH_SPREAD) <= _horizon(evaluator) <= 50.0  # few groups: every ten intervals again


def test_the_measured_cost_is_a_moving_average_of_quiet_evaluations() -> None:
    evaluator = _evaluator()
    evaluator._note_quiet_cost(0.001)
    assert evaluator._quiet_cost == 0.001
    evaluator._note_quiet_cost(0.101)  # one slow evaluation moves it a thousandth of the difference
    assert evaluator._quiet_cost == pytest.approx(0.0011)
