"""`kagent.core.evaluation`: the trigger (threshold, floor, improvement), hold, hysteresis and cooldown."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core import member_lag, recommendation
from kagent.core.evaluation import EvaluationState, evaluate, triggers, weighs_rebalance
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.policy import EvaluationPolicy, LagUnit, SkewMetric
from kagent.core.recommendation import Recommendation, propose
from kagent.core.snapshot import GroupSnapshot, LagFlag, PartitionLag
from kagent.settings import Settings

POLICY = EvaluationPolicy(
    lag_unit=LagUnit.MESSAGES,
    skew_metric=SkewMetric.PEAK_TO_MEAN,
    skew_threshold=1.5,
    min_total_lag=1000,
    min_improvement=0.2,
    hold_evaluations=3,
    hysteresis=0.8,
    cooldown=300.0,
    strategy="lag-sticky",
)


def group(
    lags: Mapping[str, Sequence[int]],
    generation: int = 1,
    time_lags: Mapping[int, float | None] | None = None,
) -> GroupSnapshot:
    """Members holding consecutive partitions of topic `t` with these offset lags (time lag: offset lag / 10)."""
    members, figures, partition = [], {}, 0
    for member_id, member_lags in lags.items():
        held = []
        for lag in member_lags:
            held.append(PartitionRef(topic="t", partition=partition))
            time_lag = lag / 10 if time_lags is None else time_lags[partition]
            figures[TopicPartition("t", partition)] = PartitionLag(
                group="g",
                topic="t",
                partition=partition,
                committed=0,
                log_start=0,
                log_end=lag,
                offset_lag=lag,
                time_lag=time_lag,
                polled_at=0.0,
            )
            partition += 1
        members.append(
            MemberAssignment(
                member_id=member_id, client_id=member_id, client_host="/h", topics=("t",), partitions=tuple(held)
            )
        )
    return GroupSnapshot(
        assignment=GroupAssigned(
            group="g", generation=generation, protocol="range", leader=None, members=tuple(members)
        ),
        partition_counts={"t": partition},
        lag=figures,
        taken_at=0.0,
    )


SKEWED = group({"a": [3000, 3000, 3000], "b": [100, 100, 100], "c": [100, 100, 100]})
"""Peak-to-mean 2.8; one hot partition per member gives 1.0."""
MILD = group({"a": [2000, 2000], "b": [1250, 1250], "c": [1250, 1250]})
"""Peak-to-mean 1.33: below the threshold, above threshold x hysteresis (1.2)."""
BALANCED = group({"a": [1000, 1000], "b": [1000, 1000], "c": [1000, 1000]})
"""Peak-to-mean 1."""


def run(
    snapshots: Sequence[GroupSnapshot],
    times: Sequence[float],
    policy: EvaluationPolicy = POLICY,
    state: EvaluationState | None = None,
) -> tuple[EvaluationState | None, list[Recommendation | None]]:
    """Evaluate each snapshot at its time, threading the state; the final state and each evaluation's result."""
    results = []
    for snapshot, now in zip(snapshots, times, strict=True):
        state, recommendation, *_ = evaluate(snapshot, state, policy, now)
        results.append(recommendation)
    return state, results


def sent(results: Sequence[Recommendation | None]) -> list[int]:
    """Indices of the evaluations that sent a recommendation."""
    return [i for i, rec in enumerate(results) if rec is not None]


def test_policy_from_settings() -> None:
    policy = Settings(
        lag_unit=LagUnit.SECONDS, skew_metric=SkewMetric.GINI, skew_threshold=0.4, hold_evaluations=2, cooldown=60
    ).evaluation_policy
    assert (policy.lag_unit, policy.skew_metric, policy.skew_threshold) == (LagUnit.SECONDS, SkewMetric.GINI, 0.4)
    assert (policy.hold_evaluations, policy.cooldown, policy.strategy) == (2, 60, "lag-sticky")
    assert (policy.min_total_lag, policy.min_improvement, policy.hysteresis) == (1000, 0.2, 0.8)
    assert policy.rearm_below == 0.4 * 0.8


def test_triggers_after_holding_for_hold_evaluations() -> None:
    state, results = run([SKEWED] * 3, [0, 5, 10])
    assert sent(results) == [2]
    rec = results[2]
    assert rec is not None
    assert rec.skew_after < POLICY.skew_threshold <= rec.skew_before
    assert (rec.time, rec.trigger.evaluations_held, rec.trigger.threshold) == (10, 3, 1.5)
    assert state == EvaluationState(
        group="g",
        generation=1,
        evaluated_at=10,
        skew=rec.skew_before,
        held=0,
        armed=False,
        cleared=False,
        last_recommendation_at=10,
        last_recommendation_id=rec.id,
    )


def test_the_hold_counts_up_in_the_state() -> None:
    state, results = run([SKEWED] * 2, [0, 5])
    assert sent(results) == []
    assert state is not None and (state.held, state.armed) == (2, True)


def test_the_hold_must_be_consecutive() -> None:
    _, results = run([SKEWED, SKEWED, MILD, SKEWED, SKEWED, SKEWED], [0, 5, 10, 15, 20, 25])
    assert sent(results) == [5]


def test_a_new_generation_starts_the_hold_again() -> None:
    rebalanced = dataclasses.replace(SKEWED, assignment=SKEWED.assignment.model_copy(update={"generation": 2}))
    _, results = run([SKEWED, SKEWED, rebalanced, rebalanced, rebalanced], [0, 5, 10, 15, 20])
    assert sent(results) == [4]


def test_hold_of_one_sends_at_once() -> None:
    _, results = run([SKEWED], [0], dataclasses.replace(POLICY, hold_evaluations=1))
    assert sent(results) == [0]


def test_below_the_threshold_nothing_triggers() -> None:
    for snapshot in (MILD, BALANCED):
        state, results = run([snapshot] * 5, [0, 5, 10, 15, 20])
        assert sent(results) == []
        assert state is not None and state.held == 0


def test_the_strategy_runs_only_for_a_group_the_trigger_could_hold_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the threshold or the floor the strategy's assignment cannot make the trigger hold: it is not
    run, and the evaluation has no recommended skew (the gauge has no series); at or above both, it is."""
    runs: list[str] = []
    real = recommendation.assign

    def counted(strategy: str, *args: object) -> object:
        runs.append(strategy)
        return real(strategy, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(recommendation, "assign", counted)
    small = group({"a": [300, 300, 300], "b": [10, 10, 10], "c": [10, 10, 10]})  # skew 2.8, total 960
    for below in (MILD, BALANCED, small):
        evaluation = evaluate(below, None, POLICY, 0.0)
        assert evaluation.skew is not None and evaluation.recommended_skew is None
        assert evaluation.proposal is not None and not weighs_rebalance(evaluation.proposal, POLICY)
    assert runs == []
    evaluation = evaluate(SKEWED, None, POLICY, 0.0)
    assert evaluation.recommended_skew == pytest.approx(1.0) and runs == ["lag-sticky"]
    assert evaluation.recommended_skew == propose(SKEWED, POLICY).skew_after
    assert evaluate(small, None, dataclasses.replace(POLICY, min_total_lag=960), 0.0).recommended_skew is not None


def test_below_the_floor_nothing_triggers() -> None:
    small = group({"a": [300, 300, 300], "b": [10, 10, 10], "c": [10, 10, 10]})  # skew 2.8, total 960
    assert propose(small, POLICY).skew_before > 2
    _, results = run([small] * 5, [0, 5, 10, 15, 20])
    assert sent(results) == []
    _, results = run([small] * 3, [0, 5, 10], dataclasses.replace(POLICY, min_total_lag=960))
    assert sent(results) == [2]


def test_without_a_better_assignment_nothing_triggers() -> None:
    hot = group({"a": [10_000], "b": [0], "c": [0]})  # skew 3, but no assignment lowers the largest lag
    proposal = propose(hot, POLICY)
    assert proposal.skew_before == 3
    assert not triggers(proposal, POLICY)
    assert not triggers(proposal, dataclasses.replace(POLICY, min_improvement=0.0))
    _, results = run([hot] * 5, [0, 5, 10, 15, 20])
    assert sent(results) == []


def test_an_improvement_below_the_minimum_does_not_trigger() -> None:
    uneven = group({"a": [6000, 1000], "b": [1000], "c": [1000]})  # at best 7000 -> 6000: 14 %
    proposal = propose(uneven, POLICY)
    assert proposal.improvement == (7000 - 6000) / 7000
    _, results = run([uneven] * 3, [0, 5, 10])
    assert sent(results) == []
    _, results = run([uneven] * 3, [0, 5, 10], dataclasses.replace(POLICY, min_improvement=0.1))
    assert sent(results) == [2]


def test_a_group_without_members_never_triggers() -> None:
    empty = group({})
    policy = dataclasses.replace(POLICY, min_total_lag=0)
    state, results = run([empty] * 5, [0, 5, 10, 15, 20], policy)
    assert sent(results) == []
    assert evaluate(empty, state, policy, 25).skew is None


def test_a_group_without_lag_figures_never_triggers() -> None:
    bare = dataclasses.replace(SKEWED, lag={})
    _, results = run([bare] * 5, [0, 5, 10, 15, 20], dataclasses.replace(POLICY, min_total_lag=0, skew_threshold=1))
    assert sent(results) == []


def unmeasured(snapshot: GroupSnapshot, *partitions: int) -> GroupSnapshot:
    """``snapshot`` with ``partitions`` of topic ``t`` unknown: their latest poll had no answer."""
    lag = dict(snapshot.lag)
    for partition in partitions:
        tp = TopicPartition("t", partition)
        lag[tp] = lag[tp].model_copy(update={"offset_lag": None, "time_lag": None, "flags": (LagFlag.NO_LEADER,)})
    return dataclasses.replace(snapshot, lag=lag)


def test_a_group_not_measured_keeps_its_state_as_it_was() -> None:
    """At start, after a failover, or while a partition's end offsets fail: neither clears nor advances."""
    holding, _ = run([SKEWED, SKEWED], [0, 5])
    assert holding is not None and holding.held == 2
    blind = unmeasured(SKEWED, 4)
    state, recommendation, skew, proposal, scale, hot, rows, weighed = evaluate(blind, holding, POLICY, 10)
    assert state == holding and (recommendation, skew, proposal, scale, hot, weighed) == (None,) * 6
    assert rows == member_lag.member_lags(blind) and any(row.offset_lag is None for row in rows[0])  # shown as unknown
    # A new generation while unmeasured does not start the hold again either: nothing was measured.
    assert (
        evaluate(
            dataclasses.replace(blind, assignment=blind.assignment.model_copy(update={"generation": 2})),
            holding,
            POLICY,
            10,
        ).state
        == holding
    )
    state, recommendation, *_ = evaluate(SKEWED, state, POLICY, 15)  # measured again: the third in a row
    assert recommendation is not None and state.held == 0


def test_a_disarmed_group_not_measured_does_not_re_arm() -> None:
    fired, results = run([SKEWED] * 3, [0, 5, 10])
    assert sent(results) == [2] and fired is not None and not fired.armed
    state = evaluate(unmeasured(BALANCED, 0, 1, 2, 3, 4, 5), fired, POLICY, 1000).state
    assert state == fired  # a group of unknown lag is not a group whose skew fell


def test_an_unassigned_partition_of_unknown_lag_measures_the_skew_but_holds_the_trigger() -> None:
    spare = dataclasses.replace(
        SKEWED,
        partition_counts={"t": 10},
        lag={
            **SKEWED.lag,
            TopicPartition("t", 9): PartitionLag(
                group="g",
                topic="t",
                partition=9,
                committed=None,
                log_start=0,
                log_end=None,
                offset_lag=None,
                time_lag=None,
                flags=(LagFlag.NOT_POLLED, LagFlag.NO_COMMIT),
                polled_at=None,
            ),
        },
    )
    holding, _ = run([SKEWED], [0])
    evaluation = evaluate(spare, holding, POLICY, 5)
    assert evaluation.skew == pytest.approx(9000 * 3 / 9600) and evaluation.state == holding
    assert evaluation.recommendation is None


def test_in_seconds_an_unknown_time_lag_holds_the_trigger_back() -> None:
    seconds = dataclasses.replace(POLICY, lag_unit=LagUnit.SECONDS, min_total_lag=100)
    known = {p: 300.0 if p < 3 else 10.0 for p in range(9)}
    lags = {"a": [3000] * 3, "b": [100] * 3, "c": [100] * 3}
    _, results = run([group(lags, time_lags=known)] * 3, [0, 5, 10], seconds)
    assert sent(results) == [2]
    unknown = group(lags, time_lags={**known, 4: None})
    state, results = run([unknown] * 3, [0, 5, 10], seconds)
    assert sent(results) == []
    assert evaluate(unknown, state, seconds, 15).skew is None


def test_hysteresis_no_second_recommendation_while_the_skew_stays_up() -> None:
    times = [0, 5, 10] + [20 + 5 * i for i in range(200)]
    snapshots = [SKEWED] * 3 + [SKEWED, MILD] * 100  # never below 1.5 x 0.8
    state, results = run(snapshots, times)
    assert sent(results) == [2]
    assert state is not None and (state.armed, state.cleared) == (False, False)


def test_cooldown_re_arms_only_once_it_has_passed_since_the_recommendation() -> None:
    state, _ = run([SKEWED] * 3 + [BALANCED], [0, 5, 10, 20])  # cleared at 20
    assert state is not None and (state.armed, state.cleared) == (False, True)
    times = [30 + 5 * i for i in range(59)]  # up to 320; the cooldown ends at 310
    _, later = run([SKEWED] * len(times), times, state=state)
    assert [times[i] for i in sent(later)] == [320]  # re-armed at 310, then held 310, 315, 320


def test_after_the_cooldown_the_skew_must_still_fall_below_the_hysteresis() -> None:
    times = [0, 5, 10, 400, 405, 410, 415, 420, 425]
    snapshots = [SKEWED] * 3 + [SKEWED, MILD, BALANCED, SKEWED, SKEWED, SKEWED]
    _, results = run(snapshots, times)
    assert [times[i] for i in sent(results)] == [10, 425]  # re-armed at 410, held 415, 420, 425


def test_the_state_survives_json_so_a_failover_resumes_the_hold() -> None:
    state, _ = run([SKEWED] * 2, [0, 5])
    assert state is not None
    restored = EvaluationState.model_validate_json(state.model_dump_json())
    assert restored == state
    _, results = run([SKEWED], [10], state=restored)
    assert sent(results) == [0]


GROUPS = [SKEWED, MILD, BALANCED, group({"a": [10_000], "b": [0], "c": [0]}), group({})]
"""Measured groups, and one without members."""
BLIND = [unmeasured(SKEWED, 4), unmeasured(BALANCED, 0)]
"""Groups with members whose lag is not all measured: evaluations of them change nothing."""


@settings(max_examples=40)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, len(GROUPS) + len(BLIND) - 1), st.floats(1, 200), st.integers(1, 2)), max_size=40
    ),
    hold=st.integers(1, 4),
    cooldown=st.sampled_from([0.0, 60.0, 300.0]),
)
def test_any_history_respects_hold_hysteresis_and_cooldown(
    steps: list[tuple[int, float, int]], hold: int, cooldown: float
) -> None:
    """The hold counts consecutive measured evaluations (one of a group not all measured changes nothing,
    so it is left out of the log), a recommendation needs a skew measured below the re-arm level since
    the last one, and the cooldown between them."""
    policy = dataclasses.replace(POLICY, hold_evaluations=hold, cooldown=cooldown)
    now, state, log = 0.0, None, []
    for index, wait, generation in steps:
        now += wait
        base = [*GROUPS, *BLIND][index]
        snapshot = dataclasses.replace(base, assignment=base.assignment.model_copy(update={"generation": generation}))
        before = state
        state, rec, skew, *_ = evaluate(snapshot, state, policy, now)
        if index >= len(GROUPS):
            assert rec is None and skew is None and (before is None or state == before)
            continue
        proposal = propose(snapshot, policy)
        log.append((now, generation, bool(snapshot.assignment.members) and triggers(proposal, policy), skew, rec))
    sends = [i for i, entry in enumerate(log) if entry[4] is not None]
    for i in sends:
        window = log[i - hold + 1 : i + 1]
        assert i + 1 >= hold and all(fires and gen == log[i][1] for _, gen, fires, _, _ in window)
    for previous, i in itertools.pairwise(sends):
        assert log[i][0] - log[previous][0] >= cooldown
        assert any(s is not None and s < policy.rearm_below for _, _, _, s, _ in log[previous + 1 : i])


def test_an_evaluation_that_changes_nothing_gives_back_the_same_state() -> None:
    """The worker stores a state only when it differs, so an unchanged group costs no write."""
    first = evaluate(MILD, None, POLICY, 0.0).state
    assert evaluate(MILD, first, POLICY, 5.0).state == first
    assert evaluate(MILD, first, POLICY, 3600.0).state == first
    holding = evaluate(SKEWED, None, POLICY, 0.0).state
    assert evaluate(SKEWED, holding, POLICY, 5.0).state != holding  # a trigger that holds counts: a write


@pytest.mark.parametrize("snapshot", [SKEWED, MILD, BALANCED, unmeasured(SKEWED, 4)])
def test_the_skew_is_measured_on_the_member_rows_the_evaluation_gives(snapshot: GroupSnapshot) -> None:
    """The evaluator shows the members' lag from the evaluation's rows instead of adding them up again."""
    evaluation = evaluate(snapshot, None, POLICY, 0.0)
    assert evaluation.member_rows == member_lag.member_lags(snapshot)
    assert evaluation.skew == member_lag.current_skew(snapshot, POLICY.lag_unit, POLICY.skew_metric)
