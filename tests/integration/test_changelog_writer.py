"""ChangelogWriter against the embedded broker: a real Faust app's producer and table."""

from __future__ import annotations

import json
import uuid

import faust
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from kagent.embedded import EmbeddedBroker
from kagent.keys import partition_of_group
from kagent.topology import GroupPartitionedTable
from kagent.worker.changelog import ChangelogWriter

pytestmark = pytest.mark.integration

PARTITIONS = 4


async def test_a_flush_sends_the_last_value_of_each_key_to_its_groups_partition(kafka_broker: EmbeddedBroker) -> None:
    app_id = f"changelog-writer-{uuid.uuid4().hex[:6]}"
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

    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(changelog, p) for p in range(PARTITIONS)])
        records = []
        while len(records) < 2:
            fetched = await consumer.getmany(timeout_ms=5_000)
            assert fetched, f"the changelog holds only {records}"
            records += [(tp.partition, json.loads(r.key), r.value) for tp, rs in fetched.items() for r in rs]
    finally:
        await consumer.stop()
    assert sorted(records) == sorted(
        [
            (partition_of_group("billing", PARTITIONS), "billing", b"second"),
            (partition_of_group("audit", PARTITIONS), "audit", None),
        ]
    )
