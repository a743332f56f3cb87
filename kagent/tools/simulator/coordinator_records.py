"""The records Kafka's group coordinator would write for what the simulator saw.

Pure functions, no I/O: from a commit or a completed generation to the
`kagent.core.consumer_offsets` record, and from a record to the
`__consumer_offsets` message (partition, key bytes, value bytes) Kafka
would append.
"""

from __future__ import annotations

from typing import NamedTuple

from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    Assignment,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    Record,
    Subscription,
    UnknownRecord,
    encode,
)
from kagent.tools.simulator.partitioners import offsets_partition_for
from kagent.tools.simulator.rebalance import Rebalance

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "OffsetsTopicMessage",
    "assignment_of",
    "empty_group_metadata",
    "group_metadata",
    "offset_commit",
    "offsets_topic_message",
    "subscription_of",
]

#: The protocol type of consumer groups (`ConsumerProtocol.PROTOCOL_TYPE`).
CONSUMER_PROTOCOL_TYPE = "consumer"
#: OffsetCommitValue version Kafka writes for a commit without expire timestamp.
OFFSET_COMMIT_VALUE_VERSION = 3
#: GroupMetadataValue version Kafka writes (with static membership).
GROUP_METADATA_VALUE_VERSION = 3


class OffsetsTopicMessage(NamedTuple):
    """A message of `__consumer_offsets`: where it goes and its exact bytes."""

    partition: int
    key: bytes
    value: bytes | None


def subscription_of(metadata: ConsumerProtocolMemberMetadata) -> Subscription:
    """The subscription a member sent in JoinGroup, as aiokafka decoded it."""
    return Subscription(version=metadata.version, topics=tuple(metadata.subscription), user_data=metadata.user_data)


def assignment_of(assignment: ConsumerProtocolMemberAssignment) -> Assignment:
    """The assignment a leader sent in SyncGroup, as aiokafka built it
    (partitions of one topic adjacent, in aiokafka's order)."""
    return Assignment(
        version=assignment.version, partitions=tuple(assignment.partitions()), user_data=assignment.user_data
    )


def offset_commit(
    group: str, partition: TopicPartition, offset: int, metadata: str, commit_timestamp_ms: int
) -> OffsetCommit:
    """The record of `group` committing `offset` (with `metadata`) for
    `partition` at `commit_timestamp_ms`: value version 3, no leader epoch
    (aiokafka's OffsetCommit request carries none), no expire timestamp."""
    return OffsetCommit(
        group=group,
        topic=partition.topic,
        partition=partition.partition,
        offset=offset,
        metadata=metadata,
        commit_timestamp=commit_timestamp_ms,
        expire_timestamp=None,
        leader_epoch=None,
        value_version=OFFSET_COMMIT_VALUE_VERSION,
    )


def group_metadata(rebalance: Rebalance, state_timestamp_ms: int) -> GroupMetadata:
    """The record of a completed generation: protocol type "consumer", the
    assignor as protocol, the leader, and every member with its client id,
    host, timeouts, subscription and assignment (value version 3, dynamic
    members: no group instance id)."""
    return GroupMetadata(
        group=rebalance.group,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        generation=rebalance.generation,
        protocol=rebalance.protocol,
        leader=rebalance.leader,
        state_timestamp=state_timestamp_ms,
        members=tuple(
            GroupMember(
                member_id=member.identity.member_id,
                group_instance_id=None,
                client_id=member.identity.client_id,
                client_host=member.identity.client_host,
                rebalance_timeout=member.identity.rebalance_timeout_ms,
                session_timeout=member.identity.session_timeout_ms,
                subscription=member.subscription,
                assignment=member.assignment,
            )
            for member in rebalance.members
        ),
        value_version=GROUP_METADATA_VALUE_VERSION,
    )


def empty_group_metadata(group: str, generation: int, state_timestamp_ms: int) -> GroupMetadata:
    """The record Kafka writes when the last member has left: the group is
    Empty, in the next `generation`, with no protocol, leader or member."""
    return GroupMetadata(
        group=group,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        generation=generation,
        protocol=None,
        leader=None,
        state_timestamp=state_timestamp_ms,
        members=(),
        value_version=GROUP_METADATA_VALUE_VERSION,
    )


def offsets_topic_message(record: Record, partitions: int) -> OffsetsTopicMessage:
    """`record` as Kafka appends it to a `__consumer_offsets` of `partitions`
    partitions: on its group's partition, keyed and valued by the codec.
    Any record of a group (all but `UnknownRecord`, which names none)."""
    if isinstance(record, UnknownRecord):
        raise TypeError(f"an unknown record (type {record.record_type}) names no group to place it by")
    key, value = encode(record)
    return OffsetsTopicMessage(offsets_partition_for(record.group, partitions), key, value)
