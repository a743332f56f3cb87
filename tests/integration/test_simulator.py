"""The simulator on the embedded broker: real groups, and Kafka's coordinator records read back."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from click.testing import CliRunner

from kagent.core.consumer_offsets import DecodeError, GroupMetadata, OffsetCommit, decode
from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.simulator import (
    GroupRebalanced,
    GroupSpec,
    MemberSpec,
    OffsetsCommitted,
    Scenario,
    SimulationEvent,
    TopicSpec,
    TrafficSpec,
    run_simulation,
)
from kagent.tools.simulator.cli import simulate
from kagent.tools.simulator.partitioners import OFFSETS_TOPIC, key_partition, offsets_partition_for

pytestmark = pytest.mark.integration

HOT = (0, 1, 2, 3)
SCENARIO = Scenario(
    topics=(TopicSpec("sim-orders", 12), TopicSpec("sim-payments", 6)),
    traffic=(
        TrafficSpec("sim-orders", rate=300, keys=600, zipf_exponent=1.0, hot_partitions=HOT),
        TrafficSpec("sim-payments", rate=120, keys=60),
    ),
    groups=(
        GroupSpec(
            "sim-skewed",
            ("sim-orders",),
            "range",
            (MemberSpec("c0", 4.0), MemberSpec("c1"), MemberSpec("c2")),
            commit_interval_ms=500,
        ),
        GroupSpec("sim-balanced", ("sim-payments",), "roundrobin", (MemberSpec("c0"), MemberSpec("c1"))),
    ),
)


def _partitions(scenario: Scenario, group: GroupSpec) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t in group.topics for p in range(scenario.partitions(t))}


def _every_partition_committed(scenario: Scenario, events: list[SimulationEvent]) -> bool:
    """Each group rebalanced, then committed every one of its partitions at least twice."""
    for group in scenario.groups:
        rebalanced = [i for i, e in enumerate(events) if isinstance(e, GroupRebalanced) and e.group == group.group]
        if not rebalanced:
            return False
        commits = Counter(
            partition
            for e in events[rebalanced[-1] :]
            if isinstance(e, OffsetsCommitted) and e.group == group.group
            for partition in e.offsets
        )
        if set(commits) != _partitions(scenario, group) or min(commits.values()) < 2:
            return False
    return True


async def _simulate_until(
    broker: EmbeddedBroker,
    scenario: Scenario,
    done: Callable[[list[SimulationEvent]], bool],
    publish: bool = True,
    deadline: float = 45.0,
) -> list[SimulationEvent]:
    events: list[SimulationEvent] = []
    stop = asyncio.Event()

    def on_event(event: SimulationEvent) -> None:
        events.append(event)
        if done(events):
            stop.set()

    await asyncio.wait_for(run_simulation(broker.kafka, scenario, stop, publish, on_event), deadline)
    return events


async def _read_all(broker: EmbeddedBroker, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of `topic` from the beginning: (partition, key, value), in offset order per partition."""
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()  # loads the metadata of every topic
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        pending = {tp for tp in partitions if ends[tp] > 0}
        records: list[tuple[int, bytes | None, bytes | None]] = []
        while pending:
            for tp, batch in (await consumer.getmany(*pending, timeout_ms=1000)).items():
                records.extend((tp.partition, r.key, r.value) for r in batch if r.offset < ends[tp])
                if batch[-1].offset + 1 >= ends[tp]:
                    pending.discard(tp)
        return records
    finally:
        await consumer.stop()


async def _committed(broker: EmbeddedBroker, group: str, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {tp: await consumer.committed(tp) for tp in partitions}
    finally:
        await consumer.stop()


def _decoded(key: bytes | None, value: bytes | None) -> object | None:
    """The decoded record; None for records of other tests that are not meant to decode
    (the session broker is shared, and the dead-letter test writes malformed ones)."""
    if key is None:
        return None
    try:
        return decode(key, value)
    except DecodeError:
        return None


async def test_simulation_writes_kafkas_coordinator_records(kafka_broker: EmbeddedBroker) -> None:
    events = await _simulate_until(kafka_broker, SCENARIO, lambda events: _every_partition_committed(SCENARIO, events))

    offsets_records = await _read_all(kafka_broker, OFFSETS_TOPIC)
    for spec in SCENARIO.groups:
        group, partitions = spec.group, _partitions(SCENARIO, spec)
        mine = [(p, r) for p, k, v in offsets_records if (r := _decoded(k, v)) is not None]
        mine = [(p, r) for p, r in mine if getattr(r, "group", None) == group]
        # every record sits where Kafka's rule puts the group
        assert {p for p, _ in mine} == {offsets_partition_for(group, 50)}
        records = [r for _, r in mine]

        # the commits are exactly the commits the broker accepted...
        commits = [r for r in records if isinstance(r, OffsetCommit)]
        reported = Counter(
            (tp, offset)
            for e in events
            if isinstance(e, OffsetsCommitted) and e.group == group
            for tp, offset in e.offsets.items()
        )
        assert Counter((TopicPartition(c.topic, c.partition), c.offset) for c in commits) == reported
        assert all(c.value_version == 3 and c.metadata == "" and c.commit_timestamp > 0 for c in commits)
        # ...and the last one per partition is the group's committed offset
        last = {TopicPartition(c.topic, c.partition): c.offset for c in commits}
        assert last == await _committed(kafka_broker, group, partitions)

        # group metadata: a generation with the real members, then Empty when they left
        metadata = [r for r in records if isinstance(r, GroupMetadata)]
        *generations, empty = metadata
        assert empty.members == () and empty.protocol is None and empty.generation == generations[-1].generation + 1
        final = generations[-1]
        rebalance = [e for e in events if isinstance(e, GroupRebalanced) and e.group == group][-1]
        assert (final.protocol_type, final.protocol) == ("consumer", spec.assignor)
        assert final.generation == rebalance.generation
        assert {m.member_id for m in final.members} == set(rebalance.assignment)
        assert final.leader in rebalance.assignment
        assert sorted(m.client_id for m in final.members) == [spec.client_id(m) for m in spec.members]
        for member in final.members:
            assert member.member_id.startswith(member.client_id + "-")  # the broker's real member id
            assert member.client_host.startswith("/")
            assert (member.session_timeout, member.rebalance_timeout) == (6000, 10000)
            assert member.subscription.topics == spec.topics  # type: ignore[union-attr]
        assigned = [tp for m in final.members for tp in m.assignment.partitions]  # type: ignore[union-attr]
        assert sorted(assigned) == sorted(partitions)  # every partition exactly once

    # records sit on the partition murmur2 gives their key, and the hot ones got the most
    orders = await _read_all(kafka_broker, "sim-orders")
    assert orders and all(p == key_partition(k, 12) for p, k, _ in orders if k is not None)
    per_partition = Counter(p for p, _, _ in orders)
    assert min(per_partition[p] for p in HOT) > max(per_partition[p] for p in range(12) if p not in HOT)


async def test_without_coordinator_records_only_the_groups_run(kafka_broker: EmbeddedBroker) -> None:
    scenario = Scenario(
        topics=(TopicSpec("sim-real", 3),),
        traffic=(TrafficSpec("sim-real", rate=100, keys=30),),
        groups=(GroupSpec("sim-real-group", ("sim-real",), "range", (MemberSpec("c0"), MemberSpec("c1"))),),
    )
    events = await _simulate_until(
        kafka_broker, scenario, lambda events: any(isinstance(e, OffsetsCommitted) for e in events), publish=False
    )
    assert any(isinstance(e, GroupRebalanced) for e in events)
    committed = await _committed(kafka_broker, "sim-real-group", _partitions(scenario, scenario.groups[0]))
    assert any(offset is not None for offset in committed.values())
    offsets_records = await _read_all(kafka_broker, OFFSETS_TOPIC)
    groups = {getattr(r, "group", None) for _, k, v in offsets_records if (r := _decoded(k, v)) is not None}
    assert "sim-real-group" not in groups


async def test_cancellation_stops_the_simulation(kafka_broker: EmbeddedBroker) -> None:
    scenario = Scenario(
        topics=(TopicSpec("sim-cancel", 2),),
        traffic=(TrafficSpec("sim-cancel", rate=50, keys=10),),
        groups=(GroupSpec("sim-cancel-group", ("sim-cancel",), "roundrobin", (MemberSpec("c0"),)),),
    )
    committed = asyncio.Event()
    task = asyncio.create_task(
        run_simulation(
            kafka_broker.kafka,
            scenario,
            asyncio.Event(),
            on_event=lambda e: committed.set() if isinstance(e, OffsetsCommitted) else None,
        )
    )
    await asyncio.wait_for(committed.wait(), 30)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done == {task} and task.cancelled()


def test_simulate_command_runs_the_default_scenario() -> None:
    # its own broker: the default scenario's topics and groups stay off the session broker
    with EmbeddedBroker() as broker:
        result = CliRunner().invoke(simulate, ["--broker", broker.bootstrap_servers, "--duration", "6"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"broker: {broker.bootstrap_servers} (external)"
    for group, assignor in (
        ("orders-processors", "range"),
        ("payments-processors", "roundrobin"),
        ("clicks-processors", "roundrobin"),
    ):
        assert any(line.startswith(f"{group}: generation ") and f"({assignor})" in line for line in lines)
        assert any(line.startswith(f"  {group}-c0-") for line in lines)
        commits = next(line for line in lines if line.startswith(f"{group}: ") and line.endswith(" commits"))
        assert int(commits.split()[1]) > 0
    assert lines[-1] == "stopped."
