"""Derived events -> the changelog tables of the groups this worker holds.

The derived-events topic is keyed by group, and every table is partitioned by
group, so each record updates state on the worker that holds its group.
A KIP-848 consumer group has no one record of its assignment: its events
are folded into its state (:mod:`kagent.consumer_group`), and its
assignment is written from that state once every topic id it holds has a
name. The names come from the group's type-4 records, which Kafka 3.7-4.0
writes and 4.1+ does not: on 4.1+ such a group's state is kept, but its
assignment is not known until topic ids are resolved from cluster metadata,
which kagent does not do yet.
Records are taken in batches; each batch's table writes go through the
:class:`~kagent.worker.changelog.ChangelogWriter` and are flushed before the
batch is acknowledged. A record that is not valid JSON of
:class:`~kagent.events.DerivedEvents` is counted and sent to the dead-letter
topic; the batch goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import faust
from aiokafka.structs import TopicPartition
from pydantic import ValidationError

from kagent.consumer_group import ConsumerGroupState, assignment, fold
from kagent.events import (
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    OffsetCommitted,
    OffsetDeleted,
    decode_events,
)
from kagent.keys import partition_key
from kagent.topology import Topology
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.metrics import Metrics
from kagent.worker.source import send_dead_letter

__all__ = ["install"]

log = logging.getLogger(__name__)

BATCH_RECORDS = 1_000
"""Derived-events records taken per batch, at most."""
BATCH_WITHIN = 0.02
"""Seconds a batch waits to fill before it is applied as it is."""

OnChange = Callable[[str, TopicPartition | None], None]
"""Called with a group whose committed offset changed on a partition, or (None) whose assignment changed."""


def install(
    app: faust.App, topology: Topology, writer: ChangelogWriter, metrics: Metrics, on_change: OnChange
) -> None:
    """Add the storage agent to ``app``; ``on_change`` hears of every group it updates."""

    def apply(event: DerivedEvent, consumer_groups: dict[str, ConsumerGroupState | None]) -> None:
        """Apply one event; KIP-848 groups' states are folded into ``consumer_groups``
        (group -> state, None once deleted) and stored once per batch."""
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
                if event.group in consumer_groups or event.group in topology.consumer_group_state:
                    consumer_groups[event.group] = None
            case _:  # the events of KIP-848 consumer groups
                if event.group not in consumer_groups:
                    raw = topology.consumer_group_state.get(event.group)
                    consumer_groups[event.group] = (
                        None if raw is None else ConsumerGroupState.model_validate_json(raw)
                    )
                consumer_groups[event.group] = fold(consumer_groups[event.group], event)

    def store_consumer_groups(consumer_groups: dict[str, ConsumerGroupState | None]) -> None:
        """Store each folded state, and the group's assignment once every topic it holds has a name."""
        for group, state in consumer_groups.items():
            if state is None:
                writer.delete(topology.consumer_group_state, group)
                continue
            writer.set(topology.consumer_group_state, group, state.model_dump_json().encode())
            assigned = assignment(state)
            if assigned is None:
                log.debug("group %s holds topic ids without names yet; its assignment waits", group)
                continue
            value = assigned.model_dump_json().encode()
            if topology.assignments.get(group) != value:
                writer.set(topology.assignments, group, value)
                on_change(group, None)

    @app.agent(topology.derived_events, name="storage")
    async def store_derived_events(stream: faust.StreamT[bytes]) -> None:
        async for batch in stream.take_events(BATCH_RECORDS, within=BATCH_WITHIN):
            letters = []
            consumer_groups: dict[str, ConsumerGroupState | None] = {}
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
                    apply(derived_event, consumer_groups)
            store_consumer_groups(consumer_groups)
            await writer.flush()
            await asyncio.gather(*letters)
