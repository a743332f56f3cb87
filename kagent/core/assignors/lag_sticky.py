"""kagent's lag-aware sticky assignor."""

from __future__ import annotations

import bisect
import heapq
from collections import Counter
from collections.abc import Mapping

from aiokafka.structs import TopicPartition

from kagent.core.assignors.placement import Placement, TieOrder, balance_counts, fill, lag_order
from kagent.core.assignors.problem import Assignment, Group
from kagent.core.table_keys import murmur2


class LagStickyAssignor:
    """kagent's `lag-sticky` strategy: balanced counts, then small lag peaks, then few moves.

    It fixes the known gaps of KAFKA-5337's lag assignor: totals are balanced
    across all topics rather than per topic, zero-lag partitions are spread by
    count instead of piling onto one member, owned partitions stay put when
    that costs little, and ties go by a stable hash instead of member id.

    Goals, in priority order, and what is guaranteed:

    1. Every subscribed partition is assigned to exactly one member subscribed
       to its topic.
    2. Counts are balanced: no member subscribed to a partition's topic holds
       two or more partitions fewer than the partition's member. With identical
       subscriptions every count is `n // m` or `n // m + 1`. Heterogeneous
       subscriptions are handled as KIP-49 does: topics with the fewest
       subscribers are placed first.
    3. The largest member lag is at most `(1 + tolerance) * B` (`tolerance`
       defaults to 0.05), where `B` is the largest member lag of the reference
       assignment: partitions in decreasing lag, each to the member with the
       fewest partitions, then the least lag (greedy largest-first, dealt in
       rounds). With identical subscriptions, lags sorted `l1 >= l2 >= ...`
       (0 beyond the last) and `m` members, the reference reaches
       `B <= mean + max(l1 - lm, l(m+1))`, hence `B <= 2 * LB`, where `LB`
       (`kagent.core.skew.balanced_lag_lower_bound`) is at least
       `max(mean, l1, lm + l(m+1))`: each round deals one partition to every
       member, the largest to the least loaded, so after a round the spread
       of member lags is at most the larger of the previous spread and the
       round's own spread (its largest minus its smallest lag). With
       heterogeneous subscriptions no bound on `B` is claimed.
    4. Among assignments meeting 1-3, few moves: owned partitions (see
       `Group.owners`) are kept, counts restored by moving unowned partitions
       first, and members above the cap exchange partitions with the least
       loaded member of their subscription class (with heterogeneous
       subscriptions, only swaps that keep goal 2). If that cannot meet the cap,
       the reference is used, as is or with its member lists permuted among
       members of the same subscription class to keep as many owned
       partitions as a greedy matching finds, whichever moves fewer. The
       result never moves more owned partitions than the reference does; if
       the owned partitions already form a complete assignment meeting 2 and
       3, nothing moves.
    5. Ties between otherwise equal members follow a stable hash of the member
       ids (Kafka's murmur2), rotated differently at each partition count, so
       no member always wins. The result depends only on the input.
    """

    name = "lag-sticky"

    def __init__(self, tolerance: float = 0.05) -> None:
        if tolerance < 0:
            raise ValueError(f"negative tolerance {tolerance}")
        self.tolerance = tolerance

    def assign(self, group: Group) -> Assignment:
        hashes = {member_id: murmur2(member_id.encode()) for member_id in group.member_ids}
        ties = TieOrder(sorted(group.member_ids, key=lambda m: (hashes[m], m)), rotate=True)
        reference = _place(group, ties, sticky=False)
        owners = group.owners
        if not owners:
            return reference.assignment()
        cap = (1 + self.tolerance) * max(reference.load.values(), default=0)
        sticky = _place(group, ties, sticky=True)
        feasible = _repair(sticky, cap, ties)
        if feasible and sticky.displaced == 0:
            return sticky.assignment()
        receivers, kept_as_is, kept_relabelled = _relabel(reference.partitions, owners, group, ties)
        if feasible and sticky.displaced <= len(owners) - max(kept_as_is, kept_relabelled):
            return sticky.assignment()
        if kept_as_is >= kept_relabelled:
            return reference.assignment()
        return {receivers[holder]: sorted(tps) for holder, tps in reference.partitions.items()}


def _place(group: Group, ties: TieOrder, sticky: bool) -> Placement:
    """Keep owned partitions if `sticky`, deal the rest in decreasing lag, restore count balance."""
    placement = Placement(group, weighted=True)
    if sticky:
        placement.keep()
    fill(placement, lag_order(group, placement.owners), ties)
    total = sum(len(tps) for tps in placement.partitions.values())
    typical_lag = sum(placement.load.values()) / total if total else 0
    balance_counts(placement, ties, typical_lag)
    return placement


def _subscription_classes(group: Group) -> list[list[str]]:
    """Members grouped by identical subscriptions, in member order."""
    classes: dict[tuple[str, ...], list[str]] = {}
    for member_id in group.member_ids:
        classes.setdefault(group.subscriptions[member_id], []).append(member_id)
    return list(classes.values())


def _repair(placement: Placement, cap: float, ties: TieOrder) -> bool:
    """Exchange partitions between members of a subscription class until no
    member's lag exceeds `cap`; whether that succeeded. Keeps goals 1 and 2 of
    a placement meeting them. Single moves are used only when all members
    share one subscription, where moving a partition from a member with one
    more partition keeps every count within one; otherwise only swaps, which
    leave every count as it is. Members of a class may differ by one
    partition, so a swap could hand the one holding more a partition whose
    topic has a subscriber holding two fewer than it; such swaps are skipped."""
    group = placement.group
    classes = _subscription_classes(group)
    if len(classes) == 1:
        return _repair_class(placement, classes[0], cap, ties, floor=None)
    floor = {topic: min(map(placement.count, subscribers)) for topic, subscribers in group.subscribers.items()}
    return all(_repair_class(placement, members, cap, ties, floor) for members in classes)


_Entry = tuple[int, TopicPartition]


def _repair_class(
    placement: Placement, members: list[str], cap: float, ties: TieOrder, floor: Mapping[str, int] | None
) -> bool:
    """`_repair` within one subscription class. `floor` is None when every
    member shares one subscription (single moves allowed); otherwise it maps
    each topic to the fewest partitions any of its subscribers holds, which
    swaps leave as it is."""
    load, count, position = placement.load, placement.count, ties.position
    by_lag: dict[str, list[_Entry]] = {}

    def sorted_by_lag(member_id: str) -> list[_Entry]:
        if member_id not in by_lag:
            by_lag[member_id] = sorted((placement.lag_of(tp), tp) for tp in placement.partitions[member_id])
        return by_lag[member_id]

    def receivable(member_id: str, receiver: str) -> list[_Entry]:
        """`member_id`'s partitions, by lag, that `receiver` may take and stay locally balanced."""
        entries = sorted_by_lag(member_id)
        if floor is None or count(receiver) <= count(member_id):
            return entries
        return [entry for entry in entries if floor[entry[1].topic] >= count(receiver) - 1]

    def transfer(entry: _Entry, source: str, target: str) -> None:
        placement.move(entry[1], source, target)
        sorted_by_lag(source).remove(entry)
        bisect.insort(sorted_by_lag(target), entry)

    most = [(-load[m], position[m], m) for m in members]
    least = [(load[m], position[m], m) for m in members]
    heapq.heapify(most)
    heapq.heapify(least)
    # Every exchange lowers the total excess over `cap` by at least 1, so this
    # ends; the bound only caps the work on pathological lags.
    for _ in range(sum(count(m) for m in members) + 1):
        while -most[0][0] != load[most[0][2]]:
            heapq.heappop(most)
        while least[0][0] != load[least[0][2]]:
            heapq.heappop(least)
        source, target = most[0][2], least[0][2]
        if load[source] <= cap:
            return True
        exchange = _best_exchange(
            receivable(source, target),
            receivable(target, source),
            need=load[source] - cap,
            room=cap - load[target],
            may_move=floor is None and count(source) > count(target),
        )
        if exchange is None:
            return False
        give, take = exchange
        transfer(give, source, target)
        if take is not None:
            transfer(take, target, source)
        for member_id in (source, target):
            heapq.heappush(most, (-load[member_id], position[member_id], member_id))
            heapq.heappush(least, (load[member_id], position[member_id], member_id))
    return False


def _best_exchange(
    give_from: list[_Entry], take_from: list[_Entry], need: float, room: float, may_move: bool
) -> tuple[_Entry, _Entry | None] | None:
    """The exchange lowering the loaded member's lag by `delta` with
    `0 < delta <= room`: preferably `delta >= need` (one exchange suffices),
    then a move over a swap, then the smallest such `delta`; failing that, the
    largest `delta`. `give_from` and `take_from` are sorted by lag."""
    lags = [lag for lag, _ in give_from]
    candidates: list[tuple[tuple[float, ...], _Entry, _Entry | None]] = []

    def consider(take: _Entry | None) -> None:
        base = 0 if take is None else take[0]
        swap = take is not None
        i = bisect.bisect_left(lags, base + need)
        if i < len(lags) and lags[i] - base <= room:
            candidates.append(((0, swap, lags[i] - base), give_from[i], take))
        j = bisect.bisect_right(lags, base + room) - 1
        if j >= 0 and lags[j] > base:
            candidates.append(((1, base - lags[j], swap), give_from[j], take))

    if may_move:
        consider(None)
    for entry in take_from:
        consider(entry)
    if not candidates:
        return None
    _, give, take = min(candidates, key=lambda candidate: candidate[0])
    return give, take


def _relabel(
    reference: Assignment, owners: Mapping[TopicPartition, str], group: Group, ties: TieOrder
) -> tuple[dict[str, str], int, int]:
    """Hand the reference's member lists to members of the same subscription
    class so that owned partitions stay: a greedy matching on the number of
    owned partitions in each list. Member lags and counts stay the same
    multiset within each class, so goals 1-3 still hold.

    Returns which member receives each member's list, and how many owned
    partitions stay with their owner in the reference as is and relabelled."""
    receivers: dict[str, str] = {}
    kept_as_is = kept_relabelled = 0
    position = ties.position
    for members in _subscription_classes(group):
        in_class = set(members)
        overlap = {
            holder: Counter(owner for owner in map(owners.get, reference[holder]) if owner in in_class)
            for holder in members
        }
        kept_as_is += sum(overlap[holder][holder] for holder in members)
        pairs = sorted(
            (-count, position[holder], position[owner], holder, owner)
            for holder, counts in overlap.items()
            for owner, count in counts.items()
        )
        taken: set[str] = set()
        for negated, _, _, holder, owner in pairs:
            if holder not in receivers and owner not in taken:
                receivers[holder] = owner
                taken.add(owner)
                kept_relabelled -= negated
        holders = sorted((m for m in members if m not in receivers), key=position.__getitem__)
        free = sorted((m for m in members if m not in taken), key=position.__getitem__)
        receivers.update(zip(holders, free, strict=True))
    return receivers, kept_as_is, kept_relabelled
