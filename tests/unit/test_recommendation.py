"""`kagent.core.recommendation`: proposals of a strategy on a group snapshot, and the recommendation record."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core.assignors import STRATEGIES
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import Proposal, Recommendation, propose
from kagent.core.snapshot import GroupSnapshot, PartitionLag
from kagent.settings import Settings

POLICY = Settings().evaluation_policy


def snapshot(
    assignment: Mapping[str, list[int]],
    lags: Mapping[int, int],
    *,
    time_lags: Mapping[int, float | None] | None = None,
    generation: int = 1,
    count: int | None = None,
    subscribed: bool = True,
) -> GroupSnapshot:
    """Members holding partitions of topic `t`, with offset lags (and time lags, default offset lag / 10)."""
    count = count if count is not None else 1 + max([*lags, *(p for ps in assignment.values() for p in ps)])
    members = tuple(
        MemberAssignment(
            member_id=member_id,
            client_id=f"client-{member_id}",
            client_host=f"/10.0.0.{i}",
            topics=("t",) if subscribed else (),
            partitions=tuple(PartitionRef(topic="t", partition=p) for p in partitions),
        )
        for i, (member_id, partitions) in enumerate(assignment.items())
    )
    times = time_lags if time_lags is not None else {p: lag / 10 for p, lag in lags.items()}
    return GroupSnapshot(
        assignment=GroupAssigned(group="g", generation=generation, protocol="range", leader=None, members=members),
        partition_counts={"t": count},
        lag={
            TopicPartition("t", p): PartitionLag(
                group="g",
                topic="t",
                partition=p,
                committed=0,
                log_start=0,
                log_end=lag,
                offset_lag=lag,
                time_lag=times[p],
                polled_at=0.0,
            )
            for p, lag in lags.items()
        },
        taken_at=0.0,
    )


SKEWED_LAGS = {0: 3000, 1: 3000, 2: 3000, 3: 100, 4: 100, 5: 100, 6: 100, 7: 100, 8: 100}
SKEWED = snapshot({"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7, 8]}, SKEWED_LAGS)
"""Member a holds all the lag: 9000 of 9600."""


def recommend(proposal: Proposal, time: float = 100.0) -> Recommendation:
    return proposal.recommendation(threshold=POLICY.skew_threshold, evaluations_held=3, time=time)


def test_a_skewed_group_gets_a_recommendation_below_the_threshold() -> None:
    proposal = propose(SKEWED, POLICY)
    assert proposal.skew_before >= POLICY.skew_threshold
    rec = recommend(proposal)
    assert rec.skew_before == pytest.approx(9000 / (9600 / 3))
    assert rec.skew_after < POLICY.skew_threshold
    assert (rec.group, rec.generation, rec.protocol, rec.strategy) == ("g", 1, "range", "lag-sticky")
    assert rec.lag_unit is LagUnit.MESSAGES
    assert rec.trigger.metric is SkewMetric.PEAK_TO_MEAN
    assert rec.trigger.value == rec.skew_before
    assert (rec.trigger.threshold, rec.trigger.evaluations_held, rec.trigger.total_lag) == (1.5, 3, 9600)
    assert rec.trigger.improvement == pytest.approx(proposal.improvement)
    assert proposal.improvement >= 0.2
    assert [m.member_id for m in rec.members] == ["a", "b", "c"]
    assert rec.members[0].current == tuple(PartitionRef(topic="t", partition=p) for p in (0, 1, 2))
    assert [m.current_lag for m in rec.members] == [9000, 300, 300]
    assert (rec.members[0].client_id, rec.members[0].client_host) == ("client-a", "/10.0.0.0")
    assert [m.recommended_lag for m in rec.members] == [3200, 3200, 3200]  # one hot partition each
    assert rec.skew_after == pytest.approx(1.0)
    assert rec.lower_bound == 3200


def test_moves_take_each_partition_from_its_member_to_its_recommended_one() -> None:
    rec = recommend(propose(SKEWED, POLICY))
    now = {(p.topic, p.partition): m.member_id for m in rec.members for p in m.current}
    then = {(p.topic, p.partition): m.member_id for m in rec.members for p in m.recommended}
    assert sorted(then) == [("t", p) for p in range(9)]
    assert [(m.topic, m.partition, m.from_member, m.to_member) for m in rec.moves] == [
        (t, p, now[t, p], then[t, p]) for t, p in sorted(then) if now[t, p] != then[t, p]
    ]
    assert all(move.lag == SKEWED_LAGS[move.partition] for move in rec.moves)
    assert rec.moves


def test_alternatives_are_every_other_strategy() -> None:
    rec = recommend(propose(SKEWED, POLICY))
    assert [a.strategy for a in rec.alternatives] == sorted(set(STRATEGIES) - {"lag-sticky"})
    rng = {a.strategy: a for a in rec.alternatives}["range"]
    assert rng.skew == pytest.approx(rec.skew_before)
    assert (rng.largest_lag, rng.moves) == (9000, 0)


def test_the_id_depends_on_group_generation_and_proposal_only() -> None:
    first = recommend(propose(SKEWED, POLICY), time=100.0)
    later = snapshot({"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7, 8]}, {p: 2 * lag for p, lag in SKEWED_LAGS.items()})
    second = recommend(propose(later, POLICY), time=200.0)
    assert [m.recommended for m in first.members] == [m.recommended for m in second.members]
    assert second.id == first.id
    assert len(first.id) == 32 and int(first.id, 16) >= 0
    regenerated = dataclasses.replace(SKEWED, assignment=SKEWED.assignment.model_copy(update={"generation": 2}))
    assert recommend(propose(regenerated, POLICY)).id != first.id
    other = propose(SKEWED, dataclasses.replace(POLICY, strategy="roundrobin"))
    assert recommend(other).id != first.id


def test_the_record_survives_json() -> None:
    rec = recommend(propose(SKEWED, POLICY))
    assert Recommendation.model_validate_json(rec.model_dump_json()) == rec


def test_in_seconds_a_members_lag_is_the_sum_of_its_partitions_time_lags() -> None:
    policy = dataclasses.replace(POLICY, lag_unit=LagUnit.SECONDS)
    snap = snapshot({"a": [0, 1], "b": [2]}, {0: 10, 1: 10, 2: 10}, time_lags={0: 1.5, 1: 0.25, 2: 0.0004})
    proposal = propose(snap, policy)
    assert proposal.unknown == ()
    rec = recommend(proposal)
    assert rec.lag_unit is LagUnit.SECONDS
    assert [m.current_lag for m in rec.members] == [1.75, 0.0]  # whole milliseconds
    assert proposal.total_lag == 1.75


def test_in_seconds_an_unknown_time_lag_counts_zero_and_is_listed() -> None:
    policy = dataclasses.replace(POLICY, lag_unit=LagUnit.SECONDS)
    snap = snapshot({"a": [0], "b": [1, 2]}, {0: 10, 1: 0, 2: 7}, time_lags={0: 3.0, 1: None, 2: None})
    proposal = propose(snap, policy)
    assert proposal.unknown == (TopicPartition("t", 2),)  # partition 1 has nothing unread: its lag is 0
    assert proposal.current_ticks == {"a": 3000, "b": 0}
    assert propose(snap, POLICY).unknown == ()  # offset lag is always known


def test_members_without_a_decoded_subscription_subscribe_to_the_snapshots_topics() -> None:
    snap = snapshot({"a": [0, 1], "b": []}, {0: 500, 1: 500}, subscribed=False)
    proposal = propose(snap, POLICY)
    assert proposal.partitions == {"t": 2}
    assert sorted(len(tps) for tps in proposal.recommended.values()) == [1, 1]


def test_figures_and_partitions_beyond_the_partition_counts_are_left_out() -> None:
    snap = snapshot({"a": [0, 1, 5], "b": [2]}, {0: 1, 1: 1, 2: 1, 5: 99}, count=3)
    proposal = propose(snap, POLICY)
    assert proposal.current == {"a": [TopicPartition("t", 0), TopicPartition("t", 1)], "b": [TopicPartition("t", 2)]}
    assert proposal.total_lag == 3


def test_a_group_without_members_gets_an_empty_proposal() -> None:
    snap = snapshot({}, {0: 100})
    proposal = propose(snap, POLICY)
    assert (proposal.current, proposal.recommended, proposal.moves) == ({}, {}, ())
    assert (proposal.lower_bound_ticks, proposal.improvement, proposal.total_lag) == (0, 0.0, 0)


@settings(max_examples=60)
@given(
    lags=st.lists(st.integers(0, 10_000), min_size=1, max_size=12),
    members=st.integers(1, 4),
    strategy=st.sampled_from(sorted(STRATEGIES)),
)
def test_proposals_account_for_every_partition_and_its_lag(lags: list[int], members: int, strategy: str) -> None:
    assignment = {f"m{i}": [p for p in range(len(lags)) if p % members == i] for i in range(members)}
    proposal = propose(snapshot(assignment, dict(enumerate(lags))), dataclasses.replace(POLICY, strategy=strategy))
    rec = recommend(proposal)
    recommended = sorted((p.topic, p.partition) for m in rec.members for p in m.recommended)
    assert recommended == [("t", p) for p in range(len(lags))]
    assert sum(m.recommended_lag for m in rec.members) == sum(m.current_lag for m in rec.members) == sum(lags)
    assert max(m.recommended_lag for m in rec.members) >= rec.lower_bound
    assert {m.partition for m in rec.moves} == {
        p.partition for m in rec.members for p in m.recommended if p not in m.current
    }
