"""Producing one traffic's keyed records at its rate."""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka import AIOKafkaProducer

from kagent.tools.simulator.key_skew import KeySampler
from kagent.tools.simulator.scenario import TrafficSpec

__all__ = ["produce_traffic"]

#: How often the producer tops the traffic up to its rate.
TICK_SECONDS = 0.05


async def produce_traffic(
    producer: AIOKafkaProducer, traffic: TrafficSpec, sampler: KeySampler, stop: asyncio.Event
) -> None:
    """Send `traffic.rate` keyed records per second to `traffic.topic` until
    `stop` is set.

    Keys come from `sampler`; the record is placed by the producer's default
    partitioner (murmur2, as Java clients do). The value is the record's
    sequence number in this traffic, in ASCII. Every tick the records due
    since the start are sent and their delivery awaited, so a slow broker
    slows the traffic rather than queueing without bound.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    sent = 0
    while not stop.is_set():
        due = int(traffic.rate * (loop.time() - started)) - sent
        if due > 0:
            deliveries = [
                await producer.send(traffic.topic, str(sent + index).encode(), key=key)
                for index, key in enumerate(sampler.draw(due))
            ]
            await asyncio.gather(*deliveries)
            sent += due
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TICK_SECONDS)
