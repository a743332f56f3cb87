"""Group state from the group APIs: one poll's answers -> the derived events of what changed.

The ``admin-api`` source polls ListGroups, DescribeGroups,
ConsumerGroupDescribe and OffsetFetch instead of reading
``__consumer_offsets``. This module turns what they
answered into the same derived events (:mod:`kagent.core.events`) the
``offsets-topic`` source emits, held to the same rules
(:mod:`kagent.core.record_checks`), and only those of what changed since the
previous poll: :func:`poll` takes the previous poll's view (plain data) and
this poll's :class:`GroupAnswers`, and returns the next view and the events.

What the group APIs cannot say, and what the events carry instead:

- DescribeGroups has no generation in any version, so every
  :class:`~kagent.core.events.GroupAssigned` carries :data:`UNKNOWN_GENERATION`;
  nor a leader (None) or state timestamp (None).
- OffsetFetch has no commit time, so an :class:`~kagent.core.events.OffsetCommitted`
  carries the time of the poll that first saw the offset.
- A group on the consumer protocol (KIP-848; ListGroups v5 says its type,
  :mod:`kagent.core.list_groups`) is not described by DescribeGroups (Kafka
  answers ``Dead``, or ``GROUP_ID_NOT_FOUND`` from v6) but by
  ConsumerGroupDescribe (:mod:`kagent.core.consumer_group_describe`), whose
  answer becomes the events the ``offsets-topic`` source derives from such a
  group's records (:func:`consumer_group_events`), which storage folds into
  the group's state and assignment as it folds theirs. A poll where
  ConsumerGroupDescribe does not answer for the group (a broker without the
  API, ``UNSUPPORTED_VERSION``, any error) changes nothing of it: a group
  never described has no assignment, so its members are unknown (not none),
  and its committed offsets are reported as any group's.

The rules: each answer is checked as the coordinator record that would say
the same (a committed offset as an ``OffsetCommit``, a described group as its
``GroupMetadata``, a KIP-848 group's epoch, members and assignments as its
records of types 3, 4, 5 and 8) by :func:`kagent.core.ingest.checked_events`,
as the ``offsets-topic`` source checks its records. The part that breaks a
rule is reported (:class:`RejectedAnswer`) and skipped, and what the previous
poll saw of it stands: a committed offset's partition, a described group's
assignment, a KIP-848 group's description. A dropping rule applies as there
(a member's assigned partition outside its subscription is dropped from it).

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar
from uuid import UUID

from aiokafka.protocol.api import Response
from aiokafka.structs import TopicPartition

from kagent.core.consumer_group_describe import AssignedTopic, DescribedConsumerGroup
from kagent.core.consumer_group_state import ConsumerGroupMemberState, ConsumerGroupState, fold
from kagent.core.consumer_offsets import (
    Assignment,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupPartitionMetadata,
    DecodeError,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    Subscription,
    TopicMetadata,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
)
from kagent.core.events import (
    ConsumerGroupEpoch,
    ConsumerGroupMember,
    ConsumerGroupMemberAssignment,
    ConsumerGroupMemberLeft,
    ConsumerGroupTargetAssignment,
    ConsumerGroupTopics,
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    OffsetCommitted,
    OffsetDeleted,
)
from kagent.core.ingest import checked_events
from kagent.core.list_groups import ListedGroup
from kagent.core.record_checks import MAX_STRING_BYTES, RecordRejected, checked_commit

__all__ = [
    "CONSUMER_GROUP_TYPE",
    "CONSUMER_PROTOCOL_TYPE",
    "DEAD_STATE",
    "SETTLED_STATES",
    "UNKNOWN_GENERATION",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffsets",
    "GroupAnswers",
    "GroupError",
    "GroupView",
    "MalformedMetadata",
    "PollResult",
    "RejectedAnswer",
    "consumer_group_events",
    "described_groups",
    "fetched_offsets",
    "group_assigned",
    "poll",
    "tracked_groups",
]

UNKNOWN_GENERATION = -1
"""The generation every :class:`GroupAssigned` of this source carries: DescribeGroups does not say it.

A constant keeps the event of an unchanged group equal from poll to poll (so
none is re-sent) and its recommendation id stable (the id hashes the
generation). The price: a rebalance that leaves the assignment as it was is
invisible, and the evaluation's hold count does not restart on a rebalance.
"""

CONSUMER_PROTOCOL_TYPE = "consumer"
"""The protocol type of groups whose member metadata and assignments are the consumer protocol's blobs."""

CONSUMER_GROUP_TYPE = "consumer"
"""ListGroups v5's type of a group on the consumer rebalance protocol (KIP-848), whose broker assigns."""

SETTLED_STATES = frozenset({"Stable", "Empty"})
"""Group states whose members and assignments are those of a completed generation.

In ``PreparingRebalance`` and ``CompletingRebalance`` the assignments are not
settled yet, and the previous view stands, as Kafka's coordinator writes a
group's metadata only when a generation completes.
"""

DEAD_STATE = "Dead"
"""The state DescribeGroups (and ConsumerGroupDescribe) answers for a group that no longer exists."""

_CHECKED_GENERATION = 0
"""The generation a described group is checked with (the rules want one >= 0; DescribeGroups says none)."""

B = TypeVar("B", Subscription, Assignment)


@dataclass(frozen=True)
class DescribedMember:
    """One member as DescribeGroups answered it; the blobs are raw (empty when not given)."""

    member_id: str
    client_id: str
    client_host: str
    member_metadata: bytes
    """The member's subscription, a ConsumerProtocolSubscription blob in a ``consumer`` group."""
    member_assignment: bytes
    """The member's assignment, a ConsumerProtocolAssignment blob in a ``consumer`` group."""
    group_instance_id: str | None = None
    """Static membership id (DescribeGroups v4+)."""


@dataclass(frozen=True)
class DescribedGroup:
    """One group as DescribeGroups answered it without error."""

    group: str
    state: str
    protocol_type: str
    protocol: str
    """The assignor the group chose; empty when it has none (or the broker does not say)."""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class GroupError:
    """A group DescribeGroups answered with an error code (``group`` None when the answer names none)."""

    group: str | None
    error_code: int


@dataclass(frozen=True)
class FetchedOffsets:
    """One group's OffsetFetch answer, partition by partition (see :func:`fetched_offsets`)."""

    offsets: Mapping[TopicPartition, int]
    """Partitions answered without error -> the offset answered (-1: no commit there)."""
    failed: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Partitions answered with an error -> its code: what the previous poll saw of them stands."""
    error_code: int = 0
    """The answer's own error code (v2+): not 0, the whole answer failed and nothing in it counts."""


@dataclass(frozen=True)
class GroupAnswers:
    """What the group APIs answered in one poll.

    A group in ``listed`` but missing from ``described`` or ``committed`` was
    not answered by that API this poll (an error, or not asked): what the
    previous poll saw of it stands. A group missing from ``listed`` is gone.
    """

    polled_at: int
    """Milliseconds since the epoch when the poll began."""
    listed: Mapping[str, ListedGroup]
    """Every group to track (see :func:`tracked_groups`), as ListGroups answered it."""
    described: Mapping[str, DescribedGroup] = field(default_factory=dict)
    """Groups DescribeGroups answered without error."""
    committed: Mapping[str, FetchedOffsets] = field(default_factory=dict)
    """Groups OffsetFetch answered without an error of the whole answer."""
    consumer_described: Mapping[str, DescribedConsumerGroup] = field(default_factory=dict)
    """Groups on the consumer protocol ConsumerGroupDescribe answered without error."""
    partition_counts: Mapping[str, int] = field(default_factory=dict)
    """Topic -> its partition count, as the poll's cluster metadata answered it."""


@dataclass(frozen=True)
class GroupView:
    """What the polls have seen of one group: its last settled assignment (a classic group's) or its
    state (a group on the consumer protocol's), and its committed offsets."""

    assignment: GroupAssigned | None = None
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)
    consumer_group: ConsumerGroupState | None = None
    """A group on the consumer protocol: its state as the events sent of it fold it; None before any."""


@dataclass(frozen=True)
class MalformedMetadata:
    """A member's subscription or assignment blob that failed to decode; the member is kept without it."""

    group: str
    member_id: str
    part: str
    """``subscription`` (the member metadata) or ``assignment``."""
    error: str


@dataclass(frozen=True)
class RejectedAnswer:
    """Part of an answer that breaks a rule of :mod:`kagent.core.record_checks`, skipped."""

    api: str
    """The API that answered it: ``OffsetFetch``, ``DescribeGroups`` or ``ConsumerGroupDescribe``."""
    group: str
    error: RecordRejected
    """The rule broken, with the field and its value (``error.rule``; ``str()`` says it all)."""


class PollResult(NamedTuple):
    """What :func:`poll` returns."""

    view: dict[str, GroupView]
    """The view to pass to the next poll."""
    events: list[DerivedEvent]
    """The derived events of what changed, in order, each for the derived-events topic keyed by its group."""
    malformed: list[MalformedMetadata]
    """Blobs that failed to decode in the assignments this poll announces (reported once per change)."""
    rejected: list[RejectedAnswer]
    """Parts of this poll's answers that break a rule, skipped (reported at every poll that answers them)."""


def tracked_groups(listed: Mapping[str, ListedGroup], own_group: str) -> dict[str, ListedGroup]:
    """ListGroups' groups (:func:`kagent.core.list_groups.listed_groups`) without kagent's own group."""
    return {group: answer for group, answer in listed.items() if group != own_group}


def described_groups(responses: Iterable[Response]) -> tuple[dict[str, DescribedGroup], list[GroupError]]:
    """The groups in aiokafka's DescribeGroups responses (any version), and those answered with an error.

    Fields are read by their names in aiokafka's response schemas, so every
    version reads alike; ``group_instance_id`` is read where the version has it.
    """
    described: dict[str, DescribedGroup] = {}
    errors: list[GroupError] = []
    for response in responses:
        for group in response.to_object()["groups"]:
            if group["error_code"] or not group["group"]:
                errors.append(GroupError(group["group"], group["error_code"]))
                continue
            described[group["group"]] = DescribedGroup(
                group=group["group"],
                state=group["state"],
                protocol_type=group["protocol_type"],
                protocol=group["protocol"] or "",
                members=tuple(_described_member(member) for member in group["members"]),
            )
    return described, errors


def _described_member(member: Mapping[str, Any]) -> DescribedMember:
    return DescribedMember(
        member_id=member["member_id"],
        client_id=member["client_id"] or "",
        client_host=member["client_host"] or "",
        member_metadata=member["member_metadata"] or b"",
        member_assignment=member["member_assignment"] or b"",
        group_instance_id=member.get("group_instance_id"),
    )


def fetched_offsets(response: Response) -> FetchedOffsets:
    """An OffsetFetch response of any version aiokafka speaks (v0-v3), partition by partition.

    Unlike aiokafka's admin ``list_consumer_group_offsets``, which raises for
    the whole group at the first partition answered with an error (and reads
    the response's code, not the partition's, to say which), one partition's
    error affects only that partition. The response's own error code (v2+;
    ``COORDINATOR_LOAD_IN_PROGRESS``, ``GROUP_AUTHORIZATION_FAILED``...), which
    comes with no partitions, is returned for the caller to treat the answer
    as failed, never read as "no commits".
    """
    answer = response.to_object()
    offsets: dict[TopicPartition, int] = {}
    failed: dict[TopicPartition, int] = {}
    for topic in answer["topics"]:
        for partition in topic["partitions"]:
            tp = TopicPartition(topic["topic"], partition["partition"])
            if partition["error_code"]:
                failed[tp] = partition["error_code"]
            else:
                offsets[tp] = partition["offset"]
    return FetchedOffsets(offsets, failed, answer.get("error_code", 0))


def group_assigned(described: DescribedGroup) -> tuple[GroupAssigned, list[MalformedMetadata]]:
    """The :class:`GroupAssigned` of a described ``consumer`` group, and the blobs that failed to decode.

    Built as the ``offsets-topic`` source builds it from the group's
    ``GroupMetadata`` record, and held to the same rules
    (:func:`kagent.core.ingest.checked_events`; the generation, which
    DescribeGroups does not say, checked as 0 and carried as
    :data:`UNKNOWN_GENERATION`). Members are ordered by member id; each
    member's subscribed topics and assigned partitions come from its blobs.
    An empty subscription blob (not given) leaves its topics empty; an empty
    assignment blob leaves its partitions unknown (None), since a coordinator
    that has the member's assignment describes it as the consumer protocol's
    bytes (an empty assignment is 10 bytes, not none), so an empty one says
    the broker did not tell (Tansu 0.6 never does). A blob that does not
    decode is treated alike and reported, so one member's broken blob
    affects only that member. Raises :class:`RecordRejected` when the group breaks a
    rule (an empty or duplicate member id, a negative partition where the
    member's subscription is unknown, ...).
    """
    members = []
    malformed: list[MalformedMetadata] = []
    for member in sorted(described.members, key=lambda m: m.member_id):
        where = (described.group, member.member_id)
        members.append(
            GroupMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout=None,
                session_timeout=0,
                subscription=_blob(decode_subscription, member.member_metadata, "subscription", where, malformed),
                assignment=_blob(decode_assignment, member.member_assignment, "assignment", where, malformed),
            )
        )
    record = GroupMetadata(
        group=described.group,
        protocol_type=described.protocol_type,
        generation=_CHECKED_GENERATION,
        protocol=described.protocol or None,
        leader=None,
        state_timestamp=None,
        members=tuple(members),
        value_version=3,
    )
    (assigned,) = checked_events(record)
    assert isinstance(assigned, GroupAssigned)  # a consumer group's metadata derives exactly that
    untold = {member.member_id for member in members if member.assignment is None}
    described_members = tuple(
        member.model_copy(update={"partitions": None}) if member.member_id in untold else member
        for member in assigned.members
    )
    return assigned.model_copy(update={"generation": UNKNOWN_GENERATION, "members": described_members}), malformed


def _blob(
    decode: Callable[[bytes], B], blob: bytes, part: str, where: tuple[str, str], malformed: list[MalformedMetadata]
) -> B | None:
    """``blob`` decoded; None when empty or malformed (then added to ``malformed``)."""
    if not blob:
        return None
    try:
        return decode(blob)
    except DecodeError as exc:
        malformed.append(MalformedMetadata(*where, part, str(exc)))
        return None


def consumer_group_events(
    previous: ConsumerGroupState | None, described: DescribedConsumerGroup, partition_counts: Mapping[str, int]
) -> tuple[ConsumerGroupState, list[DerivedEvent]]:
    """The state of a group on the consumer protocol (KIP-848) as ConsumerGroupDescribe ``described`` it,
    and the events that take ``previous`` (its state as the events sent of it fold it; None: none sent)
    there.

    Each part of the answer is checked as the coordinator record that would say the same, and makes
    the events the ``offsets-topic`` source derives from that record
    (:func:`kagent.core.ingest.checked_events`):

    - the group epoch, as ``ConsumerGroupMetadata`` (type 3): a
      :class:`~kagent.core.events.ConsumerGroupEpoch`;
    - the topics the members' current and target assignments name (the answer names each by id and
      name), with their partition counts from ``partition_counts`` (the cluster's metadata), as
      ``ConsumerGroupPartitionMetadata`` (type 4): a :class:`~kagent.core.events.ConsumerGroupTopics`.
      A topic ``partition_counts`` lacks is left out (storage then names it from the cluster's
      metadata, as it does a group's of Kafka 4.1+);
    - each member's instance id, rack, client id and host and subscribed topic names and regular
      expression, as ``ConsumerGroupMemberMetadata`` (type 5): a
      :class:`~kagent.core.events.ConsumerGroupMember`, without the assignor the member asked for
      (the answer does not say it);
    - each member's epoch and the partitions it is assigned, as
      ``ConsumerGroupCurrentMemberAssignment`` (type 8): a
      :class:`~kagent.core.events.ConsumerGroupMemberAssignment` (the answer leaves out the partitions
      pending revocation, which the member holds until it acknowledges their revocation);
    - the assignment epoch, the server assignor the broker selected and the member ids: a
      :class:`~kagent.core.events.ConsumerGroupTargetAssignment` (the epoch held to ``epoch-negative``
      and the name to ``string-too-long``, as the rules hold every epoch and string), which drops
      any other member where it is folded.

    Only the events of what differs from ``previous`` are returned: members gone first (a
    :class:`~kagent.core.events.ConsumerGroupMemberLeft` each), then the epoch, the topics, each
    member's metadata and assignment (members by id), and the target assignment. So folding them over
    ``previous`` (:func:`~kagent.core.consumer_group_state.fold`) gives the returned state, and an
    unchanged group gives none. With ``previous`` None (a source that restarted, or a new leader) all
    of them are returned, and folding them over *any* earlier state of the group gives the returned
    state: storage's stored state loses the members that left unseen. Raises :class:`RecordRejected`
    when a part breaks a rule (two members of one id break ``duplicate-member``): the caller skips the
    whole answer.
    """
    group = described.group
    records: list[Any] = [ConsumerGroupMetadata(group=group, epoch=described.group_epoch)]
    named: dict[str, str] = {}
    for member in described.members:
        for topic in (*member.assignment, *member.target_assignment):
            named.setdefault(topic.topic_id, topic.topic)
    records.append(
        ConsumerGroupPartitionMetadata(
            group=group,
            topics=tuple(
                TopicMetadata(UUID(topic_id), name, partition_counts[name], ())
                for topic_id, name in sorted(named.items())
                if name in partition_counts
            ),
        )
    )
    seen: set[str] = set()
    for member in sorted(described.members, key=lambda m: m.member_id):
        metadata = ConsumerGroupMemberMetadata(
            group=group,
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=-1,  # not in the answer; nothing is derived from it
            server_assignor=None,
        )
        if member.member_id in seen:
            raise RecordRejected(
                type(metadata).__name__, "duplicate-member", "member_id", member.member_id, "member ids are distinct"
            )
        seen.add(member.member_id)
        records.append(metadata)
        records.append(
            ConsumerGroupCurrentMemberAssignment(
                group=group,
                member_id=member.member_id,
                member_epoch=member.member_epoch,
                previous_member_epoch=-1,  # neither is in the answer, nor derived
                state=0,
                assigned_partitions=_topic_partitions(member.assignment),
                partitions_pending_revocation=(),
            )
        )
    events = [event for record in records for event in checked_events(record)]
    events.append(_target_assignment(described))
    state: ConsumerGroupState | None = None
    for event in events:
        state = fold(state, event)
    assert state is not None  # the epoch's event makes one
    return state, _changes(previous, state, events)


def _topic_partitions(topics: tuple[AssignedTopic, ...]) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(UUID(topic.topic_id), topic.partitions) for topic in topics)


def _target_assignment(described: DescribedConsumerGroup) -> ConsumerGroupTargetAssignment:
    """The answer's assignment epoch and assignor, held to the rules an epoch and a string are held to."""
    where = "ConsumerGroupTargetAssignmentMetadata"
    if described.assignment_epoch < 0:
        raise RecordRejected(
            where, "epoch-negative", "assignment_epoch", described.assignment_epoch, "an assignment epoch is >= 0"
        )
    if len(described.assignor.encode()) > MAX_STRING_BYTES:
        raise RecordRejected(
            where,
            "string-too-long",
            "assignor_name",
            described.assignor,
            f"Kafka writes strings of at most {MAX_STRING_BYTES} bytes",
        )
    return ConsumerGroupTargetAssignment(
        group=described.group,
        assignment_epoch=described.assignment_epoch,
        assignor=described.assignor or None,
        members=tuple(sorted(member.member_id for member in described.members)),
    )


def _changes(
    previous: ConsumerGroupState | None, state: ConsumerGroupState, events: list[DerivedEvent]
) -> list[DerivedEvent]:
    """Those of ``events`` (which make ``state`` from nothing) that change ``previous``, after a leave for
    each member ``previous`` has and ``state`` has not."""
    if previous is None:
        return events
    before = previous.members
    changed: list[DerivedEvent] = [
        ConsumerGroupMemberLeft(group=state.group, member_id=member_id)
        for member_id in sorted(before.keys() - state.members.keys())
    ]
    for event in events:
        match event:
            case ConsumerGroupEpoch():
                same = previous.epoch == state.epoch
            case ConsumerGroupTargetAssignment():
                same = (previous.assignment_epoch, previous.assignor, previous.members.keys()) == (
                    state.assignment_epoch,
                    state.assignor,
                    state.members.keys(),
                )
            case ConsumerGroupTopics():
                same = previous.topics == state.topics
            case ConsumerGroupMember():
                same = _metadata(before.get(event.member_id)) == _metadata(state.members[event.member_id])
            case ConsumerGroupMemberAssignment():
                same = _held(before.get(event.member_id)) == _held(state.members[event.member_id])
            case _:
                same = False
        if not same:
            changed.append(event)
    return changed


def _metadata(member: ConsumerGroupMemberState | None) -> tuple[Any, ...] | None:
    if member is None:
        return None
    return (
        member.group_instance_id,
        member.client_id,
        member.client_host,
        member.topics,
        member.topic_regex,
        member.server_assignor,
        member.rack,
    )


def _held(member: ConsumerGroupMemberState | None) -> tuple[Any, ...] | None:
    return None if member is None else (member.member_epoch, member.partitions)


def poll(previous: Mapping[str, GroupView], answers: GroupAnswers) -> PollResult:
    """The next view and the derived events of what changed between ``previous`` and ``answers``.

    The contract, group by group (in group order):

    - A group in ``previous`` that is no longer listed, or is described as
      ``Dead`` (by the API that describes it), is gone: an
      :class:`OffsetDeleted` for each partition it had committed on, then a
      :class:`GroupDeleted`; it leaves the view.
    - A group listed as on the consumer protocol (KIP-848) that
      ConsumerGroupDescribe answered gets the events of what changed in it
      (:func:`consumer_group_events`, first, before its offsets); what
      DescribeGroups answered of it is ignored. Not answered, or breaking a
      rule, it gets none, and its state in the view stands (none, if it was
      never described: then it has no assignment, and its members are unknown).
    - Otherwise a described ``consumer`` group in a settled state
      (:data:`SETTLED_STATES`) whose :func:`group_assigned` differs from the
      view's gets a :class:`GroupAssigned` (first, before its offsets). Other
      protocol types get none, as with the ``offsets-topic`` source.
    - For a group OffsetFetch answered: an :class:`OffsetCommitted` for each
      partition whose committed offset is new or changed (``commit_timestamp``
      = ``answers.polled_at``), an :class:`OffsetDeleted` for each that no
      longer has one. A partition answered with an error, or with an offset
      that breaks a rule, keeps the offset the view had (none if it had none).
    - What an API did not answer for a listed group stays as ``previous`` had it,
      and so does what breaks a rule (reported in :attr:`PollResult.rejected`).

    So polling an unchanged cluster again yields no events, and the same view.
    """
    view: dict[str, GroupView] = {}
    events: list[DerivedEvent] = []
    malformed: list[MalformedMetadata] = []
    rejected: list[RejectedAnswer] = []
    for group in sorted(previous.keys() | answers.listed.keys()):
        seen = previous.get(group, GroupView())
        listed = answers.listed.get(group)
        consumer_protocol = listed is not None and listed.group_type == CONSUMER_GROUP_TYPE
        described = None if consumer_protocol else answers.described.get(group)
        consumer_described = answers.consumer_described.get(group) if consumer_protocol else None
        dead = any(answer is not None and answer.state == DEAD_STATE for answer in (described, consumer_described))
        if listed is None or dead:
            if group in previous:
                events += _deleted(group, seen)
            continue
        assignment, consumer_group = seen.assignment, seen.consumer_group
        assigned: GroupAssigned | None = None
        bad: list[MalformedMetadata] = []
        try:
            if consumer_described is not None:
                consumer_group, changes = consumer_group_events(
                    seen.consumer_group, consumer_described, answers.partition_counts
                )
                events += changes
            elif (
                described is not None
                and described.protocol_type == CONSUMER_PROTOCOL_TYPE
                and described.state in SETTLED_STATES
            ):
                assigned, bad = group_assigned(described)
        except RecordRejected as exc:
            rejected.append(
                RejectedAnswer("ConsumerGroupDescribe" if consumer_protocol else "DescribeGroups", group, exc)
            )
        if assigned is not None and assigned != seen.assignment:
            assignment = assigned
            events.append(assigned)
            malformed += bad
        fetched = answers.committed.get(group)
        if fetched is None:
            committed: Mapping[TopicPartition, int] = seen.committed
        else:
            committed = _committed(group, fetched, seen.committed, answers.polled_at, rejected)
            events += _offset_changes(group, seen.committed, committed, answers.polled_at)
        view[group] = GroupView(assignment=assignment, committed=dict(committed), consumer_group=consumer_group)
    return PollResult(view, events, malformed, rejected)


def _committed(
    group: str,
    fetched: FetchedOffsets,
    before: Mapping[TopicPartition, int],
    polled_at: int,
    rejected: list[RejectedAnswer],
) -> dict[TopicPartition, int]:
    """The group's committed offsets after ``fetched``: each partition answered with an offset that passes
    the rules and is not -1 (no commit), and for each answered with an error or a broken rule, what
    ``before`` had (the rule broken added to ``rejected``)."""
    after: dict[TopicPartition, int] = {}
    standing = list(fetched.failed)
    for tp, offset in fetched.offsets.items():
        try:
            checked_commit(OffsetCommit(group, tp.topic, tp.partition, offset, "", polled_at, None, None, 3))
        except RecordRejected as exc:
            rejected.append(RejectedAnswer("OffsetFetch", group, exc))
            standing.append(tp)
            continue
        if offset >= 0:
            after[tp] = offset
    for tp in standing:
        if tp in before:
            after[tp] = before[tp]
    return after


def _deleted(group: str, seen: GroupView) -> list[DerivedEvent]:
    events: list[DerivedEvent] = [
        OffsetDeleted(group=group, topic=tp.topic, partition=tp.partition) for tp in sorted(seen.committed)
    ]
    events.append(GroupDeleted(group=group))
    return events


def _offset_changes(
    group: str, before: Mapping[TopicPartition, int], after: Mapping[TopicPartition, int], polled_at: int
) -> list[DerivedEvent]:
    events: list[DerivedEvent] = [
        OffsetDeleted(group=group, topic=tp.topic, partition=tp.partition)
        for tp in sorted(before.keys() - after.keys())
    ]
    events += [
        OffsetCommitted(group=group, topic=tp.topic, partition=tp.partition, offset=offset, commit_timestamp=polled_at)
        for tp, offset in sorted(after.items())
        if before.get(tp) != offset
    ]
    return events
