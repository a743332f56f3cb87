"""Derived events -> the changelog tables of the groups this worker holds.

The derived-events topic is keyed by group, and every table is partitioned by
group, so each event updates state on the worker that holds its group.
An event that is not valid JSON of a derived event is counted and sent to the
dead-letter topic; the stream goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import faust
from aiokafka.structs import TopicPartition
from pydantic import ValidationError

from kagent.events import GroupAssigned, GroupDeleted, OffsetCommitted, OffsetDeleted, decode_event
from kagent.keys import partition_key
from kagent.topology import Topology
from kagent.worker.metrics import Metrics
from kagent.worker.source import send_dead_letter

__all__ = ["install"]

log = logging.getLogger(__name__)

OnChange = Callable[[str, TopicPartition | None], None]
"""Called with a group whose committed offset changed on a partition, or (None) whose assignment changed."""


def install(app: faust.App, topology: Topology, metrics: Metrics, on_change: OnChange) -> None:
    """Add the storage agent to ``app``; ``on_change`` hears of every group it updates."""

    @app.agent(topology.derived_events, name="storage")
    async def store_derived_events(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            try:
                derived = decode_event(message.value)
            except ValidationError as exc:
                metrics.malformed.labels(message.topic).inc()
                log.warning(
                    "malformed derived event at %s partition %d offset %d: %s",
                    message.topic, message.partition, message.offset, exc.errors()[0]["msg"],
                )
                await send_dead_letter(topology, message, str(exc))
                continue
            metrics.derived_events.labels(derived.kind).inc()
            match derived:
                case OffsetCommitted():
                    key = partition_key(derived.group, derived.topic, derived.partition)
                    topology.committed[key] = message.value
                    on_change(derived.group, TopicPartition(derived.topic, derived.partition))
                case OffsetDeleted():
                    key = partition_key(derived.group, derived.topic, derived.partition)
                    topology.committed.pop(key, None)
                    topology.partition_lag.pop(key, None)
                case GroupAssigned():
                    topology.assignments[derived.group] = message.value
                    on_change(derived.group, None)
                case GroupDeleted():
                    topology.assignments.pop(derived.group, None)
                    topology.evaluation_state.pop(derived.group, None)
