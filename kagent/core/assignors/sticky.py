"""Kafka's StickyAssignor (KIP-54), with KAFKA-9987's constrained fast path."""

from __future__ import annotations

from kagent.core.assignors.placement import Placement, TieOrder, balance_counts, fair_order, fill
from kagent.core.assignors.problem import Assignment, Group


class StickyAssignor:
    """Kafka's `sticky` strategy: balanced first, then as sticky as balance permits.

    Contract:
    - every subscribed partition is assigned to exactly one member subscribed to
      its topic;
    - balance: no partition's member holds two or more partitions more than
      another member subscribed to its topic; with identical subscriptions this
      means every count is within one of every other;
    - stickiness: a member keeps the partitions it validly owned (see
      `Group.owners`: claims resolved by generation) unless balance requires
      moving them; with identical subscriptions it keeps the largest number of
      owned partitions any balanced assignment can keep;
    - determinism: the result depends only on the input.

    Identical subscriptions take KAFKA-9987's constrained algorithm: a few
    linear passes. Other groups keep every owned partition, give the rest out
    in KIP-49's order to the subscribed member with the fewest partitions, and
    then move partitions (unowned ones first) while some member could take one
    from a member holding two or more partitions more.
    """

    name = "sticky"

    def assign(self, group: Group) -> Assignment:
        if group.identical_subscriptions:
            return constrained_assign(group)
        return general_assign(group)


def constrained_assign(group: Group) -> Assignment:
    """KAFKA-9987: with identical subscriptions every member gets `n // m` or
    `n // m + 1` partitions; the `n % m` larger quotas go to the members
    owning the most, each member keeps owned partitions up to its quota, and
    the remaining partitions are dealt round-robin to the members still
    under quota."""
    members = group.member_ids
    if not members:
        return {}
    partitions = list(group.subscribed_partitions())
    minimum, extra = divmod(len(partitions), len(members))
    claims = {member_id: sorted(tps) for member_id, tps in group.owned.items()}
    by_claims = sorted(members, key=lambda m: -len(claims[m]))
    quota = {member_id: minimum + (i < extra) for i, member_id in enumerate(by_claims)}
    assignment = {member_id: claims[member_id][: quota[member_id]] for member_id in members}
    kept = {tp for tps in assignment.values() for tp in tps}
    free = (tp for tp in partitions if tp not in kept)
    under_quota = [m for m in members if len(assignment[m]) < quota[m]]
    while under_quota:
        for member_id in under_quota:
            assignment[member_id].append(next(free))
        under_quota = [m for m in under_quota if len(assignment[m]) < quota[m]]
    for tps in assignment.values():
        tps.sort()
    return assignment


def general_assign(group: Group) -> Assignment:
    """Keep owned partitions, fill in KIP-49's order, then restore balance."""
    placement = Placement(group, weighted=False)
    placement.keep()
    ties = TieOrder(group.member_ids, rotate=False)
    fill(placement, fair_order(group, exclude=placement.owners), ties)
    balance_counts(placement, ties)
    return placement.assignment()
