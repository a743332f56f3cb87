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
    """Every record ``topic`` held when called, in the order fetched: fetched from the earliest offset until
    each partition's position has reached the end offset ListOffsets gave at the start (an empty fetch on a
    slow machine does not end it early). On Tansu that end is the last batch's base offset + 1, which a
    position passes once that batch is read. Fails after ``timeout`` s."""
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
        ends = await consumer.end_offsets(partitions)
        records: list[ConsumerRecord[bytes, bytes]] = []
        async with asyncio.timeout(timeout):
            while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
                batches = await consumer.getmany(timeout_ms=300)
                records += [record for batch in batches.values() for record in batch]
        return records
    finally:
        await consumer.stop()


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
            await self._fetch()
            return done()

        await wait_until_async(probe, timeout, what, interval=0, detail=detail)

    async def drain(self, timeout: float = 30.0) -> None:
        """Fetch until each partition's position has reached the end offset ListOffsets gives now (as
        :func:`read_to_end`; an empty fetch on a slow machine does not end it early): what the topics held
        a moment ago is in :attr:`records`. Fails after ``timeout`` s."""
        async with asyncio.timeout(timeout):
            while not self._consumer.assignment():  # its partitions come with its first metadata
                await self._fetch()
            ends = await self._consumer.end_offsets(list(self._consumer.assignment()))
            while [tp for tp, end in ends.items() if await self._consumer.position(tp) < end]:
                await self._fetch()

    async def _fetch(self) -> None:
        """One fetch of at most 0.3 s, its records added to :attr:`records`."""
        batches = await self._consumer.getmany(timeout_ms=300)
        self.records += [record for batch in batches.values() for record in batch]
