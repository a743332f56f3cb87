"""Source ``offsets-topic``: ``__consumer_offsets`` -> derived events, keyed by group.

Each raw coordinator record is decoded (:mod:`kagent.consumer_offsets`) and
turned into derived events (:func:`kagent.events.derive`), which go to the
derived-events topic keyed by group. kagent's own consumer group is skipped.
A record that fails to decode is counted, logged with its partition and
offset, and sent with its raw bytes to the dead-letter topic; the stream goes
on with the next record.
"""

from __future__ import annotations

import logging

import faust

from kagent.consumer_offsets import DecodeError, decode
from kagent.events import derive, encode_event
from kagent.schemas import DeadLetter
from kagent.settings import Settings
from kagent.topology import Topology
from kagent.worker.metrics import Metrics

__all__ = ["install", "send_dead_letter"]

log = logging.getLogger(__name__)


async def send_dead_letter(topology: Topology, message: faust.types.Message, error: str) -> None:
    """Send ``message``'s raw bytes and ``error`` to the dead-letter topic, keyed by its topic-partition."""
    letter = DeadLetter.from_record(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        timestamp=round(message.timestamp * 1000) if message.timestamp else None,
        key=message.key,
        value=message.value,
        error=error,
    )
    await topology.dead_letters.send(
        key=f"{message.topic}-{message.partition}".encode(), value=letter.model_dump_json().encode()
    )


def install(app: faust.App, topology: Topology, settings: Settings, metrics: Metrics) -> None:
    """Add the ``offsets-topic`` source agent to ``app``."""
    own_group = settings.app_id

    @app.agent(topology.consumer_offsets, name="offsets-topic-source")
    async def decode_consumer_offsets(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            metrics.records.labels("offsets-topic").inc()
            try:
                if message.key is None:
                    raise DecodeError(None, "key", None, 0, "the record has no key")
                record = decode(message.key, message.value)
            except DecodeError as exc:
                metrics.malformed.labels(message.topic).inc()
                log.warning(
                    "malformed record at %s partition %d offset %d: %s",
                    message.topic, message.partition, message.offset, exc,
                )
                await send_dead_letter(topology, message, str(exc))
                continue
            for derived in derive(record):
                if derived.group != own_group:
                    await topology.derived_events.send(key=derived.group.encode(), value=encode_event(derived))
