"""Derived events -> the changelog tables of the groups this worker holds.

The derived-events topic is keyed by group, and every table is partitioned by
group, so each record updates state on the worker that holds its group.
Records are taken in batches; each batch's table writes go through the
:class:`~kagent.worker.changelog.ChangelogWriter` and are flushed before the
batch is acknowledged. The events of KIP-848 consumer groups go to
:class:`~kagent.worker.consumer_group_assignments.ConsumerGroups`, which stores their
states and assignments at the end of each batch. A record that is not valid
JSON of :class:`~kagent.core.events.DerivedEvents` is counted and sent to the
dead-letter topic; the batch goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import faust
from aiokafka.structs import TopicPartition
from pydantic import ValidationError

from kagent.core.events import (
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    OffsetCommitted,
    OffsetDeleted,
    decode_events,
)
from kagent.core.table_keys import partition_key
from kagent.worker.topology import Topology
from kagent.worker.changelog import (
    PRODUCER_ERRORS,
    ChangelogWriteError,
    ChangelogWriter,
)
from kagent.worker.consumer_group_assignments import ConsumerGroups
from kagent.worker.metrics import Metrics
from kagent.worker.offsets_topic import send_dead_letter

__all__ = ["install"]

log = logging.getLogger(__name__)

BATCH_RECORDS = 1_000
"""Derived-events records taken per batch, at most."""
BATCH_WITHIN = 0.02
"""Seconds a batch waits to fill before it is applied as it is."""

FLUSH_RETRY = 1.0
"""Seconds between attempts to flush a batch's changelog records while the producer fails."""

OnChange = Callable[[str, TopicPartition | None], None]
"""Called with a group whose committed offset changed on a partition, or (None) whose assignment changed."""


def install(
    app: faust.App,
    topology: Topology,
    writer: ChangelogWriter,
    consumer_groups: ConsumerGroups,
    metrics: Metrics,
    on_change: OnChange,
) -> None:
    """Add the storage agent to ``app``; ``on_change`` hears of every group it updates."""

    def apply(event: DerivedEvent) -> None:
        metrics.derived_events.labels(event.kind).inc()
        match event:
            case OffsetCommitted():
                key = partition_key(event.group, event.topic, event.partition)
                writer.set(topology.committed, key, event.model_dump_json().encode())
                on_change(event.group, TopicPartition(event.topic, event.partition))
            case OffsetDeleted():
                key = partition_key(event.group, event.topic, event.partition)
                writer.delete(topology.committed, key)
                writer.delete(topology.partition_lag, key)
            case GroupAssigned():
                writer.set(topology.assignments, event.group, event.model_dump_json().encode())
                on_change(event.group, None)
            case GroupDeleted():
                writer.delete(topology.assignments, event.group)
                writer.delete(topology.evaluation_state, event.group)
                consumer_groups.apply(event)  # a KIP-848 group's, or one folded earlier in this batch
            case _:  # the events of KIP-848 consumer groups
                consumer_groups.apply(event)

    @app.agent(topology.derived_events, name="storage")
    async def store_derived_events(stream: faust.StreamT[bytes]) -> None:
        async for batch in stream.take_events(BATCH_RECORDS, within=BATCH_WITHIN):
            letters = []
            for event in batch:
                message = event.message
                try:
                    derived = decode_events(message.value)
                except ValidationError as exc:
                    metrics.malformed.labels(message.topic).inc()
                    log.warning(
                        "malformed derived-events record at %s partition %d offset %d: %s",
                        message.topic, message.partition, message.offset, exc.errors()[0]["msg"],
                    )
                    letters.append(
                        await send_dead_letter(
                            app,
                            topology,
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
                for derived_event in derived.events:
                    apply(derived_event)
            await consumer_groups.store()
            while True:  # the batch is acknowledged only once its tables' changelogs have it
                try:
                    await writer.flush()
                    break
                except ChangelogWriteError as exc:
                    log.warning("%s; trying again in %g s", exc, FLUSH_RETRY)
                    await asyncio.sleep(FLUSH_RETRY)
            try:
                await asyncio.gather(*letters)
            except PRODUCER_ERRORS as exc:
                log.error("%d dead letters not sent: %r", len(letters), exc)
