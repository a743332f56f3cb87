"""What kagent's assignors write into the consumer protocol and read from it, as bytes and plain data.

Every client library wraps the consumer protocol's JoinGroup metadata (``version``, the topics,
``user_data``) and SyncGroup assignment (``version``, partitions by topic, ``user_data``) in its own
types; the bytes in ``user_data`` and the group a leader assigns from are the same whichever
library it is. So the client adapters (aiokafka's :mod:`kagent.client.assignors` and
:mod:`kagent.client.applying`, kafka-python's :mod:`kagent.client.kafka_python`) unwrap their
library's types and share this module.

- JoinGroup ``user_data``: the partitions the member owns and the generation it owned them in, as
  ``StickyAssignorUserDataV1`` (aiokafka's and Java's sticky assignors write the same), optionally
  followed by a recommendation id the member asks for (a Kafka STRING). Readers of the sticky user
  data read its fields and ignore what follows.
- SyncGroup ``user_data``: the generation the leader stamped on the assignment (an INT32). Neither
  aiokafka nor kafka-python tells a custom assignor the group's generation, so the leader stamps
  one more than the highest generation any member reported; members echo it back at the next
  join, and a member that missed a rebalance reports an older one. That is what
  ``Member.generation`` needs to settle two members claiming one partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from io import BytesIO

from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
from aiokafka.protocol.types import Int32, String
from aiokafka.structs import TopicPartition

from kagent.core.assignors import Group, Member

__all__ = [
    "VERSION",
    "JoinedMember",
    "PartitionsOf",
    "by_topic",
    "generation_stamp",
    "join_user_data",
    "joined_group",
    "member_of",
    "requested_in",
    "stamped_generation",
]

log = logging.getLogger(__name__)

VERSION = 0
"""The consumer protocol version of the metadata and assignments kagent's assignors write."""

_REQUEST = String("utf-8")

PartitionsOf = Callable[[str], Collection[int] | None]
"""A topic's partition ids as the leader's cluster metadata has them (None: a topic it does not know);
``ClusterMetadata.partitions_for_topic`` of aiokafka and of kafka-python."""


@dataclass(frozen=True)
class JoinedMember:
    """A member's JoinGroup metadata as the leader receives it."""

    topics: Collection[str]
    user_data: bytes
    group_instance_id: str | None = None
    """Its static membership id (KIP-345), when the client passes it to the assignor (kafka-python does)."""


def join_user_data(owned: Iterable[TopicPartition], generation: int, requested: str | None = None) -> bytes:
    """A member's JoinGroup user data: the partitions it ``owned`` in ``generation`` (-1: none known), and
    the recommendation id it ``requested``, if any."""
    user_data: bytes = StickyAssignorUserDataV1(by_topic(owned), generation).encode()
    return user_data if requested is None else user_data + _REQUEST.encode(requested)


def requested_in(user_data: bytes) -> str | None:
    """The recommendation id JoinGroup ``user_data`` asks for; None if it asks for none or is not kagent's."""
    data = BytesIO(user_data)
    try:
        StickyAssignorUserDataV1.decode(data)
        requested: str | None = _REQUEST.decode(data) if data.tell() < len(user_data) else None
    except ValueError:
        return None
    return requested


def member_of(joined: JoinedMember) -> Member:
    """The member ``joined`` describes; user data it cannot read (logged) means nothing owned."""
    topics = list(joined.topics)
    if not joined.user_data:
        return Member(topics, group_instance_id=joined.group_instance_id)
    try:
        data = StickyAssignorUserDataV1.decode(joined.user_data)
    except (ValueError, UnicodeDecodeError):
        log.warning("ignoring unreadable assignor user data %r", joined.user_data)
        return Member(topics, group_instance_id=joined.group_instance_id)
    owned = [TopicPartition(topic, p) for topic, partitions in data.previous_assignment for p in partitions]
    return Member(topics, owned=owned, generation=data.generation, group_instance_id=joined.group_instance_id)


def joined_group(
    partitions_of: PartitionsOf,
    members: Mapping[str, JoinedMember],
    lag_source: Callable[[Collection[TopicPartition]], Mapping[TopicPartition, int]] | None = None,
) -> Group:
    """The group the leader assigns: ``members``, the partitions of the topics they subscribe to that
    ``partitions_of`` knows, and the lag ``lag_source`` gives for those partitions (a partition left out
    has lag 0, a negative lag counts as 0, and a lag of another partition is ignored: a bad answer must
    not break a rebalance)."""
    group_members = {member_id: member_of(joined) for member_id, joined in members.items()}
    partitions: dict[str, int] = {}
    for topic in sorted({topic for member in group_members.values() for topic in member.topics}):
        known = partitions_of(topic)
        if known is not None:
            partitions[topic] = len(known)
    if lag_source is None:
        return Group(partitions, group_members)
    subscribed = [TopicPartition(topic, p) for topic, count in partitions.items() for p in range(count)]
    lag = lag_source(subscribed)
    return Group(partitions, group_members, {tp: max(0, lag[tp]) for tp in subscribed if tp in lag})


def generation_stamp(members: Iterable[Member]) -> bytes:
    """The SyncGroup user data the leader of a group of ``members`` stamps on every member's assignment."""
    stamp: bytes = Int32.encode(max((member.generation for member in members), default=-1) + 1)
    return stamp


def stamped_generation(user_data: bytes) -> int | None:
    """The generation a SyncGroup assignment's ``user_data`` was stamped with; None if it is not a stamp."""
    if len(user_data) != 4:
        return None
    generation: int = Int32.decode(BytesIO(user_data))
    return generation


def by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """``partitions`` grouped by topic, in order, as the consumer protocol lists them."""
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return list(grouped.items())
