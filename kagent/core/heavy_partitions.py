"""Heavy partitions: within one member's pace, but too busy to share a member with any other producing partition.

A partition written at 70 % of what a member reads is no problem alone; put
on one member with another partition written at 45 %, that member falls
behind, whatever the lag-balancing strategy does with the lag it piles up
(it sees lag, not rates, and may hand the heavy partition to another member
that already reads a busy one). Unlike a hot partition
(:mod:`kagent.core.hot_partitions`), an assignment fixes it: the heavy
partition on a member of its own, the others spread over the rest.
:func:`heavy_partitions` names such partitions;
:func:`kagent.core.recommendation.propose_isolating` builds that assignment,
and :func:`kagent.core.evaluation.evaluate` recommends it.

The contract of :func:`heavy_partitions`, over a group's current assignment
and each partition's :class:`~kagent.core.throughput.PartitionThroughput`
(rates over the rate window), with members' figures from
:func:`kagent.core.throughput.group_throughput`:

- The group is judged only when its capacity is measured (some member is
  saturated: it was behind throughout the window, so its rate is its pace) and
  the production rate of every partition of the group is known (a rate
  missing or unknown gives None: *not judged*). Whether a partition can
  share a member depends on the lightest of the others, so one unknown rate
  leaves every partition unjudged: an unknown rate is never taken as small
  or large.
- A member's *capacity* is throughput's: its pace when saturated; otherwise
  the group's typical pace (the median of the saturated members') or its
  own rate when higher. A member with no measured pace of its own is thus
  taken at the typical one, as the scale rule takes it; one that keeps up
  with what it holds shows a rate at least that high.
- A partition *p* written at *r* and held by member *m* of capacity *c* is
  *heavy* when all hold:

  1. a member holds it (a partition no member holds is not judged);
  2. ``0 < r <= c``: it is written to (an idle partition is never heavy)
     and within its member's capacity (above it, the partition is hot, or
     beyond its member but not the fastest one: neither is heavy);
  3. some other partition of the group is written to (``r' > 0``), and
     ``r + min(r') > c``, strictly: even the lightest other producing
     partition would take the member beyond its capacity. At exactly ``c``
     the member just keeps up with both: not heavy. Idle partitions do not
     count as others: they cost a member nothing, so they can share.

- A heavy partition is *crowded* when its member is saturated (its pace is
  measured and it was behind throughout the window) and holds another
  partition that is written to: the member's partitions are written faster
  than it reads (by rule 3), so it falls behind now, and isolating the
  heavy partition is the fix. A heavy partition alone on its member (or
  with idle ones) is not crowded: a rebalance made for other reasons keeps
  it alone.

Rule 3 asks whether the partition can share a member with *any* other, not
how all of them pack: a partition at 60 % of a member's pace beside others
at 10 % is not heavy, though four of those would overload it. Packing rates
into members is left out; the lightest other partition is the clearest case,
and the one a lag-based strategy gets wrong.

The model takes members to be alike and records to cost the same wherever
they come from, as :mod:`kagent.core.throughput` does: the heavy partition's
member now stands for the member that would hold it.

Pure: no I/O, no Faust. Rates are records per second.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from aiokafka.structs import TopicPartition

from kagent.core.drain_time import rate_text
from kagent.core.recommendation import HeavyPartitionRate, IsolationEvidence
from kagent.core.throughput import GroupThroughput, PartitionThroughput, group_throughput

__all__ = ["HeavyPartition", "heavy_partition_text", "heavy_partitions", "isolation_evidence"]


@dataclass(frozen=True)
class HeavyPartition:
    """One partition within its member's capacity that cannot share a member (see :func:`heavy_partitions`)."""

    partition: TopicPartition
    member_id: str
    """The member that holds it now."""
    production_rate: float
    """Records/s written to it over the window."""
    member_capacity: float
    """Records/s its member can read (throughput's capacity: its pace when saturated, else the typical one)."""
    lightest_other_rate: float
    """Records/s written to the least written of the group's other partitions that are written to."""
    crowded: bool
    """Whether its member is saturated and holds another partition that is written to: it falls behind now."""


def heavy_partitions(
    assignment: Mapping[str, Collection[TopicPartition]],
    throughput: Mapping[TopicPartition, PartitionThroughput],
    group: GroupThroughput | None = None,
) -> tuple[HeavyPartition, ...] | None:
    """The heavy partitions of a group holding ``assignment`` (member id -> its partitions now), given each
    partition's ``throughput``, by topic and partition; None when the group cannot be judged (no member
    saturated, or a partition's production rate unknown). The rules are the module's. ``group``:
    ``group_throughput(assignment, throughput)`` when the caller has it."""
    if group is None:
        group = group_throughput(assignment, throughput)
    if group.member_capacity is None or group.unknown_partitions:
        return None
    rates = {tp: figures.production_rate for tp, figures in throughput.items() if figures.production_rate is not None}
    producing = sorted((rate, tp) for tp, rate in rates.items() if rate > 0)
    members = {member.member_id: member for member in group.members}
    heavy = []
    for member_id in sorted(assignment):
        holder = members[member_id]
        held = sorted(set(assignment[member_id]))
        for tp in held:
            rate = rates[tp]
            lightest = next((other for other, other_tp in producing if other_tp != tp), None)
            if lightest is None or not 0 < rate <= holder.capacity or rate + lightest <= holder.capacity:
                continue
            shares = any(rates[other] > 0 for other in held if other != tp)
            heavy.append(HeavyPartition(tp, member_id, rate, holder.capacity, lightest, holder.saturated and shares))
    return tuple(sorted(heavy, key=lambda h: h.partition))


def isolation_evidence(
    heavy: Sequence[HeavyPartition], recommended: Mapping[str, Collection[TopicPartition]], window: float
) -> IsolationEvidence:
    """The record of the ``heavy`` partitions an assignment ``recommended`` (member id -> partitions) leaves
    each on a member of its own, with their rates over ``window`` seconds."""
    given = {tp: member_id for member_id, tps in recommended.items() for tp in tps}
    return IsolationEvidence(
        partitions=tuple(
            HeavyPartitionRate(
                topic=h.partition.topic,
                partition=h.partition.partition,
                member_id=given[h.partition],
                production_rate=h.production_rate,
                member_capacity=h.member_capacity,
                lightest_other_rate=h.lightest_other_rate,
            )
            for h in heavy
        ),
        window=window,
    )


def heavy_partition_text(evidence: IsolationEvidence) -> str:
    """How every interface says the partitions a recommendation isolates: ``heavy partition orders-0
    written at 28/s, alone on c0 (a member reads 40/s, less than 28/s plus the lightest other partition's
    17/s)``, partitions joined by ``, ``."""
    partitions = ", ".join(
        f"{p.topic}-{p.partition} written at {rate_text(p.production_rate)}, alone on {p.member_id} "
        f"(a member reads {rate_text(p.member_capacity)}, less than {rate_text(p.production_rate)} plus the "
        f"lightest other partition's {rate_text(p.lightest_other_rate)})"
        for p in evidence.partitions
    )
    plural = "s" if len(evidence.partitions) > 1 else ""
    return f"heavy partition{plural} {partitions}"
