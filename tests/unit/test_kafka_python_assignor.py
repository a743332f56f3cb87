"""`kagent.client.kafka_python` without a broker: kafka-python's adapter of the `kagent` assignor.

Rebalances run as kafka-python runs them: each member's JoinGroup metadata is encoded and decoded with
kafka-python's consumer protocol and wrapped in its `Subscription`, the leader assigns with kafka-python's
cluster metadata filled from a MetadataResponse, and each member gets its encoded assignment back in
`on_assignment`. The choice itself is shared with aiokafka's adapter (tested on every path in
`test_recommended_assignor.py`); here: that each path reaches kafka-python's consumers whole, that the
two adapters write the same bytes, and the follower's rejoin.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka.cluster import ClusterMetadata as AiokafkaCluster
from aiokafka.coordinator.protocol import ConsumerProtocol as AiokafkaProtocol
from aiokafka.protocol.metadata import MetadataResponse_v0 as AiokafkaMetadataResponse
from aiokafka.structs import TopicPartition

from kagent.core.assignors import Group, StickyAssignor
from kagent.core.events import PartitionRef
from kagent.core.recommendation import MemberRecommendation, Recommendation
from tests.support.incidents import recommendation as shared_recommendation
from tests.support.monitoring import in_ci

try:
    from kafka.cluster import ClusterMetadata
    from kafka.coordinator.protocol import ConsumerProtocol
    from kafka.coordinator.subscription import Subscription
    from kafka.protocol.metadata import MetadataResponse_v0

    from kagent.client import applying
    from kagent.client.kafka_python import Path, RecommendationFollower, RecommendedAssignor
except ImportError as missing:
    reason = f"kafka-python is not installed ({missing}); it comes with the test extra: pip install -e '.[test]'"
    if in_ci():
        pytest.fail(f"{reason}. Under CI=true a missing client fails the test.", pytrace=False)
    pytest.skip(reason, allow_module_level=True)

GROUP = "billing"
TOPIC = "orders"
OTHER = "payments"
SPREAD = {
    "a": [TopicPartition(TOPIC, p) for p in (0, 1, 2)],
    "b": [TopicPartition(TOPIC, 3)],
    "c": [TopicPartition(TOPIC, 4), TopicPartition(TOPIC, 5)],
}
"""An assignment no count-balancing strategy would make: seeing it means the recommendation was applied."""


def cluster(partitions: Mapping[str, int]) -> ClusterMetadata:
    """Cluster metadata as kafka-python's client fills it: from a broker's MetadataResponse."""
    metadata = ClusterMetadata()
    metadata.update_metadata(
        MetadataResponse_v0(
            [(0, "127.0.0.1", 9092)],
            [(0, topic, [(0, p, 0, [0], [0]) for p in range(count)]) for topic, count in partitions.items()],
        )
    )
    return metadata


@dataclass
class StubFeed:
    """A stand-in for a `RecommendationSource` (a `FeedThread`): it answers, from memory, whatever the test set,
    for `GROUP` only; with `error` set, both questions raise it."""

    recommendation: Recommendation | None = None
    lag: dict[TopicPartition, int] = field(default_factory=dict)
    error: Exception | None = None

    def latest(self, group: str) -> Recommendation | None:
        if self.error is not None:
            raise self.error
        return self.recommendation if group == GROUP else None

    def partition_lag(self, group: str) -> Mapping[TopicPartition, int]:
        if self.error is not None:
            raise self.error
        return self.lag if group == GROUP else {}


def recommendation(recommended: Mapping[str, list[TopicPartition]], rec_id: str = "r1") -> Recommendation:
    members = tuple(
        MemberRecommendation(
            member_id=member_id,
            client_id=member_id,
            client_host="/127.0.0.1",
            current=(),
            current_lag=0,
            recommended=tuple(PartitionRef(topic=p.topic, partition=p.partition) for p in partitions),
            recommended_lag=0,
        )
        for member_id, partitions in sorted(recommended.items())
    )
    return shared_recommendation(rec_id, 1.0, group=GROUP, move_count=0).model_copy(update={"members": members})


def encoded(struct: Any) -> bytes:
    """A kafka-python protocol struct's bytes. (Its ``encode`` is a weak method: the struct must be held by a
    name while it runs, as kafka-python's coordinator holds what an assignor returns.)"""
    data: bytes = struct.encode()
    return data


def joined(assignors: Mapping[str, RecommendedAssignor], topics: Mapping[str, list[str]]) -> dict[str, Subscription]:
    """Each member's JoinGroup metadata as the leader's kafka-python coordinator hands it to the assignor."""
    return {
        member_id: Subscription(
            ConsumerProtocol[0].METADATA.decode(encoded(assignor.metadata(set(topics.get(member_id, [TOPIC]))))),
            None,
        )
        for member_id, assignor in assignors.items()
    }


def rebalance(
    assignors: Mapping[str, RecommendedAssignor],
    metadata: ClusterMetadata,
    topics: Mapping[str, list[str]] | None = None,
) -> dict[str, list[TopicPartition]]:
    """One rebalance of the members `assignors` (each subscribed to `topics[member]`, default `[TOPIC]`) led
    by the first, as kafka-python's coordinator runs it: what each member was given."""
    result = next(iter(assignors.values())).assign(metadata, joined(assignors, topics or {}))
    for member_id, assignor in assignors.items():
        assignor.on_assignment(ConsumerProtocol[0].ASSIGNMENT.decode(encoded(result[member_id])))
    return {member_id: sorted(TopicPartition(*tp) for tp in a.partitions()) for member_id, a in result.items()}


def assert_complete_and_valid(
    given: Mapping[str, list[TopicPartition]], partitions: Mapping[str, int], topics: Mapping[str, list[str]]
) -> None:
    """Every partition of a subscribed topic is given exactly once, to a member subscribed to its topic."""
    subscribed = {topic for wanted in topics.values() for topic in wanted}
    assert sorted(tp for tps in given.values() for tp in tps) == sorted(
        TopicPartition(t, p) for t in subscribed for p in range(partitions[t])
    )
    for member_id, tps in given.items():
        assert {tp.topic for tp in tps} <= set(topics[member_id]), (member_id, tps)


def members(feed: StubFeed, *names: str) -> dict[str, RecommendedAssignor]:
    return {name: RecommendedAssignor(feed, GROUP) for name in names}


def test_a_recommendation_that_fits_reaches_kafka_python_consumers_exactly() -> None:
    feed = StubFeed()
    group = members(feed, "a", "b", "c")
    first = rebalance(group, cluster({TOPIC: 6}))
    assert first != SPREAD

    feed.recommendation = recommendation(SPREAD)
    assert rebalance(group, cluster({TOPIC: 6})) == SPREAD
    decision = group["a"].last_decision
    assert decision is not None and (decision.path, decision.recommendation_id) == (Path.RECOMMENDATION, "r1")
    assert group["a"].leading == decision and group["b"].leading is None


def test_every_path_gives_a_complete_valid_assignment(monkeypatch: pytest.MonkeyPatch) -> None:
    topics = {"a": [TOPIC], "b": [TOPIC, OTHER], "c": [OTHER]}
    fits = {
        "a": [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)],
        "b": [TopicPartition(TOPIC, 2), TopicPartition(OTHER, 0)],
        "c": [TopicPartition(OTHER, 1), TopicPartition(OTHER, 2)],
    }
    lag = {TopicPartition(OTHER, 2): 70, TopicPartition(TOPIC, 0): 30}
    cases = [
        (StubFeed(recommendation(fits)), Path.RECOMMENDATION),
        (StubFeed(recommendation({**fits, "a": [TopicPartition(TOPIC, 0)]}), lag), Path.LAG_STICKY),
        (StubFeed(), Path.STICKY),
        (StubFeed(recommendation(fits), lag, RuntimeError("down")), Path.STICKY),
    ]
    for feed, path in cases:
        group = members(feed, "a", "b", "c")
        given = rebalance(group, cluster({TOPIC: 3, OTHER: 3}), topics)
        assert_complete_and_valid(given, {TOPIC: 3, OTHER: 3}, topics)
        decision = group["a"].last_decision
        assert decision is not None and decision.path is path, decision

    def broken(self: StickyAssignor, group: Group) -> Any:
        raise AssertionError("sticky is broken")

    monkeypatch.setattr(StickyAssignor, "assign", broken)
    group = members(StubFeed(error=RuntimeError("kagent is down")), "a", "b", "c")
    given = rebalance(group, cluster({TOPIC: 4, OTHER: 3}), topics)
    assert_complete_and_valid(given, {TOPIC: 4, OTHER: 3}, topics)
    decision = group["a"].last_decision
    assert decision is not None and decision.path is Path.ROUND_ROBIN and "sticky is broken" in decision.reason


def test_both_adapters_write_and_read_the_same_bytes() -> None:
    """kafka-python's and aiokafka's `kagent` assignors share one protocol, byte for byte: a group may mix them."""
    feed = StubFeed(recommendation(SPREAD))
    ours = members(feed, "a", "b", "c")
    theirs = {name: applying.RecommendedAssignor(feed, GROUP) for name in ours}

    for rebalance_number in range(2):
        joins = {name: encoded(assignor.metadata({TOPIC})) for name, assignor in ours.items()}
        assert joins == {name: assignor.metadata([TOPIC]).encode() for name, assignor in theirs.items()}
        # Each library's leader, given the same JoinGroup bytes, sends the same SyncGroup bytes.
        ours_given = ours["a"].assign(cluster({TOPIC: 6}), joined(ours, {}))
        theirs_given = theirs["a"].assign(
            aiokafka_cluster({TOPIC: 6}), {name: AiokafkaProtocol.METADATA.decode(join) for name, join in joins.items()}
        )
        syncs = {name: encoded(assignment) for name, assignment in ours_given.items()}
        assert syncs == {name: assignment.encode() for name, assignment in theirs_given.items()}
        for name in ours:
            ours[name].on_assignment(ConsumerProtocol[0].ASSIGNMENT.decode(syncs[name]))
            theirs[name].on_assignment(AiokafkaProtocol.ASSIGNMENT.decode(syncs[name]))
        ours["b"].request(f"r{rebalance_number}")
        theirs["b"].request(f"r{rebalance_number}")
    decision = ours["a"].last_decision
    assert decision is not None and decision.path is Path.RECOMMENDATION and decision.requested == {"r0"}
    assert decision == theirs["a"].last_decision


def aiokafka_cluster(partitions: Mapping[str, int]) -> AiokafkaCluster:
    """Cluster metadata as aiokafka's client fills it."""
    metadata = AiokafkaCluster()
    metadata.update_metadata(
        AiokafkaMetadataResponse(
            brokers=[(0, "127.0.0.1", 9092)],
            topics=[(0, topic, [(0, p, 0, [0], [0]) for p in range(count)]) for topic, count in partitions.items()],
        )
    )
    return metadata


class Coordinator:
    """Stands in for kafka-python's group coordinator: its lock, and the rejoins asked for under it."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.rejoins = 0

    def request_rejoin(self) -> None:
        assert self._lock._is_owned(), "rejoin asked for without the coordinator's lock"  # type: ignore[attr-defined]
        self.rejoins += 1


class Consumer:
    """Stands in for a `KafkaConsumer`: the follower only reaches its group coordinator."""

    def __init__(self) -> None:
        self._coordinator = Coordinator()


def test_the_follower_on_the_leader_asks_kafka_python_to_rejoin_once_per_recommendation() -> None:
    feed = StubFeed()
    group = members(feed, "a", "b", "c")
    rebalance(group, cluster({TOPIC: 6}))
    consumers = {name: Consumer() for name in group}
    followers = {name: RecommendationFollower(consumers[name], group[name], min_interval=0) for name in group}  # type: ignore[arg-type]

    feed.recommendation = recommendation(SPREAD)
    assert [name for name, follower in followers.items() if follower.step(1.0) is not None] == ["a"]
    assert [consumer._coordinator.rejoins for consumer in consumers.values()] == [1, 0, 0]
    assert followers["a"].step(2.0) is None  # asked for already

    rebalance(group, cluster({TOPIC: 6}))
    decision = group["a"].last_decision
    assert decision is not None and decision.requested == {"r1"} and decision.path is Path.RECOMMENDATION
