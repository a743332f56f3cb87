"""What a strategy would do to a group's lag, and the recommendation record kagent publishes.

:func:`propose` runs the configured strategy on one :class:`GroupSnapshot`
and measures the lag of each member before and after; the evaluation
(``kagent.core.evaluation``) decides whether the :class:`Proposal` is worth a
:class:`Recommendation`, the record that goes on ``kagent-recommendations``
keyed by group.

Lag units. In ``messages`` a partition's lag is its offset lag. In
``seconds`` it is its time lag, and a member's lag is the *sum* of its
partitions' time lags, like messages: the lag-aware assignors balance sums,
so summing keeps what is measured and what is optimised the same quantity
(a member's largest partition time lag would not add up, and no assignor
could balance it). The assignors take integers, so seconds are counted in
whole milliseconds inside and reported in seconds. A partition whose time
lag is unknown (None) while its offset lag is positive counts 0 and is
listed in :attr:`Proposal.unknown`; the evaluation does not trigger on a
proposal with unknown partitions. A partition missing from the snapshot's
lag counts 0, as in the assignors.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cached_property

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.assignors import STRATEGIES, Assignment, Member, assign
from kagent.core.events import MemberAssignment, PartitionRef
from kagent.core.policy import EvaluationPolicy, LagUnit, SkewMetric
from kagent.core.skew import (
    Move,
    balanced_lag_lower_bound,
    coefficient_of_variation,
    gini,
    member_lag,
    moves,
    peak_to_mean,
    relative_range,
)
from kagent.core.snapshot import GroupSnapshot, PartitionLag

__all__ = [
    "KEPT_RECOMMENDATIONS",
    "Alternative",
    "MemberRecommendation",
    "PartitionMove",
    "Proposal",
    "RecentRecommendations",
    "Recommendation",
    "Trigger",
    "propose",
    "skew",
]

_SKEW: Mapping[SkewMetric, Callable[[Collection[float]], float]] = {
    SkewMetric.PEAK_TO_MEAN: peak_to_mean,
    SkewMetric.COEFFICIENT_OF_VARIATION: coefficient_of_variation,
    SkewMetric.GINI: gini,
    SkewMetric.RANGE: relative_range,
}

_TICKS_PER_UNIT: Mapping[LagUnit, int] = {LagUnit.MESSAGES: 1, LagUnit.SECONDS: 1000}
"""Integer lag the assignors balance, per unit of lag: records, or milliseconds."""


def skew(metric: SkewMetric, lags: Collection[float]) -> float:
    """The skew ``metric`` of a distribution of member lags (see ``kagent.core.skew``); 1 or 0 when even."""
    return _SKEW[metric](lags)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class MemberRecommendation(_Record):
    """One member: the partitions it holds now and those recommended, with their lag."""

    member_id: str
    client_id: str
    client_host: str
    current: tuple[PartitionRef, ...]
    """Partitions assigned to it in this generation."""
    current_lag: float = Field(ge=0)
    """Their lag added up, in the recommendation's ``lag_unit``."""
    recommended: tuple[PartitionRef, ...]
    """Partitions the strategy assigns it."""
    recommended_lag: float = Field(ge=0)
    """Their lag added up, in the recommendation's ``lag_unit``."""


class PartitionMove(_Record):
    """A partition the recommendation takes from one member and gives to another."""

    topic: str
    partition: int = Field(ge=0)
    from_member: str | None
    """Its member now; None when no member holds it."""
    to_member: str | None
    """Its recommended member; None when no member is left to hold it."""
    lag: float = Field(ge=0)
    """Its lag, in the recommendation's ``lag_unit``."""


class Alternative(_Record):
    """What another strategy would achieve on the same snapshot."""

    strategy: str
    skew: float
    """Its skew, in the trigger's metric."""
    largest_lag: float = Field(ge=0)
    """Its largest member lag, in the recommendation's ``lag_unit``."""
    moves: int = Field(ge=0)
    """How many partitions it moves."""


class Trigger(_Record):
    """Why the recommendation was sent: the skew that held above the threshold."""

    metric: SkewMetric
    value: float
    """The group's skew under its current assignment."""
    threshold: float
    evaluations_held: int = Field(ge=1)
    """Consecutive evaluations the trigger held."""
    total_lag: float = Field(ge=0)
    """The group's lag added up, in ``lag_unit``."""
    improvement: float
    """By how much (a fraction) the recommendation lowers the largest member lag."""


class Recommendation(_Record):
    """A rebalance recommendation for one group (the record on ``kagent-recommendations``, keyed by group).

    ``id`` is the same for the same group, generation and recommended
    assignment, so a subscriber can drop repeats; everything else describes
    the group at ``time``.
    """

    id: str
    """Hex SHA-256 (first 128 bits) over the group, generation and recommended assignment."""
    time: float
    """Seconds since the epoch of the evaluation that sent it."""
    group: str
    generation: int
    protocol: str | None
    """The assignor the group uses now (its protocol name), None when unknown."""
    strategy: str
    """The strategy the recommended assignment comes from."""
    lag_unit: LagUnit
    trigger: Trigger
    members: tuple[MemberRecommendation, ...]
    """Every member, by member id."""
    skew_before: float
    """Skew under the current assignment, in the trigger's metric."""
    skew_after: float
    """Skew under the recommended assignment."""
    lower_bound: float = Field(ge=0)
    """No assignment in which each member holds an equal share (+-1) of the partitions keeps the
    largest member lag below this, in ``lag_unit`` (exact for identical subscriptions)."""
    moves: tuple[PartitionMove, ...]
    """Partitions that change member, by topic and partition."""
    alternatives: tuple[Alternative, ...]
    """Every other strategy kagent knows, by name."""


@dataclass(frozen=True)
class Proposal:
    """The configured strategy's assignment for one group snapshot, and the lag before and after.

    Lags are integers in ticks of the lag unit (records, or milliseconds);
    the ``*_lag`` properties give them in the unit.
    """

    snapshot: GroupSnapshot
    strategy: str
    lag_unit: LagUnit
    metric: SkewMetric
    partitions: Mapping[str, int]
    """Partition count of each topic a member subscribes to."""
    members: Mapping[str, Member]
    """The assignors' view of the members: subscriptions, and owned = current partitions."""
    lag: Mapping[TopicPartition, int]
    """Ticks of every partition of ``partitions`` with a known figure."""
    unknown: tuple[TopicPartition, ...]
    """Partitions with records unread but no time lag (unit ``seconds`` only); they count 0."""
    current: Assignment
    recommended: Assignment
    current_ticks: Mapping[str, int]
    recommended_ticks: Mapping[str, int]
    skew_before: float
    skew_after: float
    lower_bound_ticks: int
    moves: tuple[Move, ...]

    def in_unit(self, ticks: float) -> float:
        """``ticks`` in the lag unit."""
        return ticks / _TICKS_PER_UNIT[self.lag_unit]

    @property
    def total_lag(self) -> float:
        """The lag of every partition the group subscribes to, added up, in the lag unit."""
        return self.in_unit(sum(self.lag.values()))

    @property
    def largest_lag_before(self) -> float:
        return self.in_unit(max(self.current_ticks.values(), default=0))

    @property
    def largest_lag_after(self) -> float:
        return self.in_unit(max(self.recommended_ticks.values(), default=0))

    @property
    def improvement(self) -> float:
        """The fraction by which the recommended assignment lowers the largest member lag (0 without lag)."""
        before = max(self.current_ticks.values(), default=0)
        after = max(self.recommended_ticks.values(), default=0)
        return (before - after) / before if before else 0.0

    @cached_property
    def alternatives(self) -> tuple[Alternative, ...]:
        """Every strategy but ``strategy``, run on the same input, by name (computed on first use)."""
        result = []
        for name in sorted(STRATEGIES):
            if name == self.strategy:
                continue
            assignment = assign(name, self.partitions, self.members, self.lag)
            ticks = member_lag(assignment, self.lag)
            result.append(
                Alternative(
                    strategy=name,
                    skew=skew(self.metric, list(ticks.values())),
                    largest_lag=self.in_unit(max(ticks.values(), default=0)),
                    moves=len(moves(self.current, assignment)),
                )
            )
        return tuple(result)

    @property
    def id(self) -> str:
        """The recommendation id: a hash over the group, generation and recommended assignment."""
        assignment = {member: [[tp.topic, tp.partition] for tp in tps] for member, tps in self.recommended.items()}
        canonical = json.dumps(
            [self.snapshot.group, self.snapshot.assignment.generation, assignment],
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    def recommendation(self, threshold: float, evaluations_held: int, time: float) -> Recommendation:
        """The record to publish at ``time``: the trigger held ``evaluations_held`` times against ``threshold``."""
        assigned = self.snapshot.assignment
        infos: dict[str, MemberAssignment] = {member.member_id: member for member in assigned.members}
        return Recommendation(
            id=self.id,
            time=time,
            group=assigned.group,
            generation=assigned.generation,
            protocol=assigned.protocol,
            strategy=self.strategy,
            lag_unit=self.lag_unit,
            trigger=Trigger(
                metric=self.metric,
                value=self.skew_before,
                threshold=threshold,
                evaluations_held=evaluations_held,
                total_lag=self.total_lag,
                improvement=self.improvement,
            ),
            members=tuple(
                MemberRecommendation(
                    member_id=member_id,
                    client_id=infos[member_id].client_id,
                    client_host=infos[member_id].client_host,
                    current=_refs(self.current[member_id]),
                    current_lag=self.in_unit(self.current_ticks[member_id]),
                    recommended=_refs(self.recommended[member_id]),
                    recommended_lag=self.in_unit(self.recommended_ticks[member_id]),
                )
                for member_id in sorted(self.current)
            ),
            skew_before=self.skew_before,
            skew_after=self.skew_after,
            lower_bound=self.in_unit(self.lower_bound_ticks),
            moves=tuple(
                PartitionMove(
                    topic=move.partition.topic,
                    partition=move.partition.partition,
                    from_member=move.source,
                    to_member=move.target,
                    lag=self.in_unit(self.lag.get(move.partition, 0)),
                )
                for move in self.moves
            ),
            alternatives=self.alternatives,
        )


def propose(snapshot: GroupSnapshot, policy: EvaluationPolicy) -> Proposal:
    """Run ``policy.strategy`` on ``snapshot`` and measure each member's lag before and after.

    Each member of the current generation becomes an assignor member that
    subscribes to its topics (when its subscription was not decoded, to every
    topic of ``snapshot.partition_counts``) and owns its current partitions.
    Partitions are those of the subscribed topics in ``partition_counts``;
    lag figures and current partitions outside them are left out (no
    assignor can place them). Lag is in ``policy.lag_unit`` as
    the module docstring says. The lower bound is
    :func:`kagent.core.skew.balanced_lag_lower_bound` over every partition (0 for
    a group without members). Never raises for a well-formed snapshot; a
    group without members gets an empty proposal.
    """
    assigned = snapshot.assignment
    all_topics = tuple(snapshot.partition_counts)
    members = {
        member.member_id: Member(
            topics=member.topics or all_topics,
            owned=[partition.topic_partition for partition in member.partitions],
            generation=assigned.generation,
            group_instance_id=member.group_instance_id,
        )
        for member in assigned.members
    }
    subscribed = {topic for member in members.values() for topic in member.topics}
    partitions = {topic: count for topic, count in snapshot.partition_counts.items() if topic in subscribed}
    lag: dict[TopicPartition, int] = {}
    unknown: list[TopicPartition] = []
    for tp, figures in snapshot.lag.items():
        if 0 <= tp.partition < partitions.get(tp.topic, 0):
            ticks = _ticks(figures, policy.lag_unit)
            if ticks is None:
                unknown.append(tp)
            else:
                lag[tp] = ticks
    current: Assignment = {
        member_id: sorted(tp for tp in member.owned if tp.partition < partitions.get(tp.topic, 0))
        for member_id, member in members.items()
    }
    recommended = assign(policy.strategy, partitions, members, lag)
    current_ticks = member_lag(current, lag)
    recommended_ticks = member_lag(recommended, lag)
    return Proposal(
        snapshot=snapshot,
        strategy=policy.strategy,
        lag_unit=policy.lag_unit,
        metric=policy.skew_metric,
        partitions=partitions,
        members=members,
        lag=lag,
        unknown=tuple(sorted(unknown)),
        current=current,
        recommended=recommended,
        current_ticks=current_ticks,
        recommended_ticks=recommended_ticks,
        skew_before=skew(policy.skew_metric, list(current_ticks.values())),
        skew_after=skew(policy.skew_metric, list(recommended_ticks.values())),
        lower_bound_ticks=balanced_lag_lower_bound(lag.values(), len(members)) if members else 0,
        moves=tuple(moves(current, recommended)),
    )


def _ticks(figures: PartitionLag, unit: LagUnit) -> int | None:
    """The partition's lag in ticks of ``unit``; None when its time lag is unknown and records are unread."""
    if unit is LagUnit.MESSAGES:
        return figures.offset_lag
    if figures.offset_lag == 0:
        return 0
    if figures.time_lag is None:
        return None
    return round(figures.time_lag * _TICKS_PER_UNIT[unit])


def _refs(partitions: Collection[TopicPartition]) -> tuple[PartitionRef, ...]:
    return tuple(PartitionRef(topic=tp.topic, partition=tp.partition) for tp in partitions)


class RecentRecommendations(_Record):
    """A group's latest recommendations, newest first (value of the recent-recommendations table, keyed
    by group): what the HTTP API serves at ``/api/recommendations``. Holds at most the number the worker
    keeps (:data:`KEPT_RECOMMENDATIONS`)."""

    group: str
    recommendations: tuple[Recommendation, ...]

    def adding(self, recommendation: Recommendation, keep: int) -> RecentRecommendations:
        """These with ``recommendation`` first (replacing one with the same id: a re-send), at most ``keep``."""
        rest = tuple(r for r in self.recommendations if r.id != recommendation.id)
        return self.model_copy(update={"recommendations": ((recommendation, *rest)[:keep])})


KEPT_RECOMMENDATIONS = 10
"""How many of a group's recommendations the recent-recommendations table keeps."""
