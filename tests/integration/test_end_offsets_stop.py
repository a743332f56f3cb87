"""The end-offsets stage stopped while a poll's requests are under way: none of them is sent after its
client is closed.

CI once caught a worker told to stop while a poll was refreshing the metadata: the stage closed its
client, the poll went on to send its ListOffsets, aiokafka opened a new connection for it, and the worker
ended with "Unclosed AIOKafkaConnection" and a traceback. Here the stage polls the real embedded broker.
The one thing held in process is the timing: the broker cannot be made to hold one request while the
worker stops, so the client holds the poll's first ListOffsets until the test lets it go.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaClient
from aiokafka.structs import TopicPartition

from kagent.connections import KafkaConnection
from kagent.tools.embedded import EmbeddedBroker, create_topics
from kagent.worker.channel import Channel
from kagent.worker.end_offsets import EndOffsets
from kagent.worker.group_state import EndOffsetsPolled
from kagent.worker.metrics import Metrics

pytestmark = pytest.mark.integration

LIST_OFFSETS = 2
"""ListOffsets' API key."""


class HeldConnection(KafkaConnection):
    """The embedded broker's connection, whose clients hold the first ListOffsets request any of them
    sends until :attr:`release` is set (:attr:`holding` is set meanwhile)."""

    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__(bootstrap_servers)
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.made: list[HeldClient] = []

    def client(self, **options: Any) -> AIOKafkaClient:
        client = HeldClient(self, **self.client_options(), **options)
        self.made.append(client)
        return client


class HeldClient(AIOKafkaClient):
    """A real aiokafka client that holds a request as its :class:`HeldConnection` says, and keeps every
    request sent after it was closed."""

    def __init__(self, connection: HeldConnection, **options: Any) -> None:
        super().__init__(**options)
        self._connection = connection
        self.closed = False
        self.sent_after_close: list[Any] = []

    async def send(self, node_id: Any, request: Any, **options: Any) -> Any:
        held = self._connection
        if request.API_KEY == LIST_OFFSETS and not held.holding.is_set():
            held.holding.set()
            await held.release.wait()
        if self.closed:
            self.sent_after_close.append(request)
        return await super().send(node_id, request, **options)

    async def close(self) -> None:
        self.closed = True
        await super().close()


class OnePartition:
    """The groups' reader, reading one partition."""

    def __init__(self, partition: TopicPartition) -> None:
        self._partition = partition

    async def partitions_read(self) -> list[TopicPartition]:
        return [self._partition]


async def test_a_poll_under_way_sends_nothing_after_the_stage_stops(kafka_broker: EmbeddedBroker) -> None:
    topic = f"stop-{uuid.uuid4().hex[:8]}"
    await create_topics(kafka_broker.kafka, {topic: 1})
    connection = HeldConnection(kafka_broker.bootstrap_servers)
    polled: Channel[EndOffsetsPolled] = Channel()
    stage = EndOffsets(
        kafka=connection,
        client_id="end-offsets-stop-test",
        interval=60.0,  # each request may take 18 s: a poll ended by stop() ends long before
        groups=OnePartition(TopicPartition(topic, 0)),  # type: ignore[arg-type]  # the one method a poll reads
        polled=polled,
        metrics=Metrics(),
        stall_after=60.0,
    )
    poll = asyncio.create_task(stage.poll())
    try:
        await asyncio.wait_for(connection.holding.wait(), 30)
        await asyncio.wait_for(stage.stop(), 5)
        connection.release.set()  # a request still under way would now be sent
        await asyncio.wait_for(poll, 5)
    finally:
        connection.release.set()
        poll.cancel()
        await stage.stop()
    (client,) = connection.made
    assert client.closed
    assert client.sent_after_close == []
    assert polled.drain() == []
