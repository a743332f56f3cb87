"""Group state from the group APIs: one poll's answers -> the derived events of what changed.

The ``admin-api`` source polls ListGroups, DescribeGroups and OffsetFetch
instead of reading ``__consumer_offsets``. This module turns what they
answered into the same derived events (:mod:`kagent.core.events`) the
``offsets-topic`` source emits, and only those of what changed since the
previous poll: :func:`poll` takes the previous poll's view (plain data) and
this poll's :class:`GroupAnswers`, and returns the next view and the events.

What the group APIs cannot say, and what the events carry instead:

- DescribeGroups has no generation in any version, so every
  :class:`~kagent.core.events.GroupAssigned` carries :data:`UNKNOWN_GENERATION`;
  nor a leader (None) or state timestamp (None).
- OffsetFetch has no commit time, so an :class:`~kagent.core.events.OffsetCommitted`
  carries the time of the poll that first saw the offset.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aiokafka.protocol.api import Response
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from pydantic import ValidationError

from kagent.core.consumer_offsets import DecodeError, decode_assignment, decode_subscription
from kagent.core.events import (
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    MemberAssignment,
    OffsetCommitted,
    OffsetDeleted,
    PartitionRef,
)

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "DEAD_STATE",
    "SETTLED_STATES",
    "UNKNOWN_GENERATION",
    "DescribedGroup",
    "DescribedMember",
    "GroupAnswers",
    "GroupError",
    "GroupView",
    "MalformedMetadata",
    "PollResult",
    "committed_offsets",
    "described_groups",
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

SETTLED_STATES = frozenset({"Stable", "Empty"})
"""Group states whose members and assignments are those of a completed generation.

In ``PreparingRebalance`` and ``CompletingRebalance`` the assignments are not
settled yet, and the previous view stands, as Kafka's coordinator writes a
group's metadata only when a generation completes.
"""

DEAD_STATE = "Dead"
"""The state DescribeGroups answers for a group that no longer exists."""


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
class GroupAnswers:
    """What the group APIs answered in one poll.

    A group in ``listed`` but missing from ``described`` or ``committed`` was
    not answered by that API this poll (an error, or not asked): what the
    previous poll saw of it stands. A group missing from ``listed`` is gone.
    """

    polled_at: int
    """Milliseconds since the epoch when the poll began."""
    listed: Mapping[str, str]
    """Every group to track (see :func:`tracked_groups`) -> its protocol type, from ListGroups."""
    described: Mapping[str, DescribedGroup] = field(default_factory=dict)
    """Groups DescribeGroups answered without error."""
    committed: Mapping[str, Mapping[TopicPartition, int]] = field(default_factory=dict)
    """Groups OffsetFetch answered -> their committed offsets (see :func:`committed_offsets`)."""


@dataclass(frozen=True)
class GroupView:
    """What the polls have seen of one group: its last settled assignment and its committed offsets."""

    assignment: GroupAssigned | None = None
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MalformedMetadata:
    """A member's subscription or assignment blob that failed to decode; the member is kept without it."""

    group: str
    member_id: str
    part: str
    """``subscription`` (the member metadata) or ``assignment``."""
    error: str


class PollResult(NamedTuple):
    """What :func:`poll` returns."""

    view: dict[str, GroupView]
    """The view to pass to the next poll."""
    events: list[DerivedEvent]
    """The derived events of what changed, in order, each for the derived-events topic keyed by its group."""
    malformed: list[MalformedMetadata]
    """Blobs that failed to decode in the assignments this poll announces (reported once per change)."""


def tracked_groups(listed: Iterable[tuple[str, str]], own_group: str) -> dict[str, str]:
    """ListGroups' ``(group, protocol type)`` pairs as a mapping, without kagent's own group."""
    return {group: protocol_type for group, protocol_type in listed if group != own_group}


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


def committed_offsets(answer: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    """The committed offsets in aiokafka's OffsetFetch answer; offset -1 (no commit there) is left
    out, and so is a partition below 0 (no :class:`OffsetCommitted` can hold it)."""
    return {tp: meta.offset for tp, meta in answer.items() if meta.offset >= 0 and tp.partition >= 0}


def group_assigned(described: DescribedGroup) -> tuple[GroupAssigned, list[MalformedMetadata]]:
    """The :class:`GroupAssigned` of a described ``consumer`` group, and the blobs that failed to decode.

    Members are ordered by member id. Each member's subscribed topics and
    assigned partitions come from its blobs; an empty blob (not given) leaves
    them empty, and so does a malformed one, which is also reported: one that
    does not decode, or an assignment the events cannot hold (a partition
    below 0). So one member's blob affects only that member.
    """
    members = []
    malformed = []
    for member in sorted(described.members, key=lambda m: m.member_id):
        topics: tuple[str, ...] = ()
        partitions: tuple[PartitionRef, ...] = ()
        try:
            if member.member_metadata:
                topics = decode_subscription(member.member_metadata).topics
        except DecodeError as exc:
            malformed.append(MalformedMetadata(described.group, member.member_id, "subscription", str(exc)))
        try:
            if member.member_assignment:
                partitions = tuple(
                    PartitionRef(topic=tp.topic, partition=tp.partition)
                    for tp in decode_assignment(member.member_assignment).partitions
                )
        except DecodeError as exc:
            malformed.append(MalformedMetadata(described.group, member.member_id, "assignment", str(exc)))
        except ValidationError as exc:
            malformed.append(MalformedMetadata(described.group, member.member_id, "assignment", _invalid(exc)))
        members.append(
            MemberAssignment(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                topics=topics,
                partitions=partitions,
            )
        )
    assigned = GroupAssigned(
        group=described.group,
        generation=UNKNOWN_GENERATION,
        protocol=described.protocol or None,
        leader=None,
        members=tuple(members),
    )
    return assigned, malformed


def _invalid(exc: ValidationError) -> str:
    """Pydantic's complaints on one line: ``partition: Input should be ... (got -1)``."""
    return "; ".join(
        f"{'.'.join(map(str, error['loc']))}: {error['msg']} (got {error['input']!r})" for error in exc.errors()
    )


def poll(previous: Mapping[str, GroupView], answers: GroupAnswers) -> PollResult:
    """The next view and the derived events of what changed between ``previous`` and ``answers``.

    The contract, group by group (in group order):

    - A group in ``previous`` that is no longer listed, or is described as
      ``Dead``, is gone: an :class:`OffsetDeleted` for each partition it had
      committed on, then a :class:`GroupDeleted`; it leaves the view.
    - A described ``consumer`` group in a settled state (:data:`SETTLED_STATES`)
      whose :func:`group_assigned` differs from the view's gets a
      :class:`GroupAssigned` (first, before its offsets). Other protocol types
      get none, as with the ``offsets-topic`` source.
    - For a group OffsetFetch answered: an :class:`OffsetCommitted` for each
      partition whose committed offset is new or changed (``commit_timestamp``
      = ``answers.polled_at``), an :class:`OffsetDeleted` for each that no
      longer has one.
    - What an API did not answer for a listed group stays as ``previous`` had it.

    So polling an unchanged cluster again yields no events, and the same view.
    """
    view: dict[str, GroupView] = {}
    events: list[DerivedEvent] = []
    malformed: list[MalformedMetadata] = []
    for group in sorted(previous.keys() | answers.listed.keys()):
        seen = previous.get(group, GroupView())
        described = answers.described.get(group)
        if group not in answers.listed or (described is not None and described.state == DEAD_STATE):
            if group in previous:
                events += _deleted(group, seen)
            continue
        assignment = seen.assignment
        if (
            described is not None
            and described.protocol_type == CONSUMER_PROTOCOL_TYPE
            and described.state in SETTLED_STATES
        ):
            assigned, bad = group_assigned(described)
            if assigned != seen.assignment:
                assignment = assigned
                events.append(assigned)
                malformed += bad
        committed = answers.committed.get(group)
        if committed is None:
            committed = seen.committed
        else:
            events += _offset_changes(group, seen.committed, committed, answers.polled_at)
        view[group] = GroupView(assignment=assignment, committed=dict(committed))
    return PollResult(view, events, malformed)


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
