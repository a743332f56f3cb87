"""Kafka's RangeAssignor."""

from __future__ import annotations

from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from kagent.core.assignors.aiokafka_bridge import run_aiokafka_assignor
from kagent.core.assignors.problem import Assignment, Group


class RangeAssignor:
    """Kafka's `range` strategy, computed by aiokafka's `RangePartitionAssignor`.

    Per topic, the subscribed members in Kafka's order (static members by
    group.instance.id first, then the others by member id) take consecutive
    ranges of partitions; the first `count % members` take one extra.

    Balance: per topic only; totals across topics can differ by one per topic.
    Stickiness: none, but a static member keeps its ranges while the group's
    static members and partition counts stay the same.
    Determinism: the result depends only on the input.
    """

    name = "range"

    def assign(self, group: Group) -> Assignment:
        return run_aiokafka_assignor(RangePartitionAssignor, group)
