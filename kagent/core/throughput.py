"""Throughput: how fast producers write, how fast a group's members can read, and how many members it needs.

Lag says how far behind a group is; it does not say whether the group can
ever catch up. This module answers that from the histories kagent already
keeps, without new polls:

- A partition's *production rate* is the growth of its log end over a recent
  window, read from its :class:`~kagent.core.time_lag.EndOffsetHistory`
  (:func:`production_rate`).
- The group's *consumption rate* on a partition is the growth of its
  committed offset over the same window, read from its
  :class:`~kagent.core.group_health.CommitWindow`
  (:func:`partition_consumption`). While the group is *behind* at every commit
  of the window (the partition is *busy*), the consumer is reading as fast as
  it can, and that rate measures its capacity; otherwise it only measures the
  producers. Behind is more than having lag: a consumer that keeps up has lag
  at nearly every commit of a steadily written partition (what was written
  since its last fetch), so behind means it had not yet read, by a commit,
  what had been written by its previous one.
- A member is *saturated* when one of its partitions is busy. Its capacity is
  then its consumption rate over all its partitions. A member that is not
  saturated has shown only a lower bound of its capacity; it is taken to be
  able to do what the group's typical saturated member does (the median of
  their rates, ``member_capacity``), or more if it already does more
  (:func:`group_throughput`).
- The members needed are the production rate, with ``headroom`` to spare,
  over ``member_capacity`` (:func:`members_needed`); a group needs more
  members than it has when even the best assignment of the ones it has would
  not keep that much ahead of the producers (:func:`falls_behind`).

The model takes members to be alike: a member's capacity in records per
second does not depend on which partitions it holds. Capacity is only
measured while members have lag, so a group that keeps up is never told it
has too many members: over-provisioning is out of scope.

Pure: no I/O, no Faust. Times are seconds since the epoch; rates are records
per second.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import pairwise
from statistics import median

from aiokafka.structs import TopicPartition

from kagent.core.group_health import CommitObservation, CommitWindow
from kagent.core.lag_twins import twin_of
from kagent.core.time_lag import EndOffsetHistory

__all__ = [
    "RATE_WINDOW",
    "GroupThroughput",
    "MemberThroughput",
    "PartitionThroughput",
    "falls_behind",
    "group_throughput",
    "members_needed",
    "partition_consumption",
    "partition_throughput",
    "production_rate",
]

RATE_WINDOW = 300.0
"""Seconds a rate is measured over by default."""

_SLACK = 1e-9
"""A need of members within this of a whole number is that number (``100 * 1.1 / 10`` is 11.000000000000002: 11)."""


@dataclass(frozen=True)
class PartitionThroughput:
    """What one partition's histories tell of its producers and of the group reading it."""

    production_rate: float | None
    """Records/s the partition's log end grew over the window; None when that cannot be measured
    (see :func:`production_rate`)."""
    consumption_rate: float | None
    """Records/s the group's committed offset grew over the window; None with fewer than two commits in it
    (or no time between them)."""
    busy: bool
    """Whether the group was behind at every commit of the window, at least two of them (see
    :func:`partition_consumption`): it could not keep up on this partition."""


def production_rate(history: EndOffsetHistory, now: float, window: float = RATE_WINDOW) -> float | None:
    """Records/s the log end in ``history`` grew over the ``window`` seconds before ``now``; None when unknown.

    The growth is from the history's log end at the window's start,
    ``max(oldest point's time, now - window)``, to its newest point, over the
    time between them. A start between two points takes the log end
    interpolated linearly between them (a flat run is two points, so a start
    inside one takes the run's offset: a burst before the window does not
    count, one inside it does). The rate is measured up to the newest poll,
    not up to ``now``.

    None with fewer than 2 points, or when no time lies between the start and
    the newest point (the newest poll is at or before ``now - window``: the
    history is stale). An idle partition gives 0.0; the rate is never
    negative (a history's offsets never decrease).
    """
    offsets, times = history.offsets, history.times
    if len(times) < 2:
        return None
    start = max(times[0], now - window)
    if start >= times[-1]:
        return None
    # The segment holding the start: times[right - 1] <= start < times[right].
    right = bisect_right(times, start)
    left = right - 1
    at_start = offsets[left] + (start - times[left]) * (offsets[right] - offsets[left]) / (times[right] - times[left])
    return max(0.0, (offsets[-1] - at_start) / (times[-1] - start))


def partition_consumption(
    window: CommitWindow,
    log_ends: EndOffsetHistory | None,
    now: float,
    since: float | None = None,
    span: float = RATE_WINDOW,
) -> tuple[float | None, bool]:
    """(consumption rate, busy) of a group on one partition, from its commits in the last ``span`` seconds
    and the partition's log ends (``log_ends``; None: none polled).

    The commits counted are those of ``window`` whose timestamp is at least
    ``now - span`` and at least ``since`` (when the group's current generation
    began: commits before it were made by other owners, and say nothing of the
    current one's pace).

    - The rate is ``(last.offset - first.offset) / (last.timestamp - first.timestamp)``
      over the counted commits, at least 0 (a rewind counts as no progress);
      None with fewer than two counted commits or no time between them.
      ``last`` is the newest counted commit, or the one before it while the
      newest may still take merges (``window.min_distance`` is above 0 and
      the newest is less than that old at ``now``): see the merges below.
    - Busy: at least two counted commits, and the group *behind* at each after
      the first: the record at its committed offset (the next it will read)
      was appended before the previous counted commit, by ``log_ends``
      (:meth:`~kagent.core.time_lag.EndOffsetHistory.time_at`, interpolated
      between polls). It had not read, in one commit interval, what was
      written by the start of it. A committed offset at or above the newest
      log end polled, or one the history cannot place (no history, fewer
      than two polls, a log end that never moved), is not behind: no evidence
      of lag is no evidence of a shortfall.

      Not "lag above 0 at each commit": a consumer that keeps up commits the
      records it fetched, while producers write the next ones, so it has a
      little lag at nearly every commit of a steadily written partition (one
      reading 40 records/s of 6/s written, committing twice a second, had lag
      at every commit, and its partition was called hot at 5.5/s). Nor the lag
      against the log end polled when kagent saw the commit: a commit read
      seconds late from ``__consumer_offsets`` (a busy worker, a backlog) is
      compared with a log end seconds newer than it.
    - Too few to tell: fewer counted commits than half the window holds (and
      than 2) give (None, False). A consumer reads and commits in batches, so a
      few commits just after a rebalance measure its batches, not its pace (a
      member reading 40 records/s in batches of 50 measured 21/s over 4 s).

    Commit timestamps are the coordinator's clock and poll times kagent's: a
    skew between them far below the commit interval does not matter.

    Merges. A window's entry keeps its first commit's timestamp and the
    offset of the last commit merged into it (one less than ``min_distance``
    after it, as Burrow), so its offset was committed up to ``min_distance``
    after its timestamp. A consumer that commits steadily more often than
    that has its entries' offsets the same time after their timestamps, which
    cancels in the rate, except for the newest entry while it still takes
    merges: counted, it read a consumer at 40 records/s committing every
    0.1 s at 36-40/s over a window of 10 entries a second apart, by the
    newest entry's age; left out until complete, at 40/s. Commits less steady
    than that leave an error of up to ``min_distance / S`` of a rate measured
    over ``S`` seconds; none for commits further apart than ``min_distance``
    (Java's auto-commit, every 5 s).
    """
    start = now - span if since is None else max(now - span, since)
    commits = [commit for commit in window.commits if commit.timestamp >= start]
    if len(commits) < max(2, window.capacity // 2):
        return None, False
    busy = log_ends is not None and all(_behind(log_ends, earlier, later) for earlier, later in pairwise(commits))
    first, last = commits[0], commits[-1]
    if window.min_distance > 0 and now - last.timestamp < window.min_distance:
        last = commits[-2]  # the newest may still take merges
    elapsed = last.timestamp - first.timestamp
    if elapsed <= 0:
        return None, busy
    return max(0.0, (last.offset - first.offset) / elapsed), busy


def _behind(log_ends: EndOffsetHistory, earlier: CommitObservation, later: CommitObservation) -> bool:
    """Whether, at ``later``, the group had not read what was written by ``earlier`` (see
    :func:`partition_consumption`)."""
    appended = log_ends.time_at(later.offset)
    return appended is not None and appended < earlier.timestamp


def _partition_throughput(
    history: EndOffsetHistory | None,
    commits: CommitWindow | None,
    now: float,
    since: float | None = None,
    window: float = RATE_WINDOW,
) -> PartitionThroughput:
    """One partition's :class:`PartitionThroughput` at ``now``: :func:`production_rate` of ``history`` and
    :func:`partition_consumption` of ``commits`` over ``window`` seconds (``since`` as there). A missing
    history gives an unknown production rate, and not busy; missing commits give an unknown consumption
    rate, not busy."""
    produced = None if history is None else production_rate(history, now, window)
    consumed, busy = (None, False) if commits is None else partition_consumption(commits, history, now, since, window)
    return PartitionThroughput(production_rate=produced, consumption_rate=consumed, busy=busy)


partition_throughput = twin_of(_partition_throughput)
"""Compiled where built (:mod:`kagent.core.lag_twins`): an evaluation measures every partition its group
reads, each from its commit window and its end-offset history (11 µs a partition in Python, most of it
placing each commit in the history)."""


@dataclass(frozen=True)
class MemberThroughput:
    """One member's pace over the partitions it holds."""

    member_id: str
    consumption_rate: float
    """Its partitions' consumption rates added up (an unknown one counts 0)."""
    saturated: bool
    """Whether any of its partitions is busy (it was behind at every commit of the window, so it read as fast as
    it could) and the consumption of every one it holds is known: a partition not yet measured (too few
    commits, just after a rebalance) would make its rate a part of its pace."""
    capacity: float
    """Records/s it can read: its consumption rate when saturated (measured); otherwise the larger of its
    rate and the group's ``member_capacity`` (its rate alone when the group has none)."""


@dataclass(frozen=True)
class GroupThroughput:
    """A group's producers against its members' capacity (see :func:`group_throughput`)."""

    members: tuple[MemberThroughput, ...]
    """By member id."""
    production_rate: float
    """The known production rates of the group's partitions added up."""
    capacity: float
    """The members' capacities added up."""
    member_capacity: float | None
    """The median consumption rate of the saturated members (a typical member's capacity); None when no
    member is saturated."""
    unknown_partitions: int
    """The group's partitions whose production rate is unknown (not counted in ``production_rate``)."""

    @property
    def headroom(self) -> float | None:
        """``capacity / production_rate - 1``: the share of capacity to spare (below 0: short of the
        producers). None when ``production_rate`` is 0 or ``member_capacity`` is None (no capacity measured)."""
        if self.production_rate == 0 or self.member_capacity is None:
            return None
        return self.capacity / self.production_rate - 1


def group_throughput(
    assignment: Mapping[str, Collection[TopicPartition]], partitions: Mapping[TopicPartition, PartitionThroughput]
) -> GroupThroughput:
    """A group's :class:`GroupThroughput` from its current assignment and each partition's figures.

    ``assignment`` maps each member id to the partitions it holds now;
    ``partitions`` maps every partition the group reads, held or not, to its
    :class:`PartitionThroughput`. The group's partitions are those of either.

    - ``production_rate`` adds up the known production rates of the group's
      partitions; ``unknown_partitions`` counts the others (a held partition
      missing from ``partitions`` is one).
    - A member's consumption rate adds up its partitions' (unknown or missing:
      0); it is saturated when one of its partitions is busy and none of them
      has an unknown or missing consumption rate (a sum with a part missing
      would understate its pace: a member that read 40 records/s measured 15
      with two of its four partitions not yet measured).
    - ``member_capacity`` is the median consumption rate of the saturated
      members (the mean of the middle two for an even count), None without any.
    - A saturated member's capacity is its consumption rate; any other's is
      ``max(its rate, member_capacity)`` (its rate when ``member_capacity`` is
      None). ``capacity`` adds them up.
    """
    group_partitions = sorted(set(partitions).union(*assignment.values()))
    produced = [partitions[tp].production_rate for tp in group_partitions if tp in partitions]
    rates = [rate for rate in produced if rate is not None]
    paces: list[tuple[str, float, bool]] = []
    for member_id in sorted(assignment):
        held = [partitions[tp] for tp in sorted(set(assignment[member_id])) if tp in partitions]
        measured = len(held) == len(set(assignment[member_id])) and all(f.consumption_rate is not None for f in held)
        rate = sum(f.consumption_rate or 0.0 for f in held)
        paces.append((member_id, rate, measured and any(f.busy for f in held)))
    saturated_rates = [rate for _, rate, saturated in paces if saturated]
    member_capacity = median(saturated_rates) if saturated_rates else None
    members = tuple(
        MemberThroughput(
            member_id=member_id,
            consumption_rate=rate,
            saturated=saturated,
            capacity=rate if saturated else max(rate, member_capacity or 0.0),
        )
        for member_id, rate, saturated in paces
    )
    return GroupThroughput(
        members=members,
        production_rate=sum(rates),
        capacity=sum(member.capacity for member in members),
        member_capacity=member_capacity,
        unknown_partitions=len(group_partitions) - len(rates),
    )


def members_needed(throughput: GroupThroughput, partitions: int, headroom: float) -> int | None:
    """How many members of the group's typical capacity read ``headroom`` faster than its producers write.

    ``partitions`` is the number of partitions the group reads; ``headroom``
    the share of capacity to keep spare (0.2: capacity 20% above the
    production rate), at least 0. The answer is
    ``ceil(production_rate * (1 + headroom) / member_capacity)`` (a need
    within 1e-9 of a whole number counts as that number, against float
    rounding), at least 1 and at most ``partitions`` (a member beyond the
    partition count holds nothing).

    None when it cannot be told: no capacity measured (``member_capacity``
    None or 0), some partition's production rate unknown, or no partitions.

    Raises ValueError for a negative ``headroom``.
    """
    if headroom < 0:
        raise ValueError(f"headroom must be at least 0, not {headroom}")
    member_capacity = throughput.member_capacity
    if member_capacity is None or member_capacity <= 0 or throughput.unknown_partitions or partitions <= 0:
        return None
    need = math.ceil(throughput.production_rate * (1 + headroom) / member_capacity - _SLACK)
    return min(partitions, max(1, need))


def falls_behind(throughput: GroupThroughput, partitions: int, headroom: float) -> int | None:
    """The members the group needs when no assignment of its current members keeps ahead of its producers;
    None when some does, or when it cannot be told.

    The contract: :func:`members_needed` (``partitions`` and ``headroom`` as
    there) when both hold:

    1. ``production_rate * (1 + headroom) > capacity``: the members' capacity
       added up, the measured one of saturated members and the estimated one
       of the others, is short of the production rate with ``headroom`` to
       spare. Then no assignment of these members has that margin; when it
       holds, some assignment does, and moving partitions off the saturated
       members onto the others is a rebalance (the skew trigger's job), not
       a scale-out.
    2. ``members_needed > len(members)``: more members of the typical
       capacity are needed than the group has (and a partition is left for
       each new one: the count is capped at ``partitions``).

    Otherwise None; always None when :func:`members_needed` is (no member
    saturated, a production rate unknown, no partitions). An idle group
    (production 0) never falls behind.

    Why not "every member is saturated" alone: a group whose members all have
    lag may be working off an old backlog (after an outage, a redeploy, a
    replay) at full speed while producers write well below its capacity; the
    lag shrinks and more members are not needed. Saturation is what makes
    capacity measurable, not evidence of a shortfall; the shortfall is the
    comparison with production. With ``headroom`` in that comparison, a group
    whose producers write less than its capacity but within the margin
    (catching up, but slowly: between ``capacity / (1 + headroom)`` and
    ``capacity``) is told to scale, as :func:`members_needed` counts with the
    same margin.

    When (1) holds but (2) does not, as many members as the group has would
    do at the typical capacity: the shortfall comes from members slower than
    the typical one (a stuck or slow consumer, records costlier to process),
    a matter for health alerts or placement, not for more members: None.
    """
    needed = members_needed(throughput, partitions, headroom)
    if needed is None or needed <= len(throughput.members):
        return None
    if throughput.production_rate * (1 + headroom) <= throughput.capacity:
        return None
    return needed
