"""read_partitions reads changelog partitions from start to end in order, and an unreachable cluster
leaves what it could not read to Faust's recovery (kagent.worker.changelog_restore)."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from kagent.connections import KafkaConnection
from kagent.tools.embedded import EmbeddedBroker
from kagent.worker.changelog_restore import read_partitions

pytestmark = pytest.mark.integration


async def test_every_record_of_each_partition_is_applied_in_offset_order(kafka_broker: EmbeddedBroker) -> None:
    topic = f"restore-{uuid.uuid4().hex[:6]}-changelog"
    await kafka_broker.create_topics({topic: 3})
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, linger_ms=50)
    await producer.start()
    try:
        # Normal batching (several records a batch), a tombstone among them, partition 2 left empty.
        sent = [
            await producer.send(topic, key=b'"k%d"' % (i % 7), value=None if i == 5 else b"v%d" % i, partition=i % 2)
            for i in range(3000)
        ]
        for future in sent:
            await future
    finally:
        await producer.stop()

    reader = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers)
    await reader.start()
    try:  # ListOffsets' end: Tansu's is the last batch's base offset + 1, Kafka's the log end
        ends = await reader.end_offsets([TopicPartition(topic, p) for p in range(2)])
    finally:
        await reader.stop()
    applied: dict[TopicPartition, list[tuple[bytes | None, bytes | None]]] = {}
    done = await read_partitions(
        KafkaConnection(kafka_broker.bootstrap_servers),
        [TopicPartition(topic, p) for p in range(3)],
        lambda tp, key, value: applied.setdefault(tp, []).append((key, value)),
    )

    for partition in (0, 1):
        expected = [(b'"k%d"' % (i % 7), None if i == 5 else b"v%d" % i) for i in range(3000) if i % 2 == partition]
        assert applied[TopicPartition(topic, partition)] == expected
        # The last offset applied, but never past ListOffsets' end, where Faust's recovery takes over.
        assert done[TopicPartition(topic, partition)] == min(len(expected), ends[TopicPartition(topic, partition)]) - 1
    assert TopicPartition(topic, 2) not in applied and TopicPartition(topic, 2) not in done


async def test_an_unreachable_cluster_restores_nothing_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    applied: list[object] = []
    done = await read_partitions(
        KafkaConnection("127.0.0.1:1"),
        [TopicPartition("gone-changelog", 0)],
        lambda *record: applied.append(record),
        timeout=3.0,
    )
    assert done == {} and applied == []
    assert "Faust's recovery reads the rest" in caplog.text
