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
whole milliseconds inside and reported in seconds. A partition whose lag is
unknown in the unit (its offset lag not measured; in ``seconds``, also a
time lag unknown while records wait) counts 0 for the assignors and is
listed in :attr:`Proposal.unknown`: the evaluation neither triggers on such
a proposal nor reports its skew, and the API reports the lag of a member
holding one as unknown. A partition missing from the snapshot's lag counts
0, as in the assignors.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.assignors import STRATEGIES, Assignment, Member, assign
from kagent.core.events import MemberAssignment, PartitionRef
from kagent.core.policy import EvaluationPolicy, LagUnit, SkewMetric
from kagent.core.remedies import Remedy
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
    "HOT_PARTITION_REMEDY",
    "KEPT_RECOMMENDATIONS",
    "SERVER_ASSIGNORS",
    "Alternative",
    "HeavyPartitionRate",
    "HotPartitionEvidence",
    "HotPartitionRate",
    "IsolationEvidence",
    "MemberRate",
    "MemberRecommendation",
    "PartitionMove",
    "PartitionRate",
    "Proposal",
    "RecentRecommendations",
    "Recommendation",
    "RecommendationKind",
    "ScaleEvidence",
    "ServerAssignorAdvice",
    "Trigger",
    "propose",
    "propose_around",
    "propose_isolating",
    "skew",
]

_SKEW: Mapping[SkewMetric, Callable[[Collection[float]], float]] = {
    SkewMetric.PEAK_TO_MEAN: peak_to_mean,
    SkewMetric.COEFFICIENT_OF_VARIATION: coefficient_of_variation,
    SkewMetric.GINI: gini,
    SkewMetric.RANGE: relative_range,
}

SERVER_ASSIGNORS: Mapping[str, str] = {"uniform": "sticky", "range": "range"}
"""The broker's built-in assignors for consumer-protocol groups (``group.remote.assignor``), each by the
kagent strategy that models it."""

_TICKS_PER_UNIT: Mapping[LagUnit, int] = {LagUnit.MESSAGES: 1, LagUnit.SECONDS: 1000}
"""Integer lag the assignors balance, per unit of lag: records, or milliseconds."""


def skew(metric: SkewMetric, lags: Collection[float]) -> float:
    """The skew ``metric`` of a distribution of member lags (see ``kagent.core.skew``); 1 or 0 when even."""
    return _SKEW[metric](lags)


class _Record(BaseModel):
    # Open to fields added later (their schemas do not forbid additional properties): a subscriber, or a
    # kagent worker of an earlier version reading a later one's records, reads what it knows.
    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)


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


class RecommendationKind(str, Enum):
    """What a recommendation asks for."""

    REBALANCE = "rebalance"
    """Move partitions between the members the group has: ``members[].recommended`` is the assignment."""
    SCALE = "scale"
    """Change the number of members: no assignment of the members the group has keeps up with its
    producers (``scale`` has the evidence and the count). Nothing is to be moved: each member's
    ``recommended`` equals its ``current``, and ``moves`` is empty."""
    HOT_PARTITION = "hot-partition"
    """Neither: some partition is written faster than any member reads (``hot`` names it, with its rate
    beside the best member's capacity, and the remedy), and the group's lag is explained by it alone. No
    assignment and no number of members fixes that, so nothing is to be moved: each member's
    ``recommended`` equals its ``current``, and ``moves`` is empty."""


HOT_PARTITION_REMEDY = (
    "No assignment and no number of members fixes a hot partition: spread its keys over more partitions "
    "(add partitions, and a key that splits the hot key's records), or make the consumer of that partition's "
    "work faster."
)
"""What can fix a hot partition, as every ``hot-partition`` recommendation says it."""


class PartitionRate(_Record):
    """How fast one partition's log end grew over the rate window."""

    topic: str
    partition: int = Field(ge=0)
    production_rate: float = Field(ge=0)
    """Records per second."""


class MemberRate(_Record):
    """How fast one member's committed offsets grew over the rate window."""

    member_id: str
    consumption_rate: float = Field(ge=0)
    """Records per second, its partitions added up."""
    saturated: bool
    """Whether it was behind at every commit of the window on a partition it holds (it had not read, by a
    commit, what was written by its previous one): then its consumption rate is
    its capacity; otherwise its capacity is at least its rate, and counted as the group's typical one."""


class ScaleEvidence(_Record):
    """Why a group needs another number of members: its rates over the window, and the count."""

    members: int = Field(ge=0)
    """Members the group has."""
    members_needed: int = Field(ge=1)
    """Members that keep up with the producers with the headroom asked for, at most one per partition."""
    partitions: int = Field(ge=0)
    """Partitions the group reads: the most members that can hold one."""
    production_rate: float = Field(ge=0)
    """Records per second written to the group's partitions, added up."""
    capacity: float = Field(ge=0)
    """Records per second the members can consume, added up (saturated members as measured, the
    others at the typical member's capacity)."""
    member_capacity: float = Field(ge=0)
    """Records per second one typical member consumes while it has lag: the median of the saturated ones."""
    headroom: float
    """``capacity / production_rate - 1``: negative when the group falls behind whatever the assignment."""
    window: float = Field(ge=0)
    """Seconds the rates were measured over."""
    partition_rates: tuple[PartitionRate, ...]
    """By topic and partition."""
    member_rates: tuple[MemberRate, ...]
    """By member id."""


class HotPartitionRate(_Record):
    """One hot partition: written faster than its member, or any member of the group, reads."""

    topic: str
    partition: int = Field(ge=0)
    member_id: str
    """The member that holds it, and keeps it."""
    production_rate: float = Field(ge=0)
    """Records per second written to it over the window."""
    member_capacity: float = Field(ge=0)
    """Records per second its member read over the window, its partitions added up (while saturated)."""


class HotPartitionEvidence(_Record):
    """The partitions no member can keep up with (:mod:`kagent.core.hot_partitions`), and what fixes them."""

    partitions: tuple[HotPartitionRate, ...]
    """By topic and partition; at least one."""
    best_capacity: float = Field(ge=0)
    """Records per second: the fastest any member of the group read over the window. Each hot partition
    is written faster than this."""
    window: float = Field(ge=0)
    """Seconds the rates were measured over."""
    remedy: str
    """What can fix it (:data:`HOT_PARTITION_REMEDY`)."""


class HeavyPartitionRate(_Record):
    """One heavy partition (:mod:`kagent.core.heavy_partitions`): within one member's pace, but written too
    fast to share a member with even the least written of the group's other producing partitions."""

    topic: str
    partition: int = Field(ge=0)
    member_id: str
    """The member the recommendation leaves it alone on: the one that holds it now, unless that one keeps a
    hot partition or another heavy one."""
    production_rate: float = Field(ge=0)
    """Records per second written to it over the window."""
    member_capacity: float = Field(ge=0)
    """Records per second the member that holds it now can read: its pace while saturated, otherwise the
    group's typical member's. At least ``production_rate``."""
    lightest_other_rate: float = Field(gt=0)
    """Records per second written to the least written of the group's other producing partitions:
    ``production_rate`` plus this is above ``member_capacity``."""


class IsolationEvidence(_Record):
    """The heavy partitions a rebalance gives each a member of its own, and their rates."""

    partitions: tuple[HeavyPartitionRate, ...]
    """By topic and partition; at least one."""
    window: float = Field(ge=0)
    """Seconds the rates were measured over."""


class ServerAssignorAdvice(_Record):
    """For a group on the consumer protocol (KIP-848), whose broker assigns: which of the broker's
    built-in assignors (``group.remote.assignor``) gives the lower skew for the group's current lag."""

    current: str | None
    """The server assignor its members asked for; None when they differ or asked for the broker's default."""
    recommended: str
    """``uniform`` or ``range``: the one with the lower skew (``uniform`` on a tie: the broker's default)."""
    skew: dict[str, float]
    """Each built-in server assignor's skew for the current lag, in the trigger's metric."""
    largest_lag: dict[str, float]
    """Each built-in server assignor's largest member lag, in ``lag_unit``."""


class Recommendation(_Record):
    """A recommendation for one group (the record on ``kagent-recommendations``, keyed by group): a
    rebalance (``kind`` ``rebalance``), a change in member count (``scale``), or a hot partition no
    assignment fixes (``hot-partition``).

    ``id`` is the same for the same group, generation and recommended
    assignment (and, for ``scale``, member count; for ``hot-partition``, the hot partitions), so a
    subscriber can drop repeats; everything else describes the group at ``time``.

    ``kind``, ``scale``, ``client_side``, ``server_assignor``, ``hot`` and ``isolated`` came later than
    the other fields; a record without them is a client-side rebalance with no hot partition that isolates
    none, so readers of either shape read both.

    When ``hot`` is set on a ``rebalance`` or ``scale``, the group has hot partitions and lag besides
    theirs: the recommendation is for the rest, computed without the hot partitions' lag (its figures,
    skew and moves leave them out), and leaves each hot partition with the member that holds it.
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
    kind: RecommendationKind = RecommendationKind.REBALANCE
    scale: ScaleEvidence | None = None
    """The rates and the member count, for ``kind`` ``scale``; None otherwise."""
    client_side: bool = True
    """Whether a client-side assignor can apply ``members[].recommended`` (kagent's aiokafka assignor
    does). False for a group on the consumer protocol (KIP-848): its broker assigns, and
    ``server_assignor`` says which of its assignors fits better."""
    server_assignor: ServerAssignorAdvice | None = None
    """For a group on the consumer protocol: the broker's built-in assignor to choose; None otherwise."""
    hot: HotPartitionEvidence | None = None
    """The group's hot partitions, their rates and the remedy: for ``kind`` ``hot-partition``, and for a
    ``rebalance`` or ``scale`` of the rest that leaves them where they are; None when none is hot (or
    the group could not be judged)."""
    isolated: IsolationEvidence | None = None
    """For a ``rebalance``: the heavy partitions its assignment leaves each alone on a member, with their
    rates; None when it isolates none (none is heavy, the group could not be judged, or it has too few
    members)."""
    remedies: tuple[Remedy, ...] = ()
    """Each option weighed, with what it would give (:mod:`kagent.core.remedies`): the rebalance, the scale
    to the members needed, the hot partitions no assignment helps; the one asked for is ``chosen``. Empty
    in a record made before they were compared."""


@dataclass(frozen=True)
class Proposal:
    """The configured strategy's assignment for one group snapshot, and the lag before and after.

    Lags are integers in ticks of the lag unit (records, or milliseconds);
    the ``*_lag`` properties give them in the unit. What the current assignment gives is computed when
    the proposal is made; the recommended assignment and its figures on first use (they were a third to
    three fifths of :func:`~kagent.core.evaluation.evaluate` on groups of 2 to 20 members, in process).
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
    """Partitions of ``partitions`` whose lag in the unit is unknown (see the module docstring); they count 0."""
    current: Assignment
    current_ticks: Mapping[str, int]
    skew_before: float
    given: Assignment | None = None
    """The recommended assignment when it is not the strategy's own on these figures (one around kept or
    isolated partitions: :func:`propose_around`, :func:`propose_isolating`); None: :attr:`recommended`
    runs the strategy."""

    @cached_property
    def recommended(self) -> Assignment:
        """The recommended assignment: :attr:`given`, or the strategy's on these figures. Computed on first
        use: an evaluation whose trigger cannot hold never runs the strategy (see
        :func:`kagent.core.evaluation.weighs_rebalance`)."""
        if self.given is not None:
            return self.given
        return assign(self.strategy, self.partitions, self.members, self.lag)

    @cached_property
    def recommended_ticks(self) -> Mapping[str, int]:
        """Each member's lag under :attr:`recommended`, in ticks."""
        return member_lag(self.recommended, self.lag)

    @cached_property
    def skew_after(self) -> float:
        """The skew under :attr:`recommended`."""
        return skew(self.metric, list(self.recommended_ticks.values()))

    @cached_property
    def lower_bound_ticks(self) -> int:
        """:func:`kagent.core.skew.balanced_lag_lower_bound` over every partition (0 for a group without
        members)."""
        return balanced_lag_lower_bound(self.lag.values(), len(self.members)) if self.members else 0

    @cached_property
    def moves(self) -> tuple[Move, ...]:
        """The moves from :attr:`current` to :attr:`recommended`."""
        return tuple(moves(self.current, self.recommended))

    def in_unit(self, ticks: float) -> float:
        """``ticks`` in the lag unit."""
        return ticks / _TICKS_PER_UNIT[self.lag_unit]

    @cached_property
    def total_lag(self) -> float:
        """The lag of every partition the group subscribes to, added up, in the lag unit (added once: an
        evaluation asks for it in :func:`~kagent.core.evaluation.weighs_rebalance` and again after)."""
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
        return self._id(self.recommended)

    def _id(self, assignment: Assignment, *extra: object) -> str:
        members = {member: [[tp.topic, tp.partition] for tp in tps] for member, tps in assignment.items()}
        canonical = json.dumps(
            [self.snapshot.group, self.snapshot.assignment.generation, members, *extra],
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    @property
    def server_side(self) -> bool:
        """Whether the group is on the consumer protocol (KIP-848): its broker assigns, not its members."""
        return self.snapshot.assignment.group_protocol == "consumer"

    def server_assignor_advice(self) -> ServerAssignorAdvice:
        """Which of the broker's built-in assignors gives the lower skew for the current lag: ``uniform``
        (modelled by kagent's ``sticky``: balanced counts, sticky to the current assignment, as Kafka's
        UniformAssignor builds it) or ``range`` (kagent's ``range``); ``uniform`` on a tie."""
        skews: dict[str, float] = {}
        largest: dict[str, float] = {}
        for server, strategy in SERVER_ASSIGNORS.items():
            ticks = member_lag(assign(strategy, self.partitions, self.members, self.lag), self.lag)
            skews[server] = skew(self.metric, list(ticks.values()))
            largest[server] = self.in_unit(max(ticks.values(), default=0))
        best = min(SERVER_ASSIGNORS, key=lambda server: (skews[server], server != "uniform"))
        return ServerAssignorAdvice(
            current=self.snapshot.assignment.protocol, recommended=best, skew=skews, largest_lag=largest
        )

    def recommendation(self, threshold: float, evaluations_held: int, time: float) -> Recommendation:
        """The rebalance to publish at ``time``: the trigger held ``evaluations_held`` times against
        ``threshold``. For a group on the consumer protocol it is marked not applicable client-side and
        names the broker's assignor that fits better."""
        server_side = self.server_side
        return self._record(
            self.id,
            self.recommended,
            self.recommended_ticks,
            self.skew_after,
            self.moves,
            self._trigger(threshold, evaluations_held, self.improvement),
            time,
            client_side=not server_side,
            server_assignor=self.server_assignor_advice() if server_side else None,
        )

    def scale_recommendation(
        self, evidence: ScaleEvidence, threshold: float, evaluations_held: int, time: float
    ) -> Recommendation:
        """The ``scale`` recommendation to publish at ``time``: no assignment of these members keeps up
        (``evidence``), so nothing is moved: each member's recommended partitions are its current ones."""
        return self._record(
            self._id(self.current, "scale", evidence.members_needed),
            self.current,
            self.current_ticks,
            self.skew_before,
            (),
            self._trigger(threshold, evaluations_held, 0.0),
            time,
            kind=RecommendationKind.SCALE,
            scale=evidence,
            client_side=not self.server_side,
        )

    def hot_partition_recommendation(
        self, evidence: HotPartitionEvidence, threshold: float, evaluations_held: int, time: float
    ) -> Recommendation:
        """The ``hot-partition`` recommendation to publish at ``time``: ``evidence`` names partitions no
        member keeps up with, and nothing is moved: each member's recommended partitions are its current
        ones."""
        hot = [[rate.topic, rate.partition] for rate in evidence.partitions]
        return self._record(
            self._id(self.current, "hot-partition", hot),
            self.current,
            self.current_ticks,
            self.skew_before,
            (),
            self._trigger(threshold, evaluations_held, 0.0),
            time,
            kind=RecommendationKind.HOT_PARTITION,
            client_side=not self.server_side,
            hot=evidence,
        )

    def _trigger(self, threshold: float, evaluations_held: int, improvement: float) -> Trigger:
        """Why a recommendation of this proposal is sent: the skew now held ``evaluations_held`` times
        against ``threshold``; ``improvement`` is what the recommended assignment does to the largest lag."""
        return Trigger(
            metric=self.metric,
            value=self.skew_before,
            threshold=threshold,
            evaluations_held=evaluations_held,
            total_lag=self.total_lag,
            improvement=improvement,
        )

    def _record(
        self,
        id: str,
        recommended: Assignment,
        recommended_ticks: Mapping[str, int],
        skew_after: float,
        moved: tuple[Move, ...],
        trigger: Trigger,
        time: float,
        *,
        kind: RecommendationKind = RecommendationKind.REBALANCE,
        scale: ScaleEvidence | None = None,
        client_side: bool = True,
        server_assignor: ServerAssignorAdvice | None = None,
        hot: HotPartitionEvidence | None = None,
    ) -> Recommendation:
        """The record, shared by both kinds: ``recommended`` with its ticks and skew, ``moved`` to get there."""
        assigned = self.snapshot.assignment
        infos: dict[str, MemberAssignment] = {member.member_id: member for member in assigned.members}
        return Recommendation(
            id=id,
            time=time,
            group=assigned.group,
            generation=assigned.generation,
            protocol=assigned.protocol,
            strategy=self.strategy,
            lag_unit=self.lag_unit,
            trigger=trigger,
            members=tuple(
                MemberRecommendation(
                    member_id=member_id,
                    client_id=infos[member_id].client_id,
                    client_host=infos[member_id].client_host,
                    current=_refs(self.current[member_id]),
                    current_lag=self.in_unit(self.current_ticks[member_id]),
                    recommended=_refs(recommended[member_id]),
                    recommended_lag=self.in_unit(recommended_ticks[member_id]),
                )
                for member_id in sorted(self.current)
            ),
            skew_before=self.skew_before,
            skew_after=skew_after,
            lower_bound=self.in_unit(self.lower_bound_ticks),
            moves=tuple(
                PartitionMove(
                    topic=move.partition.topic,
                    partition=move.partition.partition,
                    from_member=move.source,
                    to_member=move.target,
                    lag=self.in_unit(self.lag.get(move.partition, 0)),
                )
                for move in moved
            ),
            alternatives=self.alternatives,
            kind=kind,
            scale=scale,
            client_side=client_side,
            server_assignor=server_assignor,
            hot=hot,
        )


def propose(snapshot: GroupSnapshot, policy: EvaluationPolicy) -> Proposal:
    """``policy.strategy``'s proposal for ``snapshot``: each member's lag now, and (on first use of
    :attr:`Proposal.recommended` or a figure of it) the strategy's assignment and each member's lag after.

    Each member of the current generation becomes an assignor member that
    subscribes to its topics (when its subscription was not decoded, to every
    topic of ``snapshot.partition_counts``) and owns its current partitions
    (none when they are unknown: the evaluation proposes nothing for such a
    group, whose members' lag and so skew are unknown).
    Partitions are those of the subscribed topics in ``partition_counts``;
    lag figures and current partitions outside them are left out (no
    assignor can place them). Lag is in ``policy.lag_unit`` as
    the module docstring says. Never raises for a well-formed snapshot; a
    group without members gets an empty proposal.
    """
    assigned = snapshot.assignment
    all_topics = tuple(snapshot.partition_counts)
    members = {
        member.member_id: Member(
            topics=member.topics or all_topics,
            owned=[partition.topic_partition for partition in member.partitions or ()],
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
    current_ticks = member_lag(current, lag)
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
        current_ticks=current_ticks,
        skew_before=skew(policy.skew_metric, list(current_ticks.values())),
    )


def propose_around(snapshot: GroupSnapshot, policy: EvaluationPolicy, kept: Collection[TopicPartition]) -> Proposal:
    """:func:`propose` for the rest of a group: the partitions ``kept`` stay with the members that hold them.

    The strategy runs on ``snapshot`` without the lag of the partitions ``kept`` (they count 0, as a
    partition missing from the lag does); then each of them is taken from wherever the strategy put it
    and given back to its member now (or left unassigned, when none holds it). Every figure of the
    proposal (lags, skews, moves, the lower bound) is of the rest: the kept partitions' lag is left
    out. No kept partition is ever among the moves.
    """
    kept = frozenset(kept)
    rest = propose(
        dataclasses.replace(snapshot, lag={tp: f for tp, f in snapshot.lag.items() if tp not in kept}), policy
    )
    holder = {tp: member_id for member_id, tps in rest.current.items() for tp in tps if tp in kept}
    recommended: Assignment = {
        member_id: sorted([tp for tp in tps if tp not in kept] + [tp for tp, m in holder.items() if m == member_id])
        for member_id, tps in rest.recommended.items()
    }
    return dataclasses.replace(rest, given=recommended)


def propose_isolating(
    snapshot: GroupSnapshot,
    policy: EvaluationPolicy,
    kept: Collection[TopicPartition],
    isolated: Collection[TopicPartition],
) -> Proposal | None:
    """:func:`propose_around` that also gives each partition of ``isolated`` (heavy ones,
    :mod:`kagent.core.heavy_partitions`) a member of its own; None when the group cannot give them one.

    - Each isolated partition stays with the member that holds it now, which keeps nothing else: its other
      partitions go to the other members. When that member keeps a partition of ``kept`` (a hot one), or
      an isolated partition earlier by topic and partition, the isolated partition goes instead to the
      member that holds no kept or isolated partition and has the least lag now (then the first by id),
      among those subscribed to its topic.
    - The strategy assigns every other partition to the members given no isolated partition (the members
      keeping ``kept`` partitions among them, as in :func:`propose_around`), without the isolated and
      kept partitions' lag; kept partitions then go back to their members.
    - None when there is no member left for the rest (as many isolated partitions as members, or more),
      when no free member is subscribed to a displaced isolated partition's topic, or when a partition
      the strategy would place for the whole group has no subscribed member left to take it.

    The figures are :func:`propose_around`'s: the kept partitions' lag is left out, the isolated ones'
    counts. No kept partition is ever among the moves; an isolated one only when displaced as above.
    """
    kept = frozenset(kept)
    isolated = set(isolated) - kept
    rest = propose_around(snapshot, policy, kept)
    holder = {tp: member_id for member_id, tps in rest.current.items() for tp in tps}
    keeping = {holder[tp] for tp in kept if tp in holder}
    own: dict[TopicPartition, str] = {}
    for tp in sorted(isolated):
        member_id = holder.get(tp)
        if member_id is not None and member_id not in keeping and member_id not in own.values():
            own[tp] = member_id
    for tp in sorted(isolated - own.keys()):
        free = [
            member_id
            for member_id in sorted(rest.members)
            if member_id not in keeping and member_id not in own.values() and tp.topic in rest.members[member_id].topics
        ]
        if not free:
            return None
        own[tp] = min(free, key=lambda member_id: rest.current_ticks[member_id])
    others = {member_id: member for member_id, member in rest.members.items() if member_id not in own.values()}
    if not others:
        return None
    placed = assign(policy.strategy, rest.partitions, others, {tp: t for tp, t in rest.lag.items() if tp not in own})
    recommended: Assignment = {member_id: [] for member_id in rest.members}
    for member_id, tps in placed.items():
        recommended[member_id] = [tp for tp in tps if tp not in own and tp not in kept]
    for tp, member_id in [*own.items(), *((tp, m) for tp, m in holder.items() if tp in kept)]:
        recommended[member_id].append(tp)
    recommended = {member_id: sorted(tps) for member_id, tps in recommended.items()}
    if {tp for tps in rest.recommended.values() for tp in tps} - {tp for tps in recommended.values() for tp in tps}:
        return None
    return dataclasses.replace(rest, given=recommended)


def _ticks(figures: PartitionLag, unit: LagUnit) -> int | None:
    """The partition's lag in ticks of ``unit``; None when its offset lag is unknown, or in ``seconds``
    when its time lag is unknown and records are unread."""
    if unit is LagUnit.MESSAGES or figures.offset_lag is None:
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
