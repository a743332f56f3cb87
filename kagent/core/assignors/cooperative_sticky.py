"""Kafka's CooperativeStickyAssignor (KIP-429)."""

from __future__ import annotations

from dataclasses import dataclass

from kagent.core.assignors.problem import Assignment, Group
from kagent.core.assignors.sticky import StickyAssignor


@dataclass(frozen=True)
class CooperativeAssignment:
    """The outcome of a cooperative (incremental) rebalance.

    `target` is where every partition ends up: the sticky assignment.
    `first_round` is what the leader hands out now: `target` without the
    partitions another member still owns (see `Group.owners`) or that several
    members claim in the same generation (`Group.contested`); the follow-up
    rebalance hands those out, once their owners have let go.
    `revoked` lists, per member, the partitions it claims (`Member.owned`)
    but does not get in the first round: what it must give up now.
    """

    target: Assignment
    first_round: Assignment
    revoked: Assignment


class CooperativeStickyAssignor:
    """Kafka's `cooperative-sticky` strategy (KIP-429).

    Contract: `assign` returns the same target as `StickyAssignor` (balance,
    stickiness and determinism as stated there); `assign_cooperative` adds
    what the incremental protocol needs, so that no member is handed a
    partition another member may still be consuming. With identical
    subscriptions the follow-up rebalance, starting from the first round,
    hands out everything held back and holds nothing back itself; with
    different subscriptions its own sticky target can move a few more
    partitions, so the protocol may need another round.
    """

    name = "cooperative-sticky"

    def assign(self, group: Group) -> Assignment:
        return StickyAssignor().assign(group)

    def assign_cooperative(self, group: Group) -> CooperativeAssignment:
        target = self.assign(group)
        owners, contested = group.owners, group.contested
        first_round = {
            member_id: [tp for tp in tps if owners.get(tp, member_id) == member_id and tp not in contested]
            for member_id, tps in target.items()
        }
        revoked = {
            member_id: sorted(set(group.members[member_id].owned).difference(first_round[member_id]))
            for member_id in group.member_ids
        }
        return CooperativeAssignment(target, first_round, revoked)
