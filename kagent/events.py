"""Derived events: what kagent keeps of ``__consumer_offsets``, as typed records keyed by group.

The ``offsets-topic`` source turns each decoded coordinator record into zero or
more of these (:func:`derive`); the ``admin-api`` source builds the same events
from group APIs. They travel on the derived-events topic as JSON, keyed by
group, so every event of a group reaches the worker that holds that group.
One record of that topic is a :class:`DerivedEvents`: one group's events in
the order they happened. A consumer commits all its partitions in one
request, which Kafka writes as consecutive records, so one record of the
topic usually carries many events; this is what lets a worker keep up with
``__consumer_offsets`` (a Faust stream costs about 80 µs per record it
delivers, whatever the record holds).

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field, model_validator

from kagent.consumer_offsets import (
    Assignment as ConsumerProtocolAssignment,
)
from kagent.consumer_offsets import (
    GroupMetadata,
    GroupTombstone,
    OffsetCommit,
    OffsetTombstone,
    Record,
    Subscription,
)

__all__ = [
    "DerivedEvent",
    "DerivedEvents",
    "GroupAssigned",
    "GroupDeleted",
    "MemberAssignment",
    "OffsetCommitted",
    "OffsetDeleted",
    "PartitionRef",
    "by_group",
    "decode_events",
    "derive",
    "encode_events",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PartitionRef(_Frozen):
    """One partition of one topic, as JSON subscribers see it."""

    topic: str
    partition: int = Field(ge=0)

    @property
    def topic_partition(self) -> TopicPartition:
        """The same partition as aiokafka's ``TopicPartition``."""
        return TopicPartition(self.topic, self.partition)


class OffsetCommitted(_Frozen):
    """A group committed ``offset`` (the next record it will read) on a partition."""

    kind: Literal["offset-committed"] = "offset-committed"
    group: str
    topic: str
    partition: int = Field(ge=0)
    offset: int
    commit_timestamp: int
    """Milliseconds since the epoch, as the coordinator stamped the commit."""
    leader_epoch: int | None = None


class OffsetDeleted(_Frozen):
    """The committed offset of a group on a partition was deleted or expired (a tombstone)."""

    kind: Literal["offset-deleted"] = "offset-deleted"
    group: str
    topic: str
    partition: int = Field(ge=0)


class MemberAssignment(_Frozen):
    """One member of a classic consumer group and the partitions it was assigned."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str
    client_host: str
    topics: tuple[str, ...] = ()
    """The topics it subscribed to."""
    partitions: tuple[PartitionRef, ...] = ()


class GroupAssigned(_Frozen):
    """A consumer group completed a rebalance: its generation, assignor and members' assignments."""

    kind: Literal["group-assigned"] = "group-assigned"
    group: str
    generation: int
    protocol: str | None
    """The assignor the group chose (``range``, ``roundrobin``, ``cooperative-sticky``, ...)."""
    leader: str | None
    state_timestamp: int | None = None
    """Milliseconds since the epoch of the group's last state change, when the record has it."""
    members: tuple[MemberAssignment, ...] = ()


class GroupDeleted(_Frozen):
    """The group's metadata was deleted (a tombstone): it is gone."""

    kind: Literal["group-deleted"] = "group-deleted"
    group: str


DerivedEvent = Annotated[
    OffsetCommitted | OffsetDeleted | GroupAssigned | GroupDeleted,
    Field(discriminator="kind"),
]
"""Any derived event; ``kind`` tells which."""

class DerivedEvents(_Frozen):
    """One record of the derived-events topic: events of one group, oldest first."""

    group: str
    events: tuple[DerivedEvent, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_group(self) -> DerivedEvents:
        strays = sorted({event.group for event in self.events} - {self.group})
        if strays:
            raise ValueError(f"events of groups {strays} in a record of group {self.group!r}")
        return self


def by_group(events: Iterable[DerivedEvent]) -> list[DerivedEvents]:
    """``events`` as one :class:`DerivedEvents` per group, groups in order of first
    appearance, each group's events in their order."""
    grouped: dict[str, list[DerivedEvent]] = {}
    for event in events:
        grouped.setdefault(event.group, []).append(event)
    return [DerivedEvents(group=group, events=tuple(events)) for group, events in grouped.items()]


def encode_events(events: DerivedEvents) -> bytes:
    """The JSON bytes of ``events`` as a record of the derived-events topic."""
    return events.model_dump_json().encode()


def decode_events(data: bytes) -> DerivedEvents:
    """Parse a record of the derived-events topic; raises ``pydantic.ValidationError``."""
    return DerivedEvents.model_validate_json(data)


def derive(record: Record) -> list[DerivedEvent]:
    """The derived events of one decoded ``__consumer_offsets`` record.

    Offset commits and their tombstones map one to one. Group metadata of a
    group whose protocol type is ``consumer`` becomes one :class:`GroupAssigned`
    with each member's subscribed topics and assigned partitions; groups of
    other protocol types (Connect, Streams' own) and records kagent does not
    track (KIP-848 and share or streams groups, unknown types) derive nothing.
    """
    match record:
        case OffsetCommit():
            return [
                OffsetCommitted(
                    group=record.group,
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                    commit_timestamp=record.commit_timestamp,
                    leader_epoch=record.leader_epoch,
                )
            ]
        case OffsetTombstone():
            return [OffsetDeleted(group=record.group, topic=record.topic, partition=record.partition)]
        case GroupMetadata() if record.protocol_type == "consumer":
            return [
                GroupAssigned(
                    group=record.group,
                    generation=record.generation,
                    protocol=record.protocol,
                    leader=record.leader,
                    state_timestamp=record.state_timestamp,
                    members=tuple(
                        MemberAssignment(
                            member_id=member.member_id,
                            group_instance_id=member.group_instance_id,
                            client_id=member.client_id,
                            client_host=member.client_host,
                            topics=_subscribed_topics(member.subscription),
                            partitions=_assigned_partitions(member.assignment),
                        )
                        for member in record.members
                    ),
                )
            ]
        case GroupTombstone():
            return [GroupDeleted(group=record.group)]
        case _:
            return []


def _subscribed_topics(subscription: Subscription | bytes | None) -> tuple[str, ...]:
    return tuple(subscription.topics) if isinstance(subscription, Subscription) else ()


def _assigned_partitions(assignment: ConsumerProtocolAssignment | bytes | None) -> tuple[PartitionRef, ...]:
    if not isinstance(assignment, ConsumerProtocolAssignment):
        return ()
    return tuple(PartitionRef(topic=tp.topic, partition=tp.partition) for tp in assignment.partitions)
