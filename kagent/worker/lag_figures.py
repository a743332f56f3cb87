"""The lag figures of the held groups: end offsets as polled, and each group-partition's lag.

Part of the storage stage, which owns it. It keeps the log-start and
log-end offsets of every polled partition, a history of log-end offsets per
partition (for time lag, interpolated as kafka-lag-exporter does) and the
partition counts of the topics; :meth:`LagFigures.partition_lag` computes a
group's lag on a partition from these and its committed offset
(:class:`~kagent.worker.committed_offsets.CommittedOffsets`) whenever it is
asked, so evaluation always sees the latest figures.

The partition-lag table publishes those figures as a history for subscribers
(it lives in its topic only, :class:`~kagent.worker.changelog.PublishedTable`).
Entries are written at end-offset polls, each from that poll's end offsets
and the commit stored then, as kafka-lag-exporter samples lag once a poll:
an entry at the first poll after a commit changed it (however many commits
came in between: a group committing after every fetch costs one record a
poll, not one a commit), when its partition is first polled here or answered
again after a poll that got no offsets for it (an entry written meanwhile says
its lag is unknown), when its partition's log start moves (data loss may have
appeared), and all of a group's entries at the first poll after its
assignment changes and at least every ``REFRESH_AFTER_POLLS`` poll
intervals. When it wrote them is remembered per group, not per
group-partition (a million group-partitions at 50,000 groups). A worker that
takes a group over computes its lag from its own first poll.

The groups a poll writes whole because they are new here (all of them after
a start, a backlog or a failover) or were rebalanced do not stay in step:
each counts as written a share of the period earlier, its own
(:func:`refresh_phase`), so the next
whole rewrites spread over the next ``REFRESH_AFTER_POLLS`` polls. Kept in
step, every 12th poll rewrote every entry the worker held (975,545 at
50,000 groups) and the polls between wrote almost none.

Which partitions the latest poll left without offsets, and why, is kept
beside the figures (:meth:`LagFigures.unavailable`); a topic gone from the
cluster is dropped from the figures after a while and asked for again now
and then (:mod:`kagent.worker.missing_topics`), and the figures of
partitions beyond a topic's partition count are forgotten.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from aiokafka.structs import TopicPartition

from kagent.core.assigned_json import AssignedJson
from kagent.core.collector import untrack
from kagent.core.constructed import constructed
from kagent.core.events import GroupAssigned
from kagent.core.json_bytes import kept
from kagent.core.lag_series import LagsOf, PartitionOffsets
from kagent.core.snapshot import LagFlag, PartitionLag
from kagent.core.table_keys import partition_key
from kagent.core.time_lag import Answered, EndOffsetHistory, lag_fields, measured_lags, partition_lag_values
from kagent.worker.changelog import ChangelogWriter, PublishedTable
from kagent.worker.committed_offsets import CommittedOffsets
from kagent.worker.group_index import interned, topic_partitions
from kagent.worker.group_state import EndOffsetsPolled
from kagent.worker.list_offsets import Reason
from kagent.worker.loop_slices import drop_entries
from kagent.worker.missing_topics import MissingTopics, missing_topics

__all__ = ["REFRESH_AFTER_POLLS", "STALE_AFTER_POLLS", "GroupReads", "LagFigures", "refresh_phase"]

STALE_AFTER_POLLS = 3
"""An end offset older than this many poll intervals is flagged stale."""

REFRESH_AFTER_POLLS = 12
"""All of a group's lag entries are rewritten at least this many polls apart."""


def refresh_phase(group: str) -> float:
    """The share of the refresh period, from 0 up to 1 (excluded), by which ``group``'s first whole rewrite
    here counts as earlier than it was: the same in every worker and every run (CRC-32 of its name), and
    spread evenly over groups."""
    return zlib.crc32(group.encode()) / 2**32


class GroupReads(NamedTuple):
    """What a group's assignment says it reads: all the lag figures need of it."""

    generation: int
    topics: frozenset[str]
    """The topics its members subscribe to."""
    assigned: tuple[TopicPartition, ...]
    """The partitions its members are assigned."""
    members: tuple[tuple[str, str, str, int | None], ...] = ()
    """Each member's id, client id and client host, and how many of :attr:`assigned` are its (they come
    member by member, in this order; None: the cluster did not say which it holds, and it holds none of
    them): what a scrape lays its series out with, without parsing the assignment again."""

    @classmethod
    def of(cls, assignment: GroupAssigned) -> GroupReads:
        return cls(
            assignment.generation,
            frozenset(sys.intern(topic) for member in assignment.members for topic in member.topics),
            tuple(interned(ref.topic_partition) for member in assignment.members for ref in member.partitions or ()),
            tuple(
                (
                    member.member_id,
                    member.client_id,
                    member.client_host,
                    None if member.partitions is None else len(member.partitions),
                )
                for member in assignment.members
            ),
        )._kept()

    @classmethod
    def of_json(cls, assignment: AssignedJson) -> GroupReads:
        """:meth:`of` the event's plainly checked JSON object (:func:`kagent.core.assigned_json.plain_assigned`)."""
        members = assignment["members"]
        return cls(
            assignment["generation"],
            frozenset(sys.intern(topic) for member in members for topic in member["topics"]),
            tuple(
                interned(TopicPartition(ref["topic"], ref["partition"]))
                for member in members
                for ref in member["partitions"]
            ),
            tuple(
                (member["member_id"], member["client_id"], member["client_host"], len(member["partitions"]))
                for member in members
            ),
        )._kept()

    def _kept(self) -> GroupReads:
        """Itself, its topics, its partitions and its members out of the garbage collector's watch: names,
        numbers and partitions, which storage keeps per held group (:mod:`kagent.core.collector`)."""
        untrack([self, self.topics, self.assigned, self.members])
        return self


class LagFigures:
    """End offsets of the partitions the held groups read, and their lag (written to ``partition_lag``)."""

    def __init__(
        self,
        committed: CommittedOffsets,
        partition_lag: PublishedTable,
        writer: ChangelogWriter,
        *,
        poll_interval: float,
        auto_offset_reset: str,
    ) -> None:
        self._committed = committed
        self._table = partition_lag
        self._writer = writer
        self._auto_offset_reset = auto_offset_reset
        self._stale_after = STALE_AFTER_POLLS * poll_interval
        self._refresh_after = REFRESH_AFTER_POLLS * poll_interval
        self._log_start: dict[TopicPartition, int] = {}
        self._log_end: dict[TopicPartition, int] = {}
        self._polled_at: dict[TopicPartition, float] = {}
        self._history: dict[TopicPartition, EndOffsetHistory] = {}
        self._partition_counts: dict[str, int] = {}
        self._refreshed: dict[str, float] = {}
        """group -> when all its lag entries were last rewritten here."""
        self._committed_since: dict[str, dict[TopicPartition, int]] = {}
        """group -> its polled partitions whose commit changed since their entry was last written -> the
        offset committed (written at the next poll, :meth:`write_committed`; the groups in order of
        their first such commit)."""
        self._answered_anew: set[TopicPartition] = set()
        """Partitions first polled, or answered again after a poll that got no offsets for them, since the last
        sweep of :meth:`due` (see :meth:`swept`): every entry on one is due (one written meanwhile was
        written unknown)."""
        self._start_moved: set[TopicPartition] = set()
        """Partitions whose log start moved since the last sweep of :meth:`due`."""
        self._polled_version = 0
        """Counts the changes of which partitions polls answered and of the topics' partition counts."""
        self._counts_version = 0
        """Counts the changes of the topics' partition counts and of the topics dropped (what
        :meth:`partition_counts` and :meth:`dropped_topics` give)."""
        self._polled_of: dict[str, tuple[GroupReads, int, tuple[TopicPartition, ...]]] = {}
        """group -> (the assignment read, :attr:`_polled_version` then, the partitions it reads that polls
        answered) (:meth:`_polled_partitions`)."""
        self._unavailable: dict[TopicPartition, Reason] = {}
        """The partitions the latest poll asked for and got no offsets for -> why (:meth:`unavailable`)."""
        self._missing = MissingTopics(poll_interval)
        """The topics polls found gone from the cluster, and those dropped (:meth:`partitions_to_poll`)."""
        self._answered: dict[TopicPartition, Answered] = {}
        """The partitions the latest poll that asked for them answered -> their offsets then (what
        :meth:`figures` reads of each, in one look)."""
        self._last_poll: float | None = None
        """Seconds since the epoch of the latest poll taken (answered or not); None before one."""
        self._polls = 0
        """Polls taken."""

    @property
    def stale_after(self) -> float:
        """Seconds after which a partition's end offsets are stale."""
        return self._stale_after

    @property
    def last_poll(self) -> float | None:
        """When the latest poll taken was answered (or failed); None before any."""
        return self._last_poll

    @property
    def polled_version(self) -> int:
        """Changes when which partitions polls answered, or a topic's partition count, changes."""
        return self._polled_version

    @property
    def counts_version(self) -> int:
        """Changes when a topic's partition count changes, or a topic is dropped as gone or comes back; not
        when a partition is first polled or stops or starts answering."""
        return self._counts_version

    @property
    def polls(self) -> int:
        """How many polls were taken: the figures :meth:`figures` gives at a poll's time change only with
        a new poll (or a commit, or an assignment)."""
        return self._polls

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each of ``topics`` that a poll has seen."""
        return {topic: self._partition_counts[topic] for topic in topics if topic in self._partition_counts}

    def group_partitions(self, reads: GroupReads) -> list[TopicPartition]:
        """Every partition of the topics the group subscribes to (as far as known), and every one it is assigned,
        but those of topics dropped as gone from the cluster (:meth:`partitions_to_poll`)."""
        known = [tp for t, count in self.partition_counts(reads.topics).items() for tp in topic_partitions(t, count)]
        dropped = self._missing.dropped
        assigned = [tp for tp in reads.assigned if tp.topic not in dropped] if dropped else reads.assigned
        return sorted(set(known).union(assigned))

    def log_end(self, tp: TopicPartition) -> int | None:
        """``tp``'s log-end offset at the latest poll; None if never polled here."""
        return self._log_end.get(tp)

    def recent_log_ends(self, tp: TopicPartition, count: int) -> tuple[int, ...]:
        """``tp``'s log-end offsets at up to ``count`` of the latest polls that moved it (or began or ended
        a run where it did not move), oldest first: Burrow's broker-offset ring, for ``recent_lag_zero``."""
        history = self._history.get(tp)
        return tuple(history.offsets[-count:]) if history is not None else ()

    def log_end_history(self, tp: TopicPartition) -> EndOffsetHistory | None:
        """``tp``'s log-end offsets at the polls (bounded; see :class:`EndOffsetHistory`); None if never polled."""
        return self._history.get(tp)

    def take(self, polled: EndOffsetsPolled) -> set[TopicPartition]:
        """Take one poll's answers: end offsets, their history (for time lag) and partition counts;
        the partitions whose log-end or log-start offset differs from before (or is new here).
        Cheap; the lag entries they make due are rewritten apart (:meth:`due`)."""
        now = polled.polled_at
        moved = set()
        counts = polled.partition_counts
        if any(self._partition_counts.get(topic) != count for topic, count in counts.items()):
            self._polled_version += 1
            self._counts_version += 1
            self._forget_beyond(counts)
        for tp, end in polled.log_end.items():
            start = polled.log_start.get(tp, 0)
            if tp not in self._log_end:
                self._answered_anew.add(tp)
                self._polled_version += 1
            elif self._log_start.get(tp) != start:
                self._start_moved.add(tp)
            if self._log_end.get(tp) != end or self._log_start.get(tp) != start:
                moved.add(tp)
            self._log_end[tp] = end
            self._log_start[tp] = start
            self._polled_at[tp] = now
            history = self._history[tp] = self._history.get(tp, EndOffsetHistory()).add(end, now)
            self._answered[tp] = Answered(start, end, now, history)
        self._partition_counts.update(counts)
        unanswered = self._unavailable
        self._take_unavailable(polled)
        for tp in self._unavailable:
            self._answered.pop(tp, None)
        if unanswered or self._unavailable:  # answered again, or no longer: its figures change with it
            moved.update(tp for tp in unanswered.keys() ^ self._unavailable.keys() if tp in self._log_end)
            self._answered_anew.update(tp for tp in unanswered.keys() - self._unavailable.keys() if tp in self._log_end)
        self._last_poll = now if self._last_poll is None else max(self._last_poll, now)
        self._polls += 1
        return moved

    def due(
        self, groups: Mapping[str, GroupReads], now: float, moved: AbstractSet[TopicPartition] = frozenset()
    ) -> tuple[list[tuple[str, TopicPartition]], int, list[str]]:
        """The lag entries of ``groups`` a poll taken at ``now`` makes due for a rewrite, how many
        group-partitions have end offsets, and the groups that read one of the partitions in ``moved``.

        Due: every polled entry of a group never rewritten whole here (since its assignment changed) or
        not for ``REFRESH_AFTER_POLLS`` polls (the group then counts as rewritten whole at ``now``, or, when
        it was never, its :func:`refresh_phase` of the period before ``now``); an entry
        whose partition was first polled, answered again after a poll without offsets for it (an entry
        written meanwhile says unknown), or whose log start moved past its committed offset, since
        the last :meth:`swept`. Entries whose commits changed are written apart (:meth:`write_committed`;
        those of a group rewritten whole here are dropped from it). A sweep may call this for its
        groups a chunk at a time, then :meth:`swept` once.

        A poll in which nothing is due costs a few set operations per group, not a look at each of its
        partitions: a million group-partitions every poll interval."""
        tracked = 0
        due = []
        touched = []
        anew, start_moved = self._answered_anew, self._start_moved
        for group, reads in groups.items():
            polled = self._polled_partitions(group, reads)
            tracked += len(polled)
            if moved and not moved.isdisjoint(polled):
                touched.append(group)
            refreshed = self._refreshed.get(group)
            if refreshed is None or now - refreshed >= self._refresh_after:  # rewritten whole, from the table
                # New here or rebalanced: out of step with the others at this poll (see the module's docstring).
                self._refreshed[group] = (
                    now if refreshed is not None else now - refresh_phase(group) * self._refresh_after
                )
                due += [(group, tp) for tp in polled]
                committed = self._committed_since.get(group)
                if committed:
                    for tp in polled:
                        committed.pop(tp, None)
            elif anew or start_moved:
                due += [(group, tp) for tp in polled if tp in anew or (tp in start_moved and self._lost(group, tp))]
        return due, tracked, touched

    def _polled_partitions(self, group: str, reads: GroupReads) -> tuple[TopicPartition, ...]:
        """The partitions of :meth:`group_partitions` that polls answered, in order; remembered per group
        until its assignment changes, a partition is first polled or a topic's partition count changes."""
        known = self._polled_of.get(group)
        if known is not None and known[0] is reads and known[1] == self._polled_version:
            return known[2]
        log_end = self._log_end
        polled = tuple(tp for tp in self.group_partitions(reads) if tp in log_end)  # interned, every one
        self._polled_of[group] = (reads, self._polled_version, polled)
        return polled

    def swept(self) -> None:
        """A sweep of :meth:`due` over every held group is over: the partitions that appeared, were answered
        again or whose log start moved before it have been looked at."""
        self._answered_anew.clear()
        self._start_moved.clear()

    async def keep_only(self, groups: Collection[str]) -> None:
        """Forget what was written for, and what is known of, the groups not among ``groups`` (those no
        longer held), a slice of the event loop at a time."""
        await drop_entries((self._refreshed, self._polled_of), groups.__contains__)

    def _lost(self, group: str, tp: TopicPartition) -> bool:
        """Whether ``group``'s committed offset on ``tp`` is below the partition's log start."""
        committed = self._committed.offset(group, tp)
        return committed is not None and committed < self._log_start.get(tp, 0)

    def assignment_changed(self, group: str) -> None:
        """``group``'s assignment changed: all its lag entries are due at the next poll (:meth:`due`)."""
        self._refreshed.pop(group, None)

    def refresh_partition(self, group: str, tp: TopicPartition, now: float) -> None:
        """Rewrite the lag entry of ``group`` on ``tp`` in the table, if ``tp``'s end offsets were ever polled."""
        if tp in self._log_end:
            self._publish(group, tp, self._committed.offset(group, tp), now)

    def committed(self, group: str, tp: TopicPartition, offset: int) -> None:
        """``group`` committed ``offset`` on ``tp`` (applied just now): its lag entry is written at the next
        poll (:meth:`write_committed`), from the offset then committed, if ``tp``'s end offsets were ever
        polled (a partition polled for the first time has all its entries due anyway)."""
        if tp in self._log_end:
            since = self._committed_since.get(group)
            if since is None:
                since = self._committed_since[group] = {}
            since[interned(tp)] = offset  # held until the poll: one object per partition, not per batch

    def committed_groups(self) -> list[str]:
        """The groups with entries :meth:`write_committed` would write, in order of their first commit."""
        return list(self._committed_since)

    def write_committed(
        self,
        groups: list[str],
        limit: int,
        holds: Callable[[str], bool],
        now: float,
        over: Callable[[], bool] = lambda: False,
    ) -> int:
        """Write the entries of the first of ``groups`` whose commits changed them since they were last
        written, with the end offsets polled at ``now``, until ``limit`` entries are written, ``over`` says
        so after a group (the caller's slice of the event loop has run its time) or the groups run out; how
        many of ``groups`` were taken. A group ``holds`` says is not held is taken and written nothing (its
        successor writes its own entries)."""
        written = taken = 0
        for group in groups:
            if written >= limit or (taken and over()):
                break
            taken += 1
            committed = self._committed_since.pop(group, None)
            if committed is None or not holds(group):
                continue
            for tp, offset in committed.items():
                self._publish(group, tp, offset, now)
            written += len(committed)
        return taken

    def forget(self, group: str, tp: TopicPartition) -> None:
        """Drop the lag entry of ``group`` on ``tp`` (its committed offset was deleted)."""
        committed = self._committed_since.get(group)
        if committed is not None:
            committed.pop(tp, None)
        self._writer.publish(self._table, partition_key(group, tp.topic, tp.partition), None)

    def partition_lag(self, group: str, tp: TopicPartition, committed: int | None, now: float) -> PartitionLag:
        """``group``'s lag on ``tp`` now, from its committed offset there (``committed``: the one stored, None
        for none) and the last polled end offsets; its figures unknown (flagged why) when the latest poll
        had no answer for ``tp``, the answer is stale, or no poll of this worker answered for it yet (just
        after taking the group over, say)."""
        values = self.lag_values(group, tp, committed, now)
        flags = values["flags"]
        values["flags"] = tuple(map(LagFlag, flags)) if flags else ()  # as a rule none: no generator made
        return constructed(PartitionLag, values)  # computed here, not read: nothing to validate

    def partition_lags(
        self, group: str, partitions: Sequence[TopicPartition], committed: Sequence[int | None], now: float
    ) -> list[PartitionLag]:
        """:meth:`partition_lag` of each of ``partitions`` with its committed offset of ``committed``, in
        order: the same models, for a group's snapshot. The lags are measured in one call
        (:func:`~kagent.core.time_lag.measured_lags`, compiled where built), and the model of a partition
        the latest poll answered, within ``stale_after``, with a commit from its log start to its log end
        (no flag to raise, nothing to estimate) is made from them; the others' by :meth:`partition_lag`."""
        answers = [self._answered.get(tp) for tp in partitions]
        offset_lags, time_lags = measured_lags(committed, answers, now, self._stale_after)
        lags = []
        for tp, position, answer, offset_lag, time_lag in zip(
            partitions, committed, answers, offset_lags, time_lags, strict=True
        ):
            if (
                answer is None
                or position is None
                or not answer.log_start <= position <= answer.log_end
                or now - answer.polled_at > self._stale_after
            ):
                lags.append(self.partition_lag(group, tp, position, now))
                continue
            values = lag_fields(
                group,
                tp.topic,
                tp.partition,
                position,
                answer.log_start,
                answer.log_end,
                offset_lag,
                None,
                time_lag,
                (),
                answer.polled_at,
            )
            lags.append(constructed(PartitionLag, values))  # computed here, not read: nothing to validate
        return lags

    def lags_at(self, at: float) -> LagsOf:
        """A group's offset lag and time lag on partitions from its committed offsets, at ``at``, by
        :meth:`partition_lag`'s rules (:func:`kagent.core.time_lag.measured_lags`) but as plain figures: what
        the metrics render, for every group-partition a scrape renders."""
        answered, stale_after = self._answered.get, self._stale_after

        def lags(
            partitions: Sequence[TopicPartition], committed: Sequence[int | None]
        ) -> tuple[list[int | None], list[float | None]]:
            return measured_lags(committed, map(answered, partitions), at, stale_after)

        return lags

    def fresh_offsets(self, partitions: Iterable[TopicPartition], at: float) -> list[PartitionOffsets]:
        """The log offsets of those of ``partitions`` whose latest poll answered, no more than
        ``stale_after`` before ``at``, in the order given."""
        log_start, log_end, polled_at, unavailable = self._log_start, self._log_end, self._polled_at, self._unavailable
        return [
            PartitionOffsets(tp.topic, tp.partition, log_start[tp], log_end[tp])
            for tp in partitions
            if tp in log_end and tp not in unavailable and at - polled_at[tp] <= self._stale_after
        ]

    def lag_values(self, group: str, tp: TopicPartition, committed: int | None, now: float) -> dict[str, Any]:
        """:func:`~kagent.core.time_lag.partition_lag_values` of ``group`` on ``tp`` with ``committed``."""
        log_end, polled_at = self._log_end.get(tp), self._polled_at.get(tp)
        after_poll = False
        if committed is not None and log_end is not None and polled_at is not None and committed > log_end:
            stored = self._committed.stored(group, tp)  # rare: a commit beyond the polled log end
            after_poll = (
                stored is not None and stored.offset == committed and stored.commit_timestamp > polled_at * 1000
            )
        return partition_lag_values(
            group,
            tp.topic,
            tp.partition,
            committed,
            self._log_start.get(tp),
            self._log_end.get(tp),
            self._history.get(tp),
            now,
            self._polled_at.get(tp),
            self._auto_offset_reset,
            self._stale_after,
            None if (reason := self._unavailable.get(tp)) is None else LagFlag(reason.value),
            after_poll,
        )

    def _publish(self, group: str, tp: TopicPartition, committed: int | None, now: float) -> None:
        values = self.lag_values(group, tp, committed, now)
        self._writer.publish(self._table, partition_key(group, tp.topic, tp.partition), kept(values))

    # -- Partitions without offsets, and topics gone from the cluster ---------------------------------------------

    def unavailable(self, tp: TopicPartition) -> Reason | None:
        """Why the latest poll got no offsets for ``tp``; None when it got them, or did not ask for it (never
        polled here, when :meth:`log_end` is None too; no longer read; or its topic dropped)."""
        return self._unavailable.get(tp)

    def unavailable_partitions(self) -> Mapping[TopicPartition, Reason]:
        """Every partition the latest poll asked for and got no offsets for -> why."""
        return self._unavailable

    def dropped_topics(self) -> AbstractSet[str]:
        """The topics dropped from the figures as gone from the cluster (:mod:`kagent.worker.missing_topics`)."""
        return self._missing.dropped

    def partitions_to_poll(self, partitions: Iterable[TopicPartition], now: float) -> list[TopicPartition]:
        """``partitions`` (those the held groups read), sorted, less those of the topics dropped as gone from the
        cluster; but a dropped topic's partitions are asked for again when its re-check is due at ``now``
        (:meth:`MissingTopics.recheck`, which counts it as asked)."""
        dropped = self._missing.dropped
        if not dropped:
            return sorted(partitions)
        wanted = set(partitions)
        again = self._missing.recheck({tp.topic for tp in wanted if tp.topic in dropped}, now)
        return sorted(tp for tp in wanted if tp.topic not in dropped or tp.topic in again)

    def _take_unavailable(self, polled: EndOffsetsPolled) -> None:
        """Take which partitions of ``polled`` got no offsets, and which topics it found gone: those gone long
        enough are dropped (their figures forgotten), those back are polled again as before."""
        self._unavailable = dict(polled.unavailable)
        missing = missing_topics(polled.unavailable, polled.partition_counts)
        dropped, back = self._missing.observe(polled.partition_counts, missing, polled.polled_at)
        if dropped:
            self._forget([tp for tp in self._log_end if tp.topic in dropped])
            for topic in dropped:
                self._partition_counts.pop(topic, None)
        if dropped or back:
            self._polled_version += 1
            self._counts_version += 1

    def _forget_beyond(self, counts: Mapping[str, int]) -> None:
        """Forget the figures of the partitions beyond a topic's partition count in ``counts`` (the topic was
        re-created with fewer): they can be measured no more. A group assigned one is still asked for it."""
        beyond = [
            TopicPartition(topic, partition)
            for topic, count in counts.items()
            for partition in range(count, self._partition_counts.get(topic, 0))
        ]
        self._forget([tp for tp in beyond if tp in self._log_end])

    def _forget(self, partitions: Collection[TopicPartition]) -> None:
        """Forget everything polled of ``partitions``, and the commits waiting to be written on them."""
        if not partitions:
            return
        for tp in partitions:
            del self._log_end[tp], self._log_start[tp], self._polled_at[tp], self._history[tp]
            self._answered.pop(tp, None)
            self._answered_anew.discard(tp)
            self._start_moved.discard(tp)
        for committed in self._committed_since.values():
            for tp in partitions:
                committed.pop(tp, None)
        self._polled_version += 1
