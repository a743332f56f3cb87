"""`kagent.core.assignors.assign`'s contract for every strategy, and the aiokafka
partition assignors (`kagent.client.assignors`) without a broker."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.structs import TopicPartition
from hypothesis import given
from test_assignors_invariants import Case, assert_valid, cases

from kagent.client.assignors import (
    FairPartitionAssignor,
    KagentPartitionAssignor,
    LagPartitionAssignor,
    LagStickyPartitionAssignor,
)
from kagent.core.assignors import STRATEGIES, Member, assign


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def test_strategy_names() -> None:
    assert sorted(STRATEGIES) == sorted(
        ["range", "roundrobin", "sticky", "cooperative-sticky", "fair", "lag", "lag-sticky"]
    )


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@given(case=cases(static=True))
def test_every_strategy_assigns_validly_and_deterministically(strategy: str, case: Case) -> None:
    result = assign(strategy, case.partitions, case.members, case.lag)
    assert_valid(case, result)
    reordered = dict(reversed(list(case.members.items())))
    reordered_lag = dict(reversed(list(case.lag.items())))
    assert assign(strategy, dict(reversed(list(case.partitions.items()))), reordered, reordered_lag) == result


@pytest.mark.parametrize(
    ("strategy", "partitions", "lag", "message"),
    [
        ("nope", {"t": 1}, None, "unknown strategy 'nope'"),
        ("range", {"t": -1}, None, "negative partition count -1 for topic 't'"),
        ("lag", {"t": 1}, {tp("t", 1): 5}, r"unknown partition TopicPartition\(topic='t', partition=1\)"),
        ("lag", {"t": 1}, {tp("u", 0): 5}, r"unknown partition TopicPartition\(topic='u', partition=0\)"),
        ("lag", {"t": 1}, {tp("t", -1): 5}, r"unknown partition TopicPartition\(topic='t', partition=-1\)"),
        ("lag-sticky", {"t": 1}, {tp("t", 0): -5}, "negative lag -5"),
    ],
)
def test_invalid_input_raises_value_error_naming_it(
    strategy: str, partitions: dict[str, int], lag: dict[TopicPartition, int] | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        assign(strategy, partitions, {"m": Member(["t"])}, lag)


def test_a_topic_name_is_not_a_subscription() -> None:
    with pytest.raises(ValueError, match="topics must be a collection"):
        assign("range", {"t": 1}, {"m": Member("t")})


def test_unknown_topics_in_subscriptions_and_claims_are_ignored() -> None:
    members = {"m": Member(["t", "gone"], owned=[tp("gone", 0), tp("t", 7)], generation=3)}
    for strategy in STRATEGIES:
        assert assign(strategy, {"t": 2}, members) == {"m": [tp("t", 0), tp("t", 1)]}


class _Cluster(ClusterMetadata):
    """Just the partition counts aiokafka's ClusterMetadata would know."""

    def __init__(self, partitions: Mapping[str, int]) -> None:
        super().__init__()
        self._counts = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._counts.get(topic)
        return None if count is None else set(range(count))


def _rebalance(
    assignors: Mapping[str, KagentPartitionAssignor],
    topics: Mapping[str, Collection[str]],
    cluster: ClusterMetadata,
) -> dict[str, ConsumerProtocolMemberAssignment]:
    """One rebalance as aiokafka runs it: every member's metadata goes through
    the wire format, the first member leads, every member gets its assignment."""
    metadata = {m: ConsumerProtocolMemberMetadata.decode(a.metadata(topics[m]).encode()) for m, a in assignors.items()}
    leader = next(iter(assignors.values()))
    result = leader.assign(cluster, metadata)
    for member_id, assignor in assignors.items():
        assignor.on_assignment(ConsumerProtocolMemberAssignment.decode(result[member_id].encode()))
    return result


def test_assignors_are_aiokafka_partition_assignors() -> None:
    for assignor in (FairPartitionAssignor(), LagPartitionAssignor(dict), LagStickyPartitionAssignor(dict)):
        assert isinstance(assignor, AbstractPartitionAssignor)
    assert FairPartitionAssignor().name == "fair"
    assert LagPartitionAssignor(dict).name == "lag"
    assert LagStickyPartitionAssignor(dict).name == "lag-sticky"


def test_lag_sticky_assignor_matches_the_pure_function_across_rebalances() -> None:
    partitions = {"orders": 6, "payments": 2}
    lag = {tp("orders", p): 1000 * (p + 1) for p in range(6)} | {tp("payments", 0): 50}
    asked: list[Collection[TopicPartition]] = []

    def lag_source(wanted: Collection[TopicPartition]) -> Mapping[TopicPartition, int]:
        asked.append(wanted)
        return {**lag, tp("elsewhere", 0): 7}  # extra partitions are ignored

    topics = {"a": ["orders", "payments"], "b": ["orders", "payments"]}
    assignors = {m: LagStickyPartitionAssignor(lag_source) for m in topics}
    cluster = _Cluster({**partitions, "unsubscribed": 3})

    first = _rebalance(assignors, topics, cluster)
    assert sorted(asked[0]) == [tp(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
    expected = assign("lag-sticky", partitions, {m: Member(t) for m, t in topics.items()}, lag)
    assert {m: a.partitions() for m, a in first.items()} == expected

    # A third member joins: the others report what they own, in generation 0.
    topics["c"] = ["orders", "payments"]
    assignors["c"] = LagStickyPartitionAssignor(lag_source)
    second = _rebalance(assignors, topics, cluster)
    members = {
        m: Member(t, owned=expected.get(m, []), generation=0 if m in expected else -1) for m, t in topics.items()
    }
    assert {m: a.partitions() for m, a in second.items()} == assign("lag-sticky", partitions, members, lag)


def test_generation_stamp_settles_stale_claims() -> None:
    cluster = _Cluster({"t": 2})
    topics = {"a": ["t"], "b": ["t"]}
    assignors = {m: LagStickyPartitionAssignor(dict) for m in topics}
    _rebalance(assignors, topics, cluster)
    current = _rebalance(assignors, topics, cluster)
    zombie = LagStickyPartitionAssignor(dict)
    zombie.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [0, 1])], b""))  # an old, unstamped claim
    metadata = {m: assignor.metadata(["t"]) for m, assignor in {**assignors, "zombie": zombie}.items()}
    result = KagentPartitionAssignor(STRATEGIES["sticky"]).assign(cluster, metadata)
    assert {m: a.partitions() for m, a in result.items()} == {
        "a": current["a"].partitions(),
        "b": current["b"].partitions(),
        "zombie": [],
    }


def test_unreadable_user_data_means_nothing_owned() -> None:
    assignor = FairPartitionAssignor()
    metadata = {
        "a": ConsumerProtocolMemberMetadata(0, ["t"], b"\x00\x01garbage"),
        "b": assignor.metadata(["t"]),
    }
    result = assignor.assign(_Cluster({"t": 2}), metadata)
    assert {m: a.partitions() for m, a in result.items()} == {"a": [tp("t", 0)], "b": [tp("t", 1)]}
