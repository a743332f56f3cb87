"""Reading a topic as it fills, until what a test waits for has arrived."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Self

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from tests.support.waiting import wait_until_async

__all__ = ["TopicReader", "read_to_end"]


async def read_to_end(bootstrap_servers: str, topic: str, timeout: float = 30.0) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record ``topic`` held when called, in the order fetched: fetched from the earliest offset up to
    the end offsets ListOffsets gives at the start (:func:`_fetch_to_ends`). Fails after ``timeout`` s."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        await consumer.topics()
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return []
        consumer.assign(partitions)
        records: list[ConsumerRecord[bytes, bytes]] = []
        async with asyncio.timeout(timeout):
            await _fetch_to_ends(consumer, records)
        return records
    finally:
        await consumer.stop()


async def _fetch(consumer: AIOKafkaConsumer, records: list[ConsumerRecord[bytes, bytes]]) -> None:
    """One fetch of at most 0.3 s, its records appended to ``records``."""
    batches = await consumer.getmany(timeout_ms=300)
    records += [record for batch in batches.values() for record in batch]


async def _fetch_to_ends(consumer: AIOKafkaConsumer, records: list[ConsumerRecord[bytes, bytes]]) -> None:
    """Fetch into ``records`` until the position on each of the consumer's partitions has reached the end
    offset ListOffsets gives now (an empty fetch on a slow machine does not end it early). On Tansu that
    end is the last batch's base offset + 1, which a position passes once that batch is read."""
    ends = await consumer.end_offsets(list(consumer.assignment()))
    while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
        await _fetch(consumer, records)


class TopicReader:
    """Every record of ``topics`` from the earliest offset on, in :attr:`records` in the order fetched;
    an async context manager that starts and stops its consumer (no consumer group, nothing committed)."""

    def __init__(self, bootstrap_servers: str, *topics: str) -> None:
        self._consumer = AIOKafkaConsumer(
            *topics, bootstrap_servers=bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        self.records: list[ConsumerRecord[bytes, bytes]] = []

    async def __aenter__(self) -> Self:
        await self._consumer.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self._consumer.stop()

    async def until(
        self, done: Callable[[], bool], timeout: float, what: str, detail: Callable[[], str] | None = None
    ) -> None:
        """Fetch on until ``done()`` holds (checked before each fetch of at most 0.3 s); fail naming
        ``what`` (with ``detail()``) after ``timeout`` s."""

        async def probe() -> bool:
            if done():
                return True
            await _fetch(self._consumer, self.records)
            return done()

        await wait_until_async(probe, timeout, what, interval=0, detail=detail)

    async def drain(self, timeout: float = 30.0) -> None:
        """Fetch up to the end offsets ListOffsets gives now (:func:`_fetch_to_ends`): what the topics held a
        moment ago is in :attr:`records`. Fails after ``timeout`` s."""
        async with asyncio.timeout(timeout):
            while not self._consumer.assignment():  # its partitions come with its first metadata
                await _fetch(self._consumer, self.records)
            await _fetch_to_ends(self._consumer, self.records)
