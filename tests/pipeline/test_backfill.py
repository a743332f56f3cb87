"""``backfill`` on coordinator records the simulator wrote, on derived events, and through the CLI."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition
from click.testing import CliRunner
from pyspark.sql import SparkSession

from kagent.core.consumer_offsets import decode
from kagent.core.events import (
    DerivedEvents,
    GroupAssigned,
    MemberAssignment,
    OffsetCommitted,
    OffsetDeleted,
    PartitionRef,
    encode_events,
)
from kagent.core.ingest import checked_events, ingest
from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker, free_port
from kagent.tools.pipeline.backfill import TABLES, backfill
from kagent.tools.pipeline.cli import pipeline
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
from tests.support.hostile_records import HostileMessage, HostileStream

pytestmark = pytest.mark.integration

GROUP = f"pipeline-backfill-{uuid.uuid4().hex[:6]}"
TOPIC = f"pipeline-orders-{uuid.uuid4().hex[:6]}"
SCENARIO = Scenario(
    topics=(TopicSpec(TOPIC, 4),),
    traffic=(TrafficSpec(TOPIC, rate=200, keys=100),),
    groups=(
        GroupSpec(
            GROUP,
            (TOPIC,),
            "range",
            (MemberSpec("c0"), MemberSpec("c1")),
            commit_interval_ms=200,
            session_timeout_ms=2000,
            heartbeat_interval_ms=500,
        ),
    ),
)


def _committed_everywhere_twice(events: list[SimulationEvent]) -> bool:
    commits = Counter(tp for e in events if isinstance(e, OffsetsCommitted) for tp in e.offsets)
    return len(commits) == 4 and min(commits.values()) >= 2


@pytest.fixture(scope="module")
def simulated(kafka_broker: EmbeddedBroker) -> list[SimulationEvent]:
    """What the simulator reported while it wrote the coordinator records of GROUP."""
    events: list[SimulationEvent] = []
    stop = asyncio.Event()

    def on_event(event: SimulationEvent) -> None:
        events.append(event)
        if _committed_everywhere_twice(events):
            stop.set()

    asyncio.run(asyncio.wait_for(run_simulation(kafka_broker.kafka, SCENARIO, stop, True, on_event), 60))
    return events


def test_backfill_of_simulated_coordinator_records(
    spark: SparkSession, kafka_broker: EmbeddedBroker, simulated: list[SimulationEvent], tmp_path: Path
) -> None:
    summary = backfill(spark, kafka_broker.kafka, str(tmp_path))

    assert summary.tables == {name: f"{tmp_path}/{name}" for name in TABLES}
    commits = spark.read.parquet(summary.tables["offset_commits"]).where(f"group = '{GROUP}'").orderBy("source_offset")
    rows = commits.collect()
    expected = [
        (TopicPartition(TOPIC, p), offset)
        for e in simulated
        if isinstance(e, OffsetsCommitted)
        for (_, p), offset in sorted(e.offsets.items())
    ]
    assert Counter((TopicPartition(r.topic, r.partition), r.committed_offset) for r in rows) == Counter(expected)
    assert not any(r.deleted for r in rows)
    last = {TopicPartition(r.topic, r.partition): r.committed_offset for r in rows}
    assert last == dict(expected)  # in log order, each partition's last commit is the simulator's last
    assert {str(r.date) for r in rows} == {r.log_timestamp.date().isoformat() for r in rows}

    generations = (
        spark.read.parquet(summary.tables["group_generations"]).where(f"group = '{GROUP}'").orderBy("source_offset")
    ).collect()
    rebalances = [e for e in simulated if isinstance(e, GroupRebalanced)]
    assert rebalances
    got = [
        (g.generation, g.protocol, g.leader, {m.member_id: [tuple(p) for p in m.partitions] for m in g.members})
        for g in generations
    ]
    assert got == [
        (e.generation, e.protocol, e.leader, {m: [tuple(tp) for tp in tps] for m, tps in e.assignment.items()})
        for e in rebalances
    ] + [(rebalances[-1].generation + 1, None, None, {})]  # the group is Empty once the members left
    assert not any(g.deleted for g in generations)


def test_backfill_of_derived_events(spark: SparkSession, kafka_broker: EmbeddedBroker, tmp_path: Path) -> None:
    topic = f"pipeline-derived-{uuid.uuid4().hex[:6]}"
    partition = PartitionRef(topic="t", partition=2)
    member = MemberAssignment(
        member_id="m-1", client_id="m", client_host="/10.0.0.1", topics=("t",), partitions=(partition,)
    )
    events = [
        GroupAssigned(group="g", generation=3, protocol="roundrobin", leader="m-1", members=(member,)),
        OffsetCommitted(group="g", topic="t", partition=2, offset=17, commit_timestamp=1_714_564_800_000),
        OffsetDeleted(group="g", topic="t", partition=2),
    ]
    asyncio.run(kafka_broker.create_topics({topic: 2}))
    asyncio.run(
        _publish(kafka_broker, topic, [encode_events(DerivedEvents(group=e.group, events=(e,))) for e in events])
    )

    summary = backfill(spark, kafka_broker.kafka, str(tmp_path), "derived-events", topic)

    assert summary.rows == {"group-assigned": 1, "offset-committed": 1, "offset-deleted": 1}
    assert spark.read.parquet(summary.tables["rejected"]).count() == 0  # empty, and readable as such
    commits = spark.read.parquet(summary.tables["offset_commits"]).orderBy("source_offset").collect()
    assert [(r.group, r.partition, r.committed_offset, r.deleted) for r in commits] == [
        ("g", 2, 17, False),
        ("g", 2, None, True),
    ]
    (generation,) = spark.read.parquet(summary.tables["group_generations"]).collect()
    assert (generation.generation, generation.protocol, generation.leader) == (3, "roundrobin", "m-1")
    assert generation.members[0].client_host == "/10.0.0.1"


async def _publish(broker: EmbeddedBroker, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, key=b"g", partition=1)
    finally:
        await producer.stop()


def test_cli_backfill_reports_steps_and_tables(
    spark: SparkSession, kafka_broker: EmbeddedBroker, simulated: list[SimulationEvent], tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        pipeline, ["backfill", "--broker", kafka_broker.bootstrap_servers, "--output", str(tmp_path / "out")]
    )

    assert result.exit_code == 0, result.output
    assert "reading and decoding __consumer_offsets" in result.output
    assert "offset-committed" in result.output
    assert f"offset_commits: {tmp_path}/out/offset_commits" in result.output
    assert spark.read.parquet(str(tmp_path / "out" / "offset_commits")).where(f"group = '{GROUP}'").count() > 0


def test_cli_backfill_with_broker_down_names_it(spark: SparkSession, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"

    result = CliRunner().invoke(
        pipeline, ["backfill", "--broker", address, "--output", str(tmp_path), "--timeout", "3"]
    )

    assert result.exit_code == 1
    assert f"Error: Kafka at {address}: cannot connect" in result.output


class _Raw(NamedTuple):
    """What :func:`ingest` reads of a record."""

    key: bytes | None
    value: bytes | None


def test_cli_backfill_of_hostile_records_writes_exactly_the_accepted_ones(
    spark: SparkSession, kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """``kagent pipeline backfill`` over coordinator records mixed with hostile ones
    (``tests/support/hostile_records.py``: valid records, valid encodings that break a rule of
    ``record_checks``, random and truncated bytes): ``offset_commits`` and ``group_generations`` hold
    exactly what the accepted records derive, each rejected record is in ``rejected`` with the reason
    the worker's dead letter gives it (``ingest``, the worker's own verdict), and the count is printed."""
    topic = f"pipeline-hostile-{uuid.uuid4().hex[:6]}"
    stream = list(HostileStream(count=600, groups=20))
    asyncio.run(kafka_broker.create_topics({topic: 4}))
    placed = asyncio.run(_publish_hostile(kafka_broker, topic, stream))
    expected_rejected: dict[tuple[int, int], tuple[str, HostileMessage]] = {}
    accepted: dict[tuple[int, int], HostileMessage] = {}
    for message, place in zip(stream, placed, strict=True):
        reason = _dead_letter_reason(message)
        if message.expect == "valid":
            assert reason is None, reason
        elif message.expect.startswith("rejected:"):
            assert reason is not None and message.expect.removeprefix("rejected:") in reason, reason
        if reason is None:
            accepted[place] = message
        else:
            expected_rejected[place] = (reason, message)
    assert len(expected_rejected) > 100 and len(accepted) > 300  # what the stream's mix makes

    out = tmp_path / "out"
    result = CliRunner().invoke(
        pipeline, ["backfill", "--broker", kafka_broker.bootstrap_servers, "--output", str(out), "--topic", topic]
    )

    assert result.exit_code == 0, result.output
    assert f"{len(expected_rejected)} records not applied" in result.output
    assert f"rejected: {out}/rejected" in result.output
    rejected = {(r.source_partition, r.source_offset): r for r in spark.read.parquet(str(out / "rejected")).collect()}
    assert rejected.keys() == expected_rejected.keys()
    for place, (reason, message) in expected_rejected.items():
        row = rejected[place]
        assert (row.error, row.key, row.value) == (reason, message.message.key, message.message.value)
        assert row.kind in ("undecodable", "rejected")
    commits = spark.read.parquet(str(out / "offset_commits")).collect()
    generations = spark.read.parquet(str(out / "group_generations")).collect()
    written = Counter((r.source_partition, r.source_offset) for r in [*commits, *generations])
    deriving = {place: len(checked_events(decode(m.message.key, m.message.value))) for place, m in accepted.items()}
    assert written == Counter({place: count for place, count in deriving.items() if count})
    assert not [p for g in generations for m in g.members for p in m.partitions if p.topic == "not-subscribed"]


def _dead_letter_reason(message: HostileMessage) -> str | None:
    """Why the worker's source sends ``message`` to its dead-letter topic (its reason there); None if it applies it."""
    malformed = ingest([_Raw(message.message.key, message.message.value)], ()).malformed
    return str(malformed[0][1]) if malformed else None


async def _publish_hostile(broker: EmbeddedBroker, topic: str, stream: list[HostileMessage]) -> list[tuple[int, int]]:
    """Publish each message's bytes (to partition ``partition % 4``); where each landed, in order."""
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        sent = [
            await producer.send(topic, m.message.value, key=m.message.key, partition=m.message.partition % 4)
            for m in stream
        ]
        return [(meta.partition, meta.offset) for meta in await asyncio.gather(*sent)]
    finally:
        await producer.stop()
