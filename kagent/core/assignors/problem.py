"""The input every strategy assigns from: a consumer group and its topics.

`Group` validates what a caller passes to `kagent.core.assignors.assign` once, so
that each strategy can trust its input: topic partition counts, the members
with their subscriptions and previously owned partitions, and the lag of each
partition.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from aiokafka.structs import TopicPartition

Assignment = dict[str, list[TopicPartition]]
"""Member id to the partitions assigned to it."""


@dataclass(frozen=True)
class Member:
    """A member of a consumer group as its JoinGroup subscription describes it.

    `topics` are the topics it subscribes to, `owned` the partitions it owned in
    generation `generation` (-1: unknown). `rack` is carried for completeness:
    the input has no partition racks, so no strategy here is rack-aware.
    `group_instance_id` makes the member static (KIP-345).
    """

    topics: Collection[str]
    owned: Collection[TopicPartition] = ()
    generation: int = -1
    rack: str | None = None
    group_instance_id: str | None = None


def java_order(text: str) -> bytes:
    """Sort key equal to Java's `String.compareTo` (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def java_hash_code(text: str) -> int:
    """Java's `String.hashCode` as an unsigned 32-bit number: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units."""
    units = text.encode("utf-16-be", "surrogatepass")
    hashed = 0
    for i in range(0, len(units), 2):
        hashed = (hashed * 31 + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return hashed


def java_hash_map_order(keys: Collection[str]) -> list[str]:
    """`keys` in the order Java iterates a `HashMap` that was filled with them by `put`.

    A `HashMap` created with the default capacity (16) doubles its table when
    a put takes it over three quarters full, and iterates bucket by bucket;
    a key's bucket is its `hashCode` folded (`h ^ (h >>> 16)`) and masked to
    the table size. Keys in the same bucket iterate in the order they were
    put, which only the caller knew: here they keep Java's string order
    (equal 32-bit hashes of distinct member ids are rare)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        hashed = java_hash_code(key)
        return (hashed ^ (hashed >> 16)) & (capacity - 1)

    return sorted(keys, key=lambda key: (bucket(key), java_order(key)))


class Group:
    """A validated assignment problem.

    `partitions` maps each topic to its partition count; `members` are the
    group's members; `lag` holds the lag of any partition that has one, the
    others have lag 0. A member's subscription to a topic missing from
    `partitions` is ignored. Raises `ValueError` naming a negative partition
    count, a lag for an unknown partition, or a negative lag.
    """

    def __init__(
        self,
        partitions: Mapping[str, int],
        members: Mapping[str, Member],
        lag: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        for topic, count in partitions.items():
            if count < 0:
                raise ValueError(f"negative partition count {count} for topic {topic!r}")
        for member_id, member in members.items():
            if isinstance(member.topics, str):
                raise ValueError(f"member {member_id!r}: topics must be a collection of names, not a string")
        self.partitions = partitions
        self.members = members
        self.lag: Mapping[TopicPartition, int] = {} if lag is None else lag
        self.lag_by_topic: dict[str, list[int]] = {topic: [0] * count for topic, count in partitions.items()}
        """Each topic's partition lags, indexed by partition."""
        self._given: dict[str, list[TopicPartition | None]] = {
            topic: [None] * count for topic, count in partitions.items()
        }
        for tp, value in self.lag.items():
            topic, partition = tp
            lags = self.lag_by_topic.get(topic)
            if lags is None or not 0 <= partition < len(lags):
                raise ValueError(f"lag given for unknown partition {tp}")
            if value < 0:
                raise ValueError(f"negative lag {value} for partition {tp}")
            lags[partition] = value
            self._given[topic][partition] = tp
        self.subscriptions: dict[str, tuple[str, ...]] = {
            member_id: tuple(sorted(topic for topic in set(member.topics) if topic in partitions))
            for member_id, member in members.items()
        }
        """Per member, the sorted topics it subscribes to that exist."""

    @cached_property
    def member_ids(self) -> list[str]:
        """Member ids in Java string order, the order Kafka sorts member ids in."""
        return sorted(self.members, key=java_order)

    @cached_property
    def subscribers(self) -> dict[str, list[str]]:
        """Each topic someone subscribes to, in name order, with its subscribers in `member_ids` order."""
        subscribers: dict[str, list[str]] = {}
        for member_id in self.member_ids:
            for topic in self.subscriptions[member_id]:
                subscribers.setdefault(topic, []).append(member_id)
        return dict(sorted(subscribers.items()))

    @cached_property
    def identical_subscriptions(self) -> bool:
        """Whether every member subscribes to the same existing topics."""
        return len(set(self.subscriptions.values())) <= 1

    def topic_partitions(self, topic: str) -> list[TopicPartition]:
        """The topic's partitions in order, reusing the caller's objects where `lag` has them."""
        given = self._given[topic]
        return [TopicPartition(topic, p) if tp is None else tp for p, tp in enumerate(given)]

    def subscribed_partitions(self) -> list[TopicPartition]:
        """Every partition of a subscribed topic, in topic then partition order."""
        return [tp for topic in self.subscribers for tp in self.topic_partitions(topic)]

    def lag_of(self, tp: TopicPartition) -> int:
        return self.lag_by_topic[tp.topic][tp.partition]

    @cached_property
    def hash_order(self) -> list[str]:
        """Member ids in the order Kafka's sticky assignors meet them: the
        iteration order of a Java `HashMap` keyed by member id (see
        `java_hash_map_order`)."""
        return java_hash_map_order(self.member_ids)

    @cached_property
    def holders(self) -> dict[TopicPartition, str]:
        """Each existing partition's previous holder, from the members' `owned` claims.

        Kafka's rule (AbstractStickyAssignor): every claim on a partition that
        exists counts, whether or not its member still subscribes to the
        topic. When several members claim a partition, the claim of the
        highest generation wins; if two or more members claim it in that
        highest generation, it is taken from all of them: no one holds it
        (see `contested`). Kafka meets the claims in its own map order and
        also invalidates a partition whose same-generation claims it met
        before a higher one; here the result does not depend on any order.
        The holder may no longer subscribe to the topic (then it is no owner).
        """
        return self._claims.holders

    @cached_property
    def owners(self) -> dict[TopicPartition, str]:
        """Each partition's previous owner: its holder (see `holders`), if the
        holder still subscribes to the topic. The partitions assignments keep
        for stickiness."""
        return self._claims.owners

    @cached_property
    def contested(self) -> frozenset[TopicPartition]:
        """Partitions two or more members claim in the highest generation any member claims them."""
        return frozenset(self._claims.contested)

    @cached_property
    def owned(self) -> dict[str, list[TopicPartition]]:
        """Each member's partitions by `owners`, in the order it listed them."""
        return self._claims.owned

    @cached_property
    def owned_lag(self) -> dict[str, int]:
        """Each member's total lag over its `owned` partitions."""
        lags = self.lag_by_topic
        return {
            member_id: sum(lags[topic][partition] for topic, partition in tps) for member_id, tps in self.owned.items()
        }

    @cached_property
    def _claims(self) -> _Claims:
        holders: dict[TopicPartition, str] = {}
        contested: set[TopicPartition] = set()
        held: dict[str, list[TopicPartition]] = {member_id: [] for member_id in self.member_ids}
        for member_id in self.member_ids:
            member = self.members[member_id]
            mine = held[member_id]
            for tp in member.owned:
                topic, partition = tp
                lags = self.lag_by_topic.get(topic)
                if lags is None or not 0 <= partition < len(lags):
                    continue
                before = len(holders)
                rival = holders.setdefault(tp, member_id)
                if len(holders) > before:  # the first claim: by far the most common case
                    mine.append(tp)
                elif rival != member_id:
                    generation = self.members[rival].generation
                    if member.generation > generation:
                        holders[tp] = member_id
                        contested.discard(tp)
                        held[rival].remove(tp)
                        mine.append(tp)
                    elif member.generation == generation:
                        contested.add(tp)
        for tp in contested:
            held[holders.pop(tp)].remove(tp)
        unsubscribed: list[TopicPartition] = []
        for member_id, tps in held.items():
            subscribed = self.subscriptions[member_id]
            if len(subscribed) < len(self.partitions):  # else every existing partition is of a subscribed topic
                topics = set(subscribed)
                if any(tp.topic not in topics for tp in tps):
                    unsubscribed += (tp for tp in tps if tp.topic not in topics)
                    held[member_id] = [tp for tp in tps if tp.topic in topics]
        owners = holders
        if unsubscribed:  # rare: otherwise the owners are the holders
            owners = dict(holders)
            for tp in unsubscribed:
                del owners[tp]
        return _Claims(holders, owners, contested, held)

    def empty_assignment(self) -> Assignment:
        return {member_id: [] for member_id in self.member_ids}


@dataclass(frozen=True)
class _Claims:
    """Claims resolved: the winning claim per partition (`holders`), those of
    subscribed members (`owners`, the same mapping when every holder
    subscribes), the contested partitions, and per member its owned
    partitions."""

    holders: dict[TopicPartition, str]
    owners: dict[TopicPartition, str]
    contested: set[TopicPartition]
    owned: dict[str, list[TopicPartition]]


class Assignor(Protocol):
    """A strategy: a name (Kafka's, where Kafka has one) and one pure `assign`."""

    name: str

    def assign(self, group: Group) -> Assignment: ...
