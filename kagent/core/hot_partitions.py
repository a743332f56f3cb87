"""Hot partitions: a partition written faster than any member of its group can read it.

Key skew sends a hot key's records to one partition (the default
partitioner hashes a key to one partition). When that partition's producers
write faster than one consumer can read, no assignment and no number of
members fixes it: whichever member holds it falls behind. This module names
such partitions, from the figures :mod:`kagent.core.throughput` measures;
:func:`kagent.core.evaluation.evaluate` turns them into a ``hot-partition``
recommendation that moves nothing.

The contract of :func:`hot_partitions`, over a group's current assignment and
each partition's :class:`~kagent.core.throughput.PartitionThroughput` (rates
over the rate window):

- The group's *best capacity* is the largest consumption rate any of its
  members has shown over the window (a member's partitions added up, by
  :func:`kagent.core.throughput.group_throughput`). A saturated member's rate
  is its capacity; another's is a lower bound of it, so counting it only
  makes the best capacity larger and a partition harder to call hot.
- The group can be judged only when some member is saturated (it was behind
  throughout the window, so its rate is its measured pace) and the best
  capacity is above 0. Otherwise its capacity is not measured, and
  :func:`hot_partitions` returns None: *not judged*, which is not "no hot
  partition".
- A partition is *hot* when all hold:

  1. its production rate is known (an unknown rate is never judged: no
     partition is hot by default);
  2. a member holds it, and that member is saturated (its capacity is
     measured: a member with no measured pace is not judged);
  3. the partition is busy: the group was behind at every commit of the
     window on it (:func:`kagent.core.throughput.partition_consumption`:
     it had not read, by a commit, what was written by its previous one; a
     member that keeps up has a little lag at every commit of a steadily
     written partition, and is not behind). A burst the member absorbed,
     catching up at some commit, is not hot, whatever its rate over the
     window; a burst it is still working off counts at its rate over the
     window, which spreads it over the whole window, and the evaluation's
     hold asks for it to last;
  4. its production rate is above the holding member's capacity, and above
     the best capacity (strictly: a partition written exactly at the best
     capacity is not hot; one member can just keep up with it).

  An idle partition (production 0) is never hot (rule 4 fails).

The model takes records to cost the same wherever they come from, as
:mod:`kagent.core.throughput` does: a member that reads 100 records/s over
its partitions reads about 100/s from one of them alone.

Pure: no I/O, no Faust. Rates are records per second.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from aiokafka.structs import TopicPartition

from kagent.core.drain_time import rate_text
from kagent.core.recommendation import HotPartitionEvidence
from kagent.core.throughput import GroupThroughput, PartitionThroughput, group_throughput

__all__ = ["HotPartition", "HotPartitions", "hot_partition_text", "hot_partitions"]


@dataclass(frozen=True)
class HotPartition:
    """One partition written faster than any member of its group reads."""

    partition: TopicPartition
    member_id: str
    """The member that holds it now."""
    production_rate: float
    """Records/s written to it over the window."""
    member_capacity: float
    """Records/s its holder read over the window, its partitions added up (it was saturated: its pace)."""


@dataclass(frozen=True)
class HotPartitions:
    """The judgement of one group (see :func:`hot_partitions`)."""

    best_capacity: float
    """Records/s: the largest consumption rate any member of the group showed over the window (> 0)."""
    partitions: tuple[HotPartition, ...]
    """The hot partitions, by topic and partition; empty when none is."""


def hot_partitions(
    assignment: Mapping[str, Collection[TopicPartition]],
    throughput: Mapping[TopicPartition, PartitionThroughput],
    group: GroupThroughput | None = None,
) -> HotPartitions | None:
    """The hot partitions of a group holding ``assignment`` (member id -> its partitions now), given each
    partition's ``throughput``; None when the group cannot be judged (no member saturated, or none read
    anything: no capacity measured). The rules are the module's. ``group``: ``group_throughput(assignment,
    throughput)`` when the caller has it (an evaluation computes it once for every judgement of it)."""
    if group is None:
        group = group_throughput(assignment, throughput)
    if not any(member.saturated for member in group.members):
        return None
    best = max(member.consumption_rate for member in group.members)
    if best <= 0:
        return None
    members = {member.member_id: member for member in group.members}
    hot = []
    for member_id in sorted(assignment):
        holder = members[member_id]
        if not holder.saturated:
            continue
        for tp in sorted(set(assignment[member_id])):
            figures = throughput.get(tp)
            if figures is None or figures.production_rate is None or not figures.busy:
                continue
            rate = figures.production_rate
            if rate > holder.consumption_rate and rate > best:
                hot.append(HotPartition(tp, member_id, rate, holder.consumption_rate))
    return HotPartitions(best_capacity=best, partitions=tuple(sorted(hot, key=lambda h: h.partition)))


def hot_partition_text(evidence: HotPartitionEvidence) -> str:
    """How every interface says a recommendation's hot partitions: ``hot partition orders-0 written at 300/s
    (its member a reads 100/s); the fastest member reads 100/s``, partitions joined by ``, ``."""
    partitions = ", ".join(
        f"{hot.topic}-{hot.partition} written at {rate_text(hot.production_rate)} "
        f"(its member {hot.member_id} reads {rate_text(hot.member_capacity)})"
        for hot in evidence.partitions
    )
    plural = "s" if len(evidence.partitions) > 1 else ""
    return f"hot partition{plural} {partitions}; the fastest member reads {rate_text(evidence.best_capacity)}"
