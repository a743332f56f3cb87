"""Typed, immutable records of `__consumer_offsets` and of the consumer
protocol.

Each record merges a key and its value. Field names are Kafka's own in
snake_case, except that every record names its group `group` (the KIP-848
keys call it GroupId). A field the record's value version does not have is
None. Sequences are tuples; topic ids are `uuid.UUID`; partitions of the
consumer protocol are aiokafka's `TopicPartition`.

Records are NamedTuples: they are built on the decoding hot path, where a
tuple costs a fraction of a frozen dataclass. Unlike plain tuples, a record
equals only a record of the same class with equal fields, and hashes
accordingly.
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias, TypeVar
from uuid import UUID

from aiokafka.structs import TopicPartition

_R = TypeVar("_R", bound=tuple[object, ...])


def _record(cls: type[_R]) -> type[_R]:
    """Give a NamedTuple class class-sensitive equality and hashing."""

    def __eq__(self: tuple[object, ...], other: object) -> bool:
        return type(other) is type(self) and tuple.__eq__(self, other)

    def __ne__(self: tuple[object, ...], other: object) -> bool:
        return not __eq__(self, other)

    def __hash__(self: tuple[object, ...]) -> int:
        return hash((type(self).__qualname__, tuple.__hash__(self)))

    cls.__eq__ = __eq__  # type: ignore[method-assign]
    cls.__ne__ = __ne__  # type: ignore[method-assign,assignment]
    cls.__hash__ = __hash__  # type: ignore[method-assign]
    return cls


# -- consumer protocol (embedded in classic group metadata) -----------------


@_record
class Subscription(NamedTuple):
    """ConsumerProtocolSubscription v0-3: what a member asks for.

    `owned_partitions` is v1+, `generation_id` v2+ (-1 when unknown),
    `rack_id` v3+. Owned partitions of one topic are adjacent, as Kafka
    writes them.
    """

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] | None = None
    generation_id: int | None = None
    rack_id: str | None = None


@_record
class Assignment(NamedTuple):
    """ConsumerProtocolAssignment v0-3: what the leader gave a member.

    Partitions of one topic are adjacent, as Kafka writes them.
    """

    version: int
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


# -- offset commits: record types 0 and 1 -----------------------------------


@_record
class OffsetCommit(NamedTuple):
    """A committed offset of `group` for one topic partition.

    `expire_timestamp` exists in value version 1 only; `leader_epoch` in
    3+, where -1 (no epoch) reads as None. `record_type` is 1, or 0 for the
    legacy key written by Kafka before 0.10.
    """

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None
    leader_epoch: int | None
    value_version: int
    record_type: int = 1


@_record
class OffsetTombstone(NamedTuple):
    """The committed offset of `group` for one topic partition was deleted."""

    group: str
    topic: str
    partition: int
    record_type: int = 1


# -- classic groups: record type 2 ------------------------------------------


@_record
class GroupMember(NamedTuple):
    """One member of a classic group.

    When the group's protocol type is "consumer", `subscription` and
    `assignment` are decoded (None for the empty blob Kafka stores for a
    member that has no assignment yet); otherwise they are the raw bytes.
    `rebalance_timeout` is value v1+, `group_instance_id` v3+.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int | None
    session_timeout: int
    subscription: Subscription | bytes | None
    assignment: Assignment | bytes | None


@_record
class GroupMetadata(NamedTuple):
    """The state of a classic group after a rebalance.

    `state_timestamp` (Kafka's currentStateTimestamp) is value v2+; -1 on the
    wire (no timestamp) reads as None, as Kafka's coordinator reads it, and
    None is written as -1.
    """

    group: str
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int | None
    members: tuple[GroupMember, ...]
    value_version: int


@_record
class GroupTombstone(NamedTuple):
    """The classic group was deleted."""

    group: str


# -- KIP-848 consumer groups: record types 3-8 and 16 -----------------------


@_record
class ConsumerGroupMetadata(NamedTuple):
    """Type 3: the epoch of a consumer group (and, tagged, its topics'
    metadata hash and creation time)."""

    group: str
    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1
    value_version: int = 0


@_record
class ConsumerGroupMetadataTombstone(NamedTuple):
    """Type 3 deleted: the consumer group is gone."""

    group: str


@_record
class PartitionMetadata(NamedTuple):
    """The racks of one partition (deprecated by Kafka after 4.0)."""

    partition: int
    racks: tuple[str, ...]


@_record
class TopicMetadata(NamedTuple):
    """A subscribed topic as the group coordinator last saw it."""

    topic_id: UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionMetadata, ...]


@_record
class ConsumerGroupPartitionMetadata(NamedTuple):
    """Type 4: metadata of the topics a consumer group subscribes to."""

    group: str
    topics: tuple[TopicMetadata, ...]
    value_version: int = 0


@_record
class ConsumerGroupPartitionMetadataTombstone(NamedTuple):
    """Type 4 deleted."""

    group: str


@_record
class ClassicProtocol(NamedTuple):
    """A protocol a classic-protocol member of a consumer group supports."""

    name: str
    metadata: bytes


@_record
class ClassicMemberMetadata(NamedTuple):
    """What a member that joined with the classic protocol sent."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@_record
class ConsumerGroupMemberMetadata(NamedTuple):
    """Type 5: one member of a consumer group."""

    group: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None
    value_version: int = 0


@_record
class ConsumerGroupMemberMetadataTombstone(NamedTuple):
    """Type 5 deleted: the member left."""

    group: str
    member_id: str


@_record
class ConsumerGroupTargetAssignmentMetadata(NamedTuple):
    """Type 6: the epoch (and, tagged, the time) of a group's target assignment."""

    group: str
    assignment_epoch: int
    assignment_timestamp: int = 0
    value_version: int = 0


@_record
class ConsumerGroupTargetAssignmentMetadataTombstone(NamedTuple):
    """Type 6 deleted."""

    group: str


@_record
class TopicPartitions(NamedTuple):
    """Partitions of one topic, named by topic id.

    `assignment_epochs` (tagged, aligned with `partitions`) exists only in a
    current member assignment (type 8), None when not written.
    """

    topic_id: UUID
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None


@_record
class ConsumerGroupTargetAssignmentMember(NamedTuple):
    """Type 7: the partitions the target assignment gives one member."""

    group: str
    member_id: str
    topic_partitions: tuple[TopicPartitions, ...]
    value_version: int = 0


@_record
class ConsumerGroupTargetAssignmentMemberTombstone(NamedTuple):
    """Type 7 deleted."""

    group: str
    member_id: str


@_record
class ConsumerGroupCurrentMemberAssignment(NamedTuple):
    """Type 8: the partitions a member owns now, and those it must revoke."""

    group: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]
    value_version: int = 0


@_record
class ConsumerGroupCurrentMemberAssignmentTombstone(NamedTuple):
    """Type 8 deleted."""

    group: str
    member_id: str


@_record
class ConsumerGroupRegularExpression(NamedTuple):
    """Type 16: the topics a subscribed regular expression resolved to.

    `version` and `timestamp` are Kafka's: the metadata image version and
    time of the resolution (not the value's layout version).
    """

    group: str
    regular_expression: str
    topics: tuple[str, ...]
    version: int
    timestamp: int
    value_version: int = 0


@_record
class ConsumerGroupRegularExpressionTombstone(NamedTuple):
    """Type 16 deleted."""

    group: str
    regular_expression: str


# -- anything else ----------------------------------------------------------


@_record
class UnknownRecord(NamedTuple):
    """A record type this codec does not decode (share groups, streams
    groups, future types), kept as it came."""

    record_type: int
    key: bytes
    value: bytes | None


Record: TypeAlias = (
    OffsetCommit
    | OffsetTombstone
    | GroupMetadata
    | GroupTombstone
    | ConsumerGroupMetadata
    | ConsumerGroupMetadataTombstone
    | ConsumerGroupPartitionMetadata
    | ConsumerGroupPartitionMetadataTombstone
    | ConsumerGroupMemberMetadata
    | ConsumerGroupMemberMetadataTombstone
    | ConsumerGroupTargetAssignmentMetadata
    | ConsumerGroupTargetAssignmentMetadataTombstone
    | ConsumerGroupTargetAssignmentMember
    | ConsumerGroupTargetAssignmentMemberTombstone
    | ConsumerGroupCurrentMemberAssignment
    | ConsumerGroupCurrentMemberAssignmentTombstone
    | ConsumerGroupRegularExpression
    | ConsumerGroupRegularExpressionTombstone
    | UnknownRecord
)
