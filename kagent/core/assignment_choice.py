"""Which assignment kagent's ``kagent`` assignor hands out, whatever client library it runs in.

The assignor's leader chooses, in this order (:func:`choose_assignment`):

1. ``recommendation``: the latest recommendation for the group, handed out exactly, when it is a
   client-side rebalance (``kind`` ``rebalance``, ``client_side``) and still fits the group
   (:func:`unfit_reason`);
2. ``lag-sticky``: otherwise kagent's lag-aware sticky strategy, when the lag of any of the
   group's partitions is known;
3. ``sticky``: otherwise Kafka's sticky strategy.

The client adapters (aiokafka's in :mod:`kagent.client.applying`, kafka-python's in
:mod:`kagent.client.kafka_python`) add the last two ways, which are about failures rather than
choice: ``sticky`` again when anything above raises, and the client's own ``roundrobin`` should
sticky raise too. :func:`worth_rebalancing_for` is when a follower makes the group rebalance to
apply a recommendation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from aiokafka.structs import TopicPartition

from kagent.core.assignors import Assignment, Group, LagStickyAssignor, StickyAssignor
from kagent.core.recommendation import Recommendation, RecommendationKind

__all__ = [
    "Choice",
    "Path",
    "choose_assignment",
    "recommended_assignment",
    "unfit_reason",
    "worth_rebalancing_for",
]


class Path(str, Enum):
    """Which way the leader assigned."""

    RECOMMENDATION = "recommendation"
    LAG_STICKY = "lag-sticky"
    STICKY = "sticky"
    ROUND_ROBIN = "roundrobin"


@dataclass(frozen=True)
class Choice:
    """The assignment chosen for a group, the way it was chosen, and why."""

    path: Path
    reason: str
    assignment: Assignment
    """Every member of the group, each with its partitions (sorted; possibly none)."""
    recommendation_id: str | None
    """The recommendation applied; on the other paths the latest one, which did not fit (None: there was none)."""


def recommended_assignment(recommendation: Recommendation) -> Assignment:
    """Each member's recommended partitions, sorted."""
    return {m.member_id: sorted(p.topic_partition for p in m.recommended) for m in recommendation.members}


def unfit_reason(recommendation: Recommendation, group: Group) -> str | None:
    """Why ``recommendation`` cannot be handed out to ``group`` as it is; None when it can.

    It can when it is a client-side rebalance and fits: its members are exactly the group's, no
    partition is recommended twice, the partitions recommended are exactly those of the topics the
    members subscribe to (``group.partitions``, from the cluster's metadata), and each member is
    recommended partitions of its own subscription only.
    """
    what = f"recommendation {recommendation.id}"
    if recommendation.kind is not RecommendationKind.REBALANCE:
        return f"{what} is a {recommendation.kind.value} recommendation, with no assignment to apply"
    if not recommendation.client_side:
        return f"{what} is for a group whose broker assigns (KIP-848)"
    recommended = {m.member_id for m in recommendation.members}
    if recommended != set(group.members):
        gone, new = recommended - set(group.members), set(group.members) - recommended
        return f"{what} is for other members (gone: {_listed(gone)}; new: {_listed(new)})"
    given = Counter(p.topic_partition for m in recommendation.members for p in m.recommended)
    twice = [tp for tp, count in given.items() if count > 1]
    if twice:
        return f"{what} gives {_listed(twice)} to more than one member"
    subscribed = set(group.subscribed_partitions())
    if set(given) != subscribed:
        missing, unknown = subscribed - set(given), set(given) - subscribed
        return f"{what} is for other partitions (missing: {_listed(missing)}; not subscribed: {_listed(unknown)})"
    for member in recommendation.members:
        foreign = {p.topic for p in member.recommended} - set(group.subscriptions[member.member_id])
        if foreign:
            return f"{what} gives {member.member_id} partitions of {_listed(foreign)}, which it does not subscribe to"
    return None


def choose_assignment(group: Group, recommendation: Recommendation | None, *, tolerance: float = 0.05) -> Choice:
    """The assignment for ``group`` given the latest ``recommendation`` for it (None: none heard), by the
    first of the module's steps 1-3 that applies. ``tolerance`` is lag-sticky's. Raises what the
    strategies raise; the result depends only on the arguments."""
    if recommendation is None:
        why = "no recommendation for the group"
    else:
        unfit = unfit_reason(recommendation, group)
        if unfit is None:
            reason = f"recommendation {recommendation.id} fits"
            return Choice(Path.RECOMMENDATION, reason, recommended_assignment(recommendation), recommendation.id)
        why = unfit
    latest = None if recommendation is None else recommendation.id
    if group.lag:
        reason = f"{why}; lag known for {len(group.lag)} partitions"
        return Choice(Path.LAG_STICKY, reason, LagStickyAssignor(tolerance).assign(group), latest)
    return Choice(Path.STICKY, f"{why}; no lag known", StickyAssignor().assign(group), latest)


def worth_rebalancing_for(recommendation: Recommendation, holding: Mapping[str, Sequence[TopicPartition]]) -> bool:
    """Whether a group holding ``holding`` (each member's partitions, sorted) should rebalance to apply
    ``recommendation``: it is a client-side rebalance for exactly these members (for other members the
    rebalance could only fall back) whose assignment differs from what they hold."""
    if recommendation.kind is not RecommendationKind.REBALANCE or not recommendation.client_side:
        return False
    wanted = {member: tuple(tps) for member, tps in recommended_assignment(recommendation).items()}
    held = {member: tuple(tps) for member, tps in holding.items()}
    return set(wanted) == set(held) and wanted != held


def _listed(items: Collection[object], shown: int = 5) -> str:
    """Up to ``shown`` of ``items``, sorted, and how many more; ``none`` for none."""
    names = sorted(f"{item[0]}[{item[1]}]" if isinstance(item, tuple) else str(item) for item in items)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more if names else "none"
