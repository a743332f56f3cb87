"""kagent's strategies as aiokafka partition assignors, for real consumers.

    consumer = AIOKafkaConsumer(
        "orders", group_id="billing",
        partition_assignment_strategy=(LagStickyPartitionAssignor(lag_source),),
    )

The group leader runs the strategy. It reads partition lag from the
pluggable `lag_source`, called synchronously inside the rebalance, so it
should answer from memory (a kagent table, a cached recommendation). Each
member reports the partitions it owns and the generation it owned them in,
in its JoinGroup user data, as aiokafka's sticky assignor does
(`StickyAssignorUserDataV1`); aiokafka does not tell assignors the group
generation, so the leader stamps its own on every assignment
(:mod:`kagent.client.member_protocol` has the bytes and why).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.structs import TopicPartition

from kagent.client.member_protocol import (
    VERSION,
    JoinedMember,
    by_topic,
    generation_stamp,
    join_user_data,
    joined_group,
    stamped_generation,
)
from kagent.core.assignors.fair import FairAssignor
from kagent.core.assignors.lag_based import LagBasedAssignor
from kagent.core.assignors.lag_sticky import LagStickyAssignor
from kagent.core.assignors.problem import Assignor

LagSource = Callable[[Collection[TopicPartition]], Mapping[TopicPartition, int]]
"""Given the partitions being assigned, their lag. A partition left out has
lag 0, a negative lag counts as 0, and other partitions are ignored: a bad
answer must not break a rebalance."""


def _no_lag(partitions: Collection[TopicPartition]) -> Mapping[TopicPartition, int]:
    return {}


class KagentPartitionAssignor(AbstractPartitionAssignor):
    """An aiokafka partition assignor running one of kagent's strategies.

    One instance per consumer: it remembers that consumer's partitions and
    generation between rebalances.
    """

    def __init__(self, strategy: Assignor, lag_source: LagSource = _no_lag) -> None:
        self._strategy = strategy
        self._lag_source = lag_source
        self._owned: list[TopicPartition] = []
        self._generation = -1

    @property
    def name(self) -> str:
        return self._strategy.name

    # aiokafka declares metadata/assign/on_assignment as classmethods but calls them on the instance in
    # partition_assignment_strategy; this assignor keeps per-consumer state, so they are instance methods.
    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:  # type: ignore[override]
        return ConsumerProtocolMemberMetadata(VERSION, sorted(topics), join_user_data(self._owned, self._generation))

    def assign(  # type: ignore[override]
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        joined = {member_id: JoinedMember(m.subscription, m.user_data) for member_id, m in members.items()}
        group = joined_group(cluster.partitions_for_topic, joined, self._lag_source)
        result = self._strategy.assign(group)
        stamp = generation_stamp(group.members.values())
        return {
            member_id: ConsumerProtocolMemberAssignment(VERSION, by_topic(result[member_id]), stamp)
            for member_id in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:  # type: ignore[override]
        self._owned = assignment.partitions()
        generation = stamped_generation(assignment.user_data)
        if generation is not None:
            self._generation = generation


class FairPartitionAssignor(KagentPartitionAssignor):
    """KIP-49's `fair` strategy for aiokafka consumers."""

    def __init__(self) -> None:
        super().__init__(FairAssignor())


class LagPartitionAssignor(KagentPartitionAssignor):
    """KAFKA-5337's `lag` strategy for aiokafka consumers."""

    def __init__(self, lag_source: LagSource) -> None:
        super().__init__(LagBasedAssignor(), lag_source)


class LagStickyPartitionAssignor(KagentPartitionAssignor):
    """kagent's `lag-sticky` strategy for aiokafka consumers."""

    def __init__(self, lag_source: LagSource, tolerance: float = 0.05) -> None:
        super().__init__(LagStickyAssignor(tolerance), lag_source)
