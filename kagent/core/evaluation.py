"""When a group's skew deserves a recommendation: the trigger, as a pure state machine.

The worker calls :func:`evaluate` for each group on a timer and soon after a
change, with the group's :class:`GroupSnapshot`, the group's
:class:`EvaluationState` from its changelog table (None the first time), the
:class:`EvaluationPolicy` and the time. It stores the state it gets back and
publishes the recommendation, if any. Because the state lives in a changelog
table, hold, hysteresis and cooldown survive a worker failover.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.heavy_partitions import heavy_partitions, isolation_evidence
from kagent.core.hot_partitions import hot_partitions
from kagent.core.member_lag import MemberLag, member_lags, skew_of
from kagent.core.policy import EvaluationPolicy
from kagent.core.recommendation import (
    HOT_PARTITION_REMEDY,
    HotPartitionEvidence,
    HotPartitionRate,
    MemberRate,
    PartitionRate,
    Proposal,
    Recommendation,
    ScaleEvidence,
    propose,
    propose_around,
    propose_isolating,
)
from kagent.core.remedies import RemedyKind, remedies
from kagent.core.snapshot import GroupSnapshot
from kagent.core.throughput import GroupThroughput, PartitionThroughput, falls_behind, group_throughput

__all__ = [
    "Evaluation",
    "EvaluationState",
    "evaluate",
    "hot_partition_evidence",
    "scale_evidence",
    "triggers",
    "weighs_rebalance",
]


class EvaluationState(BaseModel):
    """Where one group's trigger stands (value of the evaluation-state table, keyed by group)."""

    # It holds only what a later evaluation needs, so that an evaluation that changes nothing
    # changes nothing here and costs no changelog write. Fields that earlier versions kept
    # (``evaluated_at``, ``skew``) are ignored when their records are restored.
    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)

    group: str
    generation: int | None = None
    """The generation of the last evaluation; None before the first."""
    held: int = Field(default=0, ge=0)
    """Consecutive evaluations of this generation, while armed, in which the trigger held."""
    armed: bool = True
    """Whether the group can trigger; False from a recommendation until it re-arms."""
    cleared: bool = False
    """Whether the skew has fallen below threshold x hysteresis since the last recommendation."""
    last_recommendation_at: float | None = None
    """Seconds since the epoch of the last recommendation."""
    last_recommendation_id: str | None = None
    pending_recommendation: Recommendation | None = None
    """A recommendation decided but not yet known to be on the topic: the worker stores it here
    before sending it and clears it once the broker has it, so a worker that takes the group
    over after a crash sends it again (same id) instead of losing it. :func:`evaluate` never
    sets it."""


class Evaluation(NamedTuple):
    """What one evaluation of a group gives."""

    state: EvaluationState
    """The group's next state: store it if it differs from the one passed in."""
    recommendation: Recommendation | None
    """The recommendation to publish, when the trigger fired."""
    skew: float | None
    """The skew under the current assignment (:func:`kagent.core.member_lag.current_skew`: of
    ``member_rows``); None when it could not be measured (no members, a member's lag unknown)."""
    proposal: Proposal | None
    """What the strategy would do, with each member's lag before and after; None for a group without members."""
    scale: ScaleEvidence | None
    """When no assignment of the group's members keeps up with its producers: the rates and the members
    it needs (whether or not this evaluation sent a recommendation); None otherwise, or when not asked.
    With hot partitions, judged on the rest of the group (see :func:`evaluate`)."""
    hot: HotPartitionEvidence | None
    """The group's hot partitions (whether or not this evaluation sent a recommendation); None when none
    is hot, when it cannot be judged, or without throughput."""
    member_rows: tuple[list[MemberLag], MemberLag | None]
    """Each member's lag under the current assignment, and the row of the partitions no member holds
    (:func:`kagent.core.member_lag.member_lags` of the snapshot): what ``skew`` was measured on, for the
    figures shown beside it (adding them up is a fifth to a quarter of an evaluation's own work)."""
    recommended_skew: float | None
    """The skew under the strategy's assignment (``proposal.skew_after``) when the trigger could hold
    (:func:`weighs_rebalance`); None otherwise: the strategy is not run for a group whose skew or lag is
    below the trigger's, nor for one whose figures are not all known."""


def weighs_rebalance(proposal: Proposal, policy: EvaluationPolicy) -> bool:
    """Whether the trigger could hold for ``proposal`` (:func:`triggers`), whatever the strategy's
    assignment: every partition's lag is known in the lag unit; the skew under the current assignment
    is at least ``skew_threshold``; the members' lag adds up to something, and to at least
    ``min_total_lag``. Only then is the strategy run (its assignment and figures are
    :class:`~kagent.core.recommendation.Proposal`'s on first use): for a group it cannot trigger for,
    it changes nothing and cost a third to three fifths of :func:`evaluate` (groups of 2 to 20 members:
    271 -> 108 µs, 491 -> 321 µs, 1,753 -> 801 µs in process)."""
    return (
        not proposal.unknown
        and proposal.skew_before >= policy.skew_threshold
        and proposal.total_lag > 0
        and proposal.total_lag >= policy.min_total_lag
    )


def triggers(proposal: Proposal, policy: EvaluationPolicy) -> bool:
    """Whether one evaluation's trigger holds for ``proposal``: it could (:func:`weighs_rebalance`), and
    the strategy's assignment lowers the largest member lag, by at least ``min_improvement`` (a fraction
    of it)."""
    return (
        weighs_rebalance(proposal, policy)
        and proposal.largest_lag_after < proposal.largest_lag_before
        and proposal.improvement >= policy.min_improvement
    )


def scale_evidence(
    proposal: Proposal,
    throughput: Mapping[TopicPartition, PartitionThroughput],
    policy: EvaluationPolicy,
    left_out: Collection[TopicPartition] = (),
    current: GroupThroughput | None = None,
) -> ScaleEvidence | None:
    """The evidence for a ``scale`` recommendation, when no assignment of the proposal's members keeps up
    (:func:`kagent.core.throughput.falls_behind`, with ``policy.scale_headroom``) given each partition's
    ``throughput``; None when they can, when it cannot be told, or when ``scale_headroom`` is None.

    The partitions ``left_out`` (hot ones) are not counted: neither their rates, nor the consumption they
    took from their members, nor among the partitions a new member could hold. ``current``: the group's
    throughput over the proposal's current assignment (``group_throughput(proposal.current, throughput)``)
    when the caller has it; used when nothing is left out."""
    if policy.scale_headroom is None:
        return None
    if left_out:
        kept = {member: [tp for tp in tps if tp not in left_out] for member, tps in proposal.current.items()}
        throughput = {tp: figures for tp, figures in throughput.items() if tp not in left_out}
        group = group_throughput(kept, throughput)
    else:
        group = current if current is not None else group_throughput(proposal.current, throughput)
    partitions = sum(proposal.partitions.values()) - len(set(left_out))
    needed = falls_behind(group, partitions, policy.scale_headroom)
    if needed is None:
        return None
    return ScaleEvidence(
        members=len(proposal.current),
        members_needed=needed,
        partitions=partitions,
        production_rate=group.production_rate,
        capacity=group.capacity,
        member_capacity=group.member_capacity or 0.0,
        headroom=group.headroom if group.headroom is not None else 0.0,
        window=policy.rate_window,
        partition_rates=tuple(
            PartitionRate(topic=tp.topic, partition=tp.partition, production_rate=figures.production_rate)
            for tp, figures in sorted(throughput.items())
            if figures.production_rate is not None
        ),
        member_rates=tuple(
            MemberRate(member_id=member.member_id, consumption_rate=member.consumption_rate, saturated=member.saturated)
            for member in group.members
        ),
    )


def hot_partition_evidence(
    proposal: Proposal,
    throughput: Mapping[TopicPartition, PartitionThroughput],
    policy: EvaluationPolicy,
    current: GroupThroughput | None = None,
) -> HotPartitionEvidence | None:
    """The group's hot partitions (:func:`kagent.core.hot_partitions.hot_partitions` over the proposal's
    current assignment and ``throughput``), with the best member's capacity and the remedy; None when none
    is hot or the group cannot be judged (no member's pace measured). ``current``: the group's throughput
    over that assignment when the caller has it."""
    judged = hot_partitions(proposal.current, throughput, current)
    if judged is None or not judged.partitions:
        return None
    return HotPartitionEvidence(
        partitions=tuple(
            HotPartitionRate(
                topic=hot.partition.topic,
                partition=hot.partition.partition,
                member_id=hot.member_id,
                production_rate=hot.production_rate,
                member_capacity=hot.member_capacity,
            )
            for hot in judged.partitions
        ),
        best_capacity=judged.best_capacity,
        window=policy.rate_window,
        remedy=HOT_PARTITION_REMEDY,
    )


def evaluate(
    snapshot: GroupSnapshot,
    state: EvaluationState | None,
    policy: EvaluationPolicy,
    now: float,
    throughput: Mapping[TopicPartition, PartitionThroughput] | None = None,
) -> Evaluation:
    """Evaluate one group at ``now``: its next state, its skew, and a recommendation when it triggers.

    ``state`` is what the previous call returned for this group (None: never
    evaluated; it starts armed). The next state equals ``state`` when nothing a
    later evaluation needs has changed (so the caller stores only changes).
    The contract:

    - A group without members never triggers, leaves its skew unmeasured
      (None) and starts its hold again: that it has no members is known.
    - A group with members whose skew cannot be measured (a partition a
      member holds without measured lag, :func:`kagent.core.member_lag.skew_of`; in
      unit ``seconds``, one with records unread and no time lag), or some
      partition of which it reads is of unknown lag (:attr:`Proposal.unknown`),
      is left exactly as it was: the same state (hold count, arming,
      cooldown), no recommendation, no scale evidence. Nothing is computed
      from a figure kagent does not know, and a group not yet measured (at
      start, after a failover, while its partitions' end offsets fail)
      neither clears nor advances its trigger.
    - While armed, each evaluation in which :func:`triggers` holds adds one to
      ``held``; one in which it does not, or a new generation, starts the
      count again. When ``held`` reaches ``hold_evaluations``, the evaluation
      returns a :class:`Recommendation` built from this snapshot, and the group
      is disarmed with ``held`` at 0.
    - A disarmed group re-arms when both have happened: its skew was measured
      below ``skew_threshold x hysteresis`` in some evaluation since the
      recommendation, and ``cooldown`` seconds have passed since it. The
      evaluation that re-arms it counts towards ``held`` like any other.

    With the ``peak-to-mean`` metric, whose least value is 1, a group re-arms
    only if ``skew_threshold x hysteresis`` is above 1.

    The strategy runs only where its assignment counts: when the trigger could
    hold (:func:`weighs_rebalance`; then ``recommended_skew`` is its skew),
    for the rest of a group with hot or heavy partitions, and for a
    recommendation. A group whose skew or lag is below the trigger's gets no
    ``recommended_skew``: weighing a rebalance that cannot be sent cost a third
    to three fifths of an evaluation's own work.

    Rebalance or scale. Given each partition's ``throughput`` (production and
    consumption rates), an evaluation in which no assignment of the members
    keeps up (:func:`scale_evidence`) holds too, whatever the skew; when the
    hold is reached in such an evaluation, the recommendation is of kind
    ``scale``, with the evidence and the members needed, and no rebalance is
    recommended. Without ``throughput`` only the skew trigger counts.

    Hot partitions. Given ``throughput``, a group with hot partitions
    (:func:`hot_partition_evidence`: written faster than its member, and any
    member of the group, reads) holds too, whatever the skew: it falls
    behind on them whatever kagent moves. The rest of the group (without the
    hot partitions' lag, rates and the consumption they took) is judged as
    above: its scale evidence, and the skew trigger on
    :func:`kagent.core.recommendation.propose_around` (the strategy's
    assignment of the rest, every hot partition left with its member). When
    the hold is reached: ``scale`` when the rest falls behind; else
    ``rebalance`` of the rest when its trigger holds; else ``hot-partition``,
    which moves nothing: the group's lag is explained by its hot partitions
    alone. Each of them carries the hot partitions (``Recommendation.hot``),
    and none ever moves a hot partition.

    Heavy partitions. Given ``throughput``, the group's heavy partitions
    (:func:`kagent.core.heavy_partitions.heavy_partitions`: within a member's
    pace, but not with any other producing partition beside them) get a
    member of their own in every rebalance: the skew trigger is judged on
    :func:`kagent.core.recommendation.propose_isolating` instead (when the
    group has a member left for the rest; otherwise as above). A heavy
    partition that is *crowded* (its member falls behind on it and another)
    holds too, whatever the skew: when the hold is reached and the rest does
    not fall behind, the recommendation is that ``rebalance``, and it names
    the partitions it isolates (``Recommendation.isolated``).

    Every recommendation compares the options weighed (``Recommendation.remedies``,
    :func:`kagent.core.remedies.remedies`): the rebalance (``rebalance``'s
    assignment), the scale when there is scale evidence, the hot partitions
    when some are; without ``throughput`` their drain times are unknown.
    """
    if state is None:
        state = EvaluationState(group=snapshot.group)
    generation = snapshot.assignment.generation
    rows = member_lags(snapshot)
    skew = skew_of(rows[0], policy.lag_unit, policy.skew_metric)  # as current_skew measures it
    proposal = propose(snapshot, policy) if skew is not None else None
    if snapshot.assignment.members and (proposal is None or proposal.unknown):
        return Evaluation(state, None, skew, proposal, None, None, rows, None)
    hot = scale = current = None
    if proposal is not None and throughput is not None:
        current = group_throughput(proposal.current, throughput)  # once, for each judgement below
        hot = hot_partition_evidence(proposal, throughput, policy, current)
    kept = [TopicPartition(rate.topic, rate.partition) for rate in hot.partitions] if hot is not None else []
    if proposal is not None and throughput is not None:
        scale = scale_evidence(proposal, throughput, policy, kept, current)
    rebalance = propose_around(snapshot, policy, kept) if proposal is not None and kept else proposal
    heavy = (
        heavy_partitions(proposal.current, throughput, current) if proposal is not None and throughput else None
    ) or ()
    isolating = propose_isolating(snapshot, policy, kept, [h.partition for h in heavy]) if heavy else None
    if isolating is not None:
        rebalance = isolating
    crowded = isolating is not None and any(h.crowded for h in heavy)
    armed, cleared = state.armed, state.cleared
    if not armed:
        cleared = cleared or (skew is not None and skew < policy.rearm_below)
        armed = cleared and now - (state.last_recommendation_at or 0.0) >= policy.cooldown
    held = state.held if state.generation == generation else 0
    rebalances = rebalance is not None and triggers(rebalance, policy)
    holds = proposal is not None and (hot is not None or scale is not None or rebalances or crowded)
    held = held + 1 if armed and holds else 0
    recommendation = None
    last_at, last_id = state.last_recommendation_at, state.last_recommendation_id
    if proposal is not None and rebalance is not None and held >= policy.hold_evaluations:
        if scale is not None:
            recommendation = proposal.scale_recommendation(scale, policy.skew_threshold, held, now)
        elif rebalances or crowded or hot is None:
            recommendation = rebalance.recommendation(policy.skew_threshold, held, now)
            if isolating is not None:
                isolated = isolation_evidence(heavy, isolating.recommended, policy.rate_window)
                recommendation = recommendation.model_copy(update={"isolated": isolated})
        else:
            recommendation = proposal.hot_partition_recommendation(hot, policy.skew_threshold, held, now)
        if hot is not None and recommendation.hot is None:
            recommendation = recommendation.model_copy(update={"hot": hot})
        recommendation = _compared(recommendation, proposal, rebalance, throughput, kept, scale)
        armed, cleared, held = False, False, 0
        last_at, last_id = now, recommendation.id
    next_state = EvaluationState(
        group=snapshot.group,
        generation=generation,
        held=held,
        armed=armed,
        cleared=cleared and not armed,
        last_recommendation_at=last_at,
        last_recommendation_id=last_id,
    )
    weighed = proposal.skew_after if proposal is not None and weighs_rebalance(proposal, policy) else None
    return Evaluation(next_state, recommendation, skew, proposal, scale, hot, rows, weighed)


def _compared(
    recommendation: Recommendation,
    proposal: Proposal,
    rebalance: Proposal,
    throughput: Mapping[TopicPartition, PartitionThroughput] | None,
    hot: Collection[TopicPartition],
    scale: ScaleEvidence | None,
) -> Recommendation:
    """``recommendation`` with its remedies compared (:func:`kagent.core.remedies.remedies`): ``rebalance``'s
    assignment, the scale to ``scale``'s count, the ``hot`` partitions; every partition the group reads with
    its offset lag (unknown when not measured)."""
    lags = proposal.snapshot.lag
    read = [TopicPartition(topic, p) for topic, count in sorted(proposal.partitions.items()) for p in range(count)]
    offset_lags = {tp: figures.offset_lag if (figures := lags.get(tp)) is not None else None for tp in read}
    compared = remedies(
        current=proposal.current,
        recommended=rebalance.recommended,
        offset_lags=offset_lags,
        throughput=throughput,
        skew_now=proposal.skew_before,
        skew_after=rebalance.skew_after,
        chosen=RemedyKind(recommendation.kind.value),
        hot=hot,
        members_needed=scale.members_needed if scale is not None else None,
    )
    return recommendation.model_copy(update={"remedies": compared})
