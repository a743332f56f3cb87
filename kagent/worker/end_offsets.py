"""End offsets: poll ListOffsets for the partitions the held groups read.

Every ``KAGENT_END_OFFSET_INTERVAL`` seconds the stage asks storage (through
its read interface) which partitions the held groups subscribe to or are
assigned, asks the cluster for the earliest and latest offset of each, in
one batched request each (aiokafka groups them by leader), and hands the
answers to storage as :class:`~kagent.worker.group_state.EndOffsetsPolled`
on its channel: storage owns the figures and the lag computed from them.
A round is also sent when the held groups read nothing, so storage's
periodic work (KIP-848 groups waiting for topic names) goes on.
"""

from __future__ import annotations

import logging
import time

import faust
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from kagent.connections import KafkaConnection
from kagent.worker.channel import Channel
from kagent.worker.group_state import EndOffsetsPolled, GroupStateReader
from kagent.worker.metrics import Metrics
from kagent.worker.stage import Stage

__all__ = ["EndOffsets"]

log = logging.getLogger(__name__)


class EndOffsets(Stage):
    """Polls the log-start and log-end offsets of the partitions the held groups read."""

    name = "end-offsets"

    def __init__(
        self,
        *,
        kafka: KafkaConnection,
        client_id: str,
        interval: float,
        groups: GroupStateReader,
        polled: Channel[EndOffsetsPolled],
        metrics: Metrics,
    ) -> None:
        self._kafka = kafka
        self._client_id = client_id
        self._interval = interval
        self._groups = groups
        self._polled = polled
        self._metrics = metrics
        self._consumer: AIOKafkaConsumer | None = None
        self._stopped = False

    def register(self, app: faust.App) -> None:
        @app.timer(self._interval, name="poll-end-offsets")
        async def poll_end_offsets() -> None:
            if not self._stopped:  # the timer fires until Faust stops it
                await self.poll()

    async def stop(self) -> None:
        self._stopped = True
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await consumer.stop()

    async def _client(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = self._kafka.consumer(client_id=self._client_id, enable_auto_commit=False)
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def poll(self) -> None:
        """One round: ListOffsets for every partition the held groups read, handed to storage."""
        partitions = self._groups.partitions_read()
        if not partitions:
            self._polled.put(EndOffsetsPolled(polled_at=time.time(), log_start={}, log_end={}, partition_counts={}))
            return
        try:
            consumer = await self._client()
            log_start = await consumer.beginning_offsets(partitions)
            log_end = await consumer.end_offsets(partitions)
        except KafkaError as exc:
            self._metrics.end_offset_polls.labels("error").inc()
            log.warning("ListOffsets for %d partitions failed: %s", len(partitions), exc)
            return
        self._metrics.end_offset_polls.labels("ok").inc()
        counts = {}
        for topic in {tp.topic for tp in partitions}:
            known = consumer.partitions_for_topic(topic)
            if known:
                counts[topic] = len(known)
        self._polled.put(
            EndOffsetsPolled(polled_at=time.time(), log_start=log_start, log_end=log_end, partition_counts=counts)
        )
