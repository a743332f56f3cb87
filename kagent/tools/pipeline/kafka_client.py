"""The Spark Kafka reader's I/O: partition bounds, timestamp lookups, and reading an offset range.

Synchronous functions over aiokafka, each on an event loop of its own, so
that Spark's Python workers (planner and executors alike) can call them.
Every broker operation is bounded by the connection's timeout; any failure
(an unreachable broker above all) raises :class:`KafkaSourceError` naming the
bootstrap address, never hangs.

Log ends come from a Fetch's high watermark, not from ListOffsets(latest)
alone: the embedded broker (Tansu) answers ListOffsets(latest) with the last
record batch's base offset + 1, short of the log end whenever that batch
holds several records (see ``kagent.tools.embedded``). Fetching from that offset
- 1 returns the last batch, and with it the true high watermark, on any broker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Iterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeVar

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from kagent.connections import ClusterRejected, ClusterUnreachable, KafkaConnection
from kagent.tools.pipeline.kafka_offsets import Bounds, OffsetRange

__all__ = ["Connection", "KafkaSourceError", "offsets_at", "partition_bounds", "read_range"]

_T = TypeVar("_T")

_SCAN_CHUNK = 1000
"""Records per fetch while looking for the first record at or after a timestamp."""

_PROBE_WAIT_MS = 50
"""How long a Fetch waits for data: short, as reads here ask only for what is there."""


class KafkaSourceError(RuntimeError):
    """Kafka could not be reached, or did not answer as needed; the message names the bootstrap address."""


@dataclass(frozen=True)
class Connection:
    """How to reach the cluster (plain data a Spark task receives), and a timeout, in seconds, for each operation."""

    kafka: KafkaConnection
    timeout: float = 10.0
    client_id: str = "kagent-pipeline"

    @property
    def bootstrap_servers(self) -> str:
        """The cluster's bootstrap servers, as messages name it."""
        return self.kafka.bootstrap_servers


def partition_bounds(connection: Connection, topics: Collection[str]) -> dict[TopicPartition, Bounds]:
    """Every partition of ``topics`` with its earliest offset and its log end (high watermark).

    Raises :class:`KafkaSourceError` if a topic does not exist or the cluster does not answer.
    """
    return asyncio.run(_with_consumer(connection, lambda consumer: _bounds(connection, consumer, topics)))


def offsets_at(
    connection: Connection, bounds: Mapping[TopicPartition, Bounds], timestamp_ms: int
) -> dict[TopicPartition, int | None]:
    """Per partition of ``bounds``, the offset of its first record whose timestamp is >= ``timestamp_ms``
    (None: no such record before the end in ``bounds``).

    The broker's answer to ListOffsets(timestamp) is taken as where to start
    looking, and records are read from there to the first that qualifies:
    on Apache Kafka that is the first record read; the embedded broker
    answers at best with a batch's base offset.
    """

    async def lookup(consumer: AIOKafkaConsumer) -> dict[TopicPartition, int | None]:
        hints = await _bounded(
            connection, "look up offsets by time", consumer.offsets_for_times(dict.fromkeys(bounds, timestamp_ms))
        )
        found: dict[TopicPartition, int | None] = {}
        for tp, limits in bounds.items():
            hint = hints.get(tp)
            if hint is None:
                found[tp] = None
                continue
            scan = OffsetRange(tp.topic, tp.partition, max(limits.earliest, hint.offset), limits.end)
            found[tp] = await _first_at_or_after(connection, consumer, scan, timestamp_ms)
        return found

    return asyncio.run(_with_consumer(connection, lookup))


def read_range(connection: Connection, offsets: OffsetRange, max_records: int) -> Iterator[list[ConsumerRecord]]:
    """The records of ``offsets`` in offset order, in chunks of at most ``max_records``.

    Gaps (compaction, transaction markers) are skipped. Raises
    :class:`KafkaSourceError` when no record arrives for the connection's
    timeout before the range's end is reached.
    """
    loop = asyncio.new_event_loop()
    chunks = _chunks(connection, offsets, max_records)
    try:
        while True:
            try:
                yield loop.run_until_complete(anext(chunks))
            except StopAsyncIteration:
                return
    finally:
        loop.run_until_complete(chunks.aclose())
        loop.close()


async def _chunks(
    connection: Connection, offsets: OffsetRange, max_records: int
) -> AsyncGenerator[list[ConsumerRecord], None]:
    consumer = await _started(connection)
    try:
        async with aclosing(_records(connection, consumer, offsets, max_records)) as chunks:
            async for chunk in chunks:
                yield chunk
    finally:
        await consumer.stop()


async def _records(
    connection: Connection, consumer: AIOKafkaConsumer, offsets: OffsetRange, max_records: int
) -> AsyncGenerator[list[ConsumerRecord], None]:
    """``read_range`` on a started consumer, which it assigns to the range's partition alone."""
    tp = offsets.topic_partition
    consumer.assign([tp])
    consumer.seek(tp, offsets.start)
    progress = time.monotonic()
    while (position := await consumer.position(tp)) < offsets.end:
        fetch = consumer.getmany(tp, timeout_ms=_PROBE_WAIT_MS * 4, max_records=max_records)
        fetched = (await _bounded(connection, f"fetch {_name(tp)}", fetch)).get(tp, [])
        chunk = [record for record in fetched if record.offset < offsets.end]
        if chunk:
            progress = time.monotonic()
            yield chunk
        elif time.monotonic() - progress > connection.timeout:
            raise KafkaSourceError(
                f"Kafka at {connection.bootstrap_servers}: no record of {_name(tp)} at offset {position} "
                f"(reading up to {offsets.end}) within {connection.timeout:g} s"
            )


async def _first_at_or_after(
    connection: Connection, consumer: AIOKafkaConsumer, offsets: OffsetRange, timestamp_ms: int
) -> int | None:
    async with aclosing(_records(connection, consumer, offsets, _SCAN_CHUNK)) as chunks:
        async for chunk in chunks:
            for record in chunk:
                if record.timestamp >= timestamp_ms:
                    return int(record.offset)
    return None


async def _bounds(
    connection: Connection, consumer: AIOKafkaConsumer, topics: Collection[str]
) -> dict[TopicPartition, Bounds]:
    known = await _bounded(connection, "read the topic metadata", consumer.topics())
    missing = sorted(set(topics) - known)
    if missing:
        raise KafkaSourceError(f"no topic {', '.join(map(repr, missing))} on {connection.bootstrap_servers}")
    partitions = [TopicPartition(t, p) for t in sorted(topics) for p in sorted(consumer.partitions_for_topic(t) or ())]
    earliest = await _bounded(connection, "list the earliest offsets", consumer.beginning_offsets(partitions))
    listed = await _bounded(connection, "list the latest offsets", consumer.end_offsets(partitions))
    nonempty = [tp for tp in partitions if listed[tp] > earliest[tp]]
    consumer.assign(nonempty)
    for tp in nonempty:
        consumer.seek(tp, listed[tp] - 1)
    deadline = time.monotonic() + connection.timeout
    while unknown := [tp for tp in nonempty if consumer.highwater(tp) is None]:
        if time.monotonic() > deadline:
            raise KafkaSourceError(
                f"no high watermark for {', '.join(map(_name, unknown))} from {connection.bootstrap_servers} "
                f"within {connection.timeout:g} s"
            )
        await consumer.getmany(*unknown, timeout_ms=_PROBE_WAIT_MS)
    return {tp: Bounds(earliest[tp], consumer.highwater(tp) if tp in nonempty else earliest[tp]) for tp in partitions}


REFUSAL_CHECK = 2.0
"""Seconds a failed connect spends asking the cluster why (a refusal answers at once)."""


async def _with_consumer(connection: Connection, use: Callable[[AIOKafkaConsumer], Awaitable[_T]]) -> _T:
    consumer = await _started(connection)
    try:
        return await use(consumer)
    finally:
        await consumer.stop()


async def _started(connection: Connection) -> AIOKafkaConsumer:
    consumer = connection.kafka.consumer(
        client_id=connection.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=_PROBE_WAIT_MS,
        request_timeout_ms=max(1000, int(connection.timeout * 1000)),
        metadata_max_age_ms=max(1000, int(connection.timeout * 1000)),
    )
    try:
        await _bounded(connection, "connect", consumer.start())
    except KafkaSourceError as exc:
        await consumer.stop()
        # aiokafka's bootstrap error names no cause; a broker that refuses the connection for good
        # (TLS, SASL) says why to a connection check, which then raises at once
        try:
            await connection.kafka.check_reachable(min(connection.timeout, REFUSAL_CHECK), quiet=True)
        except ClusterRejected as rejected:
            raise KafkaSourceError(f"Kafka at {connection.bootstrap_servers}: cannot connect: {rejected}") from exc
        except ClusterUnreachable:
            pass
        raise
    except BaseException:
        await consumer.stop()
        raise
    return consumer


async def _bounded(connection: Connection, what: str, operation: Awaitable[_T]) -> _T:
    """``operation``'s result; :class:`KafkaSourceError` naming the cluster if it fails or times out."""
    try:
        return await asyncio.wait_for(operation, connection.timeout)
    except (TimeoutError, KafkaError, OSError) as exc:
        reason = f"no answer within {connection.timeout:g} s" if isinstance(exc, TimeoutError) else exc
        raise KafkaSourceError(f"Kafka at {connection.bootstrap_servers}: cannot {what}: {reason}") from exc


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}[{tp.partition}]"
