"""How far storage has applied each derived-events partition, and the repair of records Faust lost.

Faust delivers a partition's records to the storage agent in order, but it
can lose some around a rebalance: records it fetched and then skipped (the
flow was stopped) are acknowledged anyway, and the commit that follows moves
the group's offset past records nobody applied; a record in flight when the
flow stops is dropped. Faust re-reads only from its committed offset, so
such records never came back and storage waited for them for good (seen on
the embedded broker as "applied to 12, position 14" for minutes).

Storage therefore keeps its own position per derived-events partition (the
offset after the last record it applied) in the ``applied-offsets`` table,
restored with the group state on whichever worker takes the partition, and
judges each record against it (:meth:`AppliedOffsets.judge`):

- below the position: applied before (read again after a rebalance or a
  repair) -- :attr:`Verdict.DUPLICATE`, skipped;
- at the position, or no position known yet: :attr:`Verdict.APPLY`;
- above it: records before it were lost -- :attr:`Verdict.EARLY`, skipped,
  and a repair starts: the caller seeks Faust's consumer back to the
  position, and records above it are skipped until the one at the position
  arrives. A repair that has waited :data:`GIVE_UP_AFTER` seconds takes the
  next record as it comes (the ones before it are gone from the log, by
  retention say) and the caller logs the range given up.

A partition whose records were fetched but none was delivered (nothing
above the position arrives to be judged) is found by :meth:`AppliedOffsets.due`,
which storage asks every second with the consumer's positions. A partition
storage never applied a record of (no position here or restored) while
Faust's consumer is past its log start is asked about with the log start as
its position: the records before the consumer's position were applied by no
one, as far as the table knows, and would otherwise never be.

Pure: it decides from the offsets and times it is given; the caller reads
and writes the table and seeks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["GIVE_UP_AFTER", "IDLE_AFTER", "AppliedOffsets", "Verdict"]

IDLE_AFTER = 5.0
"""Seconds a partition may have fetched records waiting, none delivered, before it is read again
(a delivered record reaches storage within its batch window, 20 ms)."""

GIVE_UP_AFTER = 30.0
"""Seconds a repair waits for the record at the position before it takes the next one as it comes."""


class Verdict(StrEnum):
    """What to do with one record of a derived-events partition."""

    APPLY = "apply"
    DUPLICATE = "duplicate"
    """Applied before: skip it."""
    EARLY = "early"
    """Records before it were lost: skip it until they are read again."""


@dataclass
class _Repair:
    start: int
    """The position: the first offset not applied."""
    since: float
    seeked_at: float


class AppliedOffsets:
    """The repairs under way, per derived-events partition; the positions themselves are the caller's."""

    def __init__(self, *, idle_after: float = IDLE_AFTER, give_up_after: float = GIVE_UP_AFTER) -> None:
        self._idle_after = idle_after
        self._give_up_after = give_up_after
        self._repairs: dict[int, _Repair] = {}
        self._delivered_at: dict[int, float] = {}
        self._behind_since: dict[int, float] = {}
        """Partition -> since when the consumer has been past storage's position."""

    def judge(self, partition: int, offset: int, position: int | None, now: float) -> tuple[Verdict, int | None]:
        """The verdict on the record at ``offset`` of ``partition``, whose position is ``position``
        (None: never applied), and the offset to seek the partition to now (None: no seek)."""
        self._delivered_at[partition] = now
        if position is None or offset == position:
            self._repairs.pop(partition, None)
            return Verdict.APPLY, None
        if offset < position:
            return Verdict.DUPLICATE, None
        repair = self._repairs.get(partition)
        if repair is None or repair.start != position:
            self._repairs[partition] = _Repair(position, now, now)
            return Verdict.EARLY, position
        if now - repair.since >= self._give_up_after:
            del self._repairs[partition]
            return Verdict.APPLY, None
        return Verdict.EARLY, None

    def due(self, fetched: dict[int, tuple[int, int | None]], now: float) -> dict[int, int]:
        """The partitions to seek back now, each to its position: ``fetched`` maps each partition
        storage holds to (the consumer's position, storage's position), and what is known of any other
        partition is forgotten. One is due once the consumer
        has been past storage's position for ``idle_after`` seconds with no record of it delivered
        meanwhile (nor since the last seek)."""
        self.forget({p for p in [*self._repairs, *self._delivered_at, *self._behind_since] if p not in fetched})
        due = {}
        for partition, (fetched_to, position) in fetched.items():
            if position is None or fetched_to <= position:
                self._repairs.pop(partition, None)
                self._behind_since.pop(partition, None)
                continue
            behind_since = self._behind_since.setdefault(partition, now)
            repair = self._repairs.get(partition)
            quiet_since = max(
                behind_since,
                self._delivered_at.get(partition, behind_since),
                repair.seeked_at if repair is not None else behind_since,
            )
            if now - quiet_since < self._idle_after:
                continue
            if repair is None or repair.start != position:
                self._repairs[partition] = _Repair(position, now, now)
            else:
                repair.seeked_at = now
            due[partition] = position
        return due

    def delivered(self, partitions: set[int], now: float) -> None:
        """Records of ``partitions`` were just applied or judged (a batch ended now)."""
        for partition in partitions:
            self._delivered_at[partition] = now

    def repairing(self, partition: int) -> int | None:
        """The position a repair of ``partition`` waits for; None if none is under way."""
        repair = self._repairs.get(partition)
        return repair.start if repair is not None else None

    def forget(self, partitions: set[int]) -> None:
        """Drop what is known of partitions no longer held."""
        for partition in partitions:
            self._repairs.pop(partition, None)
            self._delivered_at.pop(partition, None)
            self._behind_since.pop(partition, None)
