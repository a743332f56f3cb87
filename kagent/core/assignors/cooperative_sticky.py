"""Kafka's CooperativeStickyAssignor (KIP-429), as the assignment it converges to.

Kafka's cooperative-sticky assignor computes the sticky assignment
(:class:`~kagent.core.assignors.sticky.StickyAssignor`'s) and hands it out
over two rebalances of the incremental protocol: the first withholds every
partition moving from one member to another, which its owner revokes while
it goes on consuming the rest; the follow-up, which the revoking member's
rejoin starts, assigns them. kagent computes only that assignment: a
recommendation is where a group should end up, and the two rounds are the
clients' protocol, which no part of kagent runs. Its only client, aiokafka,
has the eager protocol alone (every member revokes all its partitions before
each rebalance, and nothing rejoins after a revocation), so a first round
withholding partitions would leave them unconsumed; Java's and librdkafka's
consumers run the rounds with their own CooperativeStickyAssignor. A group on
the cooperative protocol that applies a recommendation through an assignor of
its own hands out first the recommendation without the partitions its moves
take in (Java's ConsumerCoordinator refuses a round that moves a partition
straight from one member to another), then, in the follow-up, all of it.
"""

from __future__ import annotations

from kagent.core.assignors.problem import Assignment, Group
from kagent.core.assignors.sticky import StickyAssignor


class CooperativeStickyAssignor:
    """Kafka's `cooperative-sticky` strategy (KIP-429): the assignment its rebalances converge to.

    Contract: `assign` returns exactly `StickyAssignor`'s assignment (balance,
    stickiness, Kafka's answers and determinism as stated there), under
    Kafka's name for it.
    """

    name = "cooperative-sticky"

    def assign(self, group: Group) -> Assignment:
        return StickyAssignor().assign(group)
