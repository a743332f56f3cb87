"""ChangelogWriter against the embedded broker: a real Faust app's producer and table."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from kagent.core.table_keys import partition_of_group
from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker
from kagent.worker.changelog import ChangelogWriteError, ChangelogWriter
from kagent.worker.topology import GroupPartitionedTable
from tests.support.faults import fail_first_batch
from tests.support.processes import process_stopped
from tests.support.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.integration

PARTITIONS = 4


async def _states_table(
    kafka_broker: EmbeddedBroker, prefix: str, group_of: Callable[[str], str] = lambda key: key, **settings: Any
) -> tuple[faust.App, GroupPartitionedTable, str]:
    """A fresh app (given Faust ``settings``) with one group-partitioned table (keys in the group
    ``group_of`` names), and its changelog topic (created)."""
    app_id = f"{prefix}-{uuid.uuid4().hex[:6]}"
    app = faust.App(app_id, broker=kafka_broker.url, store="memory://", topic_partitions=PARTITIONS, **settings)
    table = GroupPartitionedTable(
        app,
        group_of=group_of,
        name="states",
        beacon=app.tables.beacon,
        partitions=PARTITIONS,
        key_type=str,
        value_type=bytes,
    )
    changelog = table.changelog_topic.get_topic_name()
    await kafka_broker.create_topics({changelog: PARTITIONS})
    return app, table, changelog


async def test_a_flush_sends_the_last_value_of_each_key_to_its_groups_partition(kafka_broker: EmbeddedBroker) -> None:
    app, table, changelog = await _states_table(kafka_broker, "changelog-writer")
    writer = ChangelogWriter(app)

    writer.set(table, "billing", b"first")
    writer.set(table, "billing", b"second")
    writer.set(table, "audit", b"gone soon")
    writer.delete(table, "audit")
    writer.delete(table, "never-written")

    assert dict(table.data) == {"billing": b"second"}  # readers see writes at once
    assert writer.staged == 2
    try:
        await writer.flush()
    finally:
        await app.producer.stop()
    assert writer.staged == 0

    records = await _read(kafka_broker, changelog, 2)
    assert sorted(records) == sorted(
        [
            (partition_of_group("billing", PARTITIONS), "billing", b"second"),
            (partition_of_group("audit", PARTITIONS), "audit", None),
        ]
    )


async def test_a_failed_flush_stages_its_records_again(
    kafka_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker refusing a write cannot be caused on the embedded broker, so the producer's
    first record batch sent is made to fail (a fake fault); the next flush must send what the failed one took."""
    app, table, changelog = await _states_table(kafka_broker, "changelog-retry")
    writer = ChangelogWriter(app)
    failed = fail_first_batch(monkeypatch, KafkaError("refused"))
    writer.set(table, "billing", b"one")
    writer.set(table, "audit", b"two")
    try:
        with pytest.raises(ChangelogWriteError, match=r"2 changelog records not sent: KafkaError.*refused"):
            await writer.flush()
        assert writer.staged == 2
        writer.set(table, "billing", b"newer")  # a newer write meanwhile wins
        await writer.flush()
    finally:
        await app.producer.stop()
    assert failed() and writer.staged == 0
    # What the compacted changelog keeps: each key's last record. A batch of the failed flush that
    # did go out (another partition's) is sent again by the next: a record twice, never a lost one.
    records = await _read(kafka_broker, changelog, 2, until=lambda rs: {k for _, k, _ in rs} == {"audit", "billing"})
    assert {key: value for _, key, value in records} == {"audit": b"two", "billing": b"newer"}
    assert len(records) <= 3


async def _read(
    kafka_broker: EmbeddedBroker,
    topic: str,
    count: int,
    with_timestamps: bool = False,
    until: Callable[[list[tuple[Any, ...]]], bool] | None = None,
) -> list[tuple[Any, ...]]:
    """The first ``count`` records of ``topic`` at least, and more until ``until`` holds of them:
    (partition, JSON-decoded key, value), and the record's timestamp ``with_timestamps``."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        records: list[tuple[Any, ...]] = []
        while len(records) < count or (until is not None and not until(records)):
            fetched = await consumer.getmany(timeout_ms=5_000)
            assert fetched, f"{topic} holds only {records}"
            records += [
                (tp.partition, json.loads(r.key), r.value, *((r.timestamp,) if with_timestamps else ()))
                for tp, rs in fetched.items()
                for r in rs
            ]
        return records
    finally:
        await consumer.stop()


async def test_a_flush_started_during_another_sends_after_it(kafka_broker: EmbeddedBroker) -> None:
    """Two tasks of storage flush one writer: its batches and its end-offset polls. A flush begun
    while another is sending returns only once that one's records are sent too (a change is
    announced only when durable), and its records follow the other's in time (changelog order
    is what the pipeline reads snapshots by), even on a partition the other is not waiting on."""
    app, table, changelog = await _states_table(kafka_broker, "changelog-order", group_of=lambda key: key.split("/")[0])
    busy, other = (
        "orders",
        next(g for g in ("billing", "audit", "payments", "search") if _partition(g) != _partition("orders")),
    )
    writer = ChangelogWriter(app)
    many = 3_000  # several producer batches: the first flush waits on the producer between sends
    for i in range(many):
        writer.set(table, f"{busy}/{i}", b"x" * 20)
    writer.set(table, f"{other}/first", b"first")  # the first flush's last record, on another partition
    try:
        first = asyncio.create_task(writer.flush())
        while writer.staged:  # until the first flush has taken its records
            await asyncio.sleep(0)
        writer.set(table, f"{other}/late", b"late")
        await writer.flush()
        assert first.done(), "the second flush returned before the first one's records were sent"
        await first
    finally:
        await app.producer.stop()
    records = await _read(kafka_broker, changelog, many + 2, with_timestamps=True)
    written = {key: timestamp for _, key, _, timestamp in records}
    assert written[f"{other}/first"] <= written[f"{other}/late"]
    assert [key for p, key, _, _ in records if p == _partition(other)] == [f"{other}/first", f"{other}/late"]


def _partition(group: str) -> int:
    return partition_of_group(group, PARTITIONS)


async def test_a_flush_to_a_broker_that_stopped_answering_fails_within_its_bound_and_the_next_sends_its_writes(
    tmp_path: Path,
) -> None:
    """The broker stops answering (its process is stopped with SIGSTOP, as a hung broker or a network
    that drops packets looks to a client) under a writer whose producer writes one record a batch: the
    flush's first batch for a partition waits for an answer that does not come, its second waits in
    aiokafka's accumulator for the first's answer, and its third for room behind the second. Faust's
    producer would wait its 20-minute request timeout there; the flush must fail within its own bound
    and keep its writes, and the flush after the broker answers again must send them."""
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        app, table, changelog = await _states_table(
            broker, "changelog-hung", group_of=lambda key: "one-group", producer_max_batch_size=ONE_RECORD_BATCH
        )
        writer = ChangelogWriter(app, timeout=2.0)
        pid = broker.pid
        assert pid is not None
        try:
            writer.set(table, "first", b"sent")
            await writer.flush()  # the producer is started and knows the topic
            os.kill(broker.pid, signal.SIGSTOP)
            await asyncio.to_thread(wait_until, lambda: process_stopped(pid), 10, "the broker stopped", interval=0.01)
            try:
                writer.set(table, "billing", b"one")
                writer.set(table, "audit", b"two")
                writer.set(table, "search", b"three")
                started = time.monotonic()
                with pytest.raises(
                    ChangelogWriteError, match=r"3 changelog records not sent: .*not taken by the producer"
                ):
                    await writer.flush()
                took = time.monotonic() - started
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            assert writer.staged == 3
            assert took < 15, f"the flush failed after {took:.1f} s, not within its 2 s bound"
            writer.set(table, "billing", b"newer")  # a newer write meanwhile wins
            await wait_until_async(_flushed(writer), 60, "a flush to succeed once the broker answers again")
        finally:
            await app.producer.stop()
        records = await _read(
            broker, changelog, 4, until=lambda rs: {k for _, k, _ in rs} >= {"audit", "billing", "search"}
        )
    # Each key's last record is the last written (the batch the failed flush queued may go out too).
    last = {key: value for _, key, value in records}
    assert last == {"first": b"sent", "audit": b"two", "billing": b"newer", "search": b"three"}, records


def _flushed(writer: ChangelogWriter) -> Callable[[], Awaitable[bool]]:
    """A probe: one flush of ``writer``; whether it succeeded (a failed one keeps its writes staged)."""

    async def flush() -> bool:
        try:
            await writer.flush()
        except ChangelogWriteError:
            return False
        return writer.staged == 0

    return flush
