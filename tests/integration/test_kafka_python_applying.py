"""kagent's recommendations applied by a real kafka-python consumer group (`kagent.client.kafka_python`).

Real parts: the embedded broker, three kafka-python consumers each polled in its own thread with
kagent's `RecommendedAssignor` and its follower, and a `TopicFeed` (run by a `FeedThread`) reading
kagent's recommendations topic, to which the test writes a recommendation as the worker's evaluator
does (a JSON record keyed by the group). No worker: the embedded broker's DescribeGroups shows no
member metadata or assignment, so a worker could not recommend for a kafka-python group here (issue 37);
the aiokafka test (`test_applying_recommendations.py`) covers the worker's side.

- No recommendation yet: the group forms on the fallback, `sticky`, complete and valid.
- A recommendation for the group's members is written: the leader's follower makes the group
  rebalance, and each consumer's `assignment()` equals what was recommended for its member id.
- A member leaves: the recommendation no longer fits and the group falls back to `sticky`, complete
  and valid.
- A group of one aiokafka and one kafka-python consumer, both on `kagent`, applies a recommendation
  too: the two libraries' assignors write and read the same bytes.

kafka-python needs no `api_version=` against the embedded broker: it probes the broker's ApiVersions
(measured with kafka-python 2.3.3 and Tansu 0.6: it settles on broker version 2.5 and sends JoinGroup v5).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import pytest
from aiokafka.structs import TopicPartition

from kagent.core.events import PartitionRef
from kagent.core.recommendation import MemberRecommendation, Recommendation
from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker
from tests.support.client_members import kafka_python_generation
from tests.support.incidents import recommendation as shared_recommendation
from tests.support.monitoring import in_ci
from tests.support.waiting import wait_until

try:
    from kafka import KafkaConsumer

    from kagent.client.kafka_python import FeedThread, Path, RecommendationFollower, RecommendedAssignor
except ImportError as missing:
    reason = f"kafka-python is not installed ({missing}); it comes with the test extra: pip install -e '.[test]'"
    if in_ci():
        pytest.fail(f"{reason}. Under CI=true a missing client fails the test.", pytrace=False)
    pytest.skip(reason, allow_module_level=True)

from kagent.client import applying
from kagent.client.recommendation_feed import TopicFeed
from kagent.client.recommended import RecommendedMember

pytestmark = pytest.mark.integration

TOPIC = "kp-orders"
PARTITIONS = 6
RECOMMENDATIONS = "kp-apply-recommendations"
GROUP = "kp-billing"
FORM_DEADLINE = 60.0
"""Seconds for the members to join one generation (the embedded broker holds a first join for a while)."""
APPLY_DEADLINE = 30.0
"""Seconds from writing the recommendation to every member holding it (the feed reads it, the follower
asks within 0.2 s, and the group rejoins within a heartbeat or two)."""


@dataclass(frozen=True)
class Held:
    """What one consumer held after a poll, read in its own thread."""

    member_id: str
    generation: int
    assignment: tuple[TopicPartition, ...]


class PolledConsumer:
    """A kafka-python consumer of `group` with kagent's assignor and follower, polled in its own thread until
    `leave()` (kafka-python's consumer is not thread-safe, so only that thread touches it). After each poll
    it notes what it holds when its group is stable."""

    def __init__(self, name: str, bootstrap_servers: str, feed: FeedThread, group: str = GROUP) -> None:
        self.name = name
        self.assignor = RecommendedAssignor(feed, group)
        self.consumer = KafkaConsumer(
            TOPIC,
            group_id=group,
            client_id=name,
            bootstrap_servers=bootstrap_servers,
            partition_assignment_strategy=[self.assignor],
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        self.follower = RecommendationFollower(self.consumer, self.assignor, min_interval=0, check_interval=0.2)
        self.held: Held | None = None
        self.error: Exception | None = None
        self._leaving = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kafka-python-{name}", daemon=True)
        self._thread.start()
        self.follower.start()

    def _run(self) -> None:
        try:
            while not self._leaving.is_set():
                self.consumer.poll(timeout_ms=100)
                generation = kafka_python_generation(self.consumer)
                if generation is not None:
                    assigned = sorted(TopicPartition(tp.topic, tp.partition) for tp in self.consumer.assignment())
                    self.held = Held(generation.member_id, generation.generation_id, tuple(assigned))
        except Exception as exc:  # noqa: BLE001 - reported by check(), in the test's thread
            self.error = exc
        finally:
            self.consumer.close()  # leaves the group

    def check(self) -> None:
        """Raise what the polling thread raised, if it ended on an error."""
        if self.error is not None:
            raise self.error

    def leave(self) -> None:
        self.follower.stop()
        self._leaving.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name} did not close within 30 s"
        self.check()


@contextmanager
def feed_thread(bootstrap_servers: str, group: str) -> Iterator[FeedThread]:
    """A `TopicFeed` of `RECOMMENDATIONS` for `group`, run by a `FeedThread`."""
    feed = FeedThread(TopicFeed(RECOMMENDATIONS, group, retry=0.5, bootstrap_servers=bootstrap_servers))
    feed.start()
    try:
        yield feed
    finally:
        feed.stop()


@contextmanager
def polled_group(bootstrap_servers: str, names: list[str]) -> Iterator[dict[str, PolledConsumer]]:
    """Consumers `names` of `GROUP`, sharing one feed."""
    with feed_thread(bootstrap_servers, GROUP) as feed:
        members: dict[str, PolledConsumer] = {}
        try:
            for name in names:
                members[name] = PolledConsumer(name, bootstrap_servers, feed)
            yield members
        finally:
            for member in members.values():
                if member._thread.is_alive():
                    member.leave()


class GroupMember(Protocol):
    """A consumer the test polls: kafka-python's `PolledConsumer` or aiokafka's `AiokafkaMember`."""

    name: str
    held: Held | None
    assignor: RecommendedMember

    def check(self) -> None: ...


def stable_generation(members: Mapping[str, GroupMember], after: int = -1) -> dict[str, Held] | None:
    """What each member holds, once all of them hold a stable generation after `after`, the same one."""
    for member in members.values():
        member.check()
    held = {name: member.held for name, member in members.items() if member.held is not None}
    generations = {h.generation for h in held.values()}
    if len(held) != len(members) or len(generations) != 1 or generations.pop() <= after:
        return None
    return held


def formed(members: Mapping[str, GroupMember], after: int = -1) -> dict[str, Held]:
    return wait_until(
        lambda: stable_generation(members, after),
        FORM_DEADLINE,
        f"the {len(members)} kafka-python consumers to hold one generation after {after}",
        detail=lambda: describe(members),
    )


def describe(members: Mapping[str, GroupMember]) -> str:
    return "; ".join(f"{name}: {member.held}" for name, member in members.items())


def assert_complete_and_valid(held: Mapping[str, Held]) -> None:
    """Every partition of `TOPIC` (the members' one subscription) given to exactly one member."""
    handed = sorted(tp for h in held.values() for tp in h.assignment)
    assert handed == [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], held


def leader(members: Mapping[str, GroupMember]) -> GroupMember:
    """The member whose assignor made the assignment its group holds."""
    leading = [member for member in members.values() if member.assignor.leading is not None]
    assert len(leading) == 1, f"leaders: {[member.name for member in leading]}"
    return leading[0]


def recommendation(rec_id: str, recommended: Mapping[str, list[TopicPartition]], group: str = GROUP) -> Recommendation:
    """A client-side rebalance recommendation of `recommended` (member id to partitions) for `group`."""
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
    built = shared_recommendation(rec_id, time.time(), group=group, move_count=0)
    return built.model_copy(update={"members": members})


async def publish(broker: EmbeddedBroker, advice: Recommendation) -> None:
    """Write `advice` to `RECOMMENDATIONS`, keyed by its group, as kagent's evaluator does."""
    producer = broker.kafka.producer(max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        await (await producer.send(RECOMMENDATIONS, advice.model_dump_json().encode(), key=advice.group.encode()))
    finally:
        await producer.stop()


async def test_a_kafka_python_group_applies_a_recommendation_and_falls_back_when_it_no_longer_fits(
    kafka_broker: EmbeddedBroker, drill_figures: Callable[[str], None]
) -> None:
    await kafka_broker.create_topics({TOPIC: PARTITIONS, RECOMMENDATIONS: 3})
    bootstrap = kafka_broker.bootstrap_servers
    with polled_group(bootstrap, ["c0", "c1", "c2"]) as members:
        # No recommendation on the topic yet: the group forms on the fallback.
        first = await asyncio.to_thread(formed, members)
        assert_complete_and_valid(first)
        decision = leader(members).assignor.leading
        assert decision is not None and decision.path is Path.STICKY, decision
        assert decision.reason == "no recommendation for the group; no lag known"
        assert {h.member_id: h.assignment for h in first.values()} == dict(decision.assignment)

        # A recommendation no count-balancing assignor would make (3, 2 and 1 partitions), for these members.
        ids = {name: h.member_id for name, h in first.items()}
        spread = {
            ids["c0"]: [TopicPartition(TOPIC, p) for p in (0, 1, 2)],
            ids["c1"]: [TopicPartition(TOPIC, p) for p in (3, 4)],
            ids["c2"]: [TopicPartition(TOPIC, 5)],
        }
        advice = recommendation("kp-r1", spread)
        written = time.monotonic()
        await publish(kafka_broker, advice)

        def holds_it() -> dict[str, Held] | None:
            held = stable_generation(members, first["c0"].generation)
            return held if held and all(h.assignment == tuple(spread[h.member_id]) for h in held.values()) else None

        applied = await asyncio.to_thread(
            wait_until,
            holds_it,
            APPLY_DEADLINE,
            "every consumer to hold the recommended assignment",
            detail=lambda: describe(members),
        )
        seconds = time.monotonic() - written
        assert {name: h.member_id for name, h in applied.items()} == ids  # nobody left the group to get there
        decision = leader(members).assignor.leading
        assert decision is not None and (decision.path, decision.recommendation_id) == (Path.RECOMMENDATION, "kp-r1")
        assert "kp-r1" in decision.requested  # the leader's follower asked for it
        drill_figures(
            f"kafka-python group applying a recommendation: {seconds:.1f} s from writing it to every member "
            f"holding it (generation {first['c0'].generation} -> {applied['c0'].generation})"
        )

        # A member leaves: the recommendation is for other members now, and the group falls back, whole.
        await asyncio.to_thread(members["c2"].leave)
        remaining = {name: member for name, member in members.items() if name != "c2"}
        after = await asyncio.to_thread(formed, remaining, applied["c0"].generation)
        assert_complete_and_valid(after)
        decision = leader(remaining).assignor.leading
        assert decision is not None and decision.path is Path.STICKY, decision
        gone = ids["c2"]
        assert decision.reason == f"recommendation kp-r1 is for other members (gone: {gone}; new: none); no lag known"
        # Sticky: the two members that stayed keep what they held.
        for name in ("c0", "c1"):
            assert set(spread[ids[name]]) <= set(after[name].assignment), (name, after[name])


class AiokafkaMember:
    """An aiokafka consumer of `group` with kagent's aiokafka assignor and follower, polled in a task on the
    test's event loop; after each poll it notes what it holds."""

    def __init__(self, name: str, broker: EmbeddedBroker, feed: FeedThread, group: str) -> None:
        self.name = name
        self.assignor = applying.RecommendedAssignor(feed, group)
        self.consumer = broker.kafka.consumer(
            TOPIC,
            group_id=group,
            client_id=name,
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            partition_assignment_strategy=(self.assignor,),
        )
        self.follower = applying.RecommendationFollower(
            self.consumer, self.assignor, min_interval=0, check_interval=0.2
        )
        self.held: Held | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        await self.follower.start()
        self._task = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        coordinator = self.consumer._coordinator
        while True:
            await self.consumer.getmany(timeout_ms=100)
            assigned = tuple(sorted(self.consumer.assignment()))
            self.held = Held(coordinator.member_id, coordinator.generation, assigned)

    def check(self) -> None:
        if self._task is not None and self._task.done():
            self._task.result()

    async def stop(self) -> None:
        await self.follower.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()


async def test_a_group_mixing_kafka_python_and_aiokafka_consumers_applies_a_recommendation(
    kafka_broker: EmbeddedBroker,
) -> None:
    """Both libraries' `kagent` assignors write and read the same bytes, so one group may mix them: whichever
    member leads, each holds what was recommended for its member id."""
    group = "kp-mixed"
    await kafka_broker.create_topics({TOPIC: PARTITIONS, RECOMMENDATIONS: 3})
    with feed_thread(kafka_broker.bootstrap_servers, group) as feed:
        theirs = AiokafkaMember("a0", kafka_broker, feed, group)
        await theirs.start()
        ours = PolledConsumer("k0", kafka_broker.bootstrap_servers, feed, group)
        members: dict[str, GroupMember] = {"a0": theirs, "k0": ours}
        try:

            def complete() -> dict[str, Held] | None:
                held = stable_generation(members)
                return held if held and sum(len(h.assignment) for h in held.values()) == PARTITIONS else None

            first = await asyncio.to_thread(
                wait_until,
                complete,
                FORM_DEADLINE,
                "both consumers to share the partitions",
                detail=lambda: describe(members),
            )
            assert_complete_and_valid(first)
            ids = {name: h.member_id for name, h in first.items()}
            spread = {
                ids["a0"]: [TopicPartition(TOPIC, p) for p in (0, 1, 2, 3, 4)],
                ids["k0"]: [TopicPartition(TOPIC, 5)],
            }
            await publish(kafka_broker, recommendation("kp-mixed-r1", spread, group))

            def holds_it() -> dict[str, Held] | None:
                held = stable_generation(members, first["a0"].generation)
                return held if held and all(h.assignment == tuple(spread[h.member_id]) for h in held.values()) else None

            await asyncio.to_thread(
                wait_until,
                holds_it,
                APPLY_DEADLINE,
                "each consumer to hold the recommended assignment",
                detail=lambda: describe(members),
            )
            decision = leader(members).assignor.leading
            assert decision is not None and decision.path is Path.RECOMMENDATION, decision
        finally:
            await asyncio.to_thread(ours.leave)
            await theirs.stop()
