"""The semantic checks a decoded ``__consumer_offsets`` record must pass before kagent derives events from it.

Decoding (:mod:`kagent.core.consumer_offsets`) proves only that the bytes
have Kafka's layout; the values in them can still be ones no Kafka broker
writes (forged, corrupted, or from a broken client). :func:`check` holds a
decoded record to the rules below. A record that breaks a *rejecting* rule
raises :class:`RecordRejected`, which names the rule, the field and its value,
and the source sends the record to the dead-letter topic. A record that breaks
a *dropping* rule is returned without the offending part and applied.

Only what kagent derives from a record is checked (:func:`kagent.core.events.derive`):
a record that derives nothing (a group of another protocol type, a target
assignment, share or streams group records, unknown types, most tombstones)
passes unchecked, so a field kagent ignores never dead-letters it.

Rejecting rules (the record goes to the dead-letter topic):

1. ``partition-negative``: a partition number is >= 0 (offset commits and
   their tombstones, KIP-848 held partitions). Kafka takes a commit only for
   a partition that exists (``UNKNOWN_TOPIC_OR_PARTITION`` otherwise).
2. ``offset-below-minus-one``: a committed offset is >= -1 (-1 is Kafka's
   "no offset"); a leader epoch is absent or >= 0 (the codec reads Kafka's -1
   as absent, so any other negative one is forged).
3. ``epoch-negative``: a classic group's generation and a KIP-848 group's
   epoch are >= 0; a KIP-848 member's epoch is >= -2 (Kafka's
   ``LEAVE_GROUP_STATIC_MEMBER_EPOCH``, written for a static member that
   left for a while, is -2).
4. ``topic-name``: a topic that names partitions (an offset commit's, a
   KIP-848 group's subscribed topic metadata, the topics a regular
   expression resolved to, all from the broker's own metadata) is a legal
   Kafka topic name: 1 to 249 characters of ``[a-zA-Z0-9._-]``, neither ``.``
   nor ``..`` (Kafka's ``Topic.validate``, ``MAX_NAME_LENGTH = 249``).
5. ``id-empty``: an id Kafka requires is non-empty: the group id of every
   KIP-848 record (``GroupId can't be empty.``) and of classic group metadata
   with members (JoinGroup refuses an empty group id); member ids (broker-made
   for classic members; ``MemberId can't be empty.`` for KIP-848); a static
   member's instance id when it has one (``InstanceId can't be empty.``). Kafka
   lets OffsetCommit, DescribeGroups and DeleteGroups use the empty group id
   (``isValidGroupId``, kept for old clients), so offset commits, their
   tombstones, group tombstones and member-less group metadata may have it.
6. ``string-too-long``: every string kagent keeps from a record (group,
   member, client and instance ids, client hosts, racks, the assignor and
   protocol names, regular expressions, subscribed topic names) is at most 32,767
   UTF-8 bytes. Kafka bounds no id but this: its generated serializers refuse
   a longer string (``'groupId' field is too long to be serialized``, limit
   ``0x7fff``), and the keys, like every non-flexible string, carry an int16
   length. No broker writes a longer one, so one is forged; the bound also
   keeps a hostile 64 KiB name out of tables, pages and metrics labels.
7. ``duplicate-member``: a classic group's members have distinct member ids
   (the coordinator keeps them in a map keyed by member id); with two, which
   one holds which partitions is unknowable.
8. ``invalid-event`` (a backstop, not a rule): the record passed the rules
   above but its events could not be built. :func:`kagent.core.ingest.ingest`
   rejects it with what failed; if it ever happens, a rule is missing here.

Dropping rule (the record is applied without the offending part):

9. ``assignment-outside-subscription``: a classic member's assigned
   partition whose topic is not among the topics the member subscribed to,
   is not a legal topic name, or whose partition number is negative, is
   dropped from that member's partitions. The assignment is written by the
   group's leader client, not checked by the broker; the Java consumer refuses
   such an assignment and rejoins ("received assignment ... does not match the
   current subscription"), so a new generation follows, and until it does the
   member's other partitions are still measured. Applied only when the
   member's subscription was decoded.

Kept as they are (neither rejected nor dropped):

- Unknown protocol types: a classic group whose protocol type is not
  ``consumer`` (Kafka Connect's ``connect``, Schema Registry's ``sr``, other
  clients' own) is a valid record of a client that is not a consumer; kagent
  derives nothing from it and does not check it. Kafka Streams' groups use the
  ``consumer`` protocol type and are checked like any consumer group.
- A KIP-848 epoch going backwards: applied, the last record winning, as
  Kafka's coordinator does when it replays the log; a group deleted and
  created again starts again from epoch 1, and nothing in one record can tell
  a stale epoch from a new group's. (So no per-record rule, and no state here.)

Pure: no I/O, no state.
"""

from __future__ import annotations

import re
from functools import lru_cache

from kagent.core.consumer_offsets import (
    Assignment,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupRegularExpression,
    ConsumerGroupRegularExpressionTombstone,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    OffsetTombstone,
    Record,
    Subscription,
)

__all__ = ["MAX_STRING_BYTES", "MAX_TOPIC_NAME_LENGTH", "RecordRejected", "check", "checked_commit", "shown"]

MAX_TOPIC_NAME_LENGTH = 249
"""Kafka's ``Topic.MAX_NAME_LENGTH``."""
MAX_STRING_BYTES = 0x7FFF
"""The longest string, in UTF-8 bytes, Kafka's generated serializers write."""

_UNMEASURED = MAX_STRING_BYTES // 4
"""The longest string within bounds whatever its characters (4 UTF-8 bytes at most each): only longer ones
are encoded to be measured."""
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_SHOWN_CHARACTERS = 40


class RecordRejected(ValueError):
    """A decoded record that breaks a rule: which rule, which field of which record, and the value.

    ``str()`` is the reason a dead letter carries, e.g.
    ``OffsetCommit breaks partition-negative: partition = -1 (a partition number is >= 0)``.
    """

    def __init__(self, record: str, rule: str, field: str, value: object, detail: str) -> None:
        self.record = record
        self.rule = rule
        self.field = field
        self.value = value
        self.detail = detail
        super().__init__(f"{record} breaks {rule}: {field} = {shown(value)} ({detail})")


def shown(value: object) -> str:
    """``value`` as a reason shows it: its repr, a long string cut short with its length."""
    if isinstance(value, str) and len(value) > _SHOWN_CHARACTERS:
        return f"{value[:_SHOWN_CHARACTERS]!r}... ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= 2 * _SHOWN_CHARACTERS else f"{text[: 2 * _SHOWN_CHARACTERS]}..."


def check(record: Record) -> Record:
    """``record`` if it passes every rule of the module; the record without the parts a dropping
    rule removes otherwise. Raises :class:`RecordRejected` for a rejecting rule, and nothing else."""
    match record:
        case OffsetCommit():
            return checked_commit(record)
        case OffsetTombstone():
            _group(record, record.group, required=False)
            _topic_name(record, "topic", record.topic)
            _partition(record, "partition", record.partition)
        case GroupMetadata() if record.protocol_type == "consumer":
            return _checked_group(record)
        case ConsumerGroupMetadata():
            _group(record, record.group)
            if record.epoch < 0:
                _reject(record, "epoch-negative", "epoch", record.epoch, "a group epoch is >= 0")
        case ConsumerGroupPartitionMetadata():
            _group(record, record.group)
            for topic in record.topics:
                _topic_name(record, "topics[].topic_name", topic.topic_name)
                if topic.num_partitions < 0:
                    _reject(
                        record, "partition-negative", "topics[].num_partitions", topic.num_partitions, "a count is >= 0"
                    )
        case ConsumerGroupMemberMetadata():
            _group(record, record.group)
            _id(record, "member_id", record.member_id)
            _instance_id(record, record.instance_id)
            for field, value in (
                ("client_id", record.client_id),
                ("client_host", record.client_host),
                ("subscribed_topic_regex", record.subscribed_topic_regex),
                ("server_assignor", record.server_assignor),
                ("rack_id", record.rack_id),
            ):
                _bounded(record, field, value)
            for name in record.subscribed_topic_names:
                _bounded(record, "subscribed_topic_names[]", name)
        case ConsumerGroupCurrentMemberAssignment():
            _group(record, record.group)
            _id(record, "member_id", record.member_id)
            if record.member_epoch < -2:
                _reject(record, "epoch-negative", "member_epoch", record.member_epoch, "a member epoch is >= -2")
            for held in (*record.assigned_partitions, *record.partitions_pending_revocation):
                for partition in held.partitions:
                    _partition(record, "partitions[]", partition)
        case ConsumerGroupRegularExpression():
            _group(record, record.group)
            _bounded(record, "regular_expression", record.regular_expression)
            for name in record.topics:
                _topic_name(record, "topics[]", name)
        case (
            ConsumerGroupMetadataTombstone()
            | ConsumerGroupMemberMetadataTombstone()
            | ConsumerGroupRegularExpressionTombstone()
        ):
            _group(record, record.group)
    return record


def checked_commit(record: OffsetCommit) -> OffsetCommit:
    """:func:`check` of an offset commit, the record nearly every one of ``__consumer_offsets`` is:
    one test of every bound at once, the rules one by one (to name the one broken) only when it fails."""
    group, topic, partition, offset, _, _, _, leader_epoch = record[:8]
    if (
        partition >= 0
        and offset >= -1
        and (leader_epoch is None or leader_epoch >= 0)
        and len(group) <= _UNMEASURED
        and _legal_topic(topic)
    ):
        return record
    _group(record, group, required=False)
    _topic_name(record, "topic", topic)
    _partition(record, "partition", partition)
    if offset < -1:
        _reject(record, "offset-below-minus-one", "offset", offset, "a committed offset is >= -1")
    if leader_epoch is not None and leader_epoch < 0:
        _reject(record, "offset-below-minus-one", "leader_epoch", leader_epoch, "a leader epoch is >= 0")
    return record


def _checked_group(record: GroupMetadata) -> GroupMetadata:
    """A consumer group's metadata checked, its members' stray assigned partitions dropped."""
    _group(record, record.group, required=bool(record.members))
    if record.generation < 0:
        _reject(record, "epoch-negative", "generation", record.generation, "a generation is >= 0")
    for field, value in (("protocol", record.protocol), ("leader", record.leader)):
        _bounded(record, field, value)
    seen: set[str] = set()
    for member in record.members:
        _id(record, "members[].member_id", member.member_id)
        if member.member_id in seen:
            _reject(record, "duplicate-member", "members[].member_id", member.member_id, "member ids are distinct")
        seen.add(member.member_id)
        _instance_id(record, member.group_instance_id)
        _bounded(record, "members[].client_id", member.client_id)
        _bounded(record, "members[].client_host", member.client_host)
        if isinstance(member.subscription, Subscription):
            for topic in member.subscription.topics:
                _bounded(record, "members[].subscription.topics[]", topic)
    members = tuple(_without_strays(member) for member in record.members)
    unchanged = all(kept is member for kept, member in zip(members, record.members, strict=True))
    return record if unchanged else record._replace(members=members)


def _without_strays(member: GroupMember) -> GroupMember:
    """``member`` without the assigned partitions rule 9 drops; ``member`` itself when none is."""
    assignment, subscription = member.assignment, member.subscription
    if not isinstance(assignment, Assignment) or not isinstance(subscription, Subscription):
        return member
    subscribed = {topic for topic in subscription.topics if _legal_topic(topic)}
    kept = tuple(tp for tp in assignment.partitions if tp.topic in subscribed and tp.partition >= 0)
    if len(kept) == len(assignment.partitions):
        return member
    return member._replace(assignment=assignment._replace(partitions=kept))


@lru_cache(maxsize=1 << 16)
def _legal_topic(name: str) -> bool:
    """Remembered for the last 65,536 names: every commit asks, and a cluster has far fewer topics."""
    return _LEGAL_TOPIC.fullmatch(name) is not None and name not in (".", "..")


def _reject(record: Record, rule: str, field: str, value: object, detail: str) -> None:
    raise RecordRejected(type(record).__name__, rule, field, value, detail)


def _partition(record: Record, field: str, partition: int) -> None:
    if partition < 0:
        _reject(record, "partition-negative", field, partition, "a partition number is >= 0")


def _topic_name(record: Record, field: str, name: str) -> None:
    if not _legal_topic(name):
        _reject(
            record,
            "topic-name",
            field,
            name,
            f"a topic name is 1 to {MAX_TOPIC_NAME_LENGTH} characters of [a-zA-Z0-9._-], not '.' or '..'",
        )


def _group(record: Record, group: str, *, required: bool = True) -> None:
    if required and not group:
        _reject(record, "id-empty", "group", group, "Kafka requires a group id here")
    _bounded(record, "group", group)


def _id(record: Record, field: str, value: str) -> None:
    if not value:
        _reject(record, "id-empty", field, value, "Kafka requires this id")
    _bounded(record, field, value)


def _instance_id(record: Record, instance_id: str | None) -> None:
    if instance_id == "":
        _reject(record, "id-empty", "instance_id", instance_id, "an instance id, when present, is non-empty")
    _bounded(record, "instance_id", instance_id)


def _bounded(record: Record, field: str, value: str | None) -> None:
    if value is not None and len(value) > _UNMEASURED and len(value.encode()) > MAX_STRING_BYTES:
        _reject(record, "string-too-long", field, value, f"Kafka writes strings of at most {MAX_STRING_BYTES} bytes")
