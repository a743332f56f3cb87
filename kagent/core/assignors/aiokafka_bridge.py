"""Run aiokafka's own range and round-robin assignors on a `Group`.

aiokafka's assignors order members by member id. Kafka orders them by
`AbstractPartitionAssignor.MemberInfo`: static members (with a
group.instance.id) first, by instance id, then dynamic members by member id.
Presenting each member to aiokafka under an id whose sort position is its
Kafka position makes aiokafka's output exactly Kafka's.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from kagent.core.assignors.problem import Assignment, Group, java_order


class _PartitionCounts(ClusterMetadata):
    """Cluster metadata that knows only partition counts: all that aiokafka's
    range and round-robin assignors read."""

    def __init__(self, partitions: Mapping[str, int]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # aiokafka leaves ClusterMetadata(**configs) unannotated
        self._counts = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._counts.get(topic)
        return None if count is None else set(range(count))


def kafka_member_order(group: Group) -> list[str]:
    """Member ids in the order of Kafka's `MemberInfo.compareTo`."""

    def key(member_id: str) -> tuple[bool, bytes, bytes]:
        instance_id = group.members[member_id].group_instance_id
        return instance_id is None, java_order(instance_id or ""), java_order(member_id)

    return sorted(group.members, key=key)


def run_aiokafka_assignor(assignor: type[AbstractPartitionAssignor], group: Group) -> Assignment:
    """`assignor`'s result for `group`, with members in Kafka's order."""
    ordered = kafka_member_order(group)
    width = len(str(len(ordered)))
    alias = {f"{rank:0{width}d}": member_id for rank, member_id in enumerate(ordered)}
    subscriptions = {
        rank_id: ConsumerProtocolMemberMetadata(0, list(group.subscriptions[member_id]), b"")
        for rank_id, member_id in alias.items()
    }
    result = assignor.assign(_PartitionCounts(group.partitions), subscriptions)
    return {alias[rank_id]: assignment.partitions() for rank_id, assignment in result.items()}
