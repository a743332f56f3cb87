"""`run_simulation`: a scenario's topics, traffic and groups on a cluster."""

from __future__ import annotations

import asyncio
import random
import socket

from kagent.connections import KafkaConnection
from kagent.tools.embedded import ONE_RECORD_BATCH, create_topics
from kagent.tools.simulator.group import SimulatedGroup
from kagent.tools.simulator.key_skew import KeySampler
from kagent.tools.simulator.publisher import CoordinatorRecordPublisher
from kagent.tools.simulator.scenario import Scenario
from kagent.tools.simulator.status import StatusCallback
from kagent.tools.simulator.traffic import produce_traffic

__all__ = ["client_host", "run_simulation"]


def client_host(bootstrap_servers: str) -> str:
    """The client host a broker records for this process, as Kafka writes it
    (Java's `InetAddress.toString()` of the peer, "/" + address): the local
    address that routes to the first bootstrap server. Sends nothing."""
    host, _, port = bootstrap_servers.split(",")[0].strip().rpartition(":")
    family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.connect(address)
        return "/" + str(probe.getsockname()[0])


async def run_simulation(
    kafka: KafkaConnection,
    scenario: Scenario,
    stop: asyncio.Event,
    publish_coordinator_records: bool = True,
    on_event: StatusCallback | None = None,
) -> None:
    """Run `scenario` against the cluster `kafka` reaches until `stop` is set.

    Creates the scenario's topics (replication 1; existing ones are left
    alone), produces its traffic and runs its groups' members. With
    `publish_coordinator_records` (for brokers without `__consumer_offsets`,
    such as the embedded Tansu) it also appends, in Kafka's binary format,
    the OffsetCommit and GroupMetadata records Kafka's coordinator would
    write, creating `__consumer_offsets` with 50 partitions if absent;
    without it (a real Kafka cluster) the broker writes them. `on_event`
    hears of every completed rebalance and accepted commit.

    When `stop` is set, members commit what they processed and leave, the
    groups are recorded as Empty, and the producers flush; the call returns
    after that. On cancellation, members leave and producers stop without
    last commits. An error in any part stops the others and is raised (in an
    ExceptionGroup).
    """
    await create_topics(kafka, {topic.name: topic.partitions for topic in scenario.topics})
    host = client_host(kafka.bootstrap_servers)
    publisher = await CoordinatorRecordPublisher.start(kafka) if publish_coordinator_records else None
    try:
        # One record per batch: Tansu's ListOffsets(latest) is the last batch's base offset + 1,
        # the true log-end offset (which lag is measured against) only for one-record batches.
        producer = kafka.producer(client_id="kagent-simulator", max_batch_size=ONE_RECORD_BATCH)
        await producer.start()
        try:
            async with asyncio.TaskGroup() as tasks:
                for traffic in scenario.traffic:
                    rng = random.Random(f"{scenario.seed}:{traffic.topic}")
                    sampler = KeySampler(traffic, scenario.partitions(traffic.topic), rng)
                    tasks.create_task(produce_traffic(producer, traffic, sampler, stop))
                for spec in scenario.groups:
                    group = SimulatedGroup(spec, kafka, host, publisher, on_event)
                    tasks.create_task(group.run(stop))
        finally:
            await producer.stop()
    finally:
        if publisher is not None:
            await publisher.stop()
