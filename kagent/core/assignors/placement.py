"""Building blocks shared by the strategies that place partitions one by one.

A `Placement` is an assignment under construction that knows each member's
lag total and the previous owners. `fill` hands out partitions greedily; `balance_counts` then moves
partitions until no member holds two or more partitions more than another
member that could take one of them. Nothing here loops over partitions x
members.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from aiokafka.structs import TopicPartition

from kagent.core.assignors.problem import Assignment, Group

_MASK = 0xFFFFFFFF


def salted(hashed: int, salt: int) -> int:
    """Mix `salt` into a 32-bit hash, so that orders by hash differ per salt."""
    return (((hashed ^ (salt * 0x9E3779B1)) & _MASK) * 0x85EBCA6B) & _MASK


class TieOrder:
    """Orders members that are otherwise equal, possibly differently at each
    partition count ("level"): the members in a fixed order, cyclically
    rotated by an offset that depends on the level when `rotate` is set."""

    def __init__(self, members: list[str], rotate: bool) -> None:
        self.position = {member_id: i for i, member_id in enumerate(members)}
        self.rotate = rotate

    def offset(self, level: int) -> int:
        return salted(level, level) % len(self.position) if self.rotate else 0

    def key(self, member_id: str, level: int) -> int:
        return (self.position[member_id] - self.offset(level)) % len(self.position)


class Placement:
    """Partitions per member, with each member's lag total (all 0 unless
    `weighted`) and how many partitions are away from their owner."""

    def __init__(self, group: Group, weighted: bool) -> None:
        self.group = group
        self.weighted = weighted
        self.partitions: Assignment = {member_id: [] for member_id in group.member_ids}
        self.load: dict[str, int] = dict.fromkeys(group.member_ids, 0)
        self.owners: Mapping[TopicPartition, str] = {}
        self.displaced = 0
        """How many partitions of `owners` are not with their owner."""

    def lag_of(self, tp: TopicPartition) -> int:
        return self.group.lag_of(tp) if self.weighted else 0

    def keep(self) -> None:
        """Give every member the partitions it owns (`Group.owned`), before anything else."""
        self.owners = self.group.owners
        for member_id, tps in self.group.owned.items():
            self.partitions[member_id] = list(tps)
            if self.weighted:
                self.load[member_id] = self.group.owned_lag[member_id]

    def add(self, member_id: str, tp: TopicPartition) -> None:
        self.partitions[member_id].append(tp)
        self.load[member_id] += self.lag_of(tp)

    def move(self, tp: TopicPartition, source: str, target: str) -> None:
        self.partitions[source].remove(tp)
        self.load[source] -= self.lag_of(tp)
        self.add(target, tp)
        owner = self.owners.get(tp)
        self.displaced += (owner == source) - (owner == target)

    def count(self, member_id: str) -> int:
        return len(self.partitions[member_id])

    def assignment(self) -> Assignment:
        """Each member's partitions, sorted."""
        return {member_id: sorted(tps) for member_id, tps in self.partitions.items()}


class Deck(NamedTuple):
    """Partitions in the order they are to be handed out, with their lags."""

    partitions: list[TopicPartition]
    lags: list[int]


def _covers_all(group: Group, exclude: Mapping[TopicPartition, object]) -> bool:
    """Whether `exclude`, which holds subscribed partitions only, holds them all."""
    return len(exclude) == sum(group.partitions[topic] for topic in group.subscribers)


def fair_order(group: Group, exclude: Mapping[TopicPartition, object]) -> Deck:
    """The subscribed partitions not in `exclude` (subscribed partitions, e.g.
    `Group.owners`) in KIP-49's order: topics with the fewest subscribers
    first, then with more partitions first, then by name; each topic's
    partitions in order. Lags are left out (0): the strategies using this
    order ignore lag."""
    if _covers_all(group, exclude):
        return Deck([], [])
    topics = sorted(group.subscribers, key=lambda t: (len(group.subscribers[t]), -group.partitions[t], t))
    partitions = [tp for topic in topics for tp in group.topic_partitions(topic) if tp not in exclude]
    return Deck(partitions, [0] * len(partitions))


def lag_order(group: Group, exclude: Mapping[TopicPartition, object]) -> Deck:
    """The subscribed partitions not in `exclude` (subscribed partitions, e.g.
    `Group.owners`): topics with the fewest subscribers first (KIP-49), then
    in decreasing lag, then in partition order."""
    if _covers_all(group, exclude):
        return Deck([], [])
    tps: list[TopicPartition] = []
    lags: list[int] = []
    for topic in group.subscribers:
        tps += group.topic_partitions(topic)
        lags += group.lag_by_topic[topic]
    kept = [i for i, tp in enumerate(tps) if tp not in exclude] if exclude else range(len(tps))
    order = sorted(kept, key=lags.__getitem__, reverse=True)  # stable: ties stay in partition order
    if len({tuple(subscribers) for subscribers in group.subscribers.values()}) > 1:
        subscriber_count = {topic: len(subscribers) for topic, subscribers in group.subscribers.items()}
        order.sort(key=lambda i: subscriber_count[tps[i].topic])
    return Deck([tps[i] for i in order], [lags[i] for i in order])


def fill(placement: Placement, deck: Deck, ties: TieOrder) -> None:
    """Give each partition, in order, to the member subscribed to its topic with
    the fewest partitions, then the least lag, then the first in `ties` at its
    partition count."""
    classes = {tuple(subscribers) for subscribers in placement.group.subscribers.values()}
    if len(classes) == 1:
        _deal(placement, deck, list(classes.pop()), ties)
    else:
        _fill_by_heap(placement, deck.partitions, ties)


def _deal(placement: Placement, deck: Deck, members: list[str], ties: TieOrder) -> None:
    """`fill` when every partition has the same subscribers, in rounds: the
    members with the fewest partitions each take one, the next largest going
    to the least loaded; a member joins the rounds when its count is reached.
    Sorting members once per round replaces a heap operation per partition."""
    load, lists = placement.load, placement.partitions
    partitions, lags = deck
    position = ties.position.__getitem__
    joining: dict[int, list[str]] = {}
    for member_id in members:
        joining.setdefault(len(lists[member_id]), []).append(member_id)
    level = min(joining, default=0)
    active: list[str] = []
    start = 0
    while start < len(partitions) and (active or joining):
        active = sorted(active + joining.pop(level, []), key=position)
        split = bisect.bisect_left(active, ties.offset(level), key=position)
        ordered = sorted(active[split:] + active[:split], key=load.__getitem__)
        stop = start + len(ordered)
        for member_id, tp, lag in zip(ordered, partitions[start:stop], lags[start:stop], strict=False):
            lists[member_id].append(tp)
            load[member_id] += lag
        start = stop
        level += 1


def _fill_by_heap(placement: Placement, partitions: Iterable[TopicPartition], ties: TieOrder) -> None:
    """`fill` for any subscriptions: one heap per set of subscribers, keyed by
    (count, lag, tie); an entry only grows stale upwards, so a stale top is
    refreshed and pushed back until the top is current."""
    load, count = placement.load, placement.count
    heaps: dict[tuple[str, ...], list[tuple[int, int, int, str]]] = {}
    heap_of: dict[str, list[tuple[int, int, int, str]]] = {}
    for topic, subscribers in placement.group.subscribers.items():
        members = tuple(subscribers)
        if members not in heaps:
            heaps[members] = [(count(m), load[m], ties.key(m, count(m)), m) for m in members]
            heapq.heapify(heaps[members])
        heap_of[topic] = heaps[members]
    for tp in partitions:
        heap = heap_of[tp.topic]
        while True:
            held, lag, _, member_id = heap[0]
            if held == count(member_id) and lag == load[member_id]:
                break
            held, lag = count(member_id), load[member_id]
            heapq.heapreplace(heap, (held, lag, ties.key(member_id, held), member_id))
        placement.add(member_id, tp)
        heapq.heapreplace(heap, (held + 1, load[member_id], ties.key(member_id, held + 1), member_id))


def balance_counts(placement: Placement, ties: TieOrder, typical_lag: float = 0) -> None:
    """Move partitions until no member subscribed to a partition's topic holds
    two or more partitions fewer than the partition's member (Kafka's sticky
    balance condition). Moves partitions their member does not own first,
    then the one whose lag is closest to `typical_lag`; members are ordered
    by count, then by `ties`."""
    counts = [len(tps) for tps in placement.partitions.values()]
    if not counts or max(counts) - min(counts) <= 1:
        return
    held: dict[str, dict[str, list[TopicPartition]]] = {member_id: {} for member_id in placement.partitions}
    for member_id, tps in placement.partitions.items():
        for tp in tps:
            held[member_id].setdefault(tp.topic, []).append(tp)
    moved = True
    while moved:
        moved = False
        for topic in placement.group.subscribers:
            moved |= _balance_topic(placement, held, topic, ties, typical_lag)


def _balance_topic(
    placement: Placement,
    held: dict[str, dict[str, list[TopicPartition]]],
    topic: str,
    ties: TieOrder,
    typical_lag: float,
) -> bool:
    count, lag_of, owners = placement.count, placement.lag_of, placement.owners
    position = ties.position
    subscribers = placement.group.subscribers[topic]
    least = [(count(m), position[m], m) for m in subscribers]
    most = [(-count(m), position[m], m) for m in subscribers if held[m].get(topic)]
    heapq.heapify(least)
    heapq.heapify(most)
    moved = False
    while least and most:
        if least[0][0] != count(least[0][2]):
            heapq.heappop(least)
            continue
        if -most[0][0] != count(most[0][2]) or not held[most[0][2]].get(topic):
            heapq.heappop(most)
            continue
        source, target = most[0][2], least[0][2]
        if count(source) - count(target) < 2:
            break
        candidates = held[source][topic]
        tp = min(candidates, key=lambda tp: (owners.get(tp) == source, abs(lag_of(tp) - typical_lag), tp))
        candidates.remove(tp)
        held[target].setdefault(topic, []).append(tp)
        placement.move(tp, source, target)
        moved = True
        for member_id in (source, target):
            heapq.heappush(least, (count(member_id), position[member_id], member_id))
            if held[member_id].get(topic):
                heapq.heappush(most, (-count(member_id), position[member_id], member_id))
    return moved
