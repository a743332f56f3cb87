"""The dead-letter topic: where a record that cannot be applied goes, with its raw bytes and why.

Not a stage: a sink the stages that read records (the sources, storage)
share. Each letter is a :class:`~kagent.core.contracts.DeadLetter` keyed by
the record's topic-partition.
"""

from __future__ import annotations

import asyncio

import faust

from kagent.core.contracts import DeadLetter

__all__ = ["DeadLetters"]


class DeadLetters:
    """Sends dead letters through the app's producer to ``topic``."""

    def __init__(self, app: faust.App, topic: str) -> None:
        self._app = app
        self._topic = topic

    async def send(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        error: str,
    ) -> asyncio.Future[object]:
        """Send a record's raw bytes and ``error``; the future is done when the broker has the letter."""
        letter = DeadLetter.from_record(
            topic=topic, partition=partition, offset=offset, timestamp=timestamp_ms, key=key, value=value, error=error
        )
        producer = self._app.producer
        await producer.maybe_start()
        sent: asyncio.Future[object] = await producer.send(
            self._topic, f"{topic}-{partition}".encode(), letter.model_dump_json().encode(), None, None, None
        )
        return sent
