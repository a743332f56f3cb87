"""kagent's recommendations applied by a real consumer group: `RecommendedAssignor` and `RecommendationFollower`.

Real parts: the embedded broker, a real kagent worker, and a simulated group of real aiokafka members
(`kagent.tools.simulator`, which publishes the coordinator records Tansu does not keep, so the worker
sees the group) using assignor `kagent`, each member's feed polling the worker's API.

- Skewed keys and one slow member: the slow member holds both hot partitions, so its lag grows. After
  the worker's recommendation the follower on the leader makes the group rebalance, the assignment
  handed out equals the recommendation's, and the largest member lag falls to less than half, with the
  skew below the worker's threshold, within the stated deadlines. Then a member leaves: the
  recommendation no longer fits and the group falls back to lag-sticky, complete and valid. A
  `TopicFeed` reads the same recommendation from the worker's recommendations topic.
- kagent unreachable (the feed pointed at a closed port): the group gets a complete, valid sticky
  assignment.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from statistics import mean
from typing import Any
from urllib.parse import quote

import pytest
from aiokafka.structs import TopicPartition

from kagent.client.applying import Decision, Path
from kagent.client.recommendation_feed import TopicFeed
from kagent.connections import KafkaConnection
from kagent.core.recommendation import Recommendation
from kagent.tools.embedded import EmbeddedBroker, free_port
from kagent.tools.simulator import (
    GroupRebalanced,
    GroupSpec,
    MemberSpec,
    Scenario,
    SimulationEvent,
    TopicSpec,
    TrafficSpec,
    run_simulation,
)
from kagent.tools.simulator.group import SimulatedGroup
from kagent.tools.simulator.member import SimulatedMember
from kagent.tools.simulator.publisher import CoordinatorRecordPublisher
from kagent.tools.simulator.runner import client_host
from tests.support.waiting import wait_until_async
from tests.support.web import get_json
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration

APP = "apply-e2e"
TOPIC = "apply-orders"
PARTITIONS = 6
THRESHOLD = 2.5
"""Peak to mean, of at most 3.0 among three members. Applied, the slow member still holds most of the lag
while it drains the backlog of the hot partition it kept (at about 20/s), so the skew stays near 2 for a
while: at a threshold of 2.0 the settled averages on a busy machine were 1.88-1.99, reached after up to
15 s of the 30 allowed."""
SETTINGS = {
    **FAST,
    # End offsets polled every second: they turn unknown (after 3 polls) only when a poll is 3 s late, not
    # 1.5 s, which a busy two-core machine does cause; the member leaving below needs the lag known.
    "end_offset_interval": "1",
    "skew_threshold": str(THRESHOLD),
    # A backlog well above the members' in-flight lag (a few dozen records each) before it recommends.
    "min_total_lag": "200",
    # Only rebalance recommendations here: a scale one (never applied: see the unit tests) would depend on
    # how fast the slow member measured.
    "scale_headroom": "",
}
HOT_RATE = 100.0
"""Records/s on two keys, one on each hot partition: 50/s each. Two, not three: kagent balances lag, not
rates, so with a third hot partition its recommendation could give the slow member that one (its lag is
small: its member keeps up) beside one of its own, and the slow member would still fall behind."""
COLD_RATE = 12.0
"""Records/s on 60 keys spread over the six partitions: 2/s each."""
SLOW = MemberSpec("c0", processing_delay_ms=13.0)
"""About 75 records/s: behind on both hot partitions (about 104/s), ahead on one (about 52/s)."""

FORM_DEADLINE = 60.0
"""Seconds for a group's members to join one generation (Tansu holds a first join for half the session timeout)."""
RECOMMEND_DEADLINE = 90.0
"""Seconds from the traffic's start to the worker's recommendation (its start included)."""
APPLY_DEADLINE = 20.0
"""Seconds from the recommendation to the group holding its assignment."""
SETTLE_DEADLINE = 30.0
"""Seconds from the applied rebalance to the largest member lag below half of what it was when kagent
recommended, and the skew below the threshold (each averaged over `WINDOW` measurements)."""
WINDOW = 10
"""Measurements of the group's lag averaged: the worker measures each member's lag as log end minus
committed offset, which swings by a few dozen records with each commit (every 500 ms) and each
log-end poll (every second), so one measurement's skew among small lags is noise."""


def group_spec(group: str, kagent_url: str, members: tuple[MemberSpec, ...]) -> GroupSpec:
    """A group on `TOPIC` with assignor `kagent` and followers, quick to notice a rebalance."""
    return GroupSpec(
        group,
        (TOPIC,),
        "kagent",
        members,
        commit_interval_ms=500,
        session_timeout_ms=3000,
        heartbeat_interval_ms=500,
        kagent_url=kagent_url,
        kagent_refresh_ms=500,
        apply_recommendations=True,
        min_apply_interval_ms=0,
    )


class RunningGroup:
    """The members of a simulated group, each with its own stop (so that one can leave), and every event
    they report. Its `SimulatedGroup` publishes what Kafka's coordinator would write, for the worker."""

    def __init__(self, spec: GroupSpec, kafka: KafkaConnection, publisher: CoordinatorRecordPublisher) -> None:
        self.events: list[SimulationEvent] = []
        self.group = SimulatedGroup(spec, kafka, client_host(kafka.bootstrap_servers), publisher, self.events.append)
        self._stops = {member.spec.name: asyncio.Event() for member in self.group.members}
        self._tasks = {
            member.spec.name: asyncio.create_task(member.run(self._stops[member.spec.name]))
            for member in self.group.members
        }

    def member(self, name: str) -> SimulatedMember:
        return next(member for member in self.group.members if member.spec.name == name)

    def rebalances(self) -> list[GroupRebalanced]:
        return [event for event in self.events if isinstance(event, GroupRebalanced)]

    async def formed(self, size: int, after: int = -1) -> GroupRebalanced:
        """The first completed generation after generation `after` with `size` members (failing with what
        happened instead)."""

        async def probe() -> GroupRebalanced | None:
            self.check_running()
            return next((r for r in self.rebalances() if r.generation > after and len(r.assignment) == size), None)

        return await wait_until_async(
            probe, FORM_DEADLINE, f"a generation of {size} members", interval=0.1, detail=self.describe
        )

    def decision(self, rebalance: GroupRebalanced) -> Decision:
        """What the leader of `rebalance` decided for it."""
        leader = next(m for m in self.group.members if m.member_id == rebalance.leader)
        assert leader.recommended is not None and leader.recommended.leading is not None, "the leader decided nothing"
        return leader.recommended.leading

    async def lag_heard(self, *names: str) -> bool:
        """Whether the feed of each member of `names` holds some partition lag for the group."""
        feeds = [self.member(name).feed for name in names]
        return all(feed is not None and feed.partition_lag(feed.group) for feed in feeds)

    def check_running(self) -> None:
        """Raise what a member raised, if one ended on an error."""
        for task in self._tasks.values():
            error = task.exception() if task.done() else None
            if error is not None:
                raise error

    def describe(self) -> str:
        return "rebalances: " + "; ".join(f"{r.generation}: {dict(r.assignment)}" for r in self.rebalances())

    async def stop(self, name: str) -> None:
        """Stop member `name` (it commits and leaves the group)."""
        self._stops[name].set()
        await asyncio.wait_for(self._tasks[name], 30)

    async def stop_all(self) -> None:
        for event in self._stops.values():
            event.set()
        await asyncio.wait_for(asyncio.gather(*self._tasks.values()), 30)


@asynccontextmanager
async def running_group(kafka: KafkaConnection, spec: GroupSpec) -> AsyncIterator[RunningGroup]:
    publisher = await CoordinatorRecordPublisher.start(kafka)
    try:
        running = RunningGroup(spec, kafka, publisher)
        try:
            yield running
        finally:
            await running.stop_all()
    finally:
        await publisher.stop()


@asynccontextmanager
async def traffic(kafka: KafkaConnection, hot: Collection[int]) -> AsyncIterator[None]:
    """Keyed records to `TOPIC` until the block ends: a hot key on each of `hot`, and cold ones everywhere."""
    scenario = Scenario(
        topics=(TopicSpec(TOPIC, PARTITIONS),),
        traffic=(
            TrafficSpec(TOPIC, rate=HOT_RATE, keys=len(hot), hot_partitions=tuple(hot)),
            TrafficSpec(TOPIC, rate=COLD_RATE, keys=60),
        ),
        groups=(),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_simulation(kafka, scenario, stop, publish_coordinator_records=False))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def assert_complete_and_valid(assignment: Mapping[str, Collection[TopicPartition]]) -> None:
    """Every partition of `TOPIC` (the members' one subscription) given to exactly one member."""
    handed = sorted(tp for tps in assignment.values() for tp in tps)
    assert handed == [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], assignment


def recommended(recommendation: Recommendation) -> dict[str, tuple[TopicPartition, ...]]:
    return {m.member_id: tuple(sorted(p.topic_partition for p in m.recommended)) for m in recommendation.members}


async def api(worker: Worker, path: str) -> Any | None:
    return await asyncio.to_thread(get_json, worker.url + path.lstrip("/"), 2)


async def first_recommendation(worker: Worker, group: str, members: RunningGroup) -> Recommendation:
    """The worker's first recommendation for `group`, as its API serves it."""

    async def probe() -> Recommendation | None:
        members.check_running()
        worker.check_alive()
        page = await api(worker, f"/api/recommendations?group={quote(group, safe='')}&limit=1")
        found = page["recommendations"] if page else []
        return Recommendation.model_validate(found[0]) if found else None

    return await wait_until_async(
        probe, RECOMMEND_DEADLINE, "the worker's recommendation", interval=0.2, detail=worker.log_tail
    )


async def rebalance_to(
    members: RunningGroup, wanted: Mapping[str, tuple[TopicPartition, ...]], after: int
) -> GroupRebalanced:
    """The first completed generation after generation `after` whose assignment is `wanted`."""

    async def probe() -> GroupRebalanced | None:
        members.check_running()
        return next((r for r in members.rebalances() if r.generation > after and dict(r.assignment) == wanted), None)

    return await wait_until_async(probe, APPLY_DEADLINE, f"the group to hold {wanted}", detail=members.describe)


async def settled_figures(worker: Worker, group: str, largest_before: float) -> tuple[float, float]:
    """The group's largest member lag and skew, each averaged over `WINDOW` measurements of the worker's
    (one every 0.2 s), once the largest member lag averages below half of `largest_before` and the skew
    below `THRESHOLD`."""
    window: list[tuple[float, float]] = []

    async def probe() -> tuple[float, float] | None:
        detail = await api(worker, f"/api/groups/{quote(group, safe='')}")
        summary = detail["summary"] if detail else {}
        if summary.get("skew") is not None and summary.get("max_lag") is not None:
            window[:] = [*window[1 - WINDOW :], (summary["max_lag"], summary["skew"])]
        largest, skew = (mean(figures) for figures in zip(*window, strict=True)) if window else (0.0, 0.0)
        settled = len(window) == WINDOW and largest < largest_before / 2 and skew < THRESHOLD
        return (largest, skew) if settled else None

    return await wait_until_async(
        probe,
        SETTLE_DEADLINE,
        f"the largest member lag to average below {largest_before / 2:g} and the skew below {THRESHOLD}",
        interval=0.2,
        detail=lambda: f"last measurements (largest member lag, skew): {window}",
    )


async def test_the_group_applies_the_recommendation_and_its_lag_falls(
    kafka_broker: EmbeddedBroker,
    offsets_topic: str,
    start_worker: Callable[..., Worker],
    drill_figures: Callable[[str], None],
) -> None:
    group = "apply-skewed"
    kafka = kafka_broker.kafka
    await kafka_broker.create_topics({TOPIC: PARTITIONS})
    worker = start_worker(APP, **SETTINGS)
    spec = group_spec(group, worker.url, (SLOW, MemberSpec("c1"), MemberSpec("c2")))
    async with running_group(kafka, spec) as members:
        formed = await members.formed(3)
        slow = formed.assignment[members.member("c0").member_id]
        async with traffic(kafka, [tp.partition for tp in slow]):
            started = time.monotonic()
            advice = await first_recommendation(worker, group, members)
            recommended_at = time.monotonic()
            applied = await rebalance_to(members, recommended(advice), after=members.rebalances()[-1].generation)
            applied_at = time.monotonic()
            decision = members.decision(applied)
            assert (decision.path, decision.recommendation_id) == (Path.RECOMMENDATION, advice.id)
            assert advice.id in decision.requested  # the follower asked for it

            before = max(m.current_lag for m in advice.members)
            largest, skew = await settled_figures(worker, group, before)
            drill_figures(
                f"applying a recommendation: {recommended_at - started:.1f} s from traffic to recommendation, "
                f"{applied_at - recommended_at:.1f} s to apply it, {time.monotonic() - applied_at:.1f} s to settle; "
                f"largest member lag {before:.0f} -> {largest:.0f}, skew {advice.skew_before:.2f} -> {skew:.2f} "
                f"(averages of {WINDOW} measurements)"
            )

            # A member leaves: the recommendation no longer fits, and the group falls back, whole, on the lag
            # the staying members' feeds hold (each has heard it; the worker knows it while its polls answer).
            await wait_until_async(
                lambda: members.lag_heard("c0", "c1"), 10, "the staying members' feeds to hold the group's lag"
            )
            await members.stop("c2")
            remaining = await members.formed(2, after=applied.generation)
            assert_complete_and_valid(remaining.assignment)
            fallback = members.decision(remaining)
            assert fallback.path is Path.LAG_STICKY, fallback
            assert f"recommendation {advice.id} is for other members" in fallback.reason

    # The recommendations topic, read as a TopicFeed reads it, has the same recommendation.
    feed = TopicFeed(f"{APP}-recommendations", group, bootstrap_servers=kafka_broker.bootstrap_servers)
    await feed.start()
    try:

        async def on_topic() -> bool:
            latest = feed.latest(group)
            return latest is not None and latest.id == advice.id

        await wait_until_async(on_topic, 15, "the TopicFeed to read the recommendation")
    finally:
        await feed.stop()


async def test_unreachable_kagent_falls_back_to_sticky(kafka_broker: EmbeddedBroker, offsets_topic: str) -> None:
    await kafka_broker.create_topics({TOPIC: PARTITIONS})
    nowhere = f"http://127.0.0.1:{free_port()}"
    spec = group_spec("apply-unreachable", nowhere, (MemberSpec("c0"), MemberSpec("c1")))
    async with running_group(kafka_broker.kafka, spec) as members:
        formed = await members.formed(2)
        assert_complete_and_valid(formed.assignment)
        decision = members.decision(formed)
        assert decision.path is Path.STICKY, decision
        assert decision.reason == "no recommendation for the group; no lag known"
        feeds = [members.member(name).feed for name in ("c0", "c1")]

        async def unreachable() -> bool:
            return all(feed is not None and "cannot connect" in (feed.error or "") for feed in feeds)

        await wait_until_async(unreachable, 10, "every member's feed to find kagent unreachable")
