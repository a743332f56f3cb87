"""Applying kagent's recommendations in aiokafka consumers: how soon a group consumes under one, and what
the assignor costs inside a rebalance.

    python benchmarks/bench_applying.py [--runs N] [--repeats N] [--part apply|assign]

(A) From publication to the group consuming under the applied assignment, over ``--runs`` runs (10). An
embedded broker (Tansu) and one real worker process, as the integration tests run them: evaluation and
end offsets every 0.5 s, a recommendation after 2 evaluations over the skew threshold 2.0 with at least
200 records of lag, and no ``scale`` recommendations (as in
``tests/integration/test_applying_recommendations.py``, whose set-up this repeats). Each run is a fresh
group of three simulated members (``kagent.tools.simulator``: real aiokafka consumers; the simulator
publishes the coordinator records Tansu does not keep) on a fresh topic of 6 partitions, with assignor
``kagent`` (``RecommendedAssignor``, each member's ``ApiFeed`` polling the worker's API every 0.5 s) and a
``RecommendationFollower`` on each member (it checks its feed every 1 s; no minimum interval);
heartbeats every 0.5 s, commits every 0.5 s. Once the group formed, three hot keys (50 records/s each) go
to the slow member's two partitions (it reads about 75 records/s) and one other, and 2 records/s to every
partition, until the worker recommends. The run measures, on this machine's wall clock:

- publication: the timestamp of the recommendation's record on ``<app id>-recommendations`` (the
  worker's producer stamps it when it sends it);
- rebalanced: when every member adopted the first later generation whose assignment is exactly the
  recommended one (the simulator's ``GroupRebalanced``); the run checks that its leader took the
  recommendation's path;
- consuming: the group's first commit accepted by the broker in that generation (``OffsetsCommitted``):
  records were read and processed under the applied assignment.

Printed: each run, then the median and max of publication -> rebalanced and publication -> consuming.
There is no baseline in the same run for this part; the sum of the intervals the figure waits on at
most (feed 0.5 s, follower 1 s, heartbeat 0.5 s, commit 0.5 s) is printed beside it.

(B) ``RecommendedAssignor.assign()`` for 2,100 members x 2,100 partitions (one topic, every member
subscribed; member ids as Kafka's Java client makes them, ``consumer-<group>-<n>-<uuid>``), the call
aiokafka makes on the leader inside a rebalance, in three cases: (1) a recommendation that fits (handed
out as it is: the fit check, then the recommended assignment), (2) one that does not (a member of it
left the group; lag-sticky with a lag for every partition, lognormal with 10 % idle partitions as in
``bench_assignors.py``), (3) no recommendation and no lag (sticky). Inputs are built as aiokafka builds
them: cluster metadata from a MetadataResponse, and each member's JoinGroup metadata encoded by its own
``RecommendedAssignor`` (owning its partitions of the previous generation, a sticky one) and decoded, as
the leader receives it. The baseline, in the same run on the same cluster metadata and members, is
aiokafka's own ``RoundRobinPartitionAssignor.assign``, timed alternately with it: median of ``--repeats``
calls (21) each, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocol, ConsumerProtocolMemberMetadata
from aiokafka.protocol.metadata import MetadataResponse_v0
from aiokafka.structs import TopicPartition

from kagent.client.applying import Path as AssignmentPath
from kagent.client.applying import RecommendedAssignor
from kagent.connections import KafkaConnection
from kagent.core.assignors import Member, assign
from kagent.core.events import PartitionRef
from kagent.core.recommendation import MemberRecommendation, Recommendation
from kagent.tools.embedded import EmbeddedBroker, create_topics
from kagent.tools.recommendations_topic import parse_recommendation
from kagent.tools.simulator import (
    GroupRebalanced,
    GroupSpec,
    MemberSpec,
    OffsetsCommitted,
    Scenario,
    SimulationEvent,
    TopicSpec,
    TrafficSpec,
    run_simulation,
)
from kagent.tools.simulator.group import SimulatedGroup
from kagent.tools.simulator.publisher import CoordinatorRecordPublisher
from kagent.tools.simulator.runner import client_host
from tests.support.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS
from tests.support.incidents import recommendation as shared_recommendation
from tests.support.waiting import wait_until_async
from tests.support.worker import FAST, Worker, running_workers

# (A) -----------------------------------------------------------------------------------------------------

APP = "bench-apply"
SETTINGS = {**FAST, "skew_threshold": "2.0", "min_total_lag": "200", "scale_headroom": ""}
"""The worker's settings: those of ``tests/integration/test_applying_recommendations.py``."""
PARTITIONS = 6
HOT_RATE = 150.0
"""Records/s on three keys, one on each hot partition."""
COLD_RATE = 12.0
"""Records/s on 60 keys spread over the six partitions."""
MEMBERS = (MemberSpec("c0", processing_delay_ms=13.0), MemberSpec("c1"), MemberSpec("c2"))
"""``c0`` reads about 75 records/s: behind on two hot partitions, ahead on one."""
FEED_REFRESH_MS, FOLLOWER_CHECK_S, HEARTBEAT_MS, COMMIT_MS = 500, 1.0, 500, 500
WAITS_AT_MOST = FEED_REFRESH_MS / 1000 + FOLLOWER_CHECK_S + HEARTBEAT_MS / 1000 + COMMIT_MS / 1000
"""Seconds of polling intervals between a publication and the first commit under it, at most."""

FORM_DEADLINE, RECOMMEND_DEADLINE, APPLY_DEADLINE = 60.0, 90.0, 30.0


@dataclass(frozen=True)
class Applied:
    """One run of (A): seconds from the recommendation's publication to the group rebalanced to it and to
    its first commit under it, the generation it was applied in, and the leader's path."""

    rebalanced: float
    consuming: float
    generation: int
    path: str


class Published:
    """The first recommendation for each group on the worker's recommendations topic, and its record's
    timestamp in seconds, read in the background from the topic's beginning (no consumer group)."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self.first: dict[str, tuple[float, Recommendation]] = {}

    async def read(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for records in (await self._consumer.getmany(timeout_ms=200)).values():
                for record in records:
                    recommendation = parse_recommendation(record.value)
                    if recommendation is not None:
                        self.first.setdefault(recommendation.group, (record.timestamp / 1000, recommendation))


def group_spec(group: str, topic: str, kagent_url: str) -> GroupSpec:
    return GroupSpec(
        group,
        (topic,),
        "kagent",
        MEMBERS,
        commit_interval_ms=COMMIT_MS,
        session_timeout_ms=3000,
        heartbeat_interval_ms=HEARTBEAT_MS,
        kagent_url=kagent_url,
        kagent_refresh_ms=FEED_REFRESH_MS,
        apply_recommendations=True,
        min_apply_interval_ms=0,
    )


def recommended(recommendation: Recommendation) -> dict[str, tuple[TopicPartition, ...]]:
    return {m.member_id: tuple(sorted(p.topic_partition for p in m.recommended)) for m in recommendation.members}


async def apply_once(
    kafka: KafkaConnection, publisher: CoordinatorRecordPublisher, published: Published, worker: Worker, run: int
) -> Applied:
    """One run of (A) on a fresh topic and group (see the module's docstring)."""
    name = f"{APP}-{run}"
    stamped: list[tuple[float, SimulationEvent]] = []
    group = SimulatedGroup(
        group_spec(name, name, worker.url),
        kafka,
        client_host(kafka.bootstrap_servers),
        publisher,
        lambda event: stamped.append((time.time(), event)),
    )
    await asyncio.wait_for(create_topics(kafka, {name: PARTITIONS}), 30)
    stop_group, stop_traffic = asyncio.Event(), asyncio.Event()
    members = asyncio.create_task(group.run(stop_group))

    def rebalance(probe: Callable[[GroupRebalanced], bool]) -> tuple[float, GroupRebalanced] | None:
        if members.done():
            members.result()  # a member's error ends the run
        return next(((t, e) for t, e in stamped if isinstance(e, GroupRebalanced) and probe(e)), None)

    async def formed() -> tuple[float, GroupRebalanced] | None:
        return rebalance(lambda e: len(e.assignment) == len(MEMBERS))

    try:
        _, first = await wait_until_async(formed, FORM_DEADLINE, f"{name} to form", interval=0.05)
        slow = first.assignment[next(m.member_id for m in group.members if m.spec.name == "c0")]
        other = next(tps for tps in first.assignment.values() if tps != slow)
        hot = tuple(tp.partition for tp in (*slow, other[0]))
        traffic = Scenario(
            topics=(TopicSpec(name, PARTITIONS),),
            traffic=(
                TrafficSpec(name, rate=HOT_RATE, keys=3, hot_partitions=hot),
                TrafficSpec(name, rate=COLD_RATE, keys=60),
            ),
            groups=(),
        )
        producing = asyncio.create_task(run_simulation(kafka, traffic, stop_traffic, publish_coordinator_records=False))
        try:

            async def recommendation() -> tuple[float, Recommendation] | None:
                worker.check_alive()
                return published.first.get(name)

            at, advice = await wait_until_async(
                recommendation, RECOMMEND_DEADLINE, f"a recommendation for {name}", interval=0.05
            )
            wanted = recommended(advice)

            async def applied() -> tuple[float, GroupRebalanced] | None:
                return rebalance(lambda e: e.generation > advice.generation and dict(e.assignment) == wanted)

            rebalanced_at, rebalanced = await wait_until_async(
                applied, APPLY_DEADLINE, f"{name} to hold the recommended assignment", interval=0.02
            )
            path = _path(group, rebalanced)

            async def consuming() -> float | None:
                return next(
                    (
                        t
                        for t, e in stamped
                        if isinstance(e, OffsetsCommitted) and e.generation == rebalanced.generation
                    ),
                    None,
                )

            committed_at = await wait_until_async(consuming, APPLY_DEADLINE, f"a commit of {name}", interval=0.02)
        finally:
            stop_traffic.set()
            await asyncio.wait_for(producing, 30)
    finally:
        stop_group.set()
        await asyncio.wait_for(members, 30)
    return Applied(rebalanced_at - at, committed_at - at, rebalanced.generation, path)


def _path(group: SimulatedGroup, rebalance: GroupRebalanced) -> str:
    """The path the leader of ``rebalance`` took, while its members are in the group (``?`` if it is gone)."""
    leader = next((m for m in group.members if m.member_id == rebalance.leader), None)
    decision = None if leader is None or leader.recommended is None else leader.recommended.leading
    return "?" if decision is None else decision.path.value


async def part_a(runs: int) -> None:
    print(f"(A) publication -> consuming under the applied assignment, {runs} runs")
    with tempfile.TemporaryDirectory(prefix="bench-applying-") as tmp, EmbeddedBroker() as broker:
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS})
        with running_workers(broker.bootstrap_servers, Path(tmp)) as start:
            worker = start(APP, **SETTINGS)
            worker.wait_serving()
            kafka = broker.kafka
            reader = kafka.consumer(f"{APP}-recommendations", auto_offset_reset="earliest")
            await reader.start()
            publisher = await CoordinatorRecordPublisher.start(kafka)
            published, stop = Published(reader), asyncio.Event()
            reading = asyncio.create_task(published.read(stop))
            results: list[Applied] = []
            try:
                for run in range(runs):
                    started = time.monotonic()
                    result = await apply_once(kafka, publisher, published, worker, run)
                    results.append(result)
                    print(
                        f"  run {run + 1:>2}: rebalanced {result.rebalanced:5.2f} s, "
                        f"consuming {result.consuming:5.2f} s after publication (generation {result.generation}, "
                        f"leader's path {result.path}; run {time.monotonic() - started:.0f} s)"
                    )
            finally:
                stop.set()
                await reading
                await publisher.stop()
                await reader.stop()
            worker.stop()
    for label, values in (
        ("publication -> rebalanced", [r.rebalanced for r in results]),
        ("publication -> consuming", [r.consuming for r in results]),
    ):
        print(f"  {label:<28} median {statistics.median(values):5.2f} s   max {max(values):5.2f} s")
    print(
        f"  intervals waited on at most: {WAITS_AT_MOST:.1f} s (feed {FEED_REFRESH_MS / 1000:g} s, follower "
        f"{FOLLOWER_CHECK_S:g} s, heartbeat {HEARTBEAT_MS / 1000:g} s, commit {COMMIT_MS / 1000:g} s)"
    )
    off_path = [r for r in results if r.path != AssignmentPath.RECOMMENDATION.value]
    if off_path:
        print(f"  NOTE: {len(off_path)} runs' leader did not take the recommendation's path: {off_path}")


# (B) -----------------------------------------------------------------------------------------------------

GROUP = "billing"
TOPIC = "orders"
SIZE = 2100


@dataclass
class FixedFeed:
    """A ``RecommendationFeed`` answering from memory what the benchmark set (nothing to start)."""

    recommendation: Recommendation | None = None
    lag: Mapping[TopicPartition, int] | None = None

    def latest(self, group: str) -> Recommendation | None:
        return self.recommendation

    def partition_lag(self, group: str) -> Mapping[TopicPartition, int]:
        return self.lag or {}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def cluster(partitions: int) -> ClusterMetadata:
    """Cluster metadata as aiokafka's client fills it: from a broker's MetadataResponse."""
    metadata = ClusterMetadata()
    metadata.update_metadata(
        MetadataResponse_v0(
            brokers=[(0, "127.0.0.1", 9092)], topics=[(0, TOPIC, [(0, p, 0, [0], [0]) for p in range(partitions)])]
        )
    )
    return metadata


def joined(assignors: Mapping[str, RecommendedAssignor]) -> dict[str, ConsumerProtocolMemberMetadata]:
    """Each member's JoinGroup metadata, encoded by its assignor and decoded, as the leader receives it."""
    return {
        member_id: ConsumerProtocol.METADATA.decode(assignor.metadata([TOPIC]).encode())
        for member_id, assignor in assignors.items()
    }


def recommendation_of(
    assignment: Mapping[str, list[TopicPartition]], owned: Mapping[str, list[TopicPartition]], rec_id: str
) -> Recommendation:
    """A rebalance recommendation of ``assignment`` for members owning ``owned`` (its figures, the shared test
    builder's, are immaterial)."""
    members = tuple(
        MemberRecommendation(
            member_id=member_id,
            client_id=member_id.rsplit("-", 5)[0],
            client_host="/10.0.0.1",
            current=tuple(PartitionRef(topic=tp.topic, partition=tp.partition) for tp in owned[member_id]),
            current_lag=0,
            recommended=tuple(PartitionRef(topic=tp.topic, partition=tp.partition) for tp in tps),
            recommended_lag=0,
        )
        for member_id, tps in sorted(assignment.items())
    )
    built = shared_recommendation(rec_id, time.time(), group=GROUP, move_count=0)
    return built.model_copy(update={"members": members, "protocol": "kagent"})


def medians(calls: tuple[Callable[[], object], Callable[[], object]], repeats: int) -> tuple[float, float]:
    """The median seconds of each of two calls, timed ``repeats`` times each, alternately (so that both meet
    the same conditions of the machine)."""
    seconds: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for call, times in zip(calls, seconds, strict=True):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
    return statistics.median(seconds[0]), statistics.median(seconds[1])


def part_b(repeats: int) -> None:
    rng = random.Random(2100)
    member_ids = [f"consumer-{GROUP}-{n + 1}-{uuid.UUID(int=rng.getrandbits(128), version=4)}" for n in range(SIZE)]
    lag = {TopicPartition(TOPIC, p): 0 if rng.random() < 0.1 else int(rng.lognormvariate(8, 2)) for p in range(SIZE)}
    metadata = cluster(SIZE)
    feed = FixedFeed()
    assignors = {member_id: RecommendedAssignor(feed, GROUP) for member_id in member_ids}
    leader = assignors[member_ids[0]]
    # The previous generation: sticky, nothing known; each member learns what it owns.
    previous = leader.assign(metadata, joined(assignors))
    for member_id, assignor in assignors.items():
        assignor.on_assignment(ConsumerProtocol.ASSIGNMENT.decode(previous[member_id].encode()))
    owned = {member_id: assignment.partitions() for member_id, assignment in previous.items()}
    members = joined(assignors)
    group = {member_id: Member([TOPIC], owned[member_id], generation=0) for member_id in member_ids}
    fitting = recommendation_of(assign("lag-sticky", {TOPIC: SIZE}, group, lag), owned, "1" * 32)
    # The same assignment, made while the group had another member in place of its first one.
    left = {member_ids[0]: f"consumer-{GROUP}-0-{uuid.UUID(int=rng.getrandbits(128), version=4)}"}
    gone = recommendation_of(
        {left.get(m.member_id, m.member_id): [p.topic_partition for p in m.recommended] for m in fitting.members},
        {left.get(member_id, member_id): tps for member_id, tps in owned.items()},
        "2" * 32,
    )
    cases = (
        ("a recommendation that fits", fitting, None, AssignmentPath.RECOMMENDATION),
        ("one that does not: lag-sticky, lag for every partition", gone, lag, AssignmentPath.LAG_STICKY),
        ("no recommendation, no lag: sticky", None, None, AssignmentPath.STICKY),
    )
    gc.collect()
    gc.freeze()  # the inputs are long-lived: keep them out of the collections the timed calls trigger
    print(f"\n(B) assign() for {SIZE:,} members x {SIZE:,} partitions, median of {repeats} calls")
    print(f"  {'case':<56}{'kagent ms':>10}{'round-robin ms':>16}{'ratio':>8}")
    for label, advice, lags, expected in cases:
        feed.recommendation, feed.lag = advice, lags
        kagent, baseline = medians(
            (lambda: leader.assign(metadata, members), lambda: RoundRobinPartitionAssignor.assign(metadata, members)),
            repeats,
        )
        decision = leader.last_decision
        if decision is None or decision.path is not expected:
            raise AssertionError(f"{label}: the leader took {decision and decision.path}, not {expected}")
        print(f"  {label:<56}{kagent * 1000:>10.1f}{baseline * 1000:>16.1f}{kagent / baseline:>8.1f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of (A)")
    parser.add_argument("--repeats", type=int, default=21, help="calls of each assign() in (B)")
    parser.add_argument("--part", choices=("apply", "assign"), help="only (A) 'apply' or (B) 'assign'")
    args = parser.parse_args()
    if args.part != "assign":
        await part_a(args.runs)
    if args.part != "apply":
        part_b(args.repeats)


if __name__ == "__main__":
    asyncio.run(main())
