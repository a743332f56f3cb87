"""Time lag from a history of log-end offsets, and the partition-lag record.

Kafka tells how many records a group is behind (offset lag), not how old the
oldest unread one is. kagent estimates that as kafka-lag-exporter does: every
end-offset poll adds a point (log-end offset, poll time) to a bounded history
per partition; the time lag of a committed offset is now minus the time at
which the log end passed that offset, interpolated between the two points
around it, or extrapolated along the history's overall rate when the offset
is older than the history.

Pure: no I/O, no Faust. Times are seconds since the epoch.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from kagent.core.lag import partition_lag
from kagent.core.lag_twins import twin_of
from kagent.core.snapshot import LagFlag

__all__ = [
    "DEFAULT_POINTS",
    "Answered",
    "EndOffsetHistory",
    "EndOffsetPoint",
    "lag_fields",
    "measured_lag",
    "measured_lags",
    "partition_lag_values",
    "time_lag",
]

DEFAULT_POINTS = 60
"""Points an :class:`EndOffsetHistory` keeps by default (kafka-lag-exporter's default table size)."""


class EndOffsetPoint(NamedTuple):
    """The partition's log-end offset at one poll."""

    offset: int
    time: float
    """Seconds since the epoch."""


class EndOffsetHistory:
    """An immutable, bounded history of one partition's log-end offsets.

    Offsets never decrease and times strictly increase along the history.
    :meth:`add` returns a new history; the memory of one is bounded by
    ``limit`` points (16 bytes each), however long the partition is polled:

    - a point no later than the newest is ignored (a late or repeated poll);
    - a point below the newest offset starts the history afresh from it (the
      log end went back: the topic was deleted and re-created, or an unclean
      leader election truncated the log);
    - a flat run (the log end did not move) is kept as two points, its first
      and its latest poll, so an idle partition keeps its last movement;
    - beyond ``limit`` points, the oldest goes.
    """

    __slots__ = ("_offsets", "_times", "limit")

    def __init__(self, limit: int = DEFAULT_POINTS, points: tuple[EndOffsetPoint, ...] = ()) -> None:
        """An empty history (or ``points``, folded in with :meth:`add`'s rules) keeping at most ``limit`` points.

        ``limit`` must be at least 2: interpolation needs two points.
        """
        if limit < 2:
            raise ValueError(f"an end-offset history needs room for 2 points, not {limit}")
        self.limit = limit
        self._offsets = array("q")
        self._times = array("d")
        for point in points:
            self._append(point.offset, point.time)

    @property
    def points(self) -> tuple[EndOffsetPoint, ...]:
        """The points, oldest first."""
        return tuple(EndOffsetPoint(offset, time) for offset, time in zip(self._offsets, self._times, strict=True))

    @property
    def offsets(self) -> Sequence[int]:
        """The points' offsets, oldest first, without a point made of each (an evaluation reads a few of
        every partition it judges); not to be changed."""
        return self._offsets

    @property
    def times(self) -> Sequence[float]:
        """The points' times, oldest first, as :attr:`offsets`."""
        return self._times

    @property
    def latest(self) -> EndOffsetPoint | None:
        """The newest point, None when the history is empty."""
        return EndOffsetPoint(self._offsets[-1], self._times[-1]) if self._offsets else None

    def __len__(self) -> int:
        return len(self._offsets)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EndOffsetHistory):
            return NotImplemented
        return (self.limit, self._offsets, self._times) == (other.limit, other._offsets, other._times)

    def __repr__(self) -> str:
        return f"EndOffsetHistory(limit={self.limit}, points={self.points!r})"

    def add(self, log_end: int, time: float) -> EndOffsetHistory:
        """This history with the poll that saw log-end offset ``log_end`` at ``time``."""
        new = EndOffsetHistory.__new__(EndOffsetHistory)
        new.limit = self.limit
        new._offsets = array("q", self._offsets)
        new._times = array("d", self._times)
        new._append(log_end, time)
        return new

    def _append(self, offset: int, time: float) -> None:
        offsets, times = self._offsets, self._times
        if offsets:
            if time <= times[-1]:
                return
            if offset < offsets[-1]:
                del offsets[:], times[:]
            elif len(offsets) >= 2 and offsets[-2] == offsets[-1] == offset:
                times[-1] = time
                return
        offsets.append(offset)
        times.append(time)
        if len(offsets) > self.limit:
            del offsets[0], times[0]

    def time_at(self, offset: int) -> float | None:
        """When the log end passed ``offset``: the time the record at ``offset`` was appended, or
        None when the history cannot tell.

        Defined for ``offset`` below the newest log end only (at or above it,
        nothing is unread). Between two points it interpolates linearly in the
        segment where the log end moved from at most ``offset`` to beyond it
        (after a flat run at ``offset``, that is the run's last poll). Below
        the oldest point it extrapolates along the rate from the oldest to the
        newest point. None with fewer than 2 points, at or above the newest
        log end, or when the whole history is one flat run.
        """
        offsets, times = self._offsets, self._times
        if len(offsets) < 2 or offset >= offsets[-1]:
            return None
        right = bisect_right(offsets, offset)
        if right == 0:
            left, right = 0, len(offsets) - 1
        else:
            left = right - 1
        rise = offsets[right] - offsets[left]
        if rise <= 0:
            return None
        return times[left] + (offset - offsets[left]) * (times[right] - times[left]) / rise


def time_lag(history: EndOffsetHistory, position: int, now: float) -> float | None:
    """Seconds the record at ``position`` (a committed offset) has waited at ``now``, in whole milliseconds,
    or None when unknown.

    0 when ``position`` is at or beyond the newest log end in ``history``
    (nothing is unread); otherwise ``now`` minus :meth:`EndOffsetHistory.time_at`,
    at least 0, rounded to the millisecond (half up); None when the history cannot tell (an empty
    history, fewer than 2 points, or a log end that has not moved since the history began).

    Whole milliseconds: the figure is interpolated between polls seconds apart, so its digits below
    the millisecond say nothing (kafka-lag-exporter's come from its lookup table's millisecond clock;
    the evaluation adds time lags up in milliseconds). A time lag so stated is written as a short
    decimal, which a scrape of every group-partition writes several times faster than a double's 17
    significant digits.
    """
    offsets = history.offsets
    if offsets and position >= offsets[-1]:
        return 0.0
    appended = history.time_at(position)
    return None if appended is None else max(0.0, math.floor((now - appended) * 1000 + 0.5) / 1000)


class Answered(NamedTuple):
    """A partition's offsets at the last poll that answered for it, when the latest poll did too."""

    log_start: int
    log_end: int
    polled_at: float
    history: EndOffsetHistory | None


def measured_lag(
    committed: int | None, answered: Answered | None, now: float, stale_after: float
) -> tuple[int | None, float | None]:
    """The offset lag and time lag of a committed offset at ``now`` (each None when not measured), by
    :func:`partition_lag_values`' rules, without the rest of its value (:func:`measured_lags` of one).
    ``answered``: None when the latest poll had no answer for the partition (or none ever did)."""
    offset_lags, time_lags = measured_lags((committed,), (answered,), now, stale_after)
    return offset_lags[0], time_lags[0]


def _measured_lags(
    committed: Iterable[int | None], answered: Iterable[Answered | None], now: float, stale_after: float
) -> tuple[list[int | None], list[float | None]]:
    """The offset lag and time lag at ``now`` (each None when not measured) of each committed offset of
    ``committed`` (None: none) on the partition ``answered`` gives the offsets of, by
    :func:`partition_lag_values`' rules: what the metrics read of every group-partition they render, a
    group at a time. ``answered``: None for a partition the latest poll had no answer for (or none ever
    did). Measured only from an answer no more than ``stale_after`` before ``now``; 0 (and a time lag
    of 0) at or beyond the log end, or without a commit on an empty partition; unknown without a commit
    while records wait; the time lag from the partition's end-offset history (:func:`time_lag`)."""
    offset_lags: list[int | None] = []
    time_lags: list[float | None] = []
    for position, answer in zip(committed, answered, strict=True):
        if answer is None:
            offset_lags.append(None)
            time_lags.append(None)
            continue
        log_start, log_end, polled_at, history = answer
        if now - polled_at > stale_after or (position is None and log_end > log_start):
            offset_lags.append(None)
            time_lags.append(None)
        elif position is None or position >= log_end:
            offset_lags.append(0)
            time_lags.append(0.0)
        else:
            offset_lags.append(log_end - position)
            time_lags.append(None if history is None else time_lag(history, position, now))
    return offset_lags, time_lags


measured_lags = twin_of(_measured_lags)
"""The scrape's loop over every group-partition: compiled where built (:mod:`kagent.core.lag_twins`)."""


def partition_lag_values(
    group: str,
    topic: str,
    partition: int,
    committed: int | None,
    log_start: int | None,
    log_end: int | None,
    history: EndOffsetHistory | None,
    now: float,
    polled_at: float | None,
    auto_offset_reset: str,
    stale_after: float,
    unanswered: LagFlag | None = None,
    committed_after_poll: bool = False,
) -> dict[str, Any]:
    """The partition-lag table value of ``group`` on ``topic``-``partition`` at ``now``, as plain data
    ready for JSON (flags as their strings; ``PartitionLag(**values)`` is the model). A worker
    publishes one per group-partition at end-offset polls, built without the model, whose validation
    and serialization cost about 10 µs a record.

    ``committed`` is the group's committed offset (None: nothing committed); ``log_start`` and
    ``log_end`` come from the last end-offset poll that answered for the partition, at ``polled_at``
    (all three None when none did), and ``history`` is the partition's end-offset history including that
    poll. ``unanswered`` is why the latest poll had no answer for the partition (one of
    :data:`~kagent.core.snapshot.UNANSWERED_FLAGS`), None when it answered. ``committed_after_poll``:
    the commit was made after that poll, so the log end is known to be at least the committed offset.

    The offset lag is measured, by :func:`kagent.core.lag.partition_lag`, only when the latest poll
    answered, no more than ``stale_after`` seconds before ``now``, and either the group has a committed
    offset or the partition holds no record (then nothing is left to read: 0). Otherwise it is None, and
    so is the time lag; without a commit and with records in the log, ``estimated_lag`` says how many
    records ``auto_offset_reset`` would leave the group to read. ``time_lag`` is that of the committed
    offset, 0 whenever the offset lag is 0. ``log_end`` is the polled one, raised to ``committed`` when a
    commit made after the poll is beyond it (never shown below a position the group has read to; a
    commit beyond the log end that is older than the poll stays visible as it is). Flags: ``unanswered``'s;
    ``stale-end-offset`` when the answer is older than ``stale_after``; ``no-commit`` without a committed
    offset; ``data-loss`` when the committed offset is below the log start.
    """
    flags: list[str] = []
    if log_start is None or log_end is None or polled_at is None:
        flags.append((unanswered or LagFlag.NOT_POLLED).value)
    elif unanswered is not None:
        flags.append(unanswered.value)
    elif now - polled_at > stale_after:
        flags.append(LagFlag.STALE_END_OFFSET.value)
    fresh = not flags
    if committed is None:
        flags.append(LagFlag.NO_COMMIT.value)
    elif log_start is not None and committed < log_start:
        flags.append(LagFlag.DATA_LOSS.value)
    answered = (
        None
        if log_start is None or log_end is None or polled_at is None or unanswered is not None
        else Answered(log_start, log_end, polled_at, history)
    )
    offset_lag, lag_seconds = measured_lag(committed, answered, now, stale_after)
    estimated_lag: int | None = None
    if offset_lag is None and fresh and committed is None and log_start is not None and log_end is not None:
        estimated_lag = partition_lag(None, log_start, log_end, auto_offset_reset)
    if committed_after_poll and committed is not None and log_end is not None and committed > log_end:
        log_end = committed
    return lag_fields(
        group, topic, partition, committed, log_start, log_end, offset_lag, estimated_lag, lag_seconds, flags, polled_at
    )


def lag_fields(
    group: str,
    topic: str,
    partition: int,
    committed: int | None,
    log_start: int | None,
    log_end: int | None,
    offset_lag: int | None,
    estimated_lag: int | None,
    time_lag: float | None,
    flags: Sequence[Any],
    polled_at: float | None,
) -> dict[str, Any]:
    """A partition-lag value's fields, by name, in the order :class:`~kagent.core.snapshot.PartitionLag` declares
    them (what :func:`~kagent.core.constructed.constructed` takes); nothing checked."""
    return {
        "group": group,
        "topic": topic,
        "partition": partition,
        "committed": committed,
        "log_start": log_start,
        "log_end": log_end,
        "offset_lag": offset_lag,
        "estimated_lag": estimated_lag,
        "time_lag": time_lag,
        "flags": flags,
        "polled_at": polled_at,
    }
