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

from collections.abc import Mapping
from typing import NamedTuple

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.member_lag import current_skew
from kagent.core.policy import EvaluationPolicy
from kagent.core.recommendation import (
    MemberRate,
    PartitionRate,
    Proposal,
    Recommendation,
    ScaleEvidence,
    propose,
)
from kagent.core.snapshot import GroupSnapshot
from kagent.core.throughput import PartitionThroughput, falls_behind, group_throughput

__all__ = ["Evaluation", "EvaluationState", "evaluate", "scale_evidence", "triggers"]


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
    """The skew under the current assignment (:func:`kagent.core.member_lag.current_skew`); None when it
    could not be measured (no members, a member's lag unknown)."""
    proposal: Proposal | None
    """What the strategy would do, with each member's lag before and after; None for a group without members."""
    scale: ScaleEvidence | None
    """When no assignment of the group's members keeps up with its producers: the rates and the members
    it needs (whether or not this evaluation sent a recommendation); None otherwise, or when not asked."""


def triggers(proposal: Proposal, policy: EvaluationPolicy) -> bool:
    """Whether one evaluation's trigger holds for ``proposal``.

    All of: every partition's lag is known in the lag unit; the skew under
    the current assignment is at least ``skew_threshold``; the members' lag
    adds up to something, and to at least ``min_total_lag``; the strategy's
    assignment lowers the largest member lag, by at least ``min_improvement``
    (a fraction of it).
    """
    return (
        not proposal.unknown
        and proposal.skew_before >= policy.skew_threshold
        and proposal.total_lag > 0
        and proposal.total_lag >= policy.min_total_lag
        and proposal.largest_lag_after < proposal.largest_lag_before
        and proposal.improvement >= policy.min_improvement
    )


def scale_evidence(
    proposal: Proposal, throughput: Mapping[TopicPartition, PartitionThroughput], policy: EvaluationPolicy
) -> ScaleEvidence | None:
    """The evidence for a ``scale`` recommendation, when no assignment of the proposal's members keeps up
    (:func:`kagent.core.throughput.falls_behind`, with ``policy.scale_headroom``) given each partition's
    ``throughput``; None when they can, when it cannot be told, or when ``scale_headroom`` is None."""
    if policy.scale_headroom is None:
        return None
    group = group_throughput(proposal.current, throughput)
    partitions = sum(proposal.partitions.values())
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

    Rebalance or scale. Given each partition's ``throughput`` (production and
    consumption rates), an evaluation in which no assignment of the members
    keeps up (:func:`scale_evidence`) holds too, whatever the skew; when the
    hold is reached in such an evaluation, the recommendation is of kind
    ``scale``, with the evidence and the members needed, and no rebalance is
    recommended. Without ``throughput`` only the skew trigger counts.
    """
    if state is None:
        state = EvaluationState(group=snapshot.group)
    generation = snapshot.assignment.generation
    skew = current_skew(snapshot, policy.lag_unit, policy.skew_metric)
    proposal = propose(snapshot, policy) if skew is not None else None
    if snapshot.assignment.members and (proposal is None or proposal.unknown):
        return Evaluation(state, None, skew, proposal, None)
    scale = scale_evidence(proposal, throughput, policy) if proposal is not None and throughput is not None else None
    armed, cleared = state.armed, state.cleared
    if not armed:
        cleared = cleared or (skew is not None and skew < policy.rearm_below)
        armed = cleared and now - (state.last_recommendation_at or 0.0) >= policy.cooldown
    held = state.held if state.generation == generation else 0
    holds = proposal is not None and (scale is not None or triggers(proposal, policy))
    held = held + 1 if armed and holds else 0
    recommendation = None
    last_at, last_id = state.last_recommendation_at, state.last_recommendation_id
    if proposal is not None and held >= policy.hold_evaluations:
        if scale is not None:
            recommendation = proposal.scale_recommendation(scale, policy.skew_threshold, held, now)
        else:
            recommendation = proposal.recommendation(policy.skew_threshold, held, now)
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
    return Evaluation(next_state, recommendation, skew, proposal, scale)
