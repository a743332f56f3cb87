"""kagent's strategies as aiokafka partition assignors, for real consumers.

    consumer = AIOKafkaConsumer(
        "orders", group_id="billing",
        partition_assignment_strategy=(LagStickyPartitionAssignor(lag_source),),
    )

The group leader runs the strategy. It reads partition lag from the
pluggable `lag_source`, called synchronously inside the rebalance, so it
should answer from memory (a kagent table, a cached recommendation). Each
member reports the partitions it owns in its JoinGroup user data, as
aiokafka's sticky assignor does (`StickyAssignorUserDataV1`).

aiokafka does not tell assignors the group generation, so the assignor keeps
its own: the leader stamps every assignment with one more than the highest
generation any member reported, members echo it back at the next join, and
a member that missed a rebalance reports an older one. That is what
`Member.generation` needs to settle two members claiming one partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from io import BytesIO

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.protocol.types import Int32
from aiokafka.structs import TopicPartition

from kagent.core.assignors.fair import FairAssignor
from kagent.core.assignors.lag_based import LagBasedAssignor
from kagent.core.assignors.lag_sticky import LagStickyAssignor
from kagent.core.assignors.problem import Assignor, Group, Member

log = logging.getLogger(__name__)

LagSource = Callable[[Collection[TopicPartition]], Mapping[TopicPartition, int]]
"""Given the partitions being assigned, their lag. A partition left out has
lag 0, a negative lag counts as 0, and other partitions are ignored: a bad
answer must not break a rebalance."""

_VERSION = 0


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
        by_topic: dict[str, list[int]] = {}
        for tp in self._owned:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        user_data = StickyAssignorUserDataV1(sorted(by_topic.items()), self._generation).encode()
        return ConsumerProtocolMemberMetadata(_VERSION, sorted(topics), user_data)

    def assign(  # type: ignore[override]
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        group_members = {member_id: _member(metadata) for member_id, metadata in members.items()}
        partitions: dict[str, int] = {}
        for topic in sorted({topic for member in group_members.values() for topic in member.topics}):
            known = cluster.partitions_for_topic(topic)
            if known is not None:
                partitions[topic] = len(known)
        subscribed = [TopicPartition(topic, p) for topic, count in partitions.items() for p in range(count)]
        lag = self._lag_source(subscribed)
        valid_lag = {tp: max(0, lag[tp]) for tp in subscribed if tp in lag}
        result = self._strategy.assign(Group(partitions, group_members, valid_lag))
        generation = max((member.generation for member in group_members.values()), default=-1) + 1
        stamp = Int32.encode(generation)
        return {
            member_id: ConsumerProtocolMemberAssignment(_VERSION, _by_topic(result[member_id]), stamp)
            for member_id in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:  # type: ignore[override]
        self._owned = assignment.partitions()
        if len(assignment.user_data) == 4:
            self._generation = Int32.decode(BytesIO(assignment.user_data))


def _member(metadata: ConsumerProtocolMemberMetadata) -> Member:
    """A member as its JoinGroup metadata describes it; unreadable user data means nothing owned."""
    if not metadata.user_data:
        return Member(metadata.subscription)
    try:
        data = StickyAssignorUserDataV1.decode(metadata.user_data)
    except (ValueError, UnicodeDecodeError):
        log.warning("ignoring unreadable assignor user data %r", metadata.user_data)
        return Member(metadata.subscription)
    owned = [TopicPartition(topic, p) for topic, partitions in data.previous_assignment for p in partitions]
    return Member(metadata.subscription, owned=owned, generation=data.generation)


def _by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return list(by_topic.items())


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
