"""A typed in-process channel: how one stage hands another something without calling into it."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

__all__ = ["Channel"]

T = TypeVar("T")


class Channel(Generic[T]):
    """An unbounded FIFO of ``T`` from the stages that put to the stage that takes.

    :meth:`put` never blocks, so a producing stage never waits for a
    consuming one mid-batch; the consumer takes one item (:meth:`get`,
    waiting) or everything waiting (:meth:`drain`, not waiting) when it is
    ready. Items put before the consumer starts wait for it.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[T] = asyncio.Queue()

    def put(self, item: T) -> None:
        """Hand ``item`` to the consumer."""
        self._queue.put_nowait(item)

    async def get(self) -> T:
        """The oldest item, waiting for one."""
        return await self._queue.get()

    def drain(self) -> list[T]:
        """Every item waiting, oldest first; empty if none."""
        items = []
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        return items

    def __len__(self) -> int:
        return self._queue.qsize()
