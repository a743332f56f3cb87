"""Kafka's StickyAssignor (KIP-54), with KAFKA-9987's constrained fast path."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from operator import itemgetter

from aiokafka.structs import TopicPartition

from kagent.core.assignors.placement import Deck, Placement, TieOrder, balance_counts, fill
from kagent.core.assignors.problem import Assignment, Group, java_order


class StickyAssignor:
    """Kafka's `sticky` strategy: balanced first, then as sticky as balance permits.

    Contract:
    - every subscribed partition is assigned to exactly one member subscribed to
      its topic;
    - balance: no partition's member holds two or more partitions more than
      another member subscribed to its topic; with identical subscriptions this
      means every count is within one of every other;
    - stickiness: a member keeps the partitions it validly owned (see
      `Group.owners`: claims resolved by generation, a partition claimed by
      several members in the highest generation taken from all of them)
      unless balance requires moving them; with identical subscriptions it
      keeps the largest number of owned partitions any balanced assignment
      can keep;
    - Kafka's answer: with identical subscriptions the result is the one
      Kafka's ConstrainedAssignmentBuilder computes (`constrained_assign`;
      without racks, from the claims as `Group.owners` resolves them); with
      any subscriptions it equals every exact assignment Kafka's own tests
      (AbstractStickyAssignorTest, StickyAssignorTest) assert;
    - determinism: the result depends only on the input.

    Identical subscriptions (Kafka's test: every member lists the same topics,
    existing or not) take KAFKA-9987's constrained algorithm: a few linear
    passes. Other groups keep every owned partition, give the rest out in
    Kafka's order (`kafka_order`) to the subscribed member with the fewest
    partitions (then the first by member id), and then move partitions
    (unowned ones first) while some member could take one from a member
    holding two or more partitions more. Kafka rebalances those groups with
    its own search (GeneralAssignmentBuilder's reassignments), whose answer
    this does not reproduce beyond the cases Kafka's tests assert.
    """

    name = "sticky"

    def assign(self, group: Group) -> Assignment:
        if identical_subscriptions(group):
            return constrained_assign(group)
        return general_assign(group)


def identical_subscriptions(group: Group) -> bool:
    """Kafka's test for the constrained algorithm: every member lists the same
    topics, whether they exist or not (`Group.identical_subscriptions` looks
    at existing topics only)."""
    return len({frozenset(member.topics) for member in group.members.values()}) <= 1


def constrained_assign(group: Group) -> Assignment:
    """Kafka's ConstrainedAssignmentBuilder (KAFKA-9987), step for step.

    With `n` partitions and `m` members every member gets `n // m` (the
    minimum) or one more (the maximum), and `n % m` members get the maximum.
    1. Members are met in Kafka's map order (`Group.hash_order`). Each keeps
       its owned partitions ordered by partition number, then topic: all of
       them if it owns fewer than the minimum; the maximum if it owns at least
       that many and fewer than `n % m` members met so far kept the maximum;
       else the minimum. Members left under the minimum are unfilled; those
       at the minimum may take one more while maximum places remain.
    2. The other partitions, by topic name then number, go round-robin to the
       unfilled members in member id order, a member leaving the round when
       it reaches the minimum; once none is under the minimum, each remaining
       partition goes to the next member that may take one more: those of
       step 1 in member id order, then those that reached the minimum in
       step 2, in the order they did.
    Each list in the result is sorted.
    """
    members = group.member_ids
    if not members:
        return {}
    topics = sorted(group.subscribers, key=java_order)
    rank = {topic: i for i, topic in enumerate(topics)}
    total = sum(group.partitions[topic] for topic in topics)
    minimum, extra = divmod(total, len(members))
    maximum = minimum + (extra > 0)
    assignment: Assignment = {}
    at_maximum = 0
    under: list[str] = []
    at_minimum: list[str] = []
    # Kafka orders owned partitions by partition, then topic (in Java's string order: Python's, for most names).
    by_partition = itemgetter(1, 0) if sorted(topics) == topics else lambda tp: (tp.partition, rank[tp.topic])
    for member_id in group.hash_order:
        owned = group.owned[member_id]
        if len(owned) < minimum:
            keep = len(owned)
            under.append(member_id)
        elif len(owned) >= maximum and at_maximum < extra:
            keep = maximum
            at_maximum += 1
            if at_maximum == extra:
                at_minimum.clear()
        else:
            keep = minimum
            if at_maximum < extra:
                at_minimum.append(member_id)
        assignment[member_id] = sorted(owned, key=by_partition)[:keep] if len(owned) > keep else list(owned)
    kept = {tp for tps in assignment.values() for tp in tps}
    free = [tp for topic in topics for tp in group.topic_partitions(topic) if tp not in kept]
    under.sort(key=java_order)
    _deal_round_robin(assignment, free, under, deque(sorted(at_minimum, key=java_order)), minimum)
    for tps in assignment.values():
        tps.sort()
    return assignment


def _deal_round_robin(
    assignment: Assignment, free: list[TopicPartition], under: list[str], at_minimum: deque[str], minimum: int
) -> None:
    """Step 2 of `constrained_assign`: Kafka's assignRoundRobin. `under`
    (members under the minimum) is walked cyclically; a member reaching the
    minimum leaves it for the end of `at_minimum`, whose head takes a
    partition whenever `under` is empty."""
    position = 0
    for tp in free:
        if position < len(under):
            member_id = under[position]
            position += 1
        elif under:
            member_id = under[0]
            position = 1
        else:
            member_id = at_minimum.popleft()  # the quotas add up to the partitions: never empty here
        assignment[member_id].append(tp)
        if len(assignment[member_id]) == minimum:
            position -= 1
            del under[position]
            at_minimum.append(member_id)


def kafka_order(group: Group, exclude: Mapping[TopicPartition, object]) -> Deck:
    """The subscribed partitions not in `exclude` in the order Kafka's
    GeneralAssignmentBuilder hands them out: topics with the fewest
    subscribers first, then by name; each topic's partitions in order."""
    topics = sorted(group.subscribers, key=lambda topic: (len(group.subscribers[topic]), java_order(topic)))
    partitions = [tp for topic in topics for tp in group.topic_partitions(topic) if tp not in exclude]
    return Deck(partitions, [0] * len(partitions))


def general_assign(group: Group) -> Assignment:
    """Keep owned partitions, fill in Kafka's order, then restore balance."""
    placement = Placement(group, weighted=False)
    placement.keep()
    ties = TieOrder(group.member_ids, rotate=False)
    fill(placement, kafka_order(group, exclude=placement.owners), ties)
    balance_counts(placement, ties)
    return placement.assignment()
