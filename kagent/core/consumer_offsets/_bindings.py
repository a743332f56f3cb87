"""Which record class each `__consumer_offsets` record type decodes to.

Pure data: for each record type, the shape of its record and of its
tombstone. The layouts themselves come from `_layouts.RECORD_TYPES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kagent.core.consumer_offsets._layouts import OFFSET_COMMIT_VALUE
from kagent.core.consumer_offsets.consumer_protocol import ASSIGNMENT, SUBSCRIPTION
from kagent.core.consumer_offsets.layout import Message
from kagent.core.consumer_offsets.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupPartitionMetadataTombstone,
    ConsumerGroupRegularExpression,
    ConsumerGroupRegularExpressionTombstone,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMemberTombstone,
    ConsumerGroupTargetAssignmentMetadata,
    ConsumerGroupTargetAssignmentMetadataTombstone,
    GroupMember,
    GroupMetadata,
    GroupTombstone,
    OffsetCommit,
    OffsetTombstone,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from kagent.core.consumer_offsets.shape import Embedding, RecordShape


@dataclass(frozen=True)
class Binding:
    """The records of one record type. `value` replaces the value layout
    the specs pair with the key, where Kafka reads it differently."""

    record: RecordShape
    tombstone: RecordShape
    value: Message | None = None


#: The KIP-848 keys call the group GroupId; every record calls it `group`.
_GROUP_ID = {"group": "group_id"}

_OFFSET_COMMIT = Binding(
    RecordShape(
        OffsetCommit,
        none_if={"leader_epoch": -1},
        version_field="value_version",
        record_type_field="record_type",
    ),
    RecordShape(OffsetTombstone, record_type_field="record_type"),
)

_TOPIC_PARTITIONS = RecordShape(TopicPartitions)

BINDINGS: Mapping[int, Binding] = {
    # Kafka 4.0 reads type 0 with LegacyOffsetCommitValue (v0 only, the same
    # layout as OffsetCommitValue v0); older brokers read any offset-commit
    # value version under either key type, and so does kagent.
    0: Binding(_OFFSET_COMMIT.record, _OFFSET_COMMIT.tombstone, OFFSET_COMMIT_VALUE),
    1: _OFFSET_COMMIT,
    2: Binding(
        RecordShape(
            GroupMetadata,
            renames={"state_timestamp": "current_state_timestamp"},
            # Kafka's coordinator reads -1 as "no timestamp" (Optional.empty()).
            none_if={"state_timestamp": -1},
            nested={
                "members": RecordShape(
                    GroupMember,
                    embedding=Embedding(
                        {"subscription": SUBSCRIPTION, "assignment": ASSIGNMENT}, "protocol_type", "consumer"
                    ),
                )
            },
            version_field="value_version",
        ),
        RecordShape(GroupTombstone),
    ),
    3: Binding(
        RecordShape(ConsumerGroupMetadata, renames=_GROUP_ID, version_field="value_version"),
        RecordShape(ConsumerGroupMetadataTombstone, renames=_GROUP_ID),
    ),
    4: Binding(
        RecordShape(
            ConsumerGroupPartitionMetadata,
            renames=_GROUP_ID,
            nested={
                "topics": RecordShape(TopicMetadata, nested={"partition_metadata": RecordShape(PartitionMetadata)})
            },
            version_field="value_version",
        ),
        RecordShape(ConsumerGroupPartitionMetadataTombstone, renames=_GROUP_ID),
    ),
    5: Binding(
        RecordShape(
            ConsumerGroupMemberMetadata,
            renames=_GROUP_ID,
            nested={
                "classic_member_metadata": RecordShape(
                    ClassicMemberMetadata, nested={"supported_protocols": RecordShape(ClassicProtocol)}
                )
            },
            version_field="value_version",
        ),
        RecordShape(ConsumerGroupMemberMetadataTombstone, renames=_GROUP_ID),
    ),
    6: Binding(
        RecordShape(ConsumerGroupTargetAssignmentMetadata, renames=_GROUP_ID, version_field="value_version"),
        RecordShape(ConsumerGroupTargetAssignmentMetadataTombstone, renames=_GROUP_ID),
    ),
    7: Binding(
        RecordShape(
            ConsumerGroupTargetAssignmentMember,
            renames=_GROUP_ID,
            nested={"topic_partitions": _TOPIC_PARTITIONS},
            version_field="value_version",
        ),
        RecordShape(ConsumerGroupTargetAssignmentMemberTombstone, renames=_GROUP_ID),
    ),
    8: Binding(
        RecordShape(
            ConsumerGroupCurrentMemberAssignment,
            renames=_GROUP_ID,
            nested={
                "assigned_partitions": _TOPIC_PARTITIONS,
                "partitions_pending_revocation": _TOPIC_PARTITIONS,
            },
            version_field="value_version",
        ),
        RecordShape(ConsumerGroupCurrentMemberAssignmentTombstone, renames=_GROUP_ID),
    ),
    16: Binding(
        RecordShape(ConsumerGroupRegularExpression, renames=_GROUP_ID, version_field="value_version"),
        RecordShape(ConsumerGroupRegularExpressionTombstone, renames=_GROUP_ID),
    ),
}
