"""One simulated consumer group: its members, and the records its coordinator would write."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from aiokafka.structs import TopicPartition

from kagent.connections import KafkaConnection
from kagent.tools.simulator.coordinator_records import empty_group_metadata, group_metadata, offset_commit
from kagent.tools.simulator.member import SimulatedMember
from kagent.tools.simulator.publisher import CoordinatorRecordPublisher
from kagent.tools.simulator.rebalance import GenerationTracker, LeaderPlan, MemberIdentity, Rebalance
from kagent.tools.simulator.scenario import GroupSpec
from kagent.tools.simulator.status import GroupRebalanced, OffsetsCommitted, StatusCallback

__all__ = ["SimulatedGroup"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SimulatedGroup:
    """Runs every member of `spec` in this process.

    With a `publisher`, it appends what Kafka's group coordinator would: an
    OffsetCommit per committed partition after each accepted commit, a
    GroupMetadata after each completed generation, and an Empty group's
    GroupMetadata (next generation, no members) when all members stopped.
    Without one (a real cluster, whose broker writes them), it only reports.
    """

    def __init__(
        self,
        spec: GroupSpec,
        kafka: KafkaConnection,
        client_host: str,
        publisher: CoordinatorRecordPublisher | None,
        on_event: StatusCallback | None = None,
    ) -> None:
        self.spec = spec
        self._publisher = publisher
        self._on_event = on_event
        self._tracker = GenerationTracker(spec.group)
        self._last_generation: int | None = None
        self.members = tuple(SimulatedMember(self, member, kafka, client_host) for member in spec.members)

    async def run(self, stop: asyncio.Event) -> None:
        """Run all members until `stop` is set (each commits and leaves);
        then record the group as Empty. Cancellation stops the members."""
        async with asyncio.TaskGroup() as members:
            for member in self.members:
                members.create_task(member.run(stop))
        if self._publisher is not None and self._last_generation is not None:
            await self._publisher.publish([empty_group_metadata(self.spec.group, self._last_generation + 1, _now_ms())])

    async def adopted(self, generation: int, member: MemberIdentity, plan: LeaderPlan | None) -> None:
        """`member` adopted its assignment of `generation`; `plan` is the
        leader's, when `member` led it."""
        rebalance = self._tracker.leader_assigned(plan) if plan is not None else None
        rebalance = self._tracker.member_assigned(generation, member) or rebalance
        if rebalance is not None:
            await self._rebalanced(rebalance)

    async def committed(self, member_id: str, generation: int, offsets: Mapping[TopicPartition, int]) -> None:
        """The broker accepted `member_id`'s commit of `offsets`."""
        if self._publisher is not None:
            now = _now_ms()
            await self._publisher.publish(
                [offset_commit(self.spec.group, partition, offset, "", now) for partition, offset in offsets.items()]
            )
        self._report(OffsetsCommitted(self.spec.group, member_id, generation, dict(offsets)))

    async def _rebalanced(self, rebalance: Rebalance) -> None:
        self._last_generation = rebalance.generation
        if self._publisher is not None:
            await self._publisher.publish([group_metadata(rebalance, _now_ms())])
        assignment = {member.identity.member_id: member.assignment.partitions for member in rebalance.members}
        self._report(
            GroupRebalanced(rebalance.group, rebalance.generation, rebalance.protocol, rebalance.leader, assignment)
        )

    def _report(self, event: GroupRebalanced | OffsetsCommitted) -> None:
        if self._on_event is not None:
            self._on_event(event)
