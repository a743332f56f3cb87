"""KIP-49's fair assignor."""

from __future__ import annotations

from kagent.core.assignors.placement import Placement, TieOrder, fair_order, fill
from kagent.core.assignors.problem import Assignment, Group


class FairAssignor:
    """KIP-49's `fair` strategy: balanced counts even with different subscriptions.

    Topics are taken with the fewest subscribed members first, ties by more
    partitions first, then by name; each partition goes to the subscribed
    member holding the fewest partitions so far, ties by member id.

    Balance: with identical subscriptions, counts within one; otherwise as
    even as this greedy order achieves.
    Stickiness: none. Determinism: the result depends only on the input.
    """

    name = "fair"

    def assign(self, group: Group) -> Assignment:
        placement = Placement(group, weighted=False)
        fill(placement, fair_order(group, exclude={}), TieOrder(group.member_ids, rotate=False))
        return placement.assignment()
