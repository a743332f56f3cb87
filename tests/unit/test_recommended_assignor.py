"""`kagent.client.applying` without a broker: every path of `RecommendedAssignor.assign`, the fit check,
the user data a follower's request adds, and when `RecommendationFollower` asks for a rebalance; and
how `ApiFeed` goes through failures.

Rebalances run as aiokafka runs them: each member's JoinGroup metadata is encoded and decoded (as the
leader receives it), the leader assigns with cluster metadata filled from a MetadataResponse, and each
member gets its encoded assignment back in `on_assignment`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
from aiokafka.coordinator.protocol import ConsumerProtocol
from aiokafka.protocol.metadata import MetadataResponse_v0
from aiokafka.protocol.types import String
from aiokafka.structs import TopicPartition

from kagent.client.applying import Path, RecommendationFollower, RecommendedAssignor, unfit_reason
from kagent.client.recommendation_feed import ApiFeed
from kagent.core.assignors import Group, Member, StickyAssignor, assign
from kagent.core.events import PartitionRef
from kagent.core.recommendation import MemberRecommendation, Recommendation, RecommendationKind
from tests.support.incidents import recommendation as shared_recommendation

GROUP = "billing"
TOPIC = "orders"
OTHER = "payments"


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def cluster(partitions: Mapping[str, int]) -> ClusterMetadata:
    """Cluster metadata as aiokafka's client fills it: from a broker's MetadataResponse."""
    metadata = ClusterMetadata()
    metadata.update_metadata(
        MetadataResponse_v0(
            brokers=[(0, "127.0.0.1", 9092)],
            topics=[(0, topic, [(0, p, 0, [0], [0]) for p in range(count)]) for topic, count in partitions.items()],
        )
    )
    return metadata


@dataclass
class StubFeed:
    """A stand-in for a `RecommendationFeed` (`ApiFeed`, `TopicFeed`): it answers, from memory, whatever the
    test set, for `GROUP` only; with `error` set, both questions raise it."""

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

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def recommendation(
    recommended: Mapping[str, list[TopicPartition]],
    *,
    id: str = "r1",
    kind: RecommendationKind = RecommendationKind.REBALANCE,
    client_side: bool = True,
) -> Recommendation:
    """A recommendation of `recommended` for `GROUP` (its other figures, the shared builder's, are immaterial)."""
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
    built = shared_recommendation(id, 1.0, group=GROUP, move_count=0)
    return built.model_copy(update={"members": members, "kind": kind, "client_side": client_side})


def rebalance(
    assignors: Mapping[str, RecommendedAssignor],
    cluster_metadata: ClusterMetadata,
    topics: Mapping[str, list[str]] | None = None,
    leader: str | None = None,
) -> dict[str, list[TopicPartition]]:
    """One eager rebalance of the members `assignors` (each subscribed to `topics[member]`, default
    `[TOPIC]`) led by `leader` (default: the first): what each member was given."""
    leader = leader or next(iter(assignors))
    joined = {
        member_id: ConsumerProtocol.METADATA.decode(assignor.metadata((topics or {}).get(member_id, [TOPIC])).encode())
        for member_id, assignor in assignors.items()
    }
    result = assignors[leader].assign(cluster_metadata, joined)
    for member_id, assignor in assignors.items():
        assignor.on_assignment(ConsumerProtocol.ASSIGNMENT.decode(result[member_id].encode()))
    return {member_id: sorted(assignment.partitions()) for member_id, assignment in result.items()}


def assert_complete_and_valid(
    given: Mapping[str, list[TopicPartition]],
    partitions: Mapping[str, int],
    topics: Mapping[str, list[str]] | None = None,
) -> None:
    """Every partition of a subscribed topic is given exactly once, to a member subscribed to its topic."""
    subscriptions = {member_id: (topics or {}).get(member_id, [TOPIC]) for member_id in given}
    subscribed = {topic for wanted in subscriptions.values() for topic in wanted}
    handed = [tp for tps in given.values() for tp in tps]
    assert sorted(handed) == sorted(tp(t, p) for t in subscribed for p in range(partitions[t]))
    for member_id, tps in given.items():
        assert {p.topic for p in tps} <= set(subscriptions[member_id]), (member_id, tps)


def members(feed: StubFeed, *names: str) -> dict[str, RecommendedAssignor]:
    return {name: RecommendedAssignor(feed, GROUP) for name in names}


SPREAD = {"a": [tp(TOPIC, 0), tp(TOPIC, 1), tp(TOPIC, 2)], "b": [tp(TOPIC, 3)], "c": [tp(TOPIC, 4), tp(TOPIC, 5)]}
"""An assignment no count-balancing strategy would make: seeing it means the recommendation was applied."""


def test_a_recommendation_that_fits_is_handed_out_exactly() -> None:
    feed = StubFeed()
    group = members(feed, "a", "b", "c")
    first = rebalance(group, cluster({TOPIC: 6}))
    assert group["a"].last_decision is not None and group["a"].last_decision.path is Path.STICKY
    assert first != SPREAD

    feed.recommendation = recommendation(SPREAD)
    assert rebalance(group, cluster({TOPIC: 6})) == SPREAD
    decision = group["a"].last_decision
    assert decision is not None
    assert (decision.path, decision.recommendation_id) == (Path.RECOMMENDATION, "r1")
    assert decision.assignment == {member_id: tuple(tps) for member_id, tps in SPREAD.items()}
    assert group["a"].leading == decision and group["b"].leading is None


def test_a_member_that_left_makes_it_fall_back_to_lag_sticky_with_lag() -> None:
    lag = {tp(TOPIC, p): lag for p, lag in enumerate([500, 400, 0, 0, 10, 10])}
    feed = StubFeed(recommendation(SPREAD), lag)
    group = members(feed, "a", "b", "c")
    first = rebalance(group, cluster({TOPIC: 6}))
    assert first == SPREAD
    owned = {member_id: Member([TOPIC], first[member_id], generation=0) for member_id in ("a", "b")}
    del group["c"]

    given = rebalance(group, cluster({TOPIC: 6}))

    assert_complete_and_valid(given, {TOPIC: 6})
    assert given == assign("lag-sticky", {TOPIC: 6}, owned, lag)
    decision = group["a"].last_decision
    assert decision is not None and decision.path is Path.LAG_STICKY
    assert "is for other members (gone: c; new: none)" in decision.reason
    assert decision.recommendation_id == "r1"


def test_a_member_that_left_makes_it_fall_back_to_sticky_without_lag() -> None:
    feed = StubFeed(recommendation(SPREAD))
    group = members(feed, "a", "b", "c", "d")

    given = rebalance(group, cluster({TOPIC: 6}))

    assert_complete_and_valid(given, {TOPIC: 6})
    decision = group["a"].last_decision
    assert decision is not None and decision.path is Path.STICKY
    assert "new: d" in decision.reason and "no lag known" in decision.reason


@pytest.mark.parametrize(
    ("kind", "client_side", "reason"),
    [
        (RecommendationKind.SCALE, True, "is a scale recommendation"),
        (RecommendationKind.REBALANCE, False, "whose broker assigns (KIP-848)"),
    ],
)
def test_scale_and_server_side_recommendations_are_not_applied(
    kind: RecommendationKind, client_side: bool, reason: str
) -> None:
    feed = StubFeed(recommendation(SPREAD, kind=kind, client_side=client_side))
    group = members(feed, "a", "b", "c")

    given = rebalance(group, cluster({TOPIC: 6}))

    assert given != SPREAD
    assert_complete_and_valid(given, {TOPIC: 6})
    decision = group["a"].last_decision
    assert decision is not None and decision.path is Path.STICKY and reason in decision.reason


def test_a_feed_that_raises_falls_back_to_sticky() -> None:
    feed = StubFeed(recommendation(SPREAD), error=RuntimeError("kagent is down"))
    group = members(feed, "a", "b", "c")

    given = rebalance(group, cluster({TOPIC: 6}))

    assert_complete_and_valid(given, {TOPIC: 6})
    assert given == assign("sticky", {TOPIC: 6}, {m: Member([TOPIC]) for m in group})
    decision = group["a"].last_decision
    assert decision is not None and decision.path is Path.STICKY
    assert "RuntimeError('kagent is down')" in decision.reason


def test_when_sticky_raises_too_aiokafkas_round_robin_assigns(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: StickyAssignor, group: Group) -> Any:
        raise AssertionError("sticky is broken")

    monkeypatch.setattr(StickyAssignor, "assign", broken)
    feed = StubFeed(error=RuntimeError("kagent is down"))
    topics = {"a": [TOPIC], "b": [TOPIC, OTHER], "c": [OTHER]}
    group = members(feed, "a", "b", "c")

    given = rebalance(group, cluster({TOPIC: 4, OTHER: 3}), topics)

    assert_complete_and_valid(given, {TOPIC: 4, OTHER: 3}, topics)
    decision = group["a"].last_decision
    assert decision is not None and decision.path is Path.ROUND_ROBIN and "sticky is broken" in decision.reason


def test_different_subscriptions_get_a_complete_valid_assignment_on_every_path() -> None:
    topics = {"a": [TOPIC], "b": [TOPIC, OTHER], "c": [OTHER]}
    fits = {"a": [tp(TOPIC, 0), tp(TOPIC, 1)], "b": [tp(TOPIC, 2), tp(OTHER, 0)], "c": [tp(OTHER, 1), tp(OTHER, 2)]}
    lag = {tp(OTHER, 2): 70, tp(TOPIC, 0): 30}
    for feed, path in (
        (StubFeed(recommendation(fits)), Path.RECOMMENDATION),
        (StubFeed(recommendation(fits), lag, RuntimeError("down")), Path.STICKY),
        (StubFeed(recommendation({**fits, "a": [tp(TOPIC, 0)]}), lag), Path.LAG_STICKY),
        (StubFeed(), Path.STICKY),
    ):
        group = members(feed, "a", "b", "c")
        given = rebalance(group, cluster({TOPIC: 3, OTHER: 3}), topics)
        assert_complete_and_valid(given, {TOPIC: 3, OTHER: 3}, topics)
        decision = group["a"].last_decision
        assert decision is not None and decision.path is path, decision


def fit_group(partitions: Mapping[str, int], topics: Mapping[str, list[str]]) -> Group:
    return Group(partitions, {member_id: Member(wanted) for member_id, wanted in topics.items()})


@pytest.mark.parametrize(
    ("recommended", "partitions", "reason"),
    [
        (SPREAD, {TOPIC: 6}, None),
        (SPREAD, {TOPIC: 7}, "is for other partitions (missing: orders[6]; not subscribed: none)"),
        ({**SPREAD, "c": [tp(TOPIC, 4)]}, {TOPIC: 6}, "is for other partitions (missing: orders[5]; not subscribed"),
        ({**SPREAD, "c": [tp(TOPIC, 4), tp(TOPIC, 0)]}, {TOPIC: 6}, "gives orders[0] to more than one member"),
        ({**SPREAD, "c": [*SPREAD["c"], tp(OTHER, 0)]}, {TOPIC: 6, OTHER: 1}, "not subscribed: payments[0]"),
        ({"a": SPREAD["a"], "b": SPREAD["b"] + SPREAD["c"]}, {TOPIC: 6}, "other members (gone: none; new: c)"),
    ],
)
def test_unfit_reason(
    recommended: Mapping[str, list[TopicPartition]], partitions: Mapping[str, int], reason: str | None
) -> None:
    found = unfit_reason(recommendation(recommended), fit_group(partitions, {m: [TOPIC] for m in "abc"}))
    assert found == reason if reason is None else reason in (found or "")


def test_a_member_is_recommended_only_its_own_topics() -> None:
    group = fit_group({TOPIC: 1, OTHER: 1}, {"a": [TOPIC], "b": [OTHER]})
    crossed = recommendation({"a": [tp(OTHER, 0)], "b": [tp(TOPIC, 0)]})
    assert unfit_reason(crossed, group) == (
        "recommendation r1 gives a partitions of payments, which it does not subscribe to"
    )


def test_a_request_follows_the_sticky_user_data_that_every_reader_still_decodes() -> None:
    feed = StubFeed()
    group = members(feed, "a", "b")
    owned = rebalance(group, cluster({TOPIC: 4}))["b"]
    group["b"].request("r9")

    user_data = group["b"].metadata([TOPIC]).user_data

    sticky = StickyAssignorUserDataV1.decode(user_data)  # aiokafka's reader, as Kafka's: the fields, then stop
    assert [tp(t, p) for t, ps in sticky.previous_assignment for p in ps] == owned and sticky.generation == 0
    rebalance(group, cluster({TOPIC: 4}))
    decision = group["a"].last_decision
    assert decision is not None and decision.requested == frozenset({"r9"})


class Coordinator:
    """Stands in for aiokafka's group coordinator: counts the rejoins asked for."""

    def __init__(self) -> None:
        self.rejoins = 0

    def request_rejoin(self) -> None:
        self.rejoins += 1


class Consumer:
    """Stands in for an `AIOKafkaConsumer`: the follower only reaches its group coordinator."""

    def __init__(self) -> None:
        self._coordinator = Coordinator()


def test_the_follower_on_the_leader_asks_once_for_each_new_recommendation_it_can_apply() -> None:
    feed = StubFeed()
    group = members(feed, "a", "b", "c")
    rebalance(group, cluster({TOPIC: 6}))
    consumers = {member_id: Consumer() for member_id in group}
    followers = {m: RecommendationFollower(consumers[m], group[m], min_interval=60) for m in group}  # type: ignore[arg-type]

    assert all(follower.step(0.0) is None for follower in followers.values())  # nothing to follow

    feed.recommendation = recommendation(SPREAD)
    assert [m for m, follower in followers.items() if follower.step(1.0) is not None] == ["a"]  # the leader
    assert consumers["a"]._coordinator.rejoins == 1
    assert _requested(group["a"]) == "r1"
    assert followers["a"].step(2.0) is None  # asked for already

    rebalance(group, cluster({TOPIC: 6}))
    assert group["a"].last_decision is not None and group["a"].last_decision.requested == {"r1"}
    feed.recommendation = recommendation(SPREAD, id="r2")
    assert followers["a"].step(3.0) is None  # the group holds that assignment already

    changed = {**SPREAD, "b": [tp(TOPIC, 3), tp(TOPIC, 2)], "a": [tp(TOPIC, 0), tp(TOPIC, 1)]}
    feed.recommendation = recommendation(changed, id="r3")
    assert followers["a"].step(30.0) is None  # within min_interval of the last ask
    assert followers["a"].step(61.0) is not None
    assert consumers["a"]._coordinator.rejoins == 2


@pytest.mark.parametrize(
    "unwanted",
    [
        recommendation({**SPREAD, "d": []}),
        recommendation(SPREAD, kind=RecommendationKind.SCALE),
        recommendation(SPREAD, client_side=False),
    ],
    ids=["other-members", "scale", "server-side"],
)
def test_the_follower_ignores_what_could_not_be_applied(unwanted: Recommendation) -> None:
    feed = StubFeed()
    group = members(feed, "a", "b", "c")
    rebalance(group, cluster({TOPIC: 6}))
    feed.recommendation = unwanted
    follower = RecommendationFollower(Consumer(), group["a"], min_interval=0)  # type: ignore[arg-type]
    assert follower.due() is None


def _requested(assignor: RecommendedAssignor) -> str | None:
    """The recommendation id after the sticky user data of the member's next JoinGroup (a Kafka STRING)."""
    data = BytesIO(assignor.metadata([TOPIC]).user_data)
    StickyAssignorUserDataV1.decode(data)
    return String("utf-8").decode(data)


async def test_the_api_feed_keeps_what_it_heard_through_failures_and_logs_each_change_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Against a stand-in for a worker's API (aiohttp on loopback) that answers, then fails, then answers."""
    answers = {"status": 200}
    page = {"recommendations": [recommendation(SPREAD).model_dump(mode="json")], "workers": [], "complete": True}

    async def recommendations(request: web.Request) -> web.Response:
        assert request.query["group"] == GROUP and request.query["limit"] == "1"
        return web.json_response(page, status=answers["status"])

    async def group(request: web.Request) -> web.Response:  # a group the worker does not know yet
        return web.json_response({"error": "no group"}, status=404)

    app = web.Application()
    app.router.add_get("/api/recommendations", recommendations)
    app.router.add_get(f"/api/groups/{GROUP}", group)
    async with TestServer(app) as server:
        feed = ApiFeed(str(server.make_url("/")), GROUP, refresh=3600)
        await feed.start()
        try:
            await feed.refresh()
            latest = feed.latest(GROUP)
            assert latest is not None and latest.id == "r1" and feed.partition_lag(GROUP) == {}
            assert feed.latest("another-group") is None and feed.error is None

            answers["status"] = 500
            with caplog.at_level(logging.INFO, logger="kagent.client.recommendation_feed"):
                for _ in range(3):
                    await feed.refresh()
                assert feed.latest(GROUP) == latest and feed.error is not None and "HTTP 500" in feed.error
                answers["status"] = 200
                await feed.refresh()
            assert feed.error is None
            assert [record.levelname for record in caplog.records] == ["WARNING", "INFO"]
        finally:
            await feed.stop()
