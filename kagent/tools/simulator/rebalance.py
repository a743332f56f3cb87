"""Piecing one group's generation together from its in-process members.

Kafka's coordinator writes a group's metadata once the leader's assignment
is in (SyncGroup). Here the simulator sees the same facts from the members
it runs: the leader reports the plan it computed (members, their
subscriptions, their assignments), and each member reports, from its
rebalance listener, that it adopted its assignment. `GenerationTracker`
says when a generation is whole. Pure state, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kagent.core.consumer_offsets import Assignment, Subscription

__all__ = ["GenerationTracker", "LeaderPlan", "MemberIdentity", "Rebalance", "RebalancedMember"]


@dataclass(frozen=True)
class MemberIdentity:
    """What the coordinator knows of a member besides its protocol bytes."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int


@dataclass(frozen=True)
class LeaderPlan:
    """What the leader of `generation` computed: every member's subscription
    (as the coordinator handed it over, in the coordinator's order) and its
    assignment (as the leader sends it back); both map the same member ids."""

    generation: int
    leader: str
    protocol: str
    subscriptions: Mapping[str, Subscription]
    assignments: Mapping[str, Assignment]


@dataclass(frozen=True)
class RebalancedMember:
    """One member of a completed generation."""

    identity: MemberIdentity
    subscription: Subscription
    assignment: Assignment


@dataclass(frozen=True)
class Rebalance:
    """A completed generation of a group: every member has its assignment."""

    group: str
    generation: int
    protocol: str
    leader: str
    members: tuple[RebalancedMember, ...]


@dataclass
class _Pending:
    plan: LeaderPlan | None = None
    adopted: dict[str, MemberIdentity] = field(default_factory=dict)


class GenerationTracker:
    """Collects a group's leader plan and its members' adoptions, by generation.

    Each report returns the `Rebalance` it completes, or None. A generation
    is complete when the leader's plan is in and every member it names has
    adopted its assignment in that generation, in either order. A
    generation is completed at most once; reports of it or of older
    generations afterwards return None (a newer generation supersedes them).
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self._pending: dict[int, _Pending] = {}
        self._completed = -1

    def leader_assigned(self, plan: LeaderPlan) -> Rebalance | None:
        """The leader of `plan.generation` computed `plan`."""
        if plan.generation <= self._completed:
            return None
        self._pending.setdefault(plan.generation, _Pending()).plan = plan
        return self._complete(plan.generation)

    def member_assigned(self, generation: int, member: MemberIdentity) -> Rebalance | None:
        """`member` adopted its assignment of `generation`."""
        if generation <= self._completed:
            return None
        self._pending.setdefault(generation, _Pending()).adopted[member.member_id] = member
        return self._complete(generation)

    def _complete(self, generation: int) -> Rebalance | None:
        pending = self._pending[generation]
        plan = pending.plan
        if plan is None or not set(plan.subscriptions) <= set(pending.adopted):
            return None
        self._completed = generation
        self._pending = {g: p for g, p in self._pending.items() if g > generation}
        members = tuple(
            RebalancedMember(pending.adopted[member_id], subscription, plan.assignments[member_id])
            for member_id, subscription in plan.subscriptions.items()
        )
        return Rebalance(self.group, generation, plan.protocol, plan.leader, members)
