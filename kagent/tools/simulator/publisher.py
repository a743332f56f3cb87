"""Appending coordinator records to `__consumer_offsets`, where a broker keeps none.

The thin I/O shell around `coordinator_records`: it creates the topic if
absent and appends each record on the partition Kafka's rule gives, with
the key and value bytes Kafka writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

from kagent.connections import KafkaConnection
from kagent.core.consumer_offsets import GroupMetadata, OffsetCommit
from kagent.tools.embedded import ONE_RECORD_BATCH, create_topics
from kagent.tools.simulator.coordinator_records import offsets_topic_message
from kagent.tools.simulator.partitioners import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS

__all__ = ["CoordinatorRecordPublisher"]


class CoordinatorRecordPublisher:
    """Publishes group coordinator records to the cluster's `__consumer_offsets`.

    Use `await CoordinatorRecordPublisher.start(kafka)` and
    `await publisher.stop()`. Records go to the partition Kafka's rule gives
    for the topic's actual partition count (50, Kafka's default, when the
    publisher creates it).
    """

    def __init__(self, producer: AIOKafkaProducer, partitions: int) -> None:
        self._producer = producer
        self.partitions = partitions

    @classmethod
    async def start(cls, kafka: KafkaConnection) -> CoordinatorRecordPublisher:
        """Create `__consumer_offsets` with 50 partitions unless it exists,
        and start the producer (acks=all, one record per batch so that
        Tansu's ListOffsets answers the true log-end offset)."""
        await create_topics(kafka, {OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS})
        producer = kafka.producer(
            acks="all",
            client_id="kagent-simulator",
            max_batch_size=ONE_RECORD_BATCH,
        )
        await producer.start()
        try:
            partitions = await producer.partitions_for(OFFSETS_TOPIC)
        except BaseException:
            await producer.stop()
            raise
        return cls(producer, len(partitions))

    async def publish(self, records: Sequence[OffsetCommit | GroupMetadata]) -> None:
        """Append `records`, in order, and return once the broker has them all."""
        deliveries = []
        for record in records:
            message = offsets_topic_message(record, self.partitions)
            deliveries.append(
                await self._producer.send(OFFSETS_TOPIC, message.value, key=message.key, partition=message.partition)
            )
        await asyncio.gather(*deliveries)

    async def stop(self) -> None:
        """Flush and stop the producer."""
        await self._producer.stop()
