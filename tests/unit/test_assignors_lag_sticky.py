"""`lag-sticky`: property tests of every guarantee its docstring states, and
the gaps of KAFKA-5337's assignor it closes."""

from __future__ import annotations

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import example, given, settings
from test_assignors_invariants import (
    Case,
    all_partitions,
    assert_counts_within_one,
    assert_locally_balanced,
    assert_valid,
    cases,
    reference_owners,
)

from kagent.core.assignors import Assignment, Group, LagStickyAssignor, Member, assign
from kagent.core.skew import balanced_lag_lower_bound, member_lag

TOLERANCE = 0.05


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def fresh(case: Case) -> Case:
    """The same group with nothing owned."""
    return Case(case.partitions, {m: Member(member.topics) for m, member in case.members.items()}, case.lag)


def peak(case: Case, assignment: Assignment) -> int:
    return max(member_lag(assignment, case.lag).values())


def moved(case: Case, assignment: Assignment) -> int:
    owners = reference_owners(case)
    return sum(owners.get(p, m) != m for m, tps in assignment.items() for p in tps)


def run(case: Case) -> Assignment:
    return assign("lag-sticky", case.partitions, case.members, case.lag)


@settings(max_examples=200)
@given(cases())
@example(  # a swap against the lag cap once moved beta-1 to '01' (4 partitions) past '00' (2, on beta)
    Case(
        {"beta": 3, "delta": 7, "alpha": 8, "gamma": 2},
        {
            "0": Member(["alpha"]),
            "00": Member(["beta", "delta"]),
            "000": Member(
                ["beta", "delta", "alpha", "gamma"],
                owned=[tp("alpha", 0), tp("beta", 0), tp("beta", 1), tp("gamma", 0), tp("gamma", 1)],
                generation=0,
            ),
            "0000": Member(["beta"]),
            "00000": Member(["delta"]),
            "01": Member(["beta", "delta", "alpha", "gamma"]),
            "1": Member(["delta"]),
        },
        {tp("alpha", 1): 0, tp("alpha", 0): 1, tp("alpha", 2): 0, tp("alpha", 3): 1},
    )
)
def test_goals_1_to_4_with_any_subscriptions(case: Case) -> None:
    result = run(case)
    assert_valid(case, result)  # goal 1
    assert_locally_balanced(case, result)  # goal 2
    reference = run(fresh(case))
    assert peak(case, result) <= (1 + TOLERANCE) * peak(case, reference)  # goal 3
    assert moved(case, result) <= moved(case, reference)  # goal 4


@settings(max_examples=200)
@given(cases(identical=True))
def test_identical_subscriptions_counts_within_one_and_the_bound(case: Case) -> None:
    result = run(case)
    assert_valid(case, result)
    assert_counts_within_one(result)
    reference = run(fresh(case))
    lags = sorted((case.lag.get(p, 0) for tps in reference.values() for p in tps), reverse=True)
    members = len(case.members)
    padded = lags + [0] * (members + 1)
    bound = sum(lags) / members + max(padded[0] - padded[members - 1], padded[members])
    lower = balanced_lag_lower_bound(lags, members)
    assert lower <= peak(case, reference) <= bound
    assert peak(case, reference) <= 2 * lower
    assert peak(case, result) <= (1 + TOLERANCE) * peak(case, reference)


@given(cases(owned=False))
def test_an_assignment_meeting_the_goals_does_not_move(case: Case) -> None:
    first = run(case)
    again = {m: Member(member.topics, owned=first[m], generation=1) for m, member in case.members.items()}
    assert assign("lag-sticky", case.partitions, again, case.lag) == first
    doubled = {p: 2 * value for p, value in case.lag.items()}  # the same shape of lag, twice as much
    assert assign("lag-sticky", case.partitions, again, doubled) == first


@settings(max_examples=100)
@given(cases(owned=False), cases(owned=False))
def test_after_a_lag_change_moves_stay_within_the_reference(case: Case, other: Case) -> None:
    """Owned = the assignment for yesterday's lag; today's lag differs."""
    first = run(case)
    today = {p: other.lag.get(tp(p.topic, p.partition), value) for p, value in case.lag.items()}
    members = {m: Member(member.topics, owned=first[m], generation=1) for m, member in case.members.items()}
    now = Case(case.partitions, members, today)
    result = run(now)
    assert_valid(now, result)
    assert_locally_balanced(now, result)
    reference = run(fresh(now))
    assert peak(now, result) <= (1 + TOLERANCE) * peak(now, reference)
    assert moved(now, result) <= moved(now, reference)


@given(cases())
def test_deterministic_whatever_the_member_order(case: Case) -> None:
    reordered = dict(reversed(list(case.members.items())))
    assert run(case) == assign("lag-sticky", case.partitions, reordered, case.lag)


@given(cases())
def test_zero_tolerance_never_exceeds_the_reference_peak(case: Case) -> None:
    group = Group(case.partitions, case.members, case.lag)
    result = LagStickyAssignor(tolerance=0).assign(group)
    assert peak(case, result) <= peak(case, run(fresh(case)))


def test_negative_tolerance_is_refused() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        LagStickyAssignor(tolerance=-0.1)


def test_totals_balance_across_topics() -> None:
    """KAFKA-5337's assignor balances each topic on its own: 20 and 2 here."""
    partitions = {"a": 2, "b": 2}
    lag = {tp("a", 0): 10, tp("a", 1): 1, tp("b", 0): 10, tp("b", 1): 1}
    members = {"C0": Member(["a", "b"]), "C1": Member(["a", "b"])}
    assert sorted(member_lag(assign("lag", partitions, members, lag), lag).values()) == [2, 20]
    assert sorted(member_lag(assign("lag-sticky", partitions, members, lag), lag).values()) == [11, 11]


def test_zero_lag_partitions_do_not_pile_onto_one_member() -> None:
    """KAFKA-5337's assignor gives every odd partition of every topic to the same member."""
    partitions = {f"topic{i}": 1 for i in range(6)}
    members = {"C0": Member(list(partitions)), "C1": Member(list(partitions))}
    assert sorted(len(tps) for tps in assign("lag", partitions, members).values()) == [0, 6]
    assert sorted(len(tps) for tps in assign("lag-sticky", partitions, members).values()) == [3, 3]


def test_ties_are_not_won_by_member_id_order() -> None:
    """With no lag, who gets the one extra partition follows a hash of the ids,
    not their order: across groups, the first id does not always win."""
    winners = set()
    for k in range(20):
        members = {f"consumer-{k}-{i}": Member(["topic"]) for i in range(4)}
        result = assign("lag-sticky", {"topic": 5}, members)
        winners |= {sorted(members).index(m) for m, tps in result.items() if len(tps) == 2}
    assert len(winners) > 1


def test_a_new_member_takes_over_without_reshuffling() -> None:
    partitions = {"topic": 12}
    lag = {p: 100 + 10 * p.partition for p in all_partitions(partitions)}
    old = {f"c{i}": Member(["topic"]) for i in range(3)}
    first = assign("lag-sticky", partitions, old, lag)
    members = {m: Member(["topic"], owned=first[m], generation=1) for m in old}
    members["c3"] = Member(["topic"])
    case = Case(partitions, members, lag)
    result = run(case)
    assert_counts_within_one(result)
    assert moved(case, result) <= 4  # at least 3 must move to the new member
    assert peak(case, result) <= (1 + TOLERANCE) * peak(case, run(fresh(case)))
