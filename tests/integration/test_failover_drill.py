"""Drill: a worker killed with SIGKILL ten times in a row under traffic, with a second worker running.

Each time, once the survivor holds every group, its tables (as its API shows
them, ``GET /api/groups/{group}`` answered by itself: generation and each
member's lag) equal a recomputation from
``__consumer_offsets`` itself, read back and decoded; and at the end every
recommendation a group's trigger state says was made is on the topic (no id
is lost), however the kills fell.

Before each kill the drill waits until both workers are members of one
generation of each of their two consumer groups (the Faust app's and the
source's). Tansu completes a generation with whoever has joined after half
the session timeout, without waiting for the members it already has, and a
member left out (slow to heartbeat on a busy machine) keeps consuming and
committing as if it still held its partitions until it notices: two workers
then apply the same records, and the one killed may have committed past
records the other never read. Apache Kafka waits for every known member to
rejoin (up to the rebalance timeout) and fences a stale generation's commits,
so a kill there meets no such split. The wait keeps the drill about kagent.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import DecodeError, GroupMetadata, OffsetCommit, decode, encode
from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker
from kagent.worker.routing import FORWARDED
from tests.support.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, group_metadata, offset_commit, produce
from tests.support.waiting import wait_until
from tests.support.web import get_answer, get_json
from tests.support.worker import Worker

pytestmark = pytest.mark.integration

KILLS = 10
GROUPS = 12
PARTITIONS = 4
RECORDS = 40
"""Records in each partition of the topic the groups read (one per batch, for Tansu's end offsets)."""
SETTINGS = {
    "evaluate_interval": "0.5",
    "end_offset_interval": "0.5",
    "hold_evaluations": "1",
    "cooldown": "0",
    "min_total_lag": "10",
    "topic_partitions": "4",
}


class Drill:
    """Two workers of one app, each with its own data dir and log, replaced one at a time."""

    def __init__(self, broker: EmbeddedBroker, tmp_path: Path, app_id: str) -> None:
        self._broker, self._tmp, self.app_id = broker, tmp_path, app_id
        self.workers: list[Worker] = []
        self._started = 0

    def start(self) -> Worker:
        self._started += 1
        worker = Worker(
            self._broker.bootstrap_servers,
            self._tmp,
            self.app_id,
            data_dir=str(self._tmp / f"data-{self._started}"),
            **SETTINGS,
        )
        worker.log_path = self._tmp / f"worker-{self._started}.log"
        self.workers.append(worker.start())
        return worker

    def settled(self) -> bool:
        """Whether every running worker last joined the same generation of each of the app's two groups."""
        groups = (self.app_id, f"{self.app_id}-offsets-topic-source")
        joined = [_last_joined(worker.log(), groups) for worker in self.workers]
        return all(None not in j for j in joined) and len(set(joined)) == 1

    def kill(self, worker: Worker) -> None:
        worker.kill()
        self.workers.remove(worker)

    def close(self) -> None:
        for worker in self.workers:
            worker.kill()


_JOINED = re.compile(r"Joined group '(?P<group>[^']+)' \(generation (?P<generation>\d+)\)")


def _last_joined(log: str, groups: tuple[str, ...]) -> tuple[int | None, ...]:
    """The generation of each of ``groups`` that ``log``'s worker joined last (None: never)."""
    last: dict[str, int] = {}
    for match in _JOINED.finditer(log):
        last[match["group"]] = int(match["generation"])
    return tuple(last.get(group) for group in groups)


@pytest.fixture
def drill(kafka_broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Drill]:
    running = Drill(kafka_broker, tmp_path, f"drill-{uuid.uuid4().hex[:6]}")
    yield running
    running.close()


async def behind(reader: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    """Whether ``reader`` has yet to reach ``ends`` on some partition."""
    for tp, end in ends.items():
        if await reader.position(tp) < end:
            return True
    return False


async def recompute(bootstrap: str, topic: str, groups: set[str]) -> dict[str, dict[str, Any]]:
    """Each group's generation and member lag, from ``__consumer_offsets`` read back and decoded, and
    the end offsets of ``topic``: what a worker's tables must show."""
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await reader.start()
    try:
        partitions = [TopicPartition(OFFSETS_TOPIC, p) for p in range(OFFSETS_TOPIC_PARTITIONS)]
        reader.assign(partitions)
        ends = await reader.end_offsets(partitions)
        metadata: dict[str, GroupMetadata] = {}
        committed: dict[tuple[str, int], int] = {}
        while await behind(reader, ends):
            for records in (await reader.getmany(timeout_ms=500)).values():
                for record in records:
                    try:
                        decoded = decode(record.key, record.value)
                    except DecodeError:
                        continue  # another test's malformed record: the topic is the session's
                    if isinstance(decoded, GroupMetadata) and decoded.group in groups:
                        metadata[decoded.group] = decoded
                    elif isinstance(decoded, OffsetCommit) and decoded.group in groups:
                        committed[decoded.group, decoded.partition] = decoded.offset
        log_end = await reader.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        await reader.stop()
    expected = {}
    for group, record in metadata.items():
        lag = {}
        for member in record.members:
            assigned = member.assignment.partitions if member.assignment else ()
            lag[member.member_id] = sum(
                log_end[TopicPartition(topic, tp.partition)] - committed.get((group, tp.partition), 0)
                for tp in assigned
            )
        expected[group] = {"generation": record.generation, "member_lag": lag}
    return expected


def shown(worker: Worker, prefix: str, expected: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The drill's groups (named ``prefix``...: the ``expected`` ones and any other it lists) that ``worker``
    holds, as it shows them itself (asked as another worker asks, so it does not forward): the session's
    other tests share ``__consumer_offsets``, so the worker also holds their groups, which the drill does
    not recompute."""
    listed = get_json(worker.url + f"api/groups?scope=local&q={quote(prefix)}") or {"groups": []}
    names = {g["group"] for g in listed["groups"] if g["group"].startswith(prefix)} | set(expected)
    found = {}
    for group in sorted(names):
        try:
            status, body = get_answer(worker.url + "api/groups/" + quote(group, safe=""), headers={FORWARDED: "1"})
        except OSError:
            continue
        if status == 200:
            found[group] = {
                "generation": body["summary"]["generation"],
                # null until the worker has measured the group (just after it took it over): not a match yet
                "member_lag": {m["member_id"]: m["offset_lag"] for m in body["members"]},
            }
    return found


def showing(worker: Worker, expected: dict[str, dict[str, Any]], prefix: str, what: str) -> None:
    """Wait until ``worker`` shows ``expected`` for the groups named ``prefix``...; fail with the groups
    that differ (shown, recomputed) and its log."""
    seen: dict[str, dict[str, Any]] = {}

    def matches() -> bool:
        nonlocal seen
        seen = shown(worker, prefix, expected)
        return seen == expected

    def differences() -> str:
        differ = {
            g: (seen.get(g), expected.get(g)) for g in seen.keys() | expected.keys() if seen.get(g) != expected.get(g)
        }
        return f"shown vs recomputed, where they differ: {differ}\n{worker.log_tail(80)}"

    wait_until(matches, 120, what, detail=differences)


async def read_all(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic`` now, as JSON (None for tombstones), with its key."""
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await reader.start()
    try:
        partitions = [TopicPartition(topic, p) for p in (reader.partitions_for_topic(topic) or set())]
        if not partitions:
            await reader._client.force_metadata_update()
            partitions = [TopicPartition(topic, p) for p in (reader.partitions_for_topic(topic) or set())]
        reader.assign(partitions)
        ends = await reader.end_offsets(partitions)
        values = []
        while await behind(reader, ends):
            for records in (await reader.getmany(timeout_ms=500)).values():
                values += [(r.key, json.loads(r.value) if r.value is not None else None) for r in records]
        return values
    finally:
        await reader.stop()


async def test_ten_sigkills_under_traffic_lose_no_state_and_no_recommendation(
    kafka_broker: EmbeddedBroker, drill: Drill, drill_figures: Callable[[str], None]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"drill-orders-{drill.app_id}"
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, topic: PARTITIONS})
    await produce(bootstrap, topic, dict.fromkeys(range(PARTITIONS), RECORDS))
    groups = {f"{drill.app_id}-group-{i}" for i in range(GROUPS)}
    # one record per batch: Tansu's end offsets, which the recomputation reads up to, are right only then
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()

    async def publish(records: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in records:
            await producer.send(OFFSETS_TOPIC, value, key=key, partition=0)
        await producer.flush()

    generation: dict[str, int] = dict.fromkeys(groups, 0)

    async def rebalance(group: str, skewed: bool) -> None:
        """A new generation of ``group``: two members, one holding the hot partitions when skewed."""
        generation[group] += 1
        members = (
            {
                "a": [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 2)],
                "b": [TopicPartition(topic, 3)],
            }
            if skewed
            else {
                "a": [TopicPartition(topic, 0), TopicPartition(topic, 1)],
                "b": [TopicPartition(topic, 2), TopicPartition(topic, 3)],
            }
        )
        await publish(
            [encode(group_metadata(group, generation[group], {f"{m}-{group}": tps for m, tps in members.items()}))]
        )

    try:
        for group in sorted(groups):
            await rebalance(group, skewed=False)
        drill.start()
        drill.start()
        await asyncio.to_thread(wait_until, drill.settled, 90, "both workers in one generation of each group")
        kill_times = []
        for kill in range(KILLS):
            # traffic: commits move on for every group; one group is skewed anew before each kill
            traffic_round = kill + 1
            await publish(
                [
                    encode(offset_commit(group, topic, p, min(RECORDS, traffic_round * 3 + p)))
                    for group in sorted(groups)
                    for p in range(PARTITIONS)
                ]
            )
            await rebalance(sorted(groups)[kill % GROUPS], skewed=True)
            victim = drill.workers[0]
            survivor = drill.workers[1]
            drill.kill(victim)
            killed_at = time.monotonic()
            expected = await recompute(bootstrap, topic, groups)
            await asyncio.to_thread(
                showing, survivor, expected, f"{drill.app_id}-group-", f"the survivor's tables after kill {kill + 1}"
            )
            kill_times.append(time.monotonic() - killed_at)
            drill.start()
            await asyncio.to_thread(wait_until, drill.settled, 90, "both workers in one generation of each group")
        matched = (
            f"the survivor's tables equal the recomputation from __consumer_offsets {len(kill_times)} times of {KILLS}"
        )
        drill_figures(f"failover after SIGKILL (s): {', '.join(f'{t:.1f}' for t in kill_times)}; {matched}")

        # every recommendation the trigger states say were made is on the topic
        def states_settled() -> bool:
            return all(get_json(w.url + "readyz") for w in drill.workers)

        await asyncio.to_thread(wait_until, states_settled, 60, "both workers to answer")
        states: dict[str, Any] = {}
        for key, value in await read_all(bootstrap, f"{drill.app_id}-evaluation-state-changelog"):
            states[json.loads(key)] = value
        decided = {s["last_recommendation_id"] for s in states.values() if s and s.get("last_recommendation_id")}
        pending = {s["group"] for s in states.values() if s and s.get("pending_recommendation")}
        sent = {v["id"] for _, v in await read_all(bootstrap, f"{drill.app_id}-recommendations")}
        assert decided, "no recommendation was made: the drill tests nothing"
        assert decided <= sent, f"lost: {sorted(decided - sent)} (pending in {sorted(pending)})"
        drill_figures(f"failover: {len(decided)} recommendations decided, all {len(decided & sent)} on the topic")
    finally:
        await producer.stop()
