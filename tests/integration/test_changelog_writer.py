"""ChangelogWriter against the embedded broker: a real Faust app's producer and table."""

from __future__ import annotations

import json
import uuid

import faust
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from kagent.core.table_keys import partition_of_group
from kagent.tools.embedded import EmbeddedBroker
from kagent.worker.changelog import ChangelogWriteError, ChangelogWriter
from kagent.worker.topology import GroupPartitionedTable
from tests.support.faults import fail_first_send

pytestmark = pytest.mark.integration

PARTITIONS = 4


async def _states_table(kafka_broker: EmbeddedBroker, prefix: str) -> tuple[faust.App, GroupPartitionedTable, str]:
    """A fresh app with one group-partitioned table, and its changelog topic (created)."""
    app_id = f"{prefix}-{uuid.uuid4().hex[:6]}"
    app = faust.App(app_id, broker=kafka_broker.url, store="memory://", topic_partitions=PARTITIONS)
    table = GroupPartitionedTable(
        app,
        group_of=lambda key: key,
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
    first send is made to fail (a fake fault); the next flush must send what the failed one took."""
    app, table, changelog = await _states_table(kafka_broker, "changelog-retry")
    writer = ChangelogWriter(app)
    failed = fail_first_send(monkeypatch, app.producer, KafkaError("refused"))
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
    assert sorted((key, value) for _, key, value in await _read(kafka_broker, changelog, 2)) == [
        ("audit", b"two"),
        ("billing", b"newer"),
    ]


async def _read(kafka_broker: EmbeddedBroker, topic: str, count: int) -> list[tuple[int, str, bytes | None]]:
    """The first ``count`` records of ``topic``: (partition, JSON-decoded key, value)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        records: list[tuple[int, str, bytes | None]] = []
        while len(records) < count:
            fetched = await consumer.getmany(timeout_ms=5_000)
            assert fetched, f"{topic} holds only {records}"
            records += [(tp.partition, json.loads(r.key), r.value) for tp, rs in fetched.items() for r in rs]
        return records
    finally:
        await consumer.stop()
