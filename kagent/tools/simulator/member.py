"""One simulated consumer: a real aiokafka consumer group member.

It subscribes with its group's assignor (with `kagent`, a RecommendedAssignor
fed by the group's kagent worker, and a RecommendationFollower when the group
applies recommendations), processes records at its own speed
(a delay per record), commits what it processed every commit interval, on
revocation and on stop, and tells its `SimulatedGroup` what the group
coordinator would record: the plan when it leads, its adopted assignment,
and each accepted commit. Member ids and generations are the real ones,
read from the consumer's group coordinator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from aiokafka import ConsumerRebalanceListener
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from kagent.client.applying import RecommendationFollower, RecommendedAssignor
from kagent.client.recommendation_feed import ApiFeed
from kagent.connections import KafkaConnection
from kagent.tools.simulator.coordinator_records import assignment_of, subscription_of
from kagent.tools.simulator.rebalance import LeaderPlan, MemberIdentity
from kagent.tools.simulator.scenario import AssignorName, GroupSpec, MemberSpec
from kagent.tools.stopping import unless_set

__all__ = ["ASSIGNORS", "PACING_SLACK", "MemberReports", "ObservedAssignor", "SimulatedMember", "processed_by"]

log = logging.getLogger(__name__)

#: aiokafka's assignor of each name a scenario can use, but `kagent` (one instance per member).
ASSIGNORS: Mapping[AssignorName, type[AbstractPartitionAssignor]] = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
}

#: Most records one poll returns, which bounds how long a batch holds off a rebalance.
MAX_POLL_RECORDS = 50
POLL_TIMEOUT_MS = 200


class ObservedAssignor(AbstractPartitionAssignor):
    """An aiokafka assignor (a class of stateless ones, or an instance), reporting each plan it computes.

    aiokafka calls `assign` only on the group leader, with every member's
    decoded subscription, which is how the simulator learns who leads and
    what the whole group was given.
    """

    def __init__(
        self, assignor: AbstractPartitionAssignor | type[AbstractPartitionAssignor], member: SimulatedMember
    ) -> None:
        self._assignor = assignor
        self._member = member

    @property
    def name(self) -> str:
        return str(self._assignor.name)

    def assign(  # type: ignore[override]
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        assignments = self._assignor.assign(cluster, members)
        self._member.led(self.name, members, assignments)
        return assignments

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:  # type: ignore[override]
        return self._assignor.metadata(topics)

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:  # type: ignore[override]
        self._assignor.on_assignment(assignment)


class MemberReports(Protocol):
    """What a member tells its group (``SimulatedGroup`` is one): what the coordinator would record."""

    @property
    def spec(self) -> GroupSpec: ...

    async def adopted(self, generation: int, member: MemberIdentity, plan: LeaderPlan | None) -> None: ...

    async def committed(self, member_id: str, generation: int, offsets: Mapping[TopicPartition, int]) -> None: ...


PACING_SLACK = 0.5
"""Seconds of a member's own polling and committing, since its last batch was processed, that count as
processing time (:func:`processed_by`)."""


def processed_by(paced_until: float, now: float, work: float, slack: float = PACING_SLACK) -> float:
    """When a member that takes ``work`` seconds over a batch read at ``now`` has processed it, its previous
    batch processed by ``paced_until`` (seconds on one clock). Paced by the clock: up to ``slack`` seconds
    the member spent polling and committing since ``paced_until`` count as part of ``work``, so while it
    has lag it reads at the pace its processing delay sets however busy the machine (until it cannot
    keep that pace at all); past ``slack`` the time is idle and not made up, so the member is never more
    than ``slack`` seconds of work ahead of that pace."""
    return max(paced_until, now - slack) + work


class SimulatedMember(ConsumerRebalanceListener):
    """A member of `group.spec` named by `spec`; `run` until a stop event.

    Processing is at-least-once: positions are committed after processing,
    and what was processed but not committed when a commit fails is
    processed again by the partition's next owner.
    """

    def __init__(self, group: MemberReports, spec: MemberSpec, kafka: KafkaConnection, client_host: str) -> None:
        self.group = group
        self.spec = spec
        self.client_id = group.spec.client_id(spec)
        group_spec: GroupSpec = group.spec
        self.feed: ApiFeed | None = None
        self.recommended: RecommendedAssignor | None = None
        """With assignor `kagent`: this member's assignor (its `last_decision` says what it did as leader)."""
        assignor: AbstractPartitionAssignor | type[AbstractPartitionAssignor]
        if group_spec.kagent_url is not None:
            self.feed = ApiFeed(group_spec.kagent_url, group_spec.group, refresh=group_spec.kagent_refresh_ms / 1000)
            assignor = self.recommended = RecommendedAssignor(self.feed, group_spec.group)
        else:
            assignor = ASSIGNORS[group_spec.assignor]
        self.consumer = kafka.consumer(
            group_id=group_spec.group,
            client_id=self.client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=group_spec.session_timeout_ms,
            heartbeat_interval_ms=group_spec.heartbeat_interval_ms,
            rebalance_timeout_ms=group_spec.rebalance_timeout_ms,
            partition_assignment_strategy=(ObservedAssignor(assignor, self),),
        )
        self.follower = (
            RecommendationFollower(
                self.consumer, self.recommended, min_interval=group_spec.min_apply_interval_ms / 1000
            )
            if self.recommended is not None and group_spec.apply_recommendations
            else None
        )
        self._client_host = client_host
        self._processed: dict[TopicPartition, int] = {}
        self._lock = asyncio.Lock()
        self._plan: LeaderPlan | None = None
        self._stopping = False

    @property
    def member_id(self) -> str:
        """The member id the coordinator gave this member (empty before it joins)."""
        return str(self.consumer._coordinator.member_id)

    @property
    def generation(self) -> int:
        """The generation this member last joined."""
        return int(self.consumer._coordinator.generation)

    def identity(self) -> MemberIdentity:
        """This member as the coordinator knows it."""
        spec = self.group.spec
        return MemberIdentity(
            self.member_id, self.client_id, self._client_host, spec.session_timeout_ms, spec.rebalance_timeout_ms
        )

    def led(
        self,
        protocol: str,
        members: Mapping[str, ConsumerProtocolMemberMetadata],
        assignments: Mapping[str, ConsumerProtocolMemberAssignment],
    ) -> None:
        """This member, as leader of the current generation, computed `assignments`."""
        self._plan = LeaderPlan(
            generation=self.generation,
            leader=self.member_id,
            protocol=protocol,
            subscriptions={member_id: subscription_of(metadata) for member_id, metadata in members.items()},
            assignments={member_id: assignment_of(assignments[member_id]) for member_id in members},
        )

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before rejoining: commit what was processed, then forget it."""
        async with self._lock:
            await self._commit()
            self._processed.clear()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """After SyncGroup: report the adopted assignment (and the plan, if leader)."""
        if self._stopping:
            return
        generation = self.generation
        plan, self._plan = self._plan, None
        if plan is not None and plan.generation != generation:
            plan = None  # computed for a generation whose SyncGroup failed
        await self.group.adopted(generation, self.identity(), plan)

    async def run(self, stop: asyncio.Event) -> None:
        """Join the group and consume until `stop` is set; then commit and leave.

        On cancellation it leaves the group without a last commit.
        """
        loop = asyncio.get_running_loop()
        interval = self.group.spec.commit_interval_ms / 1000
        delay = self.spec.processing_delay_ms / 1000
        self.consumer.subscribe(list(self.group.spec.topics), listener=self)
        try:
            if self.feed is not None:
                await self.feed.start()
            await self.consumer.start()
            if self.follower is not None:
                await self.follower.start()
            next_commit = loop.time() + interval
            paced_until = loop.time()
            while not stop.is_set():
                batches = await self._poll(stop)
                if batches is None:
                    break
                async with self._lock:
                    for partition, records in batches.items():
                        if delay:
                            paced_until = processed_by(paced_until, loop.time(), delay * len(records))
                            await asyncio.sleep(paced_until - loop.time())
                        self._processed[partition] = records[-1].offset + 1
                    if loop.time() >= next_commit:
                        await self._commit()
                        next_commit = loop.time() + interval
            self._stopping = True
            async with self._lock:
                await self._commit()
        finally:
            self._stopping = True
            if self.follower is not None:
                await self.follower.stop()
            await self.consumer.stop()
            if self.feed is not None:
                await self.feed.stop()

    async def _poll(self, stop: asyncio.Event) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] | None:
        """The consumer's next records, or None when ``stop`` is set first.

        aiokafka's ``getmany`` waits out a rebalance in progress whatever its timeout: a member the
        embedded broker kept in a rebalance it never completed (rejoining every 8 s, each JoinGroup
        answered and no assignment synced) waited in it for good and never saw ``stop``, which kept
        ``kagent run`` running after Ctrl-C. The poll is given up when ``stop`` is set; it had taken no
        record (``getmany`` takes them only once its waits are over)."""
        return await unless_set(self.consumer.getmany(timeout_ms=POLL_TIMEOUT_MS, max_records=MAX_POLL_RECORDS), stop)

    async def _commit(self) -> None:
        """Commit every processed position (as Java's auto-commit does, changed
        or not) and report the commit once the broker accepted it."""
        if not self._processed:
            return
        offsets = dict(self._processed)
        generation, member_id = self.generation, self.member_id
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("%s: commit in generation %s failed: %r", self.client_id, generation, exc)
            return
        await self.group.committed(member_id, generation, offsets)
