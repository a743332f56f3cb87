"""A KIP-848 consumer group's state folded from its derived events.

A group on the consumer protocol (``group.protocol=consumer``, Kafka
3.7+/4.x) has no one record of its assignment, as a classic group has: the
coordinator writes the group's epoch, each member's metadata and each
member's current assignment as separate records, which
:func:`kagent.core.events.derive` turns into ``consumer-group-*`` events (the
``admin-api`` source makes the same events of what ConsumerGroupDescribe
answers, :mod:`kagent.core.group_polling`).
:func:`fold` applies them one by one to a :class:`ConsumerGroupState` (the
value of a changelog table keyed by group), and :func:`assignment` reads
from that state the group's current assignment in the classic
:class:`~kagent.core.events.GroupAssigned` shape the rest of kagent measures.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field

from kagent.core.events import (
    ConsumerGroupEpoch,
    ConsumerGroupMember,
    ConsumerGroupMemberAssignment,
    ConsumerGroupMemberLeft,
    ConsumerGroupRegex,
    ConsumerGroupRegexDeleted,
    ConsumerGroupTargetAssignment,
    ConsumerGroupTopics,
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    MemberAssignment,
    PartitionRef,
    TopicName,
)

__all__ = ["ConsumerGroupMemberState", "ConsumerGroupState", "assignment", "fold", "subscribed_topics"]

_NO_NAMES: Mapping[str, str] = MappingProxyType({})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConsumerGroupMemberState(_Frozen):
    """One member of a KIP-848 consumer group, as its metadata (type 5) and
    current assignment (type 8) records last described it.

    Either record may come first: until the metadata arrives, ``client_id``
    and ``client_host`` are None (Kafka's are never null) and the
    subscription fields are empty; until the assignment arrives,
    ``member_epoch`` is None and ``partitions`` empty.
    """

    group_instance_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None
    topics: tuple[str, ...] = ()
    """The topic names it subscribed to by name."""
    topic_regex: str | None = None
    """The regular expression it subscribed with, if any."""
    server_assignor: str | None = None
    """The server assignor it asked for; None for the broker's default, or when not said."""
    rack: str | None = None
    """The rack it is in; None when it gave none."""
    member_epoch: int | None = None
    partitions: dict[str, tuple[int, ...]] = Field(default_factory=dict)
    """Topic id -> the partitions of that topic it holds (assigned or pending revocation), sorted."""


class ConsumerGroupState(_Frozen):
    """A KIP-848 consumer group as its records so far describe it; JSON-serialisable."""

    group: str
    epoch: int | None = None
    """The group epoch (type 3); None until its record arrives."""
    assignment_epoch: int | None = None
    """The epoch of its target assignment; None until an event says it (ConsumerGroupDescribe does; the
    offsets topic's record type 6 is not derived)."""
    assignor: str | None = None
    """The server assignor the broker selected for the group, as ConsumerGroupDescribe says it; None
    when unknown (the offsets topic names it nowhere)."""
    topics: dict[str, TopicName] = Field(default_factory=dict)
    """Topic id -> the subscribed topic's name and partition count, from the last type 4 record
    (Kafka 4.1+ no longer writes it; then empty)."""
    members: dict[str, ConsumerGroupMemberState] = Field(default_factory=dict)
    """Member id -> the member."""
    regexes: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Regular expression members subscribed with -> the topics it matched when last resolved (type 16)."""


def fold(state: ConsumerGroupState | None, event: DerivedEvent) -> ConsumerGroupState | None:
    """``state`` (None: no state yet) with ``event`` applied.

    - :class:`~kagent.core.events.ConsumerGroupEpoch` sets the epoch;
    - :class:`~kagent.core.events.ConsumerGroupTargetAssignment` sets the assignment epoch and assignor,
      and drops the members it does not name (when it names them);
    - :class:`~kagent.core.events.ConsumerGroupTopics` replaces the topics (each record lists them all);
    - :class:`~kagent.core.events.ConsumerGroupMember` sets a member's metadata, keeping its assignment;
    - :class:`~kagent.core.events.ConsumerGroupMemberAssignment` sets a member's epoch and partitions,
      keeping its metadata; a member whose assignment comes before its metadata is kept
      without metadata until it arrives;
    - :class:`~kagent.core.events.ConsumerGroupMemberLeft` drops the member (a leave never creates a state);
    - :class:`~kagent.core.events.ConsumerGroupRegex` sets the topics a regular expression matches;
    - :class:`~kagent.core.events.ConsumerGroupRegexDeleted` forgets a regular expression (never creates a state);
    - :class:`~kagent.core.events.GroupDeleted` returns None;
    - any other event returns ``state`` unchanged.

    Each event that sets something creates the state when ``state`` is None. Raises
    ``ValueError`` for an event of a group other than ``state``'s.
    """
    if state is not None and event.group != state.group:
        raise ValueError(f"an event of group {event.group!r} folded into the state of group {state.group!r}")
    match event:
        case GroupDeleted():
            return None
        case ConsumerGroupEpoch():
            return _or_new(state, event.group).model_copy(update={"epoch": event.epoch})
        case ConsumerGroupTargetAssignment():
            current = _or_new(state, event.group)
            target: dict[str, object] = {"assignment_epoch": event.assignment_epoch, "assignor": event.assignor}
            if event.members is not None:
                kept = set(event.members)
                target["members"] = {member_id: m for member_id, m in current.members.items() if member_id in kept}
            return current.model_copy(update=target)
        case ConsumerGroupTopics():
            topics = {topic.topic_id: topic for topic in event.topics}
            return _or_new(state, event.group).model_copy(update={"topics": topics})
        case ConsumerGroupMember():
            metadata = {
                "group_instance_id": event.group_instance_id,
                "client_id": event.client_id,
                "client_host": event.client_host,
                "topics": event.topics,
                "topic_regex": event.topic_regex,
                "server_assignor": event.server_assignor,
                "rack": event.rack,
            }
            return _with_member(_or_new(state, event.group), event.member_id, metadata)
        case ConsumerGroupMemberAssignment():
            partitions: dict[str, list[int]] = {}
            for held in event.partitions:
                partitions.setdefault(held.topic_id, []).append(held.partition)
            held_now = {topic_id: tuple(sorted(numbers)) for topic_id, numbers in sorted(partitions.items())}
            update = {"member_epoch": event.member_epoch, "partitions": held_now}
            return _with_member(_or_new(state, event.group), event.member_id, update)
        case ConsumerGroupMemberLeft():
            if state is None or event.member_id not in state.members:
                return state
            members = {member_id: m for member_id, m in state.members.items() if member_id != event.member_id}
            return state.model_copy(update={"members": members})
        case ConsumerGroupRegex():
            regexes = {**_or_new(state, event.group).regexes, event.regex: event.topics}
            return _or_new(state, event.group).model_copy(update={"regexes": regexes})
        case ConsumerGroupRegexDeleted():
            if state is None or event.regex not in state.regexes:
                return state
            regexes = {regex: topics for regex, topics in state.regexes.items() if regex != event.regex}
            return state.model_copy(update={"regexes": regexes})
        case _:
            return state


def assignment(state: ConsumerGroupState, topic_names: Mapping[str, str] = _NO_NAMES) -> GroupAssigned | None:
    """The group's current assignment in kagent's classic shape, or None while a topic id has no name.

    - ``generation``: the group epoch, -1 while unknown;
    - ``protocol``: the server assignor the broker selected for the group
      (:attr:`ConsumerGroupState.assignor`) when known; otherwise the one all
      members asked for (``uniform``, ``range``), None if they differ, if one
      asked for none (the broker's default) or there are no members;
    - ``leader`` None: the consumer protocol has no leader;
    - ``group_protocol`` ``consumer``;
    - ``members``: those whose metadata has arrived, sorted by member id,
      each with its subscribed topics (those it named, then those its
      regular expression matched at its last resolution that it did not
      name) and the partitions it holds (assigned or pending revocation)
      sorted by topic name, then partition.

    A topic id is named by the state's topics (type 4) first, then by
    ``topic_names`` (topic id -> name, e.g. from cluster metadata). If a
    partition of a member it returns has a topic id neither names, it
    returns None: the caller resolves the id and asks again.
    """
    members: list[MemberAssignment] = []
    for member_id in sorted(state.members):
        member = state.members[member_id]
        if member.client_id is None or member.client_host is None:
            continue
        partitions: list[PartitionRef] = []
        for topic_id, numbers in member.partitions.items():
            topic = state.topics[topic_id].topic if topic_id in state.topics else topic_names.get(topic_id)
            if topic is None:
                return None
            partitions.extend(PartitionRef(topic=topic, partition=number) for number in numbers)
        partitions.sort(key=lambda ref: (ref.topic, ref.partition))
        members.append(
            MemberAssignment(
                member_id=member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                topics=subscribed_topics(state, member),
                partitions=tuple(partitions),
            )
        )
    assignors = {state.members[member.member_id].server_assignor for member in members}
    asked = assignors.pop() if len(assignors) == 1 else None
    return GroupAssigned(
        group=state.group,
        generation=-1 if state.epoch is None else state.epoch,
        protocol=state.assignor if state.assignor is not None else asked,
        leader=None,
        members=tuple(members),
        group_protocol="consumer",
    )


def subscribed_topics(state: ConsumerGroupState, member: ConsumerGroupMemberState) -> tuple[str, ...]:
    """The topics ``member`` of ``state`` subscribes to: those it named, then those its regular expression
    matched at its last resolution that it did not name."""
    matched = state.regexes.get(member.topic_regex, ()) if member.topic_regex is not None else ()
    return member.topics + tuple(topic for topic in matched if topic not in member.topics)


def _or_new(state: ConsumerGroupState | None, group: str) -> ConsumerGroupState:
    return ConsumerGroupState(group=group) if state is None else state


def _with_member(state: ConsumerGroupState, member_id: str, update: Mapping[str, object]) -> ConsumerGroupState:
    member = state.members.get(member_id, ConsumerGroupMemberState()).model_copy(update=dict(update))
    return state.model_copy(update={"members": {**state.members, member_id: member}})
