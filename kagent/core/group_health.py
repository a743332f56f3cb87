"""Group health: Burrow's consumer-status rules over a sliding window of commits, as pure functions.

Burrow (linkedin/Burrow) judges a consumer group without a lag threshold: for
each partition the group consumes it keeps the group's last few offset
commits, and asks of that window whether the consumer is keeping up. kagent
does the same here, from the commits it reads on ``__consumer_offsets`` and
the log-end offsets it polls. The rules follow Burrow's evaluator
(``core/internal/evaluator/caching.go``, ``calculatePartitionStatus`` and the
rule functions it calls, read at Burrow commit
ced55ba90f6b833a45a124d411fd5eef63a70933; the evaluator last changed in
2676759d731365a9924869edfc589209cbd99556). Each rule is a function below,
named after Burrow's, so that Burrow's own test cases can be checked against
it one by one.

A partition's status, the first of these that applies:

1. OK when the current lag (log end minus the last committed offset) is at
   most ``allowed_lag``: nothing to consume is never a fault, whatever the
   window looks like. An idle partition, whose log end has not moved since
   the consumer caught up, is OK however long ago the last commit was.
2. STOP when no commit came for longer than the window spans (Burrow's
   ``checkIfOffsetsStopped``), unless a recent log-end poll was at or below
   the last committed offset (``checkIfRecentLagZero``) or the oldest unread
   record has not waited longer than the window spans (kagent's addition).
3. REWIND when a committed offset went below the one before it
   (``checkIfOffsetsRewind``) and no later commit came back up to that one
   (``checkIfRewindRecovered``).
4. If some commit in the window had lag at most ``allowed_lag``
   (``isLagAlwaysNotZero`` false), OK. Otherwise STALL when every commit
   in the window is the same offset (``checkIfOffsetsStalled``), then WARN
   when the lag never fell from one commit to the next
   (``checkIfLagNotDecreasing``), else OK.

Where kagent departs from Burrow, and why:

- STOP counts the silence from when records began to wait, not from the last
  commit. A consumer that commits only when it has read something (Faust
  does) is silent on an idle topic; when a record finally arrives, Burrow
  sees an hour without a commit and calls the partition STOP at once, unless
  one of its last ``intervals`` broker-offset polls still shows the consumer
  caught up (its fix for linkedin/Burrow#303, #338: a grace of a few minutes,
  after which a slow topic pages again). With ``time_lag`` (how long the
  oldest unread record has waited, :func:`kagent.core.time_lag.time_lag`),
  the partition is STOP only once records have waited longer than the window
  spans: a consumer is never blamed for not committing while there was
  nothing to read. Burrow's idle-topic reports (#38, #94, #140, #185) were of
  lag-0 partitions; rule 1 states that case as the contract.
- Short windows. Burrow judges any window (its ``minimum-complete`` defaults
  to 0): a single commit spans no time, so a new consumer's first commit with
  lag is STOP the moment the clock moves, and STALL and WARN read a "trend"
  from two or three commits. Here STOP and REWIND need ``min_commits``
  commits (2: a span, a step), and STALL and WARN need a full window, as the
  trend they describe is the window's. A consumer that stops committing stops
  filling its window, so STOP does not wait for a full one. The cost: a
  consumer that committed once and never again is not judged (OK, saying
  why) until it commits a second time.
- WARN needs at least two commits with a known lag: Burrow's rule holds
  vacuously when no lag is known, which is no evidence of falling behind.
- A group's status is its worst partition's own status, in Burrow's severity
  order (OK < WARN < STOP < STALL < REWIND), not Burrow's ``ERR`` that folds
  the last three together: the alert names the failure. A group that was
  deleted, or has nothing left to judge, is OK with no culprits, so its
  incidents resolve. Burrow forgets a group on its group tombstone (#727),
  but a group deleted without one (assign()-only groups, #818) or a topic
  the group no longer reads (#854) stays in its storage until
  ``expire-group`` (a week by default), and its stale commits go on
  alerting STOP on the ghost (#589, #797).

Pure: no I/O, no Faust. Times are seconds since the epoch; offsets and lags
are in records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from functools import partial
from itertools import pairwise
from operator import gt, le
from typing import Any, NamedTuple

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field, model_validator

from kagent.core.lag_twins import twin_of

__all__ = [
    "DEFAULT_COMMITS",
    "CommitObservation",
    "CommitWindow",
    "Culprit",
    "GroupHealth",
    "GroupStatus",
    "PartitionHealth",
    "PartitionStatus",
    "add_commit",
    "group_status",
    "judged_group",
    "lag_always_not_zero",
    "lag_not_decreasing",
    "offsets_rewind_index",
    "offsets_stalled",
    "offsets_stopped",
    "partition_status",
    "recent_lag_zero",
    "rewind_recovered",
    "stop_possible_from",
]

DEFAULT_COMMITS = 10
"""Commits a :class:`CommitWindow` keeps by default (Burrow's storage ``intervals`` default)."""


class PartitionStatus(str, Enum):
    """How a group is doing on one partition, in Burrow's names; :attr:`severity` orders them."""

    UNKNOWN = "UNKNOWN"
    """Nothing could be judged (Burrow's ``NOTFOUND``): no partition with a commit window and a measured
    lag. A group's status only; never a partition's, and never exported as a figure."""
    OK = "OK"
    """Keeping up, caught up, idle, or too little history to say otherwise."""
    WARN = "WARN"
    """Committing, but the lag never fell across the window: the consumer is falling behind."""
    STOP = "STOP"
    """Records wait and no commit came for longer than the window spans: the consumer is gone or stuck."""
    STALL = "STALL"
    """Committing the same offset over the whole window while records wait: alive but not progressing."""
    REWIND = "REWIND"
    """A committed offset went backwards and has not come back: records are being read again (or skipped)."""

    @property
    def severity(self) -> int:
        """Burrow's ``StatusConstant`` value: the larger, the worse (3 is Burrow's group-only ``ERR``)."""
        return _SEVERITY[self]


_SEVERITY: Mapping[PartitionStatus, int] = {
    PartitionStatus.UNKNOWN: 0,
    PartitionStatus.OK: 1,
    PartitionStatus.WARN: 2,
    PartitionStatus.STOP: 4,
    PartitionStatus.STALL: 5,
    PartitionStatus.REWIND: 6,
}

GroupStatus = PartitionStatus
"""A group's status: its worst partition's (see :func:`group_status`)."""


class CommitObservation(NamedTuple):
    """One offset commit of a group on a partition, with the log end kagent knew when it saw it."""

    offset: int
    """The committed offset: the next record the group will read."""
    timestamp: float
    """When the group committed it (the commit's own timestamp), seconds since the epoch."""
    log_end_offset: int | None
    """The partition's log-end offset at the latest poll before the commit was seen; None when unknown."""

    @property
    def lag(self) -> int | None:
        """Records the group was behind at this commit: ``max(0, log end - offset)`` (a log end polled
        before the commit can trail it: that counts 0, as in Burrow); None when the log end is unknown."""
        if self.log_end_offset is None:
            return None
        return max(0, self.log_end_offset - self.offset)


class CommitWindow(BaseModel):
    """The last ``capacity`` commits of one group on one partition, oldest first (Burrow's offset ring).

    Timestamps never decrease along the window; commits join it by :func:`add_commit`'s rules (the
    committed-offsets table's values keep one, :mod:`kagent.core.committed_offset`). Immutable.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    capacity: int = Field(default=DEFAULT_COMMITS, ge=1)
    """Commits kept (Burrow's ``intervals``); the oldest goes when a new one comes."""
    min_distance: float = Field(default=0.0, ge=0)
    """Seconds: a commit closer than this to the newest replaces it instead of taking a slot (Burrow's
    ``min-distance``), so a consumer that commits many times a second does not shrink the window's span."""
    commits: tuple[CommitObservation, ...] = ()
    """Oldest first."""

    @model_validator(mode="after")
    def _fits(self) -> CommitWindow:
        if len(self.commits) > self.capacity:
            raise ValueError(f"{len(self.commits)} commits do not fit a window of {self.capacity}")
        if any(later.timestamp < earlier.timestamp for earlier, later in pairwise(self.commits)):
            raise ValueError("a window's commits must be in timestamp order")
        return self

    @property
    def full(self) -> bool:
        """Whether the window holds ``capacity`` commits."""
        return len(self.commits) == self.capacity

    @property
    def complete(self) -> float:
        """The share of the window filled, 0 to 1 (Burrow's ``Complete``)."""
        return len(self.commits) / self.capacity

    @property
    def latest(self) -> CommitObservation | None:
        """The newest commit; None when the window is empty."""
        return self.commits[-1] if self.commits else None

    @property
    def span(self) -> float:
        """Seconds from the oldest commit to the newest (0 with fewer than two)."""
        return self.commits[-1].timestamp - self.commits[0].timestamp if self.commits else 0.0


def add_commit(commits: list[Sequence[Any]], observation: Sequence[Any], capacity: int, min_distance: float) -> bool:
    """Add ``observation`` to a window's ``commits`` (``(offset, timestamp, log_end_offset)`` each, oldest
    first) as the newest, in place; whether they changed.

    - An observation older than the newest commit, or the newest again (same
      offset and timestamp: a replayed record), leaves them as they are.
    - One less than ``min_distance`` seconds after the newest replaces it,
      keeping the newest's timestamp (so that steady frequent commits still
      move the window on: Burrow's ``mergeFrequentCommitIntoPrevious``).
    - Otherwise it is appended, and beyond ``capacity`` the oldest go.

    Works on plain sequences (the committed-offsets table's parsed JSON) as on
    :class:`CommitObservation` s, so the hot path and the model share one rule.
    """
    if commits:
        latest = commits[-1]
        if observation[1] < latest[1] or (observation[0] == latest[0] and observation[1] == latest[1]):
            return False
        if observation[1] - latest[1] < min_distance:
            commits[-1] = (observation[0], latest[1], observation[2])
            return True
    commits.append(observation)
    if len(commits) > capacity:
        del commits[:-capacity]
    return True


# Burrow's rules, one function each, over a window's commits (oldest first). Burrow numbers them in
# its comments; the names are its function names.


def lag_always_not_zero(commits: Sequence[CommitObservation], allowed_lag: int = 0) -> bool:
    """Burrow's ``isLagAlwaysNotZero`` (its Rule 1): no commit had a lag at most ``allowed_lag``.

    A commit whose lag is unknown neither breaks nor proves it.
    """
    lags = _known_lags(commits)
    return not lags or min(lags) > allowed_lag


def offsets_rewind_index(commits: Sequence[CommitObservation]) -> int | None:
    """Burrow's ``checkIfOffsetsRewind`` (Rule 2): the index of the first commit below the one before
    it; None when the offsets never go back (Burrow's -1)."""
    offsets = [commit[0] for commit in commits]  # each commit's offset
    if not any(map(gt, offsets, offsets[1:])):  # as a rule they never go back: found without a step in Python
        return None
    return next(index for index in range(1, len(offsets)) if offsets[index] < offsets[index - 1])


def rewind_recovered(commits: Sequence[CommitObservation], index: int) -> bool:
    """Burrow's ``checkIfRewindRecovered`` (Rule 2, part 2): whether a commit from ``index`` (a rewind)
    on is back at or beyond the offset committed just before the rewind."""
    before = commits[index - 1].offset
    return any(commit.offset >= before for commit in commits[index:])


def offsets_stopped(commits: Sequence[CommitObservation], now: float) -> bool:
    """Burrow's ``checkIfOffsetsStopped`` (Rule 3): the time since the newest commit is greater (strictly)
    than the time from the oldest commit to the newest. False for an empty window."""
    if not commits:
        return False
    first, last = commits[0].timestamp, commits[-1].timestamp
    return now - last > last - first


def stop_possible_from(
    window: CommitWindow, log_end_offset: int, *, allowed_lag: int = 0, min_commits: int = 2
) -> float | None:
    """The earliest time at which :func:`partition_status` could say STOP for this window and log end
    if neither changes: the newest commit's time plus the time the window spans (from then on
    :func:`offsets_stopped` holds). None when it cannot say STOP without a new commit or log end: the
    lag is within ``allowed_lag``, or the window has fewer than ``min_commits`` commits.

    STOP is the one rule that reads the clock; the others judge the window and the log end alone.
    So until this time (the earliest over a group's partitions) a group's status is what it was,
    unless a commit, an assignment or an end offset changes. ``time_lag`` and recent log ends only
    hold STOP back, never bring it forward."""
    commits = window.commits
    if len(commits) < max(1, min_commits) or log_end_offset - commits[-1].offset <= allowed_lag:
        return None
    first, last = commits[0].timestamp, commits[-1].timestamp
    return last + (last - first)


def offsets_stalled(commits: Sequence[CommitObservation]) -> bool:
    """Burrow's ``checkIfOffsetsStalled`` (Rule 4): every commit is the same offset (true of one commit)."""
    return len({commit[0] for commit in commits}) <= 1  # the offsets, one each


def lag_not_decreasing(commits: Sequence[CommitObservation]) -> bool:
    """Burrow's ``checkIfLagNotDecreasing`` (Rule 5): the known lags never fall from one to the next
    (unknown lags are skipped; flat counts as not decreasing)."""
    lags = _known_lags(commits)
    return all(map(le, lags, lags[1:]))


def recent_lag_zero(commits: Sequence[CommitObservation], recent_log_end_offsets: Sequence[int]) -> bool:
    """Burrow's ``checkIfRecentLagZero``: some recent log-end poll was at or below the newest committed
    offset, i.e. the consumer was caught up a few polls ago. False for an empty window."""
    if not commits:
        return False
    last = commits[-1].offset
    return any(log_end <= last for log_end in recent_log_end_offsets)


class PartitionHealth(NamedTuple):
    """One partition's status and what an alert needs to say about it."""

    status: PartitionStatus
    reason: str = ""
    """Why, in a sentence: e.g. ``lag grew at every one of the last 10 commits: 120 -> 950``."""
    lag: int | None = None
    """The current lag (log end minus the newest committed offset, at least 0); None without a commit."""
    commits: int = 0
    """Commits in the window."""
    start: CommitObservation | None = None
    """The oldest commit in the window (Burrow's ``start``)."""
    end: CommitObservation | None = None
    """The newest commit in the window (Burrow's ``end``)."""


def partition_status(
    window: CommitWindow,
    log_end_offset: int,
    now: float,
    *,
    allowed_lag: int = 0,
    time_lag: float | None = None,
    recent_log_end_offsets: Sequence[int] = (),
    min_commits: int = 2,
) -> PartitionHealth:
    """The status of the group on one partition at ``now``, from its commit window.

    ``log_end_offset`` is the partition's log end at the latest poll.
    ``allowed_lag`` is a lag that counts as none (Burrow's ``allowed-lag``,
    e.g. 1 on a transactional topic whose last record is a commit marker).
    ``time_lag`` is how long the oldest unread record has waited, in seconds
    (``PartitionLag.time_lag``); None when unknown, and then STOP is Burrow's
    alone. ``recent_log_end_offsets`` are the partition's log ends at the last
    few polls (Burrow's broker-offset ring), for ``checkIfRecentLagZero``.

    The contract, in order (see the module's docstring for where and why it
    departs from Burrow):

    - An empty window is OK: nothing to judge.
    - A current lag at most ``allowed_lag`` is OK, whatever the window shows
      (an idle or caught-up partition is never STOP, STALL, REWIND or WARN).
    - Fewer than ``min_commits`` commits is OK: too few to judge.
    - STOP: :func:`offsets_stopped`, not :func:`recent_lag_zero`, and, when
      ``time_lag`` is known, records have waited longer than the window spans.
    - REWIND: :func:`offsets_rewind_index` finds a rewind and
      :func:`rewind_recovered` does not.
    - A window not yet full is OK: STALL and WARN describe the whole window.
    - If :func:`lag_always_not_zero`: STALL when :func:`offsets_stalled`,
      else WARN when :func:`lag_not_decreasing` and at least two commits have
      a known lag. Anything else is OK.

    ``reason`` says which of these decided, with the figures.
    """
    recent = lambda: recent_log_end_offsets  # noqa: E731 -- asked for only where the STOP rule needs them
    status, rule = judge(window, log_end_offset, now, allowed_lag, time_lag, recent, min_commits)
    return _explained(status, rule, window, log_end_offset, now, allowed_lag, time_lag, min_commits)


class _Rule(Enum):
    """Which step of :func:`partition_status`'s contract decided a partition's status."""

    EMPTY = "empty"
    IDLE = "idle"
    CAUGHT_UP = "caught up"
    ALLOWED = "allowed"
    TOO_FEW = "too few"
    STOP = "stop"
    REWIND = "rewind"
    NOT_FULL = "not full"
    CAUGHT_UP_IN_WINDOW = "caught up in the window"
    STALL = "stall"
    GREW = "grew"
    NEVER_FELL = "never fell"
    FELL = "fell"


def _judged(
    window: CommitWindow,
    log_end_offset: int,
    now: float,
    allowed_lag: int,
    time_lag: float | None,
    recent_log_end_offsets: Callable[[], Sequence[int]],
    min_commits: int,
) -> tuple[PartitionStatus, _Rule]:
    """:func:`partition_status`'s status, and the rule that decided it, without the reason's text: a group
    is judged on every partition it reads, and only its culprits' reasons are read. The recent log ends
    are asked for only where the STOP rule needs them."""
    commits = window.commits
    if not commits:
        return PartitionStatus.OK, _Rule.EMPTY
    first, last = commits[0], commits[-1]
    lag = max(0, log_end_offset - last[0])
    if lag <= allowed_lag:
        if lag == 0:
            return PartitionStatus.OK, _Rule.IDLE if last[2] == log_end_offset else _Rule.CAUGHT_UP
        return PartitionStatus.OK, _Rule.ALLOWED
    if len(commits) < min_commits:
        return PartitionStatus.OK, _Rule.TOO_FEW
    if (
        offsets_stopped(commits, now)
        and not recent_lag_zero(commits, recent_log_end_offsets())
        and (time_lag is None or time_lag > last[1] - first[1])
    ):
        return PartitionStatus.STOP, _Rule.STOP
    rewind = offsets_rewind_index(commits)
    if rewind is not None and not rewind_recovered(commits, rewind):
        return PartitionStatus.REWIND, _Rule.REWIND
    if not window.full:
        return PartitionStatus.OK, _Rule.NOT_FULL
    if not lag_always_not_zero(commits, allowed_lag):
        return PartitionStatus.OK, _Rule.CAUGHT_UP_IN_WINDOW
    if offsets_stalled(commits):
        return PartitionStatus.STALL, _Rule.STALL
    lags = _known_lags(commits)
    if len(lags) >= 2 and lag_not_decreasing(commits):
        if all(later > earlier for earlier, later in pairwise(lags)):
            return PartitionStatus.WARN, _Rule.GREW
        return PartitionStatus.WARN, _Rule.NEVER_FELL
    return PartitionStatus.OK, _Rule.FELL


judge = twin_of(_judged)
"""Compiled where built (:mod:`kagent.core.lag_twins`): every evaluation judges each partition its group reads."""


def _explained(
    status: PartitionStatus,
    rule: _Rule,
    window: CommitWindow,
    log_end_offset: int,
    now: float,
    allowed_lag: int,
    time_lag: float | None,
    min_commits: int,
) -> PartitionHealth:
    """The :class:`PartitionHealth` of a partition :func:`_judged` found at ``status`` by ``rule``, its
    reason written out with the figures."""
    commits = window.commits
    if rule is _Rule.EMPTY:
        return PartitionHealth(status, "no commit in the window yet")
    first, last = commits[0], commits[-1]
    lag = max(0, log_end_offset - last.offset)
    count = len(commits)
    if rule is _Rule.IDLE:
        reason = f"idle: no record since the last commit (log end {log_end_offset})"
    elif rule is _Rule.CAUGHT_UP:
        reason = "caught up: lag 0"
    elif rule is _Rule.ALLOWED:
        reason = f"lag {lag} within the allowed {allowed_lag}"
    elif rule is _Rule.TOO_FEW:
        reason = f"{_commits(count)} of {window.capacity}: too few to judge (needs {min_commits}); lag {lag}"
    elif rule is _Rule.STOP:
        span = last.timestamp - first.timestamp
        waited = "" if time_lag is None else f", the oldest unread record has waited {_seconds(time_lag)}"
        reason = (
            f"no commit for {_seconds(now - last.timestamp)}, longer than the {_seconds(span)} the last {count} "
            f"commits span; lag {lag}{waited}"
        )
    elif rule is _Rule.REWIND:
        rewind = offsets_rewind_index(commits)
        assert rewind is not None
        before = commits[rewind - 1].offset
        reason = (
            f"committed offset went back from {before} to {commits[rewind].offset} "
            f"(commit {rewind + 1} of {count}) and has not come back to {before} (latest {last.offset}); lag {lag}"
        )
    elif rule is _Rule.NOT_FULL:
        reason = f"{_commits(count)} of {window.capacity}: no trend to judge before a full window; lag {lag}"
    elif rule is _Rule.CAUGHT_UP_IN_WINDOW:
        at = next(i for i, commit in enumerate(commits) if commit.lag is not None and commit.lag <= allowed_lag)
        reason = f"lag was {commits[at].lag} at commit {at + 1} of the last {count}: caught up within the window"
    else:
        lags = _known_lags(commits)
        trend = f"{lags[0]} -> {lags[-1]}" if lags else "unknown"
        if rule is _Rule.STALL:
            reason = f"committed offset stuck at {last.offset} over the last {count} commits; lag {trend}"
        elif rule is _Rule.GREW:
            reason = f"lag grew at every one of the last {len(lags)} commits: {trend}"
        elif rule is _Rule.NEVER_FELL:
            reason = f"lag never fell over the last {len(lags)} commits: {trend}"
        else:
            reason = f"lag fell within the window: {trend}; now {lag}"
    return PartitionHealth(status, reason, lag, count, first, last)


class Culprit(NamedTuple):
    """A partition at the group's (worst) status."""

    partition: TopicPartition
    health: PartitionHealth


class GroupHealth(NamedTuple):
    """A group's status and the partitions that make it so."""

    status: GroupStatus
    culprits: tuple[Culprit, ...]
    """Every partition at ``status``, sorted by topic and partition; empty when the group is OK."""
    partitions: int
    """How many partitions were judged (0 for a deleted group, or one of status UNKNOWN)."""
    reason: str
    """One line for an alert: the status, how many partitions, and the first few culprits' reasons."""


_NAMED_CULPRITS = 3
"""Culprits :attr:`GroupHealth.reason` spells out before it counts the rest."""


def group_status(
    partitions: Mapping[TopicPartition, PartitionHealth | PartitionStatus], group_gone_or_empty: bool
) -> GroupHealth:
    """The group's status: that of its worst partition, by :attr:`PartitionStatus.severity`.

    ``partitions`` maps each partition the group is judged on to its
    :func:`partition_status` (or a bare status). ``group_gone_or_empty`` is
    the caller's word that there is nothing left to judge: the group was
    deleted (a group tombstone, the coordinator reports it ``Dead``, or it is
    no longer listed), and it has no committed offset left on any partition
    (its offsets were deleted or expired, its topics deleted).

    The contract:

    - A gone group is OK with no culprits, whatever ``partitions`` says
      (stale windows of a group that is gone must not keep an incident open:
      they resolve it).
    - A group with no partition judged is UNKNOWN with no culprits: nothing
      says it is fine.
    - Otherwise the status is the worst partition's, and the culprits are
      every partition at that status (none when it is OK).

    A group with no members but with committed offsets (Kafka's ``Empty``)
    is judged like any other: its consumers are all gone while records may
    still arrive, which is what STOP is for; one that read everything (a
    batch job that ran to its end) is OK.
    """
    if group_gone_or_empty:
        return GroupHealth(GroupStatus.OK, (), 0, "group deleted: nothing to judge")
    if not partitions:
        return GroupHealth(GroupStatus.UNKNOWN, (), 0, "no partition with a measured lag and commits to judge")
    status = max(map(_status_of, partitions.values()), key=_SEVERITY.__getitem__)
    if status is PartitionStatus.OK:
        return GroupHealth(status, (), len(partitions), f"OK: all {len(partitions)} partitions")
    culprits = tuple(
        Culprit(tp, value if isinstance(value, PartitionHealth) else PartitionHealth(value))
        for tp in sorted(partitions)
        if _status_of(value := partitions[tp]) is status
    )
    named = "; ".join(
        f"{c.partition.topic}-{c.partition.partition}" + (f": {c.health.reason}" if c.health.reason else "")
        for c in culprits[:_NAMED_CULPRITS]
    )
    more = f"; and {len(culprits) - _NAMED_CULPRITS} more" if len(culprits) > _NAMED_CULPRITS else ""
    reason = f"{status.value} on {len(culprits)} of {len(partitions)} partitions: {named}{more}"
    return GroupHealth(status, culprits, len(partitions), reason)


def _status_of(value: PartitionHealth | PartitionStatus) -> PartitionStatus:
    return value.status if isinstance(value, PartitionHealth) else value


def judged_group(
    partitions: Iterable[tuple[TopicPartition, CommitWindow, int, float | None]],
    now: float,
    recent_log_end_offsets: Callable[[TopicPartition, int], Sequence[int]],
    *,
    allowed_lag: int = 0,
    min_commits: int = 2,
) -> GroupHealth:
    """:func:`group_status` (the group neither gone nor empty) of the :func:`partition_status` of each of
    ``partitions``: its window, its log end at the latest poll and its time lag, with
    ``recent_log_end_offsets(tp, capacity)`` its recent log ends; the same :class:`GroupHealth`.

    Every partition is judged, and only those at the group's status have their reasons written: only
    the culprits carry theirs. An evaluation judges every partition its group reads, and most are OK.
    """
    judged: dict[TopicPartition, PartitionHealth | PartitionStatus] = {}
    flagged: list[tuple[TopicPartition, CommitWindow, int, float | None, PartitionStatus]] = []
    for tp, window, log_end_offset, time_lag in partitions:
        recent = partial(recent_log_end_offsets, tp, window.capacity)
        status, _ = judge(window, log_end_offset, now, allowed_lag, time_lag, recent, min_commits)
        judged[tp] = status
        if status is not PartitionStatus.OK:
            flagged.append((tp, window, log_end_offset, time_lag, status))
    if flagged:
        worst = max((entry[4] for entry in flagged), key=_SEVERITY.__getitem__)
        for tp, window, log_end_offset, time_lag, status in flagged:
            if status is worst:  # a culprit: judged again, with its reason
                judged[tp] = partition_status(
                    window,
                    log_end_offset,
                    now,
                    allowed_lag=allowed_lag,
                    time_lag=time_lag,
                    recent_log_end_offsets=recent_log_end_offsets(tp, window.capacity),
                    min_commits=min_commits,
                )
    return group_status(judged, group_gone_or_empty=False)


def _known_lags(commits: Sequence[CommitObservation]) -> list[int]:
    """Each commit's known :attr:`~CommitObservation.lag`, in order: computed here from its fields by the
    property's rule, not by calling it. An evaluation judges every partition its group reads, and reading
    the property for each commit in each rule was half of a judgement's work."""
    return [end - offset if end > offset else 0 for offset, _, end in commits if end is not None]


def _commits(count: int) -> str:
    return f"{count} commit" if count == 1 else f"{count} commits"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if abs(value) >= 10 else f"{value:.1f} s"
