"""Kafka's RoundRobinAssignor."""

from __future__ import annotations

from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from kagent.core.assignors.aiokafka_bridge import run_aiokafka_assignor
from kagent.core.assignors.problem import Assignment, Group


class RoundRobinAssignor:
    """Kafka's `roundrobin` strategy, computed by aiokafka's `RoundRobinPartitionAssignor`.

    All subscribed partitions, sorted by topic then partition, are dealt to the
    members in Kafka's order (static members first), cycling and skipping a
    member not subscribed to the partition's topic.

    Balance: counts within one when subscriptions are identical; otherwise none.
    Stickiness: none. Determinism: the result depends only on the input.
    """

    name = "roundrobin"

    def assign(self, group: Group) -> Assignment:
        return run_aiokafka_assignor(RoundRobinPartitionAssignor, group)
