"""`kagent.worker.channel.Channel`: items in order, a waiting get woken by a put, a drain of all."""

from __future__ import annotations

import asyncio

from kagent.worker.channel import Channel


def test_drain_takes_every_item_in_order_and_leaves_none() -> None:
    channel: Channel[int] = Channel()
    assert channel.drain() == [] and len(channel) == 0
    for item in range(5):
        channel.put(item)
    assert len(channel) == 5
    assert channel.drain() == [0, 1, 2, 3, 4]
    assert channel.drain() == [] and len(channel) == 0


def test_get_waits_for_a_put_and_takes_the_oldest() -> None:
    async def scenario() -> list[int]:
        channel: Channel[int] = Channel()
        taking = asyncio.ensure_future(channel.get())
        await asyncio.sleep(0)
        assert not taking.done()  # nothing to take yet
        channel.put(1)
        channel.put(2)
        first = await asyncio.wait_for(taking, 5)
        second = await asyncio.wait_for(channel.get(), 5)
        channel.put(3)
        return [first, second, *channel.drain()]

    assert asyncio.run(scenario()) == [1, 2, 3]


def test_a_get_after_a_drain_waits_for_the_next_put() -> None:
    async def scenario() -> int:
        channel: Channel[int] = Channel()
        channel.put(1)
        assert channel.drain() == [1]
        taking = asyncio.ensure_future(channel.get())  # the event was set by the put: it must not return
        await asyncio.sleep(0)
        assert not taking.done()
        channel.put(2)
        return await asyncio.wait_for(taking, 5)

    assert asyncio.run(scenario()) == 2
