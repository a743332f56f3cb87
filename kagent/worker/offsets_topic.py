"""Source ``offsets-topic``: ``__consumer_offsets`` -> derived events, packed per partition.

The source reads ``__consumer_offsets`` with an aiokafka consumer of its own,
in the consumer group ``<app id>-offsets-topic-source`` (so the workers share
its partitions), batch by batch, not through a Faust stream: Faust delivers
at most about 13,000 records/s to a no-op agent on this machine (79 µs of CPU
per record), a bare aiokafka consumer reads 360,000/s, and a large cluster
writes tens of thousands of commits per second to ``__consumer_offsets``.

Each fetched batch is decoded and derived (:func:`kagent.core.ingest.ingest`);
the groups' events go to the derived-events topic packed, each group's on its
partition (:class:`kagent.core.events.PackedRecords`): a few records of up to
64 KiB per partition and batch, where one record per group cost storage's Faust
stream about 80 µs each (a group that commits a few partitions at a time, as
a real cluster's members do, paid that for a few commits). kagent's own
consumer groups are skipped. A record that fails to
decode or breaks a rule is counted and sent with its raw bytes, partition,
offset and reason to the dead-letter topic, and the batch goes on; the log
gets one line a batch, naming the first such record and how many followed. The batch's offsets
are committed once the broker has every record sent for it, while the next
batch is fetched and processed. At least once: a batch whose sends fail (or
go :data:`~kagent.worker.record_batches.SEND_TIMEOUT` seconds without
progress) is read again from its start, one cut short by a rebalance is read
again by the new owner, and applying events twice leaves the tables as once.

The source outlives its consumer. If the consumer's ``start()``, a fetch or a
commit raises (the group's coordinator refuses it, the broker is gone when
it starts, ...) or a commit takes longer than :data:`COMMIT_TIMEOUT`, the
consumer is closed, the failure counted (``kagent_source_restarts_total``,
by where it failed) and logged once with its cause, and a new consumer is
made after a backoff (:data:`RESTART`). It reads from the group's committed
offsets, so what the failed one read and did not commit is read again. While
there is no consumer the source is not caught up, and the worker is not
ready.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass

import faust
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.structs import TopicPartition
from faust.types import TopicT

from kagent.core.backoff import RetryPolicy, backoff_delay
from kagent.core.collector import untrack
from kagent.core.consumer_offsets import compiled_decoders
from kagent.core.events import PackedRecords
from kagent.core.ingest import Failure, ingest
from kagent.settings import Settings
from kagent.worker.changelog import PRODUCER_ERRORS
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.loop_slices import any_request_under_way, next_turn
from kagent.worker.metrics import Metrics
from kagent.worker.record_batches import abandon, acknowledged, send_derived_events
from kagent.worker.stage import Stage
from kagent.worker.stalls import BatchDelay

__all__ = ["OffsetsTopicSource"]

log = logging.getLogger(__name__)

MAX_RECORDS = 100_000
"""Records per fetched batch, at most. Storage writes a group-partition's committed offset once per
batch of derived events however many of its commits the batch carries, so while the source reads a
backlog (a start, a failover, a worker that fell behind) the more of a partition's records one fetch
takes, the fewer value writes a record costs. Measured by ``benchmarks/bench_ingest.py`` (10,000
groups, 391,565 group-partitions, 3,000,006 records), one worker: 92,576 records/s at 10.3 µs of CPU
each with fetches of 10,000 records and aiokafka's 1 MiB a partition, 115,727/s at 8.2 µs with 40,000
and 4 MiB, 133,395/s at 7.1 µs with these. Reading live, a fetch takes what has arrived since the
last, far fewer."""

PARTITION_FETCH_BYTES = 8 * 1024 * 1024
"""Bytes of one partition a fetch asks for, at most (aiokafka: 1 MiB): about 100,000 offset commits,
so that one fetch can fill :data:`MAX_RECORDS` from one partition. The whole response stays within
aiokafka's ``fetch_max_bytes`` (50 MiB)."""

INGEST_CHUNK = 400
"""Records decoded between two yields to the event loop: about a slice
(:data:`~kagent.worker.loop_slices.SLICE`) at the Python's 2.5-5 µs a record, a quarter of one where
:func:`~kagent.core.ingest.ingest`'s compiled twin reads the commits (1.2 µs). Deriving costs a few µs a record, so a
fetch of thousands held the loop for tens of milliseconds: the API's requests, the consumers' heartbeats and the
other stages waited meanwhile (at 10,000 groups under live commits, the longest waits of ``GET
/api/groups``). The fetch's events are still packed and sent together (a group's events of two chunks
are two entries of the same record, in order): storage pays for each derived-events record it is
delivered, so a record per chunk instead of per fetch put a live worker a million records behind."""

FETCH_SLICE = 800
"""Records taken from what the consumer has fetched at a time (about a slice,
:data:`~kagent.worker.loop_slices.SLICE`), up to :data:`MAX_RECORDS` a batch, with a yield to the event
loop between two takes: aiokafka unpacks what one ``getmany`` returns in one stretch, and under
``bench_api``'s live commits a worker that fell a few seconds behind took tens of thousands at once, holding
its loop up to 100 ms."""

URGENT_CHUNK = 100
"""Records decoded, or taken from what the consumer has fetched, between two yields while a request to the
worker's web server is under way (:func:`~kagent.worker.loop_slices.request_under_way`) in place of
:data:`INGEST_CHUNK` and :data:`FETCH_SLICE`: a few tenths of a millisecond, about
:data:`~kagent.worker.loop_slices.URGENT_SLICE`."""

CAUGHT_UP_RECORDS = 10_000
"""Records of a partition the source may have left to read and still count as caught up."""

RESTART = RetryPolicy(initial_backoff=1.0, max_backoff=30.0)
"""The pause before a failed consumer is made again: 1 s, doubling with each failure in a row, at most
30 s; back to 1 s once a consumer has lasted that long."""

COMMIT_TIMEOUT = 30.0
"""Seconds a commit of the source's offsets may take before the consumer counts as failed: aiokafka
tries a commit again for as long as the group's coordinator does not answer."""

CLOSE_TIMEOUT = 10.0
"""Seconds closing a consumer (leaving its group) may take before it is given up."""


class _ConsumerFailed(Exception):
    """The source's consumer failed: where (``start``, ``fetch``, ``commit``) and why."""

    def __init__(self, reason: str, cause: BaseException) -> None:
        super().__init__(f"{reason}: {cause!r}")
        self.reason = reason
        self.cause = cause


class _Assigned(ConsumerRebalanceListener):  # type: ignore[misc]
    """Whether the source's consumer holds an assignment now (an empty one included)."""

    def __init__(self) -> None:
        self.assigned = False

    async def on_partitions_revoked(self, revoked: object) -> None:
        self.assigned = False

    async def on_partitions_assigned(self, assigned: object) -> None:
        self.assigned = True


class OffsetsTopicSource(Stage):
    """Reads ``__consumer_offsets`` in batches and sends each group's derived events."""

    name = "offsets-topic-source"

    def __init__(
        self,
        app: faust.App,
        settings: Settings,
        *,
        consumer_offsets: TopicT,
        derived_events: TopicT,
        dead_letters: DeadLetters,
        metrics: Metrics,
    ) -> None:
        self._app = app
        self._settings = settings
        self._consumer_offsets = consumer_offsets.get_topic_name()
        self._derived_events = derived_events.get_topic_name()
        self._dead_letters = dead_letters
        self._metrics = metrics
        self.group_id = f"{settings.app_id}-offsets-topic-source"
        self._skip = frozenset({settings.app_id, self.group_id})
        self._running: asyncio.Task[None] | None = None
        self._consumer: AIOKafkaConsumer | None = None
        """The consumer reading now: None until it has started, and from when it fails or stops."""
        self._assigned = _Assigned()
        self._applied = 0
        self._delay: BatchDelay | None = None
        self._random = random.Random()

    @property
    def applied(self) -> int:
        """Records of ``__consumer_offsets`` sent on (as derived events or dead letters)."""
        return self._applied

    @property
    def delay(self) -> BatchDelay | None:
        """From the newest record of the last batch being written to ``__consumer_offsets`` (its
        timestamp: the group coordinator's clock) to the batch being sent on."""
        return self._delay

    async def backlog(self) -> int | None:
        """Records of the assigned ``__consumer_offsets`` partitions not yet read; None before the
        consumer has an assignment."""
        consumer = self._consumer
        if consumer is None or not consumer.assignment():
            return None
        waiting = 0
        for tp in consumer.assignment():
            highwater = consumer.highwater(tp)
            if highwater is not None:
                waiting += max(0, highwater - await consumer.position(tp))
        return waiting

    async def caught_up(self) -> bool:
        """Whether the source has read to within :data:`CAUGHT_UP_RECORDS` of the high watermark of each
        ``__consumer_offsets`` partition it is assigned, as far as its last fetch knows; False before its
        group has assigned it partitions, and while it has no consumer (one failed and the next is not
        started yet); True with an empty assignment: nothing waits for it."""
        consumer = self._consumer
        if consumer is None or not self._assigned.assigned:
            return False
        for tp in consumer.assignment():
            highwater = consumer.highwater(tp)
            if highwater is None or highwater - await consumer.position(tp) > CAUGHT_UP_RECORDS:
                return False
        return True

    async def where(self) -> str:
        """Each assigned partition with records waiting: its position and high watermark."""
        consumer = self._consumer
        if consumer is None:
            return "no consumer"
        parts = []
        for tp in sorted(consumer.assignment()):
            highwater, position = consumer.highwater(tp), await consumer.position(tp)
            if highwater is None or highwater > position:
                parts.append(f"{tp.topic}[{tp.partition}] at {position} of {highwater}")
        return ", ".join(parts) or "nothing waits"

    async def start(self) -> None:
        self._running = asyncio.create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        """Stop reading; the batch in flight is committed if the broker has its sends."""
        if self._running is not None:
            self._running.cancel()
            await asyncio.gather(self._running, return_exceptions=True)

    async def run(self) -> None:
        """Consume until cancelled, making the consumer again each time it fails (see the module)."""
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                await self._consume()
            except _ConsumerFailed as failure:
                reason, cause = failure.reason, failure.cause
            except Exception as exc:  # noqa: BLE001 -- the source must outlive any one consumer, a bug's included
                reason, cause = "error", exc
            if time.monotonic() - started >= RESTART.max_backoff:
                attempt = 0  # it lasted: not a failure in a row
            delay = backoff_delay(RESTART, attempt, self._random.random())
            attempt += 1
            self._metrics.source_restarts.labels(reason).inc()
            log.error(
                "the %s source's consumer failed at %s (%r); making it again in %.1f s",
                self._consumer_offsets,
                reason,
                cause,
                delay,
                exc_info=cause if reason == "error" else None,  # a bug's traceback; a consumer's failure says it all
            )
            await asyncio.sleep(delay)

    async def _consume(self) -> None:
        """Read with a new consumer until cancelled; raise :class:`_ConsumerFailed` if it fails. The
        consumer leaves its group on the way out.

        One batch is in flight while the next is fetched and processed: its
        offsets are committed once the broker has everything sent for it. When
        cancelled (the stage stops), the batch in flight is committed if its
        sends are acknowledged; when the consumer fails, nothing more is
        committed and the next consumer reads the uncommitted batches again.
        """
        settings = self._settings
        topic = self._consumer_offsets
        consumer = settings.kafka.consumer(
            client_id=self.group_id,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=int(settings.session_timeout * 1000),
            heartbeat_interval_ms=int(settings.heartbeat_interval * 1000),
            max_poll_records=MAX_RECORDS,
            max_partition_fetch_bytes=PARTITION_FETCH_BYTES,
        )
        assigned = _Assigned()
        consumer.subscribe([topic], listener=assigned)
        in_flight: _Sent | None = None
        sending: _Sent | None = None
        try:
            try:
                await consumer.start()
            except Exception as exc:
                raise _ConsumerFailed("start", exc) from exc
            self._consumer, self._assigned = consumer, assigned
            log.info("reading %s with %d of %d decoders compiled", topic, *compiled_decoders())
            while True:
                try:
                    fetched = await _fetch(consumer)
                except Exception as exc:
                    raise _ConsumerFailed("fetch", exc) from exc
                sending = await self._sent(fetched)
                if in_flight is not None and not await self._commit(consumer, in_flight, sending):
                    sending = None  # read again from the failed batch's start
                in_flight, sending = sending, None
        except asyncio.CancelledError:
            if in_flight is not None and self._consumer is consumer:
                try:
                    await self._commit(consumer, in_flight, None)
                except _ConsumerFailed as failure:
                    log.warning("committing the source's last batch at stop: %s", failure)
            raise
        finally:
            self._consumer = None
            for batch in (in_flight, sending):  # not committed: whoever reads next reads them again
                if batch is not None:
                    abandon(batch.futures)
            await _close(consumer)

    async def _sent(self, fetched: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> _Sent | None:
        """Send what one fetch returned; None if it returned nothing. The fetched records are
        referenced by nothing once this returns: a quiet topic's wait for the next fetch must not
        keep the last batch (up to :data:`MAX_RECORDS` records) alive."""
        if not fetched:
            return None
        records = [record for batch in fetched.values() for record in batch]
        self._applied += len(records)
        # A partition's records come in offset order, which the coordinator writes in time order.
        written = max((batch[-1].timestamp for batch in fetched.values() if batch[-1].timestamp > 0), default=None)
        pending = await self._send_or_fail(records)
        if written is not None:
            now = time.time()
            self._delay = BatchDelay(now - written / 1000, now)
        return _Sent(
            pending,
            {tp: batch[0].offset for tp, batch in fetched.items()},
            {tp: batch[-1].offset + 1 for tp, batch in fetched.items()},
        )

    async def send(self, records: list[ConsumerRecord[bytes, bytes]]) -> list[asyncio.Future[object]]:
        """Send the derived events (as record batches, each group's on its partition) and dead letters
        of ``records``; futures done when the broker has them."""
        self._metrics.records.labels("offsets-topic").inc(len(records))
        packed = PackedRecords(self._settings.topic_partitions)
        malformed: list[tuple[ConsumerRecord[bytes, bytes], Failure]] = []
        start = 0
        while start < len(records):
            if start:
                await next_turn()  # the rest of the worker runs between two chunks
            chunk = records[start : start + _at_a_time(INGEST_CHUNK)]
            start += len(chunk)
            result = ingest(chunk, self._skip)
            for events in result.events:  # encoded here, a chunk at a time, not all at the end
                packed.add(events)
            malformed += result.malformed
        pending = await send_derived_events(self._app, self._derived_events, packed.records())
        if malformed:
            # One line a batch however many (a flood of them must not flood the log); each is in the dead letters.
            record, exc = malformed[0]
            more = len(malformed) - 1
            log.warning(
                "malformed record at %s partition %d offset %d: %s%s",
                record.topic,
                record.partition,
                record.offset,
                exc,
                f" (and {more} more in this batch, each in the dead-letter topic)" if more else "",
            )
        for record, exc in malformed:
            self._metrics.malformed.labels(record.topic).inc()
            pending.append(
                await self._dead_letters.send(
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                    timestamp_ms=record.timestamp,
                    key=record.key,
                    value=record.value,
                    error=str(exc),
                )
            )
        return pending

    async def _send_or_fail(self, records: list[ConsumerRecord[bytes, bytes]]) -> list[asyncio.Future[object]]:
        """:meth:`send`, a producer error raised at once turned into a failed future like a late one."""
        try:
            return await self.send(records)
        except PRODUCER_ERRORS as exc:
            failed: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return [failed]

    async def _commit(self, consumer: AIOKafkaConsumer, batch: _Sent, after: _Sent | None) -> bool:
        """Commit ``batch``'s offsets once the broker has everything sent for it; whether it did.

        If a send failed or went :data:`~kagent.worker.record_batches.SEND_TIMEOUT`
        seconds without progress, nothing is committed, the sends of ``batch``
        and ``after`` (the batch sent since) are abandoned, and the consumer is
        moved back to where they began, so their records are read and sent
        again. A commit refused because the group rebalanced is logged (the
        partitions' new owner reads them again); any other commit error, or a
        commit that takes longer than :data:`COMMIT_TIMEOUT`, raises
        :class:`_ConsumerFailed`.
        """
        try:
            await acknowledged(batch.futures)
        except PRODUCER_ERRORS as exc:
            starts = dict(after.starts) if after is not None else {}
            starts.update(batch.starts)
            if after is not None:
                abandon(after.futures)
            log.error(
                "sending a batch's derived events or dead letters failed; reading %d partitions again: %r",
                len(starts),
                exc,
            )
            for tp, offset in starts.items():
                if tp in consumer.assignment():
                    consumer.seek(tp, offset)
            return False
        try:
            async with asyncio.timeout(COMMIT_TIMEOUT):
                await consumer.commit(batch.ends)
        except (CommitFailedError, IllegalStateError) as exc:
            # A rebalance took partitions away mid-batch: their new owner reads them again.
            log.warning("committing the source's offsets failed (they will be read again): %s", exc)
        except TimeoutError as exc:
            raise _ConsumerFailed("commit", TimeoutError(f"no answer within {COMMIT_TIMEOUT:g} s")) from exc
        except KafkaError as exc:
            raise _ConsumerFailed("commit", exc) from exc
        return True


async def _close(consumer: AIOKafkaConsumer) -> None:
    """Stop ``consumer`` (it leaves its group), giving up after :data:`CLOSE_TIMEOUT` seconds."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await consumer.stop()
    except Exception as exc:  # noqa: BLE001 -- a consumer that cannot even close is left behind
        log.warning("closing the source's consumer: %r", exc)


@dataclass(frozen=True)
class _Sent:
    """One fetched batch in flight: the futures of what was sent for it, and its offsets."""

    futures: list[asyncio.Future[object]]
    """Done when the broker has what was sent for the batch."""
    starts: dict[TopicPartition, int]
    """Partition -> the batch's first offset there."""
    ends: dict[TopicPartition, int]
    """Partition -> the offset after the batch's last record there (what to commit)."""


def _at_a_time(records: int) -> int:
    """How many records to take between two yields, ``records`` as a rule: :data:`URGENT_CHUNK` while a
    request is under way."""
    return URGENT_CHUNK if any_request_under_way() else records


async def _fetch(consumer: AIOKafkaConsumer) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
    """One batch of records: what arrives within a second, then, while each take comes back full, what the
    consumer has already fetched besides, :data:`FETCH_SLICE` records at a time (:data:`URGENT_CHUNK` while a
    request is under way), up to :data:`MAX_RECORDS`; each partition's records in offset order. Empty when
    nothing arrived."""
    asked = _at_a_time(FETCH_SLICE)
    fetched = await consumer.getmany(timeout_ms=1000, max_records=asked)
    for records in fetched.values():
        untrack(records)  # held until sent, over many turns: young collections need not go over them
    took = total = sum(map(len, fetched.values()))
    while took == asked and total < MAX_RECORDS:
        await next_turn()  # the rest of the worker runs between two takes
        asked = min(_at_a_time(FETCH_SLICE), MAX_RECORDS - total)
        more = await consumer.getmany(timeout_ms=0, max_records=asked)
        took = sum(map(len, more.values()))
        total += took
        for tp, records in more.items():
            untrack(records)
            fetched.setdefault(tp, []).extend(records)
    return fetched
