"""Kafka's CooperativeStickyAssignor (KIP-429)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kagent.core.assignors.problem import Assignment, Group
from kagent.core.assignors.sticky import StickyAssignor, identical_subscriptions


@dataclass(frozen=True)
class CooperativeAssignment:
    """The outcome of a cooperative (incremental) rebalance.

    `target` is the sticky assignment (`StickyAssignor`'s, as Kafka's
    CooperativeStickyAssignor computes it).
    `first_round` is what the leader hands out now: `target` without the
    partitions another member still holds (see `Group.holders`: its claim
    won, whether or not it still subscribes to the topic) or that several
    members claim in the highest generation (`Group.contested`: taken from
    all of them). These are the partitions Kafka removes as "transferring
    ownership", except that with different subscriptions Kafka lets a member
    whose claim lost (to a newer generation, or contested) get the partition
    in the first round, while its holder may still be consuming it; here it
    never does. With different subscriptions the first round also leaves
    out, rarely, partitions the follow-up rebalance would take away from
    their member (see `CooperativeStickyAssignor`): they are revoked now
    instead of in a third rebalance.
    `revoked` lists, per member, the partitions it claims (`Member.owned`)
    but does not get in the first round: what it must give up now.
    """

    target: Assignment
    first_round: Assignment
    revoked: Assignment


class CooperativeStickyAssignor:
    """Kafka's `cooperative-sticky` strategy (KIP-429).

    Contract: `assign` returns the same target as `StickyAssignor` (balance,
    stickiness, Kafka's answers and determinism as stated there);
    `assign_cooperative` adds what the incremental protocol needs:
    - no member is handed a partition another member may still be consuming;
    - a first round that revokes anything needs exactly one follow-up
      rebalance: started from the first round (every member owning what it
      was given, in one newer generation), the follow-up revokes nothing and
      holds nothing back, so the protocol never needs a third rebalance.

    With identical subscriptions the follow-up keeps every owned partition
    by construction (each member owns at most its quota). With different
    subscriptions the sticky algorithm can place the held-back partitions so
    that balance then requires moving a partition handed out in the first
    round; so the leader runs the follow-up's sticky assignment itself and
    leaves any such partition out of the first round, until the follow-up
    keeps everything it is given (the first round only shrinks, so this
    ends).
    """

    name = "cooperative-sticky"

    def assign(self, group: Group) -> Assignment:
        return StickyAssignor().assign(group)

    def assign_cooperative(self, group: Group) -> CooperativeAssignment:
        target = self.assign(group)
        holders, contested = group.holders, group.contested
        first_round = {
            member_id: [tp for tp in tps if holders.get(tp, member_id) == member_id and tp not in contested]
            for member_id, tps in target.items()
        }
        if not identical_subscriptions(group) and _revokes(group, first_round):
            first_round = _final_first_round(group, first_round)
        revoked = {
            member_id: sorted(set(group.members[member_id].owned).difference(first_round[member_id]))
            for member_id in group.member_ids
        }
        return CooperativeAssignment(target, first_round, revoked)


def _revokes(group: Group, first_round: Assignment) -> bool:
    """Whether some member claims a partition it does not get in `first_round`:
    then a follow-up rebalance comes."""
    return any(set(group.members[m].owned).difference(first_round[m]) for m in group.member_ids)


def _follow_up(group: Group, first_round: Assignment) -> Group:
    """The group of the follow-up rebalance: every member owning what
    `first_round` gave it, all in one generation newer than any before."""
    generation = max((member.generation for member in group.members.values()), default=-1) + 1
    members = {
        member_id: replace(member, owned=first_round[member_id], generation=generation)
        for member_id, member in group.members.items()
    }
    return Group(group.partitions, members, group.lag)


def _final_first_round(group: Group, first_round: Assignment) -> Assignment:
    """`first_round` without the partitions the follow-up rebalance would move:
    run the follow-up's sticky assignment and drop what it takes from a member,
    until it takes nothing."""
    sticky = StickyAssignor()
    while True:
        after = sticky.assign(_follow_up(group, first_round))
        kept = {member_id: set(after[member_id]).intersection(tps) for member_id, tps in first_round.items()}
        if all(len(kept[member_id]) == len(tps) for member_id, tps in first_round.items()):
            return first_round
        first_round = {member_id: [tp for tp in tps if tp in kept[member_id]] for member_id, tps in first_round.items()}
