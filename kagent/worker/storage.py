"""Storage: the one owner of the held groups' state.

It keeps, in changelog tables partitioned by group, each group's assignment,
KIP-848 group state, and committed offset with its recent commits per
group-partition; in memory the end offsets and partition counts behind the
lag; and publishes the lag per group-partition. It applies:

- derived events, from the derived-events topic (each group's on its
  partition, so they reach the worker that holds the group; a record packs
  many groups' events, :func:`~kagent.core.events.decode_record`), in
  batches; a batch is acknowledged only once its table writes are in their
  changelogs. A group's offset commits in a batch are applied together, each
  partition's value parsed and written once and its lag published once
  (before the group's next other event, if one comes: order within a group
  is kept). A record that is not valid JSON of a derived-events record
  (:data:`~kagent.core.events.DerivedEventsRecord`) is counted and sent,
  whole, to the dead-letter topic; the batch goes on. The events
  of KIP-848 groups are folded by :class:`ConsumerGroupAssignments`.
  Events read again (at least once: a source that crashed re-reads from its
  last committed position) never undo newer state: an assignment of an older
  generation, or a commit older than the one stored, is counted
  (``kagent_stale_events``) and skipped. How far each derived-events
  partition is applied is storage's own (the ``applied-offsets`` table), not
  Faust's committed offset, and records Faust lost on the way are read again
  (:mod:`kagent.worker.applied_offsets`);
- end offsets, as :class:`~kagent.worker.group_state.EndOffsetsPolled` on its
  channel from the end-offsets stage.

Other stages read this state through :class:`GroupStateReader` (which
:class:`Storage` is) and hear of each changed group through
:class:`~kagent.worker.group_state.GroupChanged` notices, sent once the
change is durable.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import NamedTuple

import faust
from aiokafka.structs import TopicPartition
from faust.types import TP, TopicT
from pydantic import ValidationError

from kagent.core.collector import untrack
from kagent.core.consumer_group_state import ConsumerGroupState
from kagent.core.events import (
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    OffsetDeleted,
    decode_record,
)
from kagent.core.group_health import (
    CommitWindow,
    GroupHealth,
    judged_group,
    stop_possible_from,
)
from kagent.core.json_bytes import kept
from kagent.core.lag_series import GroupLag, PartitionOffsets
from kagent.core.member_lag import Member
from kagent.core.snapshot import UNDESCRIBED_GENERATION, GroupSnapshot
from kagent.core.throughput import PartitionThroughput, partition_throughput
from kagent.worker.applied_offsets import AppliedOffsets, Verdict
from kagent.worker.changelog import ChangelogWriteError, ChangelogWriter
from kagent.worker.channel import Channel
from kagent.worker.committed_offsets import CommittedOffsets
from kagent.worker.consumer_group_assignments import ConsumerGroupAssignments
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.group_index import topic_partitions
from kagent.worker.group_state import EndOffsetsPolled, GroupChange, GroupChanged, GroupStateReader, LagClock, held_runs
from kagent.worker.lag_figures import GroupReads, LagFigures
from kagent.worker.loop_slices import LoopSlices, drop_entries
from kagent.worker.metrics import Metrics
from kagent.worker.stage import Stage
from kagent.worker.stalls import BatchDelay
from kagent.worker.topology import GroupPartitionedTable, HeldGroups

__all__ = ["Storage"]

log = logging.getLogger(__name__)

BATCH_RECORDS = 64
"""Derived-events records taken per batch, at most: up to 4 MiB of packed records (64 KiB each), about
80,000 commits, a few tenths of a second of the event loop."""
BATCH_WITHIN = 0.02
"""Seconds a batch waits to fill before it is applied as it is."""

FLUSH_RETRY = 1.0
"""Seconds between attempts to flush a batch's changelog records while the producer fails."""

REFRESH_CHUNK = 2_000
"""Lag entries an end-offsets poll rewrites between two flushes, at most."""

DUE_CHUNK = 100
"""Groups whose lag entries a poll looks over between two looks at the clock (a slice of the event loop,
:class:`~kagent.worker.loop_slices.LoopSlices`, may end at each): when a group's entries are all due, a
look costs about 10 µs a group (a thousand groups between two yields held the loop up to 13 ms at
5,000 groups a worker, ``benchmarks/bench_api.py``). The entries found due are written
:data:`REFRESH_CHUNK` or so at a time."""

REPAIR_CHECK = 1.0
"""Seconds between two looks for derived-events records fetched but never delivered to storage."""

STOP_FLUSH_TIMEOUT = 5.0
"""Seconds the flush at stop may take before what is left is given up (a successor re-derives it)."""


class _GroupShape(NamedTuple):
    """A group's members, the partition counts of the topics it reads and the partitions it reads, as
    :meth:`Storage.group_lag` and :meth:`Storage.snapshot` give them, and what they were made from: the
    same while the stored assignment is the same object, the partitions the group committed on are the
    same, and the partition counts of its topics and which of them are dropped are the same (looked at
    again only when some topic's changed: :attr:`LagFigures.counts_version`)."""

    assignment: bytes | None
    counts_version: int
    committed_version: Hashable
    serial: int
    """Different for each shape made: the :attr:`GroupLag.shape` of the figures given with it."""
    members: list[Member]
    counts: dict[str, int]
    read: list[TopicPartition]
    keys: list[str | None]
    """The key of the group's committed-offsets entry on each of :attr:`read` (None: none)."""


class Storage(Stage, GroupStateReader):
    """Applies derived events and end offsets to the group state it owns, and answers reads of it."""

    name = "storage"

    def __init__(
        self,
        *,
        derived_events: TopicT,
        assignments: GroupPartitionedTable,
        committed: CommittedOffsets,
        applied_offsets: faust.Table,
        lag: LagFigures,
        consumer_groups: ConsumerGroupAssignments,
        writer: ChangelogWriter,
        held: HeldGroups,
        dead_letters: DeadLetters,
        metrics: Metrics,
        changes: Channel[GroupChanged],
        end_offsets: Channel[EndOffsetsPolled],
    ) -> None:
        self._derived_events = derived_events
        self._assignments = assignments
        self._committed = committed
        self._applied_offsets = applied_offsets
        self._offsets = AppliedOffsets()
        self._lag = lag
        self._consumer_groups = consumer_groups
        self._writer = writer
        self._held = held
        self._dead_letters = dead_letters
        self._metrics = metrics
        self._changes = changes
        self._end_offsets = end_offsets
        self._window_memo: tuple[GroupSnapshot, dict[TopicPartition, CommitWindow]] | None = None
        """The last snapshot :meth:`_windows_of` read windows for, and them."""
        self._parsed: dict[str, tuple[bytes, GroupReads]] = {}
        """Group -> (the stored assignment, what it reads), for :meth:`_reads`."""
        self._unassigned: dict[str, GroupReads] = {}
        """Group without an assignment -> the partitions it has committed offsets on, as what it reads."""
        self._changed: dict[str, GroupChange] = {}
        """Groups changed since the last flush -> the weightiest change (notices go out after it)."""
        self._versions: dict[str, int] = {}
        """Group -> how many changes were noted of it (:meth:`lag_version`)."""
        self._shapes: dict[str, _GroupShape] = {}
        """Group -> its members, partition counts and partitions read as :meth:`_shape` last made them."""
        self._shape_serial = 0
        """Shapes made so far: each one's :attr:`GroupLag.shape`."""
        self._tasks: list[asyncio.Task[None]] = []
        self._app: faust.App | None = None
        self._applied = 0
        self._delay: BatchDelay | None = None
        self._applying = False
        """Whether a batch of derived events is being applied now."""

    # -- the stage -----------------------------------------------------------------------------

    def register(self, app: faust.App) -> None:
        """The storage agent: derived events, in batches."""
        self._app = app

        @app.agent(self._derived_events, name="storage")
        async def store_derived_events(stream: faust.StreamT[bytes]) -> None:
            async for batch in stream.take_events(BATCH_RECORDS, within=BATCH_WITHIN):
                await self._apply_batch([event.message for event in batch])

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._take_end_offsets(), name="storage-end-offsets"),
            asyncio.create_task(self._repair_lost_records(), name="storage-repair"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._consumer_groups.stop()
        try:
            async with asyncio.timeout(STOP_FLUSH_TIMEOUT):
                await self._writer.flush()
        except (ChangelogWriteError, TimeoutError) as exc:
            log.warning("storage at stop: changelog records not sent: %r", exc)

    @property
    def applied(self) -> int:
        """Derived-events records applied since the worker started."""
        return self._applied

    @property
    def delay(self) -> BatchDelay | None:
        """From the newest derived event of the last batch being sent (by a source) to the batch applied
        and in the changelogs."""
        return self._delay

    async def backlog(self) -> int | None:
        """Derived-events records of this worker's partitions not yet applied; None before it has
        any, or before the consumer has fetched from any of them (their end is not known yet)."""
        if self._app is None:
            return None
        consumer = self._app.consumer
        topic = self._derived_events.get_topic_name()
        partitions = [tp for tp in consumer.assignment() if tp.topic == topic]
        if not partitions:
            return None
        waiting: int | None = None
        for tp in partitions:
            highwater = consumer.highwater(tp)
            if highwater is None:  # no fetch response for it yet (just assigned)
                continue
            applied_to = self._position(tp.partition)
            if applied_to is None:
                applied_to = await consumer.position(tp) or 0
            waiting = (waiting or 0) + max(0, highwater - applied_to)
        return waiting

    async def where(self) -> str:
        """Each of this worker's derived-events partitions with records waiting: the offset after the
        last record applied, the consumer's position and high watermark, and whether Faust's consumer
        fetches it (a partition Faust keeps paused is never fetched)."""
        if self._app is None:
            return "not registered"
        consumer = self._app.consumer
        topic = self._derived_events.get_topic_name()
        active = getattr(consumer, "_active_partitions", None) or set()
        paused = getattr(consumer, "_paused_partitions", None) or set()
        parts = []
        for tp in sorted(tp for tp in consumer.assignment() if tp.topic == topic):
            highwater, position = consumer.highwater(tp), await consumer.position(tp)
            applied_to = self._position(tp.partition)
            if highwater is None or highwater > (applied_to if applied_to is not None else position or 0):
                fetching = "paused" if tp in paused else "fetched" if tp in active else "not fetched"
                parts.append(
                    f"{tp.topic}[{tp.partition}] applied to {applied_to}, position {position}, "
                    f"high watermark {highwater}, {fetching}"
                )
        flushing = self._writer.flushing
        return ", ".join([*parts, *([flushing] if flushing else [])]) or "nothing waits"

    # -- writes --------------------------------------------------------------------------------

    async def _apply_batch(self, messages: list[faust.types.Message]) -> None:
        self._applying = True
        try:
            await self._apply_records(messages)
        finally:
            self._applying = False

    async def _apply_records(self, messages: list[faust.types.Message]) -> None:
        judged_at = time.monotonic()
        kinds: Counter[str] = Counter()
        commits: dict[str, dict[TopicPartition, list[int | None]]] = {}
        """Group -> its offset commits in this batch not applied yet, by partition (three fields each,
        :meth:`DerivedEvents.gather`): applied once per partition at the end of the batch, or before
        the group's next other event."""
        letters = []
        applied_to: dict[int, int] = {}
        """Partition -> the offset after the last record of this batch applied from it."""
        seeks: dict[int, int] = {}
        never = {message.partition for message in messages if self._position(message.partition) is None}
        """The partitions storage had applied no record of, here or restored: judged from their log start."""
        log_starts = await self._log_starts(never) if never else {}  # one broker call a batch
        slices = LoopSlices()  # a batch of 64 packed records is up to 80,000 commits: others run between slices
        for message in messages:
            if slices.over():
                await slices.next()
            partition = message.partition
            position = applied_to.get(partition, self._position(partition))
            if position is None:  # none applied here or restored: records before this one count too
                position = log_starts.get(partition)
            verdict, seek = self._offsets.judge(partition, message.offset, position, judged_at)
            if seek is not None:
                seeks[partition] = seek
            if verdict is Verdict.DUPLICATE:
                self._metrics.derived_events_reread.labels("applied-before").inc()
                continue
            if verdict is Verdict.EARLY:
                continue
            if position is not None and message.offset > position:
                log.error(
                    "derived-events partition %d: offsets %d to %d never arrived when read again; going on from %d",
                    partition,
                    position,
                    message.offset - 1,
                    message.offset,
                )
            applied_to[partition] = message.offset + 1
            try:
                groups = decode_record(message.value)
            except ValidationError as exc:
                self._metrics.malformed.labels(message.topic).inc()
                log.warning(
                    "malformed derived-events record at %s partition %d offset %d: %s",
                    message.topic,
                    message.partition,
                    message.offset,
                    exc.errors()[0]["msg"],
                )
                letters.append(
                    await self._dead_letters.send(
                        topic=message.topic,
                        partition=message.partition,
                        offset=message.offset,
                        timestamp_ms=round(message.timestamp * 1000) if message.timestamp else None,
                        key=message.key,
                        value=message.value,
                        error=str(exc),
                    )
                )
                continue
            for derived in groups:  # a packed record holds up to thousands of groups' events: sliced too
                if slices.over():
                    await slices.next()
                group = derived.group
                waiting = commits.get(group)
                if waiting is None:
                    waiting = commits[group] = {}
                for event in derived.gather(waiting):
                    if waiting:  # the group's commits before it, first
                        kinds["offset-committed"] += self._commits(group, waiting)
                        waiting.clear()
                    if isinstance(event, dict):  # a group-assigned event as read (AssignedJson)
                        kinds["group-assigned"] += 1
                        self._assign(group, event["generation"], kept(event), GroupReads.of_json(event))
                        continue
                    kinds[event.kind] += 1
                    self._apply(event)
        for group, waiting in commits.items():
            if slices.over():
                await slices.next()
            kinds["offset-committed"] += self._commits(group, waiting)
        for kind, count in kinds.items():
            self._metrics.derived_events.labels(kind).inc(count)
        for group in await self._consumer_groups.store():
            self._assigned(group)
        while True:  # the batch is acknowledged only once its tables' changelogs have it
            try:
                await self._flush()
                break
            except ChangelogWriteError as exc:
                log.warning("%s; trying again in %g s", exc, FLUSH_RETRY)
                await asyncio.sleep(FLUSH_RETRY)
        await asyncio.gather(*letters)  # each is sent until the broker has it (dead_letters.py)
        self._applied += len(messages)
        sent = max((message.timestamp for message in messages if message.timestamp), default=None)
        if sent is not None:
            now = time.time()
            self._delay = BatchDelay(now - sent, now)
        # The positions go out with the next flush, so a position in the changelog never runs
        # ahead of the state it describes (a successor at worst applies a batch again).
        for partition, offset in applied_to.items():
            self._writer.set(self._applied_offsets, str(partition), str(offset).encode())
        self._offsets.delivered({message.partition for message in messages}, time.monotonic())
        for partition, offset in seeks.items():
            why = (
                "no record of it was ever applied, and the first one delivered is past its log start"
                if partition in never
                else "later records came first (a rebalance, or lost records)"
            )
            await self._read_again(partition, offset, why)

    def _position(self, partition: int) -> int | None:
        """The offset after the last record storage applied from derived-events ``partition``;
        None if it never applied one (as far as the restored table tells)."""
        raw = self._applied_offsets.get(str(partition))
        return int(raw) if raw is not None else None

    async def _log_starts(self, partitions: Iterable[int]) -> dict[int, int]:
        """The log-start offset of each of derived-events ``partitions`` the broker gives now; none on a
        broker error (logged at debug: it is asked again at the next need, and a broker that is gone is
        said elsewhere): a partition without one is judged as before it had a position."""
        assert self._app is not None
        topic = self._derived_events.get_topic_name()
        try:
            starts = await self._app.consumer.earliest_offsets(*(TP(topic, partition) for partition in partitions))
        except Exception as exc:  # noqa: BLE001 -- a broker error: asked again at the next need
            log.debug("derived-events log starts not read: %r", exc)
            return {}
        return {tp.partition: start for tp, start in starts.items() if start is not None}

    async def _repair_lost_records(self) -> None:
        """Every :data:`REPAIR_CHECK` s: seek back each held derived-events partition whose records
        the consumer fetched but never delivered (:meth:`AppliedOffsets.due`); a partition storage never
        applied a record of counts from its log start."""
        while True:
            await asyncio.sleep(REPAIR_CHECK)
            app = self._app
            if app is None or app.rebalancing or self._applying:
                continue
            consumer = app.consumer
            topic = self._derived_events.get_topic_name()
            try:
                held = [tp for tp in consumer.assignment() if tp.topic == topic]
                fetched = {tp.partition: (await consumer.position(tp), self._position(tp.partition)) for tp in held}
                # A partition storage never applied a record of (none here, none restored) while the
                # consumer is past its log start: what lies before was read by no one here (Faust's
                # committed offset moved past records no storage applied), so its position is the log start.
                never = {p for p, (fetched_to, position) in fetched.items() if position is None and fetched_to}
                for partition, start in (await self._log_starts(never) if never else {}).items():
                    fetched[partition] = (fetched[partition][0], start)
            except Exception as exc:  # noqa: BLE001 -- mid-rebalance, say: the next look tries again
                log.debug("derived-events positions not read: %r", exc)
                continue
            for partition, offset in self._offsets.due(fetched, time.monotonic()).items():
                why = (
                    "no record of it was ever applied, and the consumer is past its log start"
                    if partition in never
                    else "records fetched after it never arrived"
                )
                await self._read_again(partition, offset, why)

    async def _read_again(self, partition: int, offset: int, why: str) -> None:
        """Seek the consumer back to ``offset`` of derived-events ``partition``, the first offset
        storage has not applied there; ``why`` is said in the log line."""
        assert self._app is not None
        tp = TP(self._derived_events.get_topic_name(), partition)
        if tp not in self._app.consumer.assignment():
            return
        log.warning(
            "derived-events partition %d: reading again from offset %d, the first not applied: %s",
            partition,
            offset,
            why,
        )
        self._metrics.derived_events_reread.labels("lost").inc()
        await self._app.consumer.seek_wait({tp: offset})  # in the consumer's thread, as Faust's own seeks

    def _apply(self, event: DerivedEvent) -> None:
        """Apply one event other than an offset commit."""
        match event:
            case OffsetDeleted():
                tp = TopicPartition(event.topic, event.partition)
                self._committed.delete(event.group, tp)
                self._lag.forget(event.group, tp)
                gone = self._assignments.stored.get(event.group) is None and not any(
                    True for _ in self._committed.partitions(event.group)
                )
                self._note(event.group, GroupChange.DELETED if gone else GroupChange.COMMITTED)
            case GroupAssigned():
                self._assign(event.group, event.generation, event.model_dump_json().encode(), GroupReads.of(event))
            case GroupDeleted():
                # Its committed offsets, if any are left, keep it listed (state Unknown) until their own
                # tombstones come; the last of them says it is deleted again.
                self._writer.delete(self._assignments, event.group)
                self._parsed.pop(event.group, None)
                self._consumer_groups.apply(event)  # a KIP-848 group's, or one folded earlier in this batch
                self._note(event.group, GroupChange.DELETED)
            case _:  # the events of KIP-848 consumer groups
                self._consumer_groups.apply(event)

    def _assign(self, group: str, generation: int, raw: bytes, reads: GroupReads) -> None:
        """Store ``group``'s assignment of ``generation`` (its value ``raw``, what it reads ``reads``),
        unless the one stored is of a later generation (an event read again)."""
        stored = self._reads(group)
        if stored is not None and generation < stored.generation:
            self._metrics.stale_events.labels("group-assigned").inc()
            return
        self._writer.set(self._assignments, group, raw)
        self._parsed_as(group, raw, reads)
        self._lag.assignment_changed(group)
        self._note(group, GroupChange.ASSIGNED)

    def _commits(self, group: str, waiting: dict[TopicPartition, list[int | None]]) -> int:
        """Apply ``group``'s offset commits of a batch (:meth:`DerivedEvents.gather`), each partition's
        together; how many commits there were."""
        fields = stale = 0
        applied = moved = False
        for tp, commits in waiting.items():
            fields += len(commits)
            result = self._committed.commit(group, tp, commits, self._lag.log_end(tp))
            stale += result.stale
            if result.offset is not None:
                self._lag.committed(group, tp, result.offset)
                applied = True
                moved = moved or result.moved
        if applied:
            self._note(group, GroupChange.COMMITTED, figures_changed=moved)
        if stale:
            self._metrics.stale_events.labels("offset-committed").inc(stale)
        return fields // 3

    def _parsed_as(self, group: str, raw: bytes, reads: GroupReads) -> None:
        """Remember that the stored assignment ``raw`` of ``group`` says it reads ``reads`` (the pair out of
        the garbage collector's watch, as ``reads`` is: kept per group, :mod:`kagent.core.collector`)."""
        parsed = self._parsed[group] = (raw, reads)
        untrack([parsed])

    def _reads(self, group: str) -> GroupReads | None:
        """What ``group``'s stored assignment says it reads (and its generation); parsed once per stored
        value, whoever wrote it (a restore included): every end-offsets poll asks it of every group,
        and a large group's assignment costs tens of µs to parse."""
        raw = self._assignments.stored.get(group)
        if raw is None:
            return None
        known = self._parsed.get(group)
        if known is not None and known[0] is raw:
            return known[1]
        reads = GroupReads.of(GroupAssigned.model_validate_json(raw))
        self._parsed_as(group, raw, reads)
        return reads

    def _reads_or_commits(self, group: str) -> GroupReads | None:
        """What ``group``'s assignment says it reads; for a group without one, the partitions it has
        committed offsets on (remembered while they stay the same); None for neither."""
        reads = self._reads(group)
        if reads is not None:
            return reads
        committed = tuple(sorted(self._committed.partitions(group)))
        if not committed:
            self._unassigned.pop(group, None)
            return None
        known = self._unassigned.get(group)
        if known is None or known.assigned != committed:
            known = self._unassigned[group] = GroupReads(UNDESCRIBED_GENERATION, frozenset(), committed)
        return known

    def _assigned(self, group: str) -> None:
        self._lag.assignment_changed(group)
        self._note(group, GroupChange.ASSIGNED)

    def _note(self, group: str, change: GroupChange, figures_changed: bool = True) -> None:
        """Note that ``group`` changed (its notice goes out after the next flush); unless
        ``figures_changed`` is False (a commit of the position committed before), its lag figures too
        (:meth:`lag_version`)."""
        if figures_changed:
            self._versions[group] = self._versions.get(group, 0) + 1
        previous = self._changed.get(group)
        if previous is None or _WEIGHT[change] >= _WEIGHT[previous]:
            self._changed[group] = change

    async def _flush(self) -> None:
        """Flush the writes, then tell the other stages which groups changed: only the changes
        noted before the flush began, whose writes it has made durable."""
        changed, self._changed = self._changed, {}
        try:
            await self._writer.flush()
        except BaseException:
            for group, change in changed.items():
                self._note(group, change)
            raise
        at = time.time()
        notices = [GroupChanged(group, change, at) for group, change in changed.items()]
        untrack(notices)  # a name, a kind and a time; tens of thousands wait for the evaluator on a busy worker
        for notice in notices:
            self._changes.put(notice)

    async def _take_end_offsets(self) -> None:
        """Apply the end offsets of each poll; rewrite the lag entries they make due (:data:`DUE_CHUNK`
        groups' at a time), then those whose commits changed since the last poll, a chunk of
        :data:`REFRESH_CHUNK` entries at a time, each flushed before the next is written, so that a
        batch of derived events waits for one chunk's flush at most, never for a whole cluster's lag
        entries (100,000 of them stalled storage for minutes on the embedded broker). Polls that
        arrived meanwhile are taken together. KIP-848 groups waiting for a name ask again."""
        while True:
            polls = [await self._end_offsets.get(), *self._end_offsets.drain()]
            moved: set[TopicPartition] = set()
            for polled in polls:  # each one's end offsets join the time-lag history
                moved |= self._lag.take(polled)
            now = polls[-1].polled_at
            held: set[str] = set()
            groups: dict[str, GroupReads] = {}
            slices = LoopSlices()
            for run in self.held_group_runs():  # a look at each group's assignment: others run between slices
                held.update(run)
                for group in run:
                    if slices.over():
                        await slices.next()
                    reads = self._reads_or_commits(group)
                    if reads is not None:
                        groups[group] = reads
                if slices.over():
                    await slices.next()
            # The per-group maps lose the groups no longer held, in slices (rebuilt whole, with a sorted list
            # of the held groups made first, they held the loop 7-14 ms a poll at 5,000 groups a worker in
            # bench_api, ten times that at 50,000). A group that came to the tables while the poll looked
            # keeps its entries: its count of changes, by which the scrape tells a changed group, must not
            # start again.
            maps = (self._parsed, self._unassigned, self._versions, self._shapes)
            await drop_entries(maps, lambda group, held=held: group in held or self._is_held(group))
            await self._lag.keep_only(groups)
            tracked = 0
            names = list(groups)
            due: list[tuple[str, TopicPartition]] = []
            slices = LoopSlices()
            for start in range(0, len(names), DUE_CHUNK):  # a large cluster's take seconds: others run between
                if slices.over():
                    await slices.next()
                chunk = {group: groups[group] for group in names[start : start + DUE_CHUNK]}
                chunk_due, chunk_tracked, touched = self._lag.due(chunk, now, moved)
                tracked += chunk_tracked
                for group in touched:
                    self._note(group, GroupChange.END_OFFSETS)
                due += chunk_due
                if len(due) >= REFRESH_CHUNK:
                    await self._write_due(due, now)
                    due = []
                    slices = LoopSlices()
            await self._write_due(due, now)
            self._lag.swept()
            self._metrics.groups.set(len(groups))
            self._metrics.group_partitions.set(tracked)
            committed = self._lag.committed_groups()
            slices = LoopSlices()
            while committed:  # a slice of the loop at a time, flushed every REFRESH_CHUNK entries or so
                del committed[
                    : self._lag.write_committed(committed, REFRESH_CHUNK, self._held.holding(), now, slices.over)
                ]
                if not committed or self._writer.staged >= REFRESH_CHUNK:
                    await self._flush_end_offsets()
                    slices = LoopSlices()
                else:
                    await slices.next()
            for group in await self._consumer_groups.store():
                self._assigned(group)
            await self._flush_end_offsets()

    async def _write_due(self, due: list[tuple[str, TopicPartition]], now: float) -> None:
        """Rewrite the lag entries ``due`` for the poll at ``now``, each chunk of :data:`REFRESH_CHUNK`
        flushed before the next; a sweep writes the entries it found due each time they reach
        :data:`REFRESH_CHUNK`, before it looks at more groups, so it never holds a whole cluster's list of
        entries (a million at 50,000 groups, when every group's refresh period ends at one poll)."""
        for start in range(0, len(due), REFRESH_CHUNK):
            holds = self._held.holding()  # a group deleted, or no longer held, meanwhile gets no entry
            slices = LoopSlices()
            for group, tp in due[start : start + REFRESH_CHUNK]:
                if slices.over():
                    await slices.next()
                    holds = self._held.holding()
                if holds(group) and self._assignments.stored.get(group) is not None:
                    self._lag.refresh_partition(group, tp, now)
            await self._flush_end_offsets()

    async def _flush_end_offsets(self) -> None:
        try:
            await self._flush()
        except ChangelogWriteError as exc:
            log.warning("end offsets: %s; the next flush sends them", exc)

    # -- reads (GroupStateReader) --------------------------------------------------------------

    def held_groups(self) -> list[str]:
        assigned = self._assignments.stored.keys()
        committed = self._committed.groups()
        return self._held.among(assigned | committed if committed else assigned)

    def held_group_runs(self) -> Iterator[list[str]]:
        # Copied (the tables change while the caller goes over them) from the stores' dicts, in C: through
        # Faust's mapping layers, copying 50,000 groups' keys held the event loop 13-21 ms. The groups with
        # commits and no assignment are told apart a run at a time: a set difference of the two lists at
        # once took 6 times as long as the copies (the first stretch of a scrape at a million
        # group-partitions held the loop up to 22 ms).
        return held_runs(list(self._assignments.stored), list(self._committed.groups()), self._held.holding())

    def holding(self) -> Callable[[str], bool]:
        return self._held.holding()

    def _is_held(self, group: str) -> bool:
        """Whether this worker holds ``group`` now and it has an assignment or a committed offset stored (as
        :meth:`held_groups` counts it), asked of one group."""
        return self._held.holds(group) and (group in self._assignments.stored or group in self._committed.groups())

    def held_partitions(self) -> frozenset[int]:
        return self._held.partitions()

    def consumer_group(self, group: str) -> ConsumerGroupState | None:
        return self._consumer_groups.state(group)

    def snapshot(self, group: str, now: float) -> GroupSnapshot | None:
        raw = self._assignments.stored.get(group)
        shape = self._shape(group, raw)  # what it reads, and the keys of its committed offsets there
        if shape is None:
            return None
        if raw is not None:
            assignment = GroupAssigned.model_validate_json(raw)
        else:
            assignment = GroupAssigned(group=group, generation=UNDESCRIBED_GENERATION, protocol=None, leader=None)
        lags = self._lag.partition_lags(group, shape.read, self._committed.offsets_at(shape.keys), now)
        lag = dict(zip(shape.read, lags, strict=True))
        return GroupSnapshot(
            assignment=assignment, partition_counts=shape.counts, lag=lag, taken_at=now, described=raw is not None
        )

    def _counts_and_read(self, group: str, raw: bytes | None) -> tuple[dict[str, int], list[TopicPartition]]:
        """:meth:`_read_by` of ``group`` as its stored assignment ``raw`` (None: none) says it reads."""
        if raw is None:
            return self._read_by(group, frozenset(), ())
        reads = self._reads(group)
        assert reads is not None
        return self._read_by(group, reads.topics, reads.assigned)

    def _read_by(
        self, group: str, topics: AbstractSet[str], assigned: Iterable[TopicPartition]
    ) -> tuple[dict[str, int], list[TopicPartition]]:
        """The partition counts of the topics ``group`` reads (those it subscribes to, ``topics``, and
        those of the partitions it is ``assigned``), and every partition it reads, sorted: each of those
        topics' partitions, those assigned, and those it has committed offsets on."""
        held = set(assigned)
        counts = self._lag.partition_counts(topics | {tp.topic for tp in held})
        held.update(self._committed.partitions(group))
        # Each topic's partitions, in order, topic by topic: sorted already. As a rule every partition the
        # group is assigned or committed on is one of them, and the sort of them all is not needed.
        read = [tp for topic in sorted(counts) for tp in topic_partitions(topic, counts[topic])]
        if not held.issubset(read):
            read = sorted(held.union(read))
        # A topic gone from the cluster long enough is dropped from the figures (lag_figures): it has no
        # partition (count 0), so none of it is shown or counted, whoever still holds or committed on it.
        dropped = self._lag.dropped_topics()
        if dropped:
            gone = {tp.topic for tp in read if tp.topic in dropped}
            counts.update(dict.fromkeys(gone, 0))
            read = [tp for tp in read if tp.topic not in gone]
        return counts, read

    def lag_clock(self, now: float) -> LagClock:
        last = self._lag.last_poll
        if last is None or now - last > self._lag.stale_after:
            return LagClock(now, self._lag.polls, True)
        return LagClock(last, self._lag.polls, False)

    def lag_version(self, group: str) -> Hashable:
        return self._versions.get(group, 0), self._lag.polled_version

    def group_lag(self, group: str, clock: LagClock) -> GroupLag | None:
        shape = self._shape(group, self._assignments.stored.get(group))
        if shape is None:
            return None
        return GroupLag(
            group,
            shape.members,
            shape.counts,
            shape.read,
            self._committed.offsets_at(shape.keys),
            self._lag.lags_at(clock.at),
            shape.serial,
        )

    def _shape(self, group: str, raw: bytes | None) -> _GroupShape | None:
        """``group``'s shape as its stored assignment ``raw`` (None: none) and its commits make it now: the one
        remembered while it holds (:class:`_GroupShape`), made afresh otherwise; None for a group with
        neither an assignment nor commits."""
        committed_version = self._committed.partitions_version(group)
        counts_version = self._lag.counts_version
        shape = self._shapes.get(group)
        if (
            shape is None
            or shape.assignment is not raw
            or shape.committed_version != committed_version
            or committed_version is None
        ):
            return self._group_shape(group, raw, counts_version, committed_version)
        if shape.counts_version != counts_version:  # some topic's count changed: this group's?
            counts, read = self._counts_and_read(group, raw)
            if counts == shape.counts and read == shape.read:
                shape = self._shapes[group] = shape._replace(counts_version=counts_version)
                untrack([shape])
                return shape
            return self._group_shape(group, raw, counts_version, committed_version)
        return shape

    def _group_shape(
        self, group: str, raw: bytes | None, counts_version: int, committed_version: Hashable
    ) -> _GroupShape | None:
        """What :meth:`group_lag` gives of ``group`` apart from its figures, made afresh and remembered
        (while the group is held); None for a group with neither an assignment nor commits."""
        members: list[Member] = []
        if raw is None:
            if not any(True for _ in self._committed.partitions(group)):
                self._shapes.pop(group, None)
                return None
        else:
            reads = self._reads(group)
            assert reads is not None
            start = 0
            for member_id, client_id, client_host, held in reads.members:  # holding reads.assigned, in order
                if held is None:  # which partitions it holds is unknown
                    members.append(Member(member_id, client_id, client_host, None))
                    continue
                members.append(Member(member_id, client_id, client_host, reads.assigned[start : start + held]))
                start += held
        counts, read = self._counts_and_read(group, raw)
        self._shape_serial += 1
        shape = _GroupShape(
            raw,
            counts_version,
            committed_version,
            self._shape_serial,
            members,
            counts,
            read,
            self._committed.entry_keys(group, read),
        )
        held = [member.partitions for member in members if member.partitions is not None]
        untrack([*members, *held, members, read, shape.keys, shape])  # names, numbers, partitions: kept per group
        self._shapes[group] = shape
        return shape

    def partition_offsets(self, partitions: Iterable[TopicPartition], clock: LagClock) -> list[PartitionOffsets]:
        return self._lag.fresh_offsets(partitions, clock.at)

    def health(self, snapshot: GroupSnapshot, now: float) -> GroupHealth:
        # Judged: every partition the group has a commit window and a measured lag on. Without members
        # (Kafka's Empty state), all of them: a group whose consumers all crashed while records wait is
        # STOP. With members, those they read (hold, or subscribe to the topic of): commits left on a
        # topic the group no longer reads stay until they expire, and are shown, but a STOP there would
        # be a false alarm. With a member whose assignment is unknown, what the group reads is not known
        # either: all of them, as without members.
        judged: list[tuple[TopicPartition, CommitWindow, int, float | None]] = []
        windows = self._windows_of(snapshot)
        members = snapshot.assignment.members
        topics = {topic for member in members for topic in member.topics}
        held = {ref.topic_partition for member in members for ref in member.partitions or ()}
        reads_known = bool(members) and all(member.partitions is not None for member in members)
        for tp, entry in snapshot.lag.items():
            window = windows.get(tp) if entry.committed is not None else None
            if window is None or entry.log_end is None or not entry.measured:
                continue
            if reads_known and tp.topic not in topics and tp not in held:
                continue
            judged.append((tp, window, entry.log_end, entry.time_lag))
        return judged_group(judged, now, self._lag.recent_log_ends)

    def status_holds_until(self, snapshot: GroupSnapshot) -> float:
        windows = self._windows_of(snapshot)
        until = math.inf
        for tp, entry in snapshot.lag.items():
            window = windows.get(tp) if entry.committed is not None and entry.measured else None
            if (
                window is not None
                and entry.log_end is not None
                and (stop := stop_possible_from(window, entry.log_end)) is not None
            ):
                until = min(until, stop)
        return until

    def throughput(self, snapshot: GroupSnapshot, window: float) -> dict[TopicPartition, PartitionThroughput]:
        now = snapshot.taken_at
        stamp = snapshot.assignment.state_timestamp
        since = stamp / 1000 if stamp is not None else None
        windows = self._windows_of(snapshot)
        figures: dict[TopicPartition, PartitionThroughput] = {}
        for topic, count in snapshot.partition_counts.items():
            for tp in topic_partitions(topic, count):
                figures[tp] = partition_throughput(self._lag.log_end_history(tp), windows.get(tp), now, since, window)
        return figures

    def _windows_of(self, snapshot: GroupSnapshot) -> dict[TopicPartition, CommitWindow]:
        """The commit windows of the group on the partitions of ``snapshot``'s topics, read once per
        snapshot: an evaluation asks for its health and its throughput, each of every partition."""
        memo = self._window_memo
        if memo is not None and memo[0] is snapshot:
            return memo[1]
        windows = {}
        for tp, entry in snapshot.lag.items():
            if entry.committed is not None and (found := self._committed.window(snapshot.group, tp)) is not None:
                windows[tp] = found
        self._window_memo = (snapshot, windows)
        return windows

    async def partitions_read(self) -> list[TopicPartition]:
        # Topics and assigned partitions gathered first: per group, every partition of its topics
        # would be a million entries at 50,000 groups, every poll. The partitions with committed offsets
        # come from the committed-offsets table's index: every group's, held here or not yet (a group's
        # entries are on this worker only while it holds the group, or until Faust's recovery drops them).
        topics: set[str] = set()
        partitions: set[TopicPartition] = set(self._committed.all_partitions())
        slices = LoopSlices()
        for run in self.held_group_runs():  # in no order: sorting them held the loop for nothing
            for group in run:
                if slices.over():
                    await slices.next()
                reads = self._reads(group)
                if reads is not None:
                    topics.update(reads.topics)
                    partitions.update(reads.assigned)
            if slices.over():
                await slices.next()
        counts = self._lag.partition_counts(topics)
        for topic, count in counts.items():
            partitions.update(topic_partitions(topic, count))
        return self._lag.partitions_to_poll(partitions, time.time())  # less topics gone from the cluster


_WEIGHT = {GroupChange.END_OFFSETS: -1, GroupChange.COMMITTED: 0, GroupChange.ASSIGNED: 1, GroupChange.DELETED: 2}
"""A group's notice says its weightiest change since the last flush (a deletion outweighs all)."""
