"""``backtest`` on the snapshots a real worker wrote to its changelogs (``snapshots_from_changelogs``, ``--broker``).

A kagent worker runs on the embedded broker over coordinator records published
as Kafka's coordinator would write them: a skewed group (range put the two hot
partitions on one member) and an even one. The test drives it through three
steps, each awaited on the worker's own output (its changelogs and metrics):
the first end-offset poll; a commit on one partition after a later poll (a
partition-lag entry written alone at the poll after it, with a newer
``polled_at``); and a rebalance of the skewed group to new members (every lag
entry of the group rewritten at once at the next poll, carrying its
``polled_at``). Then it
reads the changelogs back with the function and with ``kagent pipeline
backtest --broker``.
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pytest
from aiokafka.structs import TopicPartition
from click.testing import CliRunner
from pyspark.sql import SparkSession

from kagent.connections import KafkaConnection
from kagent.core.consumer_offsets import GroupMetadata, OffsetCommit
from kagent.core.table_keys import partition_key
from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.pipeline.backtest import snapshots_from_changelogs
from kagent.tools.pipeline.cli import pipeline
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.topics import read_to_end
from tests.support.waiting import wait_until_async
from tests.support.worker import STEADY, Worker

pytestmark = pytest.mark.integration

SKEWED_LOG = {0: 600, 1: 600, 2: 200, 3: 200, 4: 200, 5: 200}
EVEN_LOG = {p: 300 for p in range(4)}
DEADLINE = 40.0
T = TypeVar("T")


@dataclass(frozen=True)
class Record:
    key: bytes
    value: Any | None  # parsed JSON; None for a tombstone
    timestamp: int
    partition: int
    offset: int


async def _changelog(bootstrap: str, topic: str) -> list[Record]:
    """Every record of ``topic`` now, in write order (timestamp, then partition and offset)."""
    records = [
        Record(m.key, None if m.value is None else json.loads(m.value), m.timestamp, m.partition, m.offset)
        for m in await read_to_end(bootstrap, topic)
    ]
    return sorted(records, key=lambda r: (r.timestamp, r.partition, r.offset))


def _expected_snapshots(records: list[Record], groups: set[str]) -> list[tuple[str, pd.Timestamp]]:
    """The contract's snapshots of ``groups`` in the partition-lag changelog's ``records`` (in write order):
    for each group and distinct ``polled_at``, its entries as they stood when the last entry carrying that
    ``polled_at`` was written; kept when one of them then had a measured lag."""
    return sorted(_expected_partitions(records, groups))


def _expected_partitions(records: list[Record], groups: set[str]) -> dict[tuple[str, pd.Timestamp], int]:
    """Each of :func:`_expected_snapshots`' snapshots, and how many partitions had an entry with a measured
    lag then: one not yet written (at a worker's first poll) is not in it, nor one whose lag was unknown (a
    poll that had no answer for its partition)."""
    mine = [r for r in records if json.loads(json.loads(r.key))[0] in groups]
    last: dict[tuple[str, float], int] = {}
    for index, r in enumerate(mine):
        if r.value is not None and r.value["polled_at"] is not None:
            last[(r.value["group"], r.value["polled_at"])] = index
    expected = {}
    for (group, polled_at), upto in last.items():
        state: dict[bytes, Any] = {}
        for r in mine[: upto + 1]:
            if json.loads(json.loads(r.key))[0] == group:
                state[r.key] = r.value
        if any(value is not None and value["offset_lag"] is not None for value in state.values()):
            expected[group, _at(polled_at)] = sum(
                value is not None and value["offset_lag"] is not None for value in state.values()
            )
    return expected


async def _until(probe: Callable[[], Awaitable[T | None]], what: str, worker: Worker) -> T:
    """Await ``probe()`` every 0.2 s until it returns something truthy; fail with the worker's log after DEADLINE."""
    return await wait_until_async(probe, DEADLINE, what, interval=0.2, detail=lambda: worker.log_tail(80))


async def _polls(worker: Worker) -> float:
    """The worker's count of successful end-offset polls (0 until its web server answers)."""
    samples = await asyncio.to_thread(worker.metrics)
    return (samples or {}).get('kagent_end_offset_polls_total{outcome="ok"}', 0.0)


def _at(polled_at: float) -> pd.Timestamp:
    """A ``polled_at`` as the snapshot time Spark gives it: naive UTC, to the microsecond.

    Spark's ``round`` takes halves up, Python's to even; at today's epoch times
    doubles are 0.25 us apart, so exact halves are common.
    """
    return pd.Timestamp(math.floor(polled_at * 1_000_000 + 0.5), unit="us")


def _members(group: str, tag: str, layout: list[list[int]], topic: str) -> dict[str, list[TopicPartition]]:
    return {f"{group}-{tag}{m}": [TopicPartition(topic, p) for p in parts] for m, parts in enumerate(layout)}


async def test_backtest_reads_the_snapshots_a_worker_wrote(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker], spark: SparkSession, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    run = uuid.uuid4().hex[:6]
    app_id, skewed, even = f"bt-{run}", f"bt-skewed-{run}", f"bt-even-{run}"
    skewed_topic, even_topic = f"{skewed}-in", f"{even}-in"
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, skewed_topic: 6, even_topic: 4})
    await produce(bootstrap, skewed_topic, SKEWED_LOG)
    await produce(bootstrap, even_topic, EVEN_LOG)

    # Generation 1: range put the two hot partitions on member r0; everyone committed at 0.
    first = _members(skewed, "r", [[0, 1], [2, 3], [4, 5]], skewed_topic)
    even_members = _members(even, "e", [[0, 1], [2, 3]], even_topic)
    records: list[GroupMetadata | OffsetCommit] = [
        group_metadata(skewed, 1, first),
        group_metadata(even, 1, even_members),
    ]
    records += [offset_commit(skewed, skewed_topic, p, 0) for p in SKEWED_LOG]
    records += [offset_commit(even, even_topic, p, 0) for p in EVEN_LOG]
    await publish(bootstrap, records)
    worker = start_worker(app_id, **STEADY)
    lag_topic, assignments_topic = f"{app_id}-partition-lag-changelog", f"{app_id}-assignments-changelog"

    async def lag_entries(group: str) -> list[Record]:
        return [r for r in await _changelog(bootstrap, lag_topic) if json.loads(json.loads(r.key))[0] == group]

    async def first_poll() -> bool:
        return len(await lag_entries(skewed)) >= 6 and len(await lag_entries(even)) >= 4

    await _until(first_poll, "the first poll's lag entries", worker)
    polls = await _polls(worker)

    async def polled_again() -> bool:
        return await _polls(worker) > polls

    # A later poll has happened (and written nothing: its entries are not due), so the
    # commit's entry is alone with its polled_at.
    await _until(polled_again, "another end-offset poll", worker)
    await publish(bootstrap, [offset_commit(skewed, skewed_topic, 2, 100)])

    async def commit_written() -> list[Record]:
        return [
            r
            for r in await lag_entries(skewed)
            if r.value and r.value["committed"] == 100 and r.value["offset_lag"] is not None
        ]

    # The first such entry with its lag measured is the commit's, or a refresh of it: on a busy machine the
    # end offsets may have gone stale by then (the entry written unknown, and no snapshot at its poll).
    commit_entry = (await _until(commit_written, "the commit's lag entry", worker))[0]

    # Generation 2: new members, still skewed (r0's hot pair now on s0).
    second = _members(skewed, "s", [[0, 1], [2, 3, 4], [5]], skewed_topic)
    await publish(bootstrap, [group_metadata(skewed, 2, second)])

    async def rebalance_written() -> tuple[Record, list[Record]] | None:
        assigned = [r for r in await _changelog(bootstrap, assignments_topic) if r.value and r.value["group"] == skewed]
        if not assigned or assigned[-1].value["generation"] != 2:
            return None
        after = [
            r
            for r in await lag_entries(skewed)
            if r.timestamp >= assigned[-1].timestamp and r.value and r.value["offset_lag"] is not None
        ]
        return (assigned[-1], after) if len({r.value["partition"] for r in after}) == 6 else None

    assignment_2, rewritten = await _until(rebalance_written, "the lag entries rewritten after the rebalance", worker)
    assert worker.stop() == 0

    # What Faust wrote: keys are the table keys JSON-encoded, values the records' JSON.
    lag_records = [r for r in await _changelog(bootstrap, lag_topic) if r.value and r.value["group"] in (skewed, even)]
    for r in lag_records:
        assert r.key == json.dumps(partition_key(r.value["group"], r.value["topic"], r.value["partition"])).encode()
    assert assignment_2.key == json.dumps(skewed).encode()

    # --- the function
    snapshots = snapshots_from_changelogs(spark, KafkaConnection(bootstrap), app_id).toPandas()
    ours = snapshots[snapshots["group"].isin([skewed, even])]
    assert not ours.duplicated(["group", "snapshot", "topic", "partition"]).any()
    # One snapshot per distinct polled_at of a group, at that time to the microsecond, unless none of its
    # entries then had a measured lag (a poll that timed out for a partition writes its entry unknown).
    written = await _changelog(bootstrap, lag_topic)
    polled = _expected_snapshots(written, {skewed, even})
    assert sorted((g, pd.Timestamp(t)) for g, t in ours.groupby(["group", "snapshot"]).size().index) == polled
    # Every snapshot has every partition of its group written by then with a measured lag: an entry written
    # alone carries the others forward. Only a worker's first poll may be written before all of them are, and
    # a poll that had no answer for a partition leaves it out (on a busy machine, a poll may time out).
    sizes = ours.groupby(["group", "snapshot"])["partition"].nunique()
    assert sizes.to_dict() == _expected_partitions(written, {skewed, even})
    # The commit's poll rewrote the commit's entry (and maybe more): its snapshot carries the rest, so it has
    # every partition (the sizes above show what was carried).
    commit_poll = commit_entry.value["polled_at"]
    assert sizes[skewed, _at(commit_poll)] == len(SKEWED_LOG), sizes[skewed]
    assert set(sizes[even]) <= {4}

    def owners(members: dict[str, list[TopicPartition]]) -> dict[int, str]:
        return {tp.partition: m for m, tps in members.items() for tp in tps}

    by_snapshot = {
        pd.Timestamp(t): rows.set_index("partition") for t, rows in ours[ours["group"] == skewed].groupby("snapshot")
    }
    times = sorted(by_snapshot)
    gen1, gen2 = owners(first), owners(second)
    # The first snapshot: generation 1 and the lag of the log ends, all committed at 0.
    assert by_snapshot[times[0]]["member"].to_dict() == gen1
    assert by_snapshot[times[0]]["lag"].to_dict() == SKEWED_LOG
    # The commit's snapshot: partition 2 at 100, the others carried forward from the first poll.
    assert by_snapshot[_at(commit_entry.value["polled_at"])]["lag"].to_dict() == {**SKEWED_LOG, 2: 100}
    # The rebalance rewrote every entry at the next poll, with its polled_at: that snapshot, and
    # every later one, is held by generation 2's members.
    rebalanced = _at(rewritten[0].value["polled_at"])
    assert rebalanced in by_snapshot
    for t in times:
        held = by_snapshot[t]["member"].to_dict()
        assert held == (gen2 if t >= rebalanced else gen1), (t, held)
    assert by_snapshot[times[-1]]["lag"].to_dict() == {**SKEWED_LOG, 2: 100}
    even_rows = ours[ours["group"] == even]
    assert set(even_rows["lag"]) == {300}
    assert even_rows.groupby("member")["partition"].agg(lambda s: sorted(set(s))).to_dict() == {
        m: [tp.partition for tp in tps] for m, tps in even_members.items()
    }

    # --- the CLI, on the same broker: every strategy against the actual assignment
    out = tmp_path / "cli"
    cli = CliRunner().invoke(pipeline, ["backtest", "--broker", bootstrap, "--app-id", app_id, "--output", str(out)])
    assert cli.exit_code == 0, cli.output
    assert f"report: {out}/report.html" in cli.output
    summary = spark.read.parquet(str(out / "strategy_summary")).toPandas().set_index(["group", "strategy"])
    assert set(summary.loc[skewed].index) == {"actual", "range", "roundrobin", "sticky", "fair", "lag", "lag-sticky"}
    assert (summary.loc[skewed, "snapshots"] == len(times)).all()
    # Range, like the actual assignments, keeps the hot pair together; lag-sticky never lets skew reach 1.5.
    assert summary.loc[(skewed, "actual"), "share_above"] == summary.loc[(skewed, "range"), "share_above"] == 1.0
    assert summary.loc[(skewed, "lag-sticky"), "share_above"] == 0.0
    assert summary.loc[(skewed, "lag-sticky"), "p95_skew"] < 1.5 <= summary.loc[(skewed, "actual"), "median_skew"]
    assert summary.loc[(even, "actual"), "median_skew"] == pytest.approx(1.0)
    assert summary.loc[(even, "actual"), "share_above"] == 0.0
    results = spark.read.parquet(str(out / "snapshot_results")).where(f"group = '{skewed}'").toPandas()
    actual = results[results["strategy"] == "actual"].set_index("snapshot")["skew"]
    # The first snapshot: 1200 of 2000 on r0; the last: 1200 of 1900 on s0.
    assert actual.sort_index().iloc[0] == pytest.approx(1200 * 3 / 2000)
    assert actual.sort_index().iloc[-1] == pytest.approx(1200 * 3 / 1900)
