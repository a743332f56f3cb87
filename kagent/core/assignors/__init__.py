"""Partition assignment strategies: Kafka's, the proposals', and kagent's own.

Pure functions over plain data (no I/O). `assign` runs a strategy by name:

- `range`, `roundrobin`: Kafka's RangeAssignor and RoundRobinAssignor, exactly.
- `sticky`, `cooperative-sticky`: Kafka's sticky assignors' guarantees (the
  cooperative one's as the assignment its two rebalances converge to).
- `fair`: KIP-49.
- `lag`: KAFKA-5337.
- `lag-sticky`: kagent's lag-aware sticky assignor.

`kagent.client.assignors` runs `fair`, `lag` and `lag-sticky` inside
aiokafka consumers.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka.structs import TopicPartition

from kagent.core.assignors.cooperative_sticky import CooperativeStickyAssignor
from kagent.core.assignors.fair import FairAssignor
from kagent.core.assignors.lag_based import LagBasedAssignor
from kagent.core.assignors.lag_sticky import LagStickyAssignor
from kagent.core.assignors.problem import Assignment, Assignor, Group, Member
from kagent.core.assignors.range import RangeAssignor
from kagent.core.assignors.roundrobin import RoundRobinAssignor
from kagent.core.assignors.sticky import StickyAssignor

__all__ = [
    "STRATEGIES",
    "Assignment",
    "Assignor",
    "CooperativeStickyAssignor",
    "FairAssignor",
    "Group",
    "LagBasedAssignor",
    "LagStickyAssignor",
    "Member",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assign",
]

STRATEGIES: Mapping[str, Assignor] = {
    assignor.name: assignor
    for assignor in (
        RangeAssignor(),
        RoundRobinAssignor(),
        StickyAssignor(),
        CooperativeStickyAssignor(),
        FairAssignor(),
        LagBasedAssignor(),
        LagStickyAssignor(),
    )
}
"""Every strategy by name, with default settings."""


def assign(
    strategy: str,
    partitions: Mapping[str, int],
    members: Mapping[str, Member],
    lag: Mapping[TopicPartition, int] | None = None,
) -> Assignment:
    """Assign the partitions of `partitions` (topic to partition count) to `members`.

    Every member id is in the result, possibly with an empty list; each list is
    sorted. A member subscribed to a topic missing from `partitions` is ignored
    for that topic; partitions without a `lag` entry have lag 0. An unknown
    strategy, a negative partition count, a negative lag or a lag for an
    unknown partition raises `ValueError` naming it.
    """
    try:
        assignor = STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}") from None
    return assignor.assign(Group(partitions, members, lag))
