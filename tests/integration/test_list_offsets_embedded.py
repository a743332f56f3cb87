"""`kagent.worker.list_offsets` against the embedded broker: one bad partition affects only itself.

Issue 17: a group assigned partition 5 of a 2-partition topic made every
end-offset poll (aiokafka's ``beginning_offsets``/``end_offsets`` for all
partitions at once) wait 40 s and fail as a whole. Here the same partitions
are asked in one call, and each gets its own answer, at once.

Records are produced one per batch: Tansu answers ListOffsets(latest) with the
last batch's base offset + 1 (see kagent.tools.embedded).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaClient
from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol.metadata import MetadataResponse_v1
from aiokafka.structs import TopicPartition as TP

from kagent.connections import KafkaConnection
from kagent.tools.embedded import EmbeddedBroker, create_topics, free_port
from kagent.worker.list_offsets import ListOffsetsClient, Offsets, Reason, Unavailable
from tests.support.coordinator import produce

pytestmark = pytest.mark.integration

TIMEOUT = 1.0
"""Each leader's request timeout (seconds) in these tests."""


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def two_partitions(kafka_broker: EmbeddedBroker) -> str:
    """A real 2-partition topic holding 3 records in partition 0 and 5 in partition 1."""
    topic = unique("two")
    await create_topics(kafka_broker.kafka, {topic: 2})
    await produce(kafka_broker.bootstrap_servers, topic, {0: 3, 1: 5})
    return topic


@pytest.fixture
async def client(kafka_broker: EmbeddedBroker) -> AsyncIterator[AIOKafkaClient]:
    """A bootstrapped aiokafka client of the embedded broker, as :meth:`ListOffsetsClient.connect` makes."""
    client = KafkaConnection(kafka_broker.bootstrap_servers).client(
        client_id="list-offsets-test", request_timeout_ms=int(TIMEOUT * 1000)
    )
    await client.bootstrap()
    yield client
    await client.close()


async def test_impossible_partitions_are_reported_unknown_at_once_and_the_others_measured(
    kafka_broker: EmbeddedBroker, two_partitions: str, client: AIOKafkaClient
) -> None:
    missing = unique("missing")
    asked = [TP(two_partitions, 0), TP(two_partitions, 1), TP(two_partitions, 5), TP(missing, 0)]
    lister = await ListOffsetsClient.connect(
        KafkaConnection(kafka_broker.bootstrap_servers), client_id="list-offsets-test", timeout=TIMEOUT
    )
    try:
        started = time.monotonic()
        result = await lister.list_offsets(asked)
        elapsed = time.monotonic() - started
    finally:
        await lister.close()

    assert result.answers[TP(two_partitions, 0)] == Offsets(log_start=0, log_end=3)
    assert result.answers[TP(two_partitions, 1)] == Offsets(log_start=0, log_end=5)
    assert result.unavailable[TP(two_partitions, 5)].reason is Reason.UNKNOWN_PARTITION
    assert result.unavailable[TP(missing, 0)].reason is Reason.UNKNOWN_PARTITION
    assert result.partition_counts == {two_partitions: 2}
    assert elapsed < 3 * TIMEOUT, f"took {elapsed:.2f} s"  # aiokafka's end_offsets took 40 s, then failed
    print(f"\none call for 2 good and 2 impossible partitions: {elapsed * 1000:.0f} ms")

    # Asking created nothing: Tansu auto-creates a topic that Metadata names.
    assert missing not in (await client.fetch_all_metadata()).topics()


async def test_metadata_is_refreshed_for_unknown_partitions_at_a_bounded_rate(
    kafka_broker: EmbeddedBroker, two_partitions: str, client: AIOKafkaClient
) -> None:
    now = [0.0]
    lister = ListOffsetsClient(client, timeout=TIMEOUT, refresh_interval=30.0, clock=lambda: now[0])
    refreshes: list[ClusterMetadata] = []
    client.cluster.add_listener(refreshes.append)
    late = unique("late")
    asked = [TP(two_partitions, 0), TP(late, 0)]
    first = await lister.list_offsets(asked)
    assert len(refreshes) == 1  # the first call refreshes: bootstrap's metadata may name no topic
    assert first.unavailable[TP(late, 0)].reason is Reason.UNKNOWN_PARTITION

    await create_topics(kafka_broker.kafka, {late: 1})
    await produce(kafka_broker.bootstrap_servers, late, {0: 2})
    now[0] = 29.0
    again = await lister.list_offsets(asked)
    assert len(refreshes) == 1, "refreshed again within the interval"
    assert again.unavailable[TP(late, 0)].reason is Reason.UNKNOWN_PARTITION
    assert again.answers[TP(two_partitions, 0)] == Offsets(0, 3)

    now[0] = 30.0
    after = await lister.list_offsets(asked)
    assert len(refreshes) == 2
    assert after.answers[TP(late, 0)] == Offsets(0, 2)


async def black_hole() -> tuple[asyncio.Server, int]:
    """A listener that accepts connections and never answers: a hung broker."""
    port = free_port()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up and closes
        writer.close()

    return await asyncio.start_server(hold, "127.0.0.1", port), port


async def test_a_dead_leader_delays_and_fails_only_its_own_partitions(
    kafka_broker: EmbeddedBroker, two_partitions: str
) -> None:
    """A cluster where node 5 hangs: the embedded broker is one node, so the client's metadata is
    given two more, node 5 at a listener that never answers, leading a topic's only partition, and
    node 7 at the real broker's address, leading the real topic's partitions.

    aiokafka opens one connection at a time: in the first call node 7's first
    connection waits behind node 5's, which hangs until the timeout. From the
    second call on, node 5 is sent to last, and node 7's partitions are measured.
    """
    connection = KafkaConnection(kafka_broker.bootstrap_servers)
    # aiokafka's own timeout is longer than the lister's, so that it does not refresh the metadata
    client = connection.client(client_id="list-offsets-test", request_timeout_ms=30_000)
    await client.bootstrap()
    lister = ListOffsetsClient(client, timeout=TIMEOUT, refresh_interval=3600.0)
    server, port = await black_hole()
    try:
        assert (await lister.list_offsets([TP(two_partitions, 0)])).log_end == {TP(two_partitions, 0): 3}
        (real,) = client.cluster.brokers()
        stuck = unique("a-stuck")  # before the real topic: node 5's request is started first

        def partition(p: int, node: int) -> tuple[Any, ...]:
            return (0, p, node, [node], [node])

        client.cluster.update_metadata(
            MetadataResponse_v1(
                [(5, "127.0.0.1", port, None), (7, real.host, real.port, None)],
                7,
                [(0, two_partitions, False, [partition(0, 7), partition(1, 7)]), (0, stuck, False, [partition(0, 5)])],
            )
        )
        asked = [TP(two_partitions, 0), TP(two_partitions, 1), TP(stuck, 0)]

        first = await lister.list_offsets(asked)
        assert first.unavailable[TP(stuck, 0)].reason is Reason.REQUEST_FAILED

        started = time.monotonic()
        result = await lister.list_offsets(asked)
        elapsed = time.monotonic() - started
    finally:
        server.close()
        await lister.close()

    assert result.answers[TP(two_partitions, 0)] == Offsets(0, 3)
    assert result.answers[TP(two_partitions, 1)] == Offsets(0, 5)
    assert result.unavailable[TP(stuck, 0)] == Unavailable(Reason.REQUEST_FAILED, "node 5 did not answer within 1 s")
    assert TIMEOUT * 0.9 <= elapsed < 2.5 * TIMEOUT, f"took {elapsed:.2f} s"
    print(f"\none call with a hung leader (timeout {TIMEOUT:g} s): {elapsed * 1000:.0f} ms")
