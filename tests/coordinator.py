"""Publishing coordinator records, in Kafka's binary format, to the embedded broker's ``__consumer_offsets``,
and producing the traffic whose lag they measure.

Tansu keeps no ``__consumer_offsets`` of its own, so tests write there what
Kafka's group coordinator would: offset commits and group metadata.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import ONE_RECORD_BATCH
from kagent.core.consumer_offsets import (
    Assignment,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    Subscription,
)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50


def offset_commit(group: str, topic: str, partition: int, offset: int) -> OffsetCommit:
    """An offset commit as Kafka 2.1+ writes it (value version 3)."""
    now = int(time.time() * 1000)
    return OffsetCommit(group, topic, partition, offset, "", now, None, None, 3)


def group_metadata(group: str, generation: int, members: Mapping[str, Sequence[TopicPartition]]) -> GroupMetadata:
    """Group metadata (value version 3) of a consumer group with the range assignor."""
    topics = tuple(sorted({tp.topic for tps in members.values() for tp in tps}))
    return GroupMetadata(
        group=group,
        protocol_type="consumer",
        generation=generation,
        protocol="range",
        leader=next(iter(members), None),
        state_timestamp=int(time.time() * 1000),
        members=tuple(
            GroupMember(
                member_id=member_id,
                group_instance_id=None,
                client_id=member_id.split("-")[0],
                client_host="/127.0.0.1",
                rebalance_timeout=30000,
                session_timeout=10000,
                subscription=Subscription(0, topics),
                assignment=Assignment(0, tuple(tps)),
            )
            for member_id, tps in members.items()
        ),
        value_version=3,
    )


async def publish(bootstrap_servers: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
    """Publish (key, value) records (see ``kagent.core.consumer_offsets.encode``) to partition 0 of
    ``__consumer_offsets``, in order."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        for key, value in records:
            await producer.send(OFFSETS_TOPIC, value, key=key, partition=0)
        await producer.flush()
    finally:
        await producer.stop()


async def produce(bootstrap_servers: str, topic: str, counts: Mapping[int, int]) -> None:
    """Write ``counts[p]`` records to each partition ``p`` of ``topic``, one record per batch.

    Tansu answers ListOffsets(latest) with its last batch's base offset + 1, which
    is the log end only when every batch holds one record (see kagent.tools.embedded).
    """
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        for partition, count in counts.items():
            for i in range(count):
                await producer.send(topic, b"x", key=b"%d" % i, partition=partition)
        await producer.flush()
    finally:
        await producer.stop()
