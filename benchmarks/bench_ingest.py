"""Ingest throughput of kagent workers on a realistic ``__consumer_offsets``, beside a bare consumer's.

    python benchmarks/bench_ingest.py [--quick] [--records N] [--groups N] [--seed N] [--one-only]
        [--profile FILE] [--profile-live FILE]

The mix, built deterministically from ``--seed`` (the structure; timestamps
are the time of building): ``--groups`` consumer groups (5,000) of 1 to 20
members (P(m) proportional to 1/m: many small groups, few large), each
reading 1, 2 or 3 topics (50/30/20 %) drawn from a pool of 24 topics of 1 to
70 partitions, 552 in all. 60 % of the groups are Java consumers
(cooperative-sticky, consumer-protocol subscription and assignment v3, the
subscription carrying the owned partitions, the generation and the
assignor's user data; their commits carry a leader epoch), 40 % aiokafka
consumers (range, v0 blobs, no leader epoch); the assignments come from
``kagent.core.assignors``. On ``__consumer_offsets``, in this order: each
group's metadata (value v3, generation 1); then rounds of offset commits on
every partition each group is assigned, the last round cut short once the
records reach ``--records`` (1,000,000); commits are value v3 before the
middle round and v4 from it on (the cluster's metadata version bumped), and
just before it 5 % of the groups rebalance (a new generation's metadata: one
member more or fewer, and a group reading several topics unsubscribes from
its last one, committing on it no more); after the last round, the offsets
of each unsubscribed topic expire (an offset tombstone per partition), and
1 % of the groups are deleted (metadata of the empty group, an offset
tombstone per partition, the group tombstone). Every record derives exactly
one event (checked in process before any worker starts). The mix's exact
composition is printed. Records are built by ``tests.support.coordinator``
and the simulator's ``coordinator_records``, and published with the
producer's normal batching (20 ms linger, 256 KiB batches), each to its
group's partition of 50 by Kafka's rule, before any worker starts. Each
group-partition's first commit is below :data:`FIRST_OFFSETS` and each later
one up to :data:`STEPS` further, and each partition of the 24 topics holds
records past the highest commit of the mix, live rounds included
(:func:`produce_topic_records`), so that a worker that polls their end
offsets finds every commit at or below its partition's log end, as on a real
cluster (on empty topics every commit was past the log end, a path a real
cluster seldom takes).

Measured in the same run, on one embedded broker (Tansu):

- a bare aiokafka consumer reading every record of ``__consumer_offsets``
  (best of 3, from its first fetch to its last record); CPU microseconds per
  record from this process's process time. This process's garbage collector
  has the worker's thresholds (:mod:`kagent.worker.garbage_collection`), for
  this line and the next, so that the baseline gets what the worker gets;
- the source's pure work on the same bytes in this process, with no I/O
  (:func:`kagent.core.ingest.ingest` on batches of the source's fetch size,
  in the order its consumer fetches them, and encoding the derived-events
  records), once;
- storage's pure work on what that derives, in this process: the
  derived-events records of those batches (packed as the source packs
  them) applied by a worker's :class:`~kagent.worker.storage.Storage` (the
  stages of :func:`kagent.app.create_app`), 64 records a batch as its agent
  takes them. Its flushes make the changelogs' record batches with
  aiokafka's builder and hand them to a producer that sends nothing
  (:class:`_NoSendProducer`): every write, index entry and changelog record
  is paid, no I/O. Beside the bare consumer's and the source's lines, it
  shows the budget: a worker at 0.5 of the bare consumer has twice the bare
  consumer's CPU a record for everything, these two included;
- a Faust agent that does nothing with each record (``faust_noop_app.py``),
  over the first :data:`FAUST_NOOP_RECORDS` records it is given: what
  Faust's per-event machinery alone costs, and so the ceiling of a design
  that reads ``__consumer_offsets`` through a Faust stream (the source
  does not; see :mod:`kagent.worker.offsets_topic`);
- one worker (``faust -A kagent.app worker``, ``tests.support.worker``) with
  ``KAGENT_EVALUATE_INTERVAL`` and ``KAGENT_END_OFFSET_INTERVAL`` at 3600 s
  (neither runs while it ingests) and the producer's normal batching for
  everything it writes (``KAGENT_ONE_RECORD_BATCHES=false``: nothing here
  reads Tansu's ListOffsets of its topics, so no line needs the workaround).
  The window runs from the first poll (every 0.1 s) of the worker's
  ``/metrics`` that sees ``kagent_source_records_total`` above 0 to the
  newest timestamp of the records of the app's ``applied-offsets``
  changelog: the flush of the last batch of derived events applied to the
  tables (nothing else writes that topic). ``/metrics`` is
  not polled in between: at 5,000 groups held one scrape (65,000 samples)
  cost the worker 1.9 s of CPU (the lag exporter computes every group's
  figures) and this process 2.6 s to parse, so polling it measured the
  polling (3,529 records/s and 138 µs per record on this mix, polled at
  10 Hz; 12,824/s and 78 µs without). Instead, the workers' and the
  broker's CPU time is sampled from ``/proc`` every 0.1 s, and once the
  workers' CPU has been near idle for 3 s, one scrape confirms the end: every record read
  (``kagent_source_records_total``), every derived event applied
  (``kagent_derived_events_total``), every stage's backlog gauge at 0;
  changelog records stamped after that scrape are not counted. "Read" is the
  same start to the newest derived-events record (the source's part). CPU
  microseconds per record are the worker's ``utime + stime`` (``/proc``,
  every thread) over the window, the broker's beside them; the peak RSS is
  the worker's ``VmHWM`` at the end;
- one worker as a deployment runs it, measured the same way: end offsets
  polled every 5 s (``KAGENT_END_OFFSET_INTERVAL``'s default), so each poll
  publishes the lag of every group-partition whose commit changed since the
  last, and sweeps the held groups' entries;
- two workers of one app id sharing the work (the source's consumer group
  and Faust's split the partitions between them; no standby copies, see
  ``kagent/app.py``), started together with a session
  timeout of 20 s (so that both join the first generation of each group and
  none rebalances while reading; see ``PAIR_SETTINGS``), measured the same
  way: the combined rate, their summed CPU, ``os.cpu_count()``, and how
  many events were applied twice (a rebalance while reading makes the new
  owner read a batch again);
- one worker live, as it ships (evaluation and end-offset polls every 5 s;
  the producer batching): once it has applied the records above and held
  the groups for 5 s with nothing arriving, :data:`LIVE_ROUNDS` more commit
  rounds by every group not deleted (value v4, each member's partitions
  together, the members in a new order each round) are published at the
  pace of the Java consumer's auto-commit, a round every 5 s, in slices of
  0.1 s. Printed: its CPU per record from the first record published to
  the last applied, the cores that is (and in the 5 s before, nothing
  arriving: the first evaluations of the groups, end-offset polls), the
  most records published and not yet applied in a sample every 0.5 s, and
  how long after the broker acknowledged the last record every record was
  applied. A backlog lets a fetch take many commits of one group-partition,
  which storage writes once; live, a fetch holds what arrived since the
  last. Measured last: it adds records to ``__consumer_offsets``.

The targets (issue #15) are printed beside the figures with PASS or FAIL:
one worker applies at least 100,000 records/s, at least 0.5 of the bare
consumer's rate, at under 10 µs of CPU per record. The exit code is 0 only
if all three pass. ``--profile FILE`` writes py-spy's raw (collapsed) stacks
of the one worker over its window, ``--profile-live FILE`` the live
worker's from the first record published to every record applied; the
figures of such a run are disturbed by the sampling and are not of record.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import platform
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The repository root, for this checkout's kagent and the shared tests.support (sys.path[0] is benchmarks/).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import TopicPartition

from kagent.app import build_stages, create_app
from kagent.core.assignors import Member, assign
from kagent.core.consumer_offsets import (
    Assignment,
    GroupMetadata,
    GroupTombstone,
    OffsetCommit,
    OffsetTombstone,
    Record,
    Subscription,
)
from kagent.core.events import packed_records
from kagent.core.ingest import ingest
from kagent.settings import Settings
from kagent.tools.embedded import EmbeddedBroker, die_with_parent
from kagent.tools.simulator import coordinator_records
from kagent.tools.simulator.coordinator_records import OffsetsTopicMessage
from kagent.tools.simulator.rebalance import MemberIdentity, Rebalance, RebalancedMember
from kagent.worker import garbage_collection
from kagent.worker.metrics import Metrics
from kagent.worker.offsets_topic import MAX_RECORDS, PARTITION_FETCH_BYTES
from kagent.worker.storage import BATCH_RECORDS, Storage
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    offset_commit,
    publish,
)
from tests.support.processes import cpu_seconds, memory_kb, profiled
from tests.support.waiting import wait_until_async
from tests.support.worker import Worker, collector_line, loop_lag_line, metric_total, running_workers

TOPIC_PARTITIONS = (1, 2, 3, 4, 6, 6, 8, 8, 10, 12, 12, 16, 16, 20, 24, 24, 30, 32, 36, 40, 48, 60, 64, 70)
"""The pool of topics the groups read, by partition count: 24 topics, 552 partitions."""
TOPICS_PER_GROUP = {1: 0.5, 2: 0.3, 3: 0.2}
MAX_MEMBERS = 20
JAVA_SHARE = 0.6
"""Groups of Java consumers (cooperative-sticky, v3 blobs); the others are aiokafka's (range, v0 blobs)."""
REBALANCE_SHARE = 0.05
DELETE_SHARE = 0.01

FAUST_NOOP_RECORDS = 200_000
"""Records the Faust no-op agent reads (all of them would take over a minute at its rate)."""
TARGET_RATE = 100_000
TARGET_RATIO = 0.5
TARGET_CPU_US = 10.0

POLL = 0.1
"""Seconds between two samples of the workers' counters (before the first record) or CPU time (after)."""
QUIET = 3.0
"""Seconds the workers' CPU must have been nearly idle before ``/metrics`` is scraped to confirm the end;
also the least time between two such scrapes."""
IDLE_CPU = 0.1
"""Cores per worker below which a worker counts as idle (an idle worker uses about 0.03)."""
WORKER_SETTINGS = {"evaluate_interval": "3600", "end_offset_interval": "3600", "one_record_batches": "false"}
"""Neither the evaluation nor the end-offset poll runs while the records are applied; the producer batches."""
POLLING_SETTINGS = {**WORKER_SETTINGS, "end_offset_interval": "5"}
"""As a deployment runs: end offsets polled every 5 s (the default), so every poll publishes the lag of the
group-partitions whose commits changed since the last, and sweeps the held groups' entries."""
PAIR_SETTINGS = {**WORKER_SETTINGS, "session_timeout": "20"}
"""Tansu holds a group's first join for half the session timeout: 10 s lets the second worker of a pair
join the first generation of both groups (the source's and Faust's), so the pair does not rebalance
while it reads (with the 2 s of the tests, one run's pair applied 30,000 events twice)."""
BACKLOG = "kagent_stage_backlog_records"
FIRST_OFFSETS, STEPS = 1_000, 50
"""Each group-partition's first commit is below ``FIRST_OFFSETS``, each later one up to ``STEPS`` further
(:func:`build_mix`): on the default mix the highest commit, live rounds included, is about 1,500."""
TOPIC_RECORDS_ABOVE = 100
"""Records in each topic partition past the mix's highest commit (:func:`produce_topic_records`)."""
LIVE_ROUNDS = 4
"""Commit rounds published while the live worker runs (:func:`live_run`)."""
COMMIT_INTERVAL = 5.0
"""Seconds between two commits of one group-partition, live: the Java consumer's ``auto.commit.interval.ms``
default, so that a round of the mix's commits is published in 5 s (39,148 records/s on the default mix)."""
LIVE_SLICE = 0.1
"""Seconds between two slices of the live records published."""
LIVE_SETTINGS = {"one_record_batches": "false"}
"""A worker as it ships (evaluation and end-offset polls every 5 s), but for the producer's batching, which
only Tansu's ListOffsets of the topics written needs off, and nothing here reads those."""


# --- the mix ------------------------------------------------------------------------------------


async def produce_topic_records(bootstrap: str, topics: dict[str, int], records: int) -> None:
    """``records`` records in each partition of ``topics``: all but the last in full batches, the last in a
    batch of its own, since Tansu's ListOffsets answers a partition's last batch's base offset + 1."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await producer.start()
    try:
        sent = []
        for topic, count in topics.items():
            for partition in range(count):
                batch, left = producer.create_batch(), records - 1
                while left:
                    if batch.append(key=None, value=b"x", timestamp=None) is None:  # full
                        sent.append(await producer.send_batch(batch, topic, partition=partition))
                        batch = producer.create_batch()
                        continue
                    left -= 1
                if batch.record_count():
                    sent.append(await producer.send_batch(batch, topic, partition=partition))
            await asyncio.gather(*sent)
            sent = []
        for topic, count in topics.items():  # each partition's last record, alone in its batch
            alone = []
            for partition in range(count):
                batch = producer.create_batch()
                batch.append(key=None, value=b"x", timestamp=None)
                alone.append(await producer.send_batch(batch, topic, partition=partition))
            await asyncio.gather(*alone)
    finally:
        await producer.stop()


@dataclass
class _Group:
    """A group's state while its records are built."""

    name: str
    java: bool
    topics: list[str]
    members: list[str]
    generation: int = 0
    assignment: dict[str, list[TopicPartition]] = field(default_factory=dict)
    offsets: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    """Per assigned partition: (first committed offset, records consumed between two commits)."""
    dropped: str | None = None
    """The topic it unsubscribed from at its rebalance, if any."""

    @property
    def partitions(self) -> list[TopicPartition]:
        return sorted(tp for tps in self.assignment.values() for tp in tps)


@dataclass(frozen=True)
class Mix:
    records: list[Record]
    groups: int
    java_groups: int
    members: Counter[int]
    """Groups by member count (at generation 1)."""
    group_partitions: int
    """Group-partitions at generation 1."""
    rounds: int
    """Commit rounds, the last one possibly cut short."""
    upgrade_round: int
    """The round from which commits are value v4, before which the rebalances happen."""
    kinds: Counter[str]
    live: list[Record] = field(default_factory=list)
    """Commit rounds after ``records``, published while a worker runs (:func:`live_run`)."""


_UUID = "01234567-89ab-cdef-0123-456789abcdef"
"""A UUID's shape: Kafka's member id is ``<client id>-<random UUID>``."""


def _new_member(rng: random.Random, group: _Group, index: int) -> str:
    client = f"consumer-{group.name}-{index}" if group.java else "aiokafka-0.12.0"
    return f"{client}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"


def _metadata(group: _Group, rng: random.Random, now_ms: int, pool: Sequence[int]) -> GroupMetadata:
    """The group's next generation, as its client's assignor leads it: a Java consumer's cooperative-sticky
    (v3 blobs: owned partitions, generation, the assignor's user data), an aiokafka consumer's range (v0)."""
    partitions = {topic: pool[int(topic.rsplit("-", 1)[1])] for topic in group.topics}
    previous = group.assignment
    group.generation += 1
    topics = tuple(sorted(group.topics))
    members = {
        m: Member(topics, owned=previous.get(m, ()), generation=group.generation - 1 if m in previous else -1)
        for m in group.members
    }
    group.assignment = assign("cooperative-sticky" if group.java else "range", partitions, members)
    rebalanced = []
    for m in group.members:
        assigned = tuple(sorted(group.assignment[m]))
        if group.java:
            owned, generation = members[m].owned, members[m].generation
            # The cooperative-sticky assignor's user data is the member's generation (an int32).
            subscription = Subscription(3, topics, struct.pack(">i", generation), tuple(sorted(owned)), generation)
            assignment = Assignment(3, assigned)
        else:
            subscription, assignment = Subscription(0, topics), Assignment(0, assigned)
        identity = MemberIdentity(
            m,
            m[: -len(_UUID) - 1],
            f"/10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            SESSION_TIMEOUT_MS,
            REBALANCE_TIMEOUT_MS,
        )
        rebalanced.append(RebalancedMember(identity, subscription, assignment))
    protocol = "cooperative-sticky" if group.java else "range"
    rebalance = Rebalance(group.name, group.generation, protocol, group.members[0], tuple(rebalanced))
    return coordinator_records.group_metadata(rebalance, now_ms)


def _now_ms() -> int:
    return int(time.time() * 1000)


def build_mix(
    groups: int,
    target: int,
    seed: int,
    *,
    pool: Sequence[int] = TOPIC_PARTITIONS,
    first_offsets: int = 1_000_000,
    steps: int = 5_000,
    rounds: int | None = None,
    live_rounds: int = 0,
) -> Mix:
    """The records of the mix the module docstring describes, in the order they are published.

    ``pool``: the topics' partition counts; each group-partition's first commit is below
    ``first_offsets`` and each later one up to ``steps`` further; ``rounds``, given, is the number
    of commit rounds, whatever ``target`` says. ``live_rounds`` more rounds of commits (value v4) by
    every group not deleted follow in :attr:`Mix.live`, each member committing its partitions
    together, the members in a new random order each round."""
    rng = random.Random(seed)
    topics = [f"orders-{t:02d}" for t in range(len(pool))]
    member_weights = [1 / m for m in range(1, MAX_MEMBERS + 1)]
    planned: list[_Group] = []
    for g in range(groups):
        count = rng.choices(list(TOPICS_PER_GROUP), weights=list(TOPICS_PER_GROUP.values()))[0]
        group = _Group(f"service-{g:05d}", rng.random() < JAVA_SHARE, rng.sample(topics, count), [])
        size = rng.choices(range(1, MAX_MEMBERS + 1), weights=member_weights)[0]
        group.members = [_new_member(rng, group, i) for i in range(size)]
        planned.append(group)
    order = rng.sample(range(groups), groups)
    rebalancing = {planned[i].name for i in order[: max(1, round(groups * REBALANCE_SHARE))]}
    deleted = {planned[i].name for i in order[-max(1, round(groups * DELETE_SHARE)) :]}

    kinds: Counter[str] = Counter()
    records: list[Record] = []

    def add(record: Record, kind: str) -> None:
        records.append(record)
        kinds[kind] += 1

    for group in planned:
        add(_metadata(group, rng, _now_ms(), pool), "group metadata v3, generation 1")
        for tp in group.partitions:
            group.offsets[tp] = (rng.randrange(first_offsets), rng.randrange(1, steps))
    members = Counter(len(group.members) for group in planned)
    group_partitions = sum(len(group.offsets) for group in planned)

    # What the tail adds: the rebalances' metadata, the expired topics' and the deleted groups' tombstones.
    for group in planned:
        if group.name in rebalancing and len(group.topics) > 1:
            group.dropped = group.topics[-1]
    expiring = sum(1 for group in planned for tp in group.offsets if tp.topic == group.dropped)
    tail = len(rebalancing) + expiring + sum(2 + len(g.offsets) for g in planned if g.name in deleted)
    commits = max(0, target - len(records) - tail) if rounds is None else rounds * group_partitions
    upgrade_round = max(1, math.ceil(commits / max(1, group_partitions)) // 2)

    leader_epochs = {topic: rng.randrange(10) for topic in topics}
    rounds = 0
    while commits > 0:
        if rounds == upgrade_round:
            for group in planned:
                if group.name in rebalancing:
                    if group.dropped is not None:
                        group.topics.remove(group.dropped)
                    if len(group.members) > 1 and (len(group.members) == MAX_MEMBERS or rng.random() < 0.5):
                        group.members.pop(rng.randrange(len(group.members)))
                    else:
                        group.members.append(_new_member(rng, group, len(group.members)))
                    add(_metadata(group, rng, _now_ms(), pool), "group metadata v3, new generation")
        version = 4 if rounds >= upgrade_round else 3
        for group in planned:
            for tp in group.partitions:
                first, step = group.offsets[tp]
                commit = offset_commit(group.name, tp.topic, tp.partition, first + (rounds + 1) * step)
                if group.java or version == 4:
                    commit = commit._replace(
                        value_version=version, leader_epoch=leader_epochs[tp.topic] if group.java else None
                    )
                add(commit, f"offset commit v{version}")
                commits -= 1
            if commits <= 0:
                break
        rounds += 1

    for group in planned:
        if group.dropped is not None:
            for tp in sorted(tp for tp in group.offsets if tp.topic == group.dropped):
                add(OffsetTombstone(group.name, tp.topic, tp.partition), "offset tombstone, topic unsubscribed")
    for group in planned:
        if group.name in deleted:
            add(
                coordinator_records.empty_group_metadata(group.name, group.generation + 1, _now_ms()),
                "group metadata v3, empty group",
            )
            for tp in sorted(tp for tp in group.offsets if tp.topic != group.dropped):
                add(OffsetTombstone(group.name, tp.topic, tp.partition), "offset tombstone, group deleted")
            add(GroupTombstone(group.name), "group tombstone")
    live: list[Record] = []
    committing = [(g, tps) for g in planned if g.name not in deleted for tps in g.assignment.values() if tps]
    for later in range(1, live_rounds + 1):
        for group, tps in rng.sample(committing, len(committing)):
            for tp in sorted(tps):
                first, step = group.offsets[tp]
                commit = offset_commit(group.name, tp.topic, tp.partition, first + (rounds + later) * step)
                live.append(
                    commit._replace(value_version=4, leader_epoch=leader_epochs[tp.topic] if group.java else None)
                )
    return Mix(
        records,
        groups,
        sum(group.java for group in planned),
        members,
        group_partitions,
        rounds,
        upgrade_round,
        kinds,
        live,
    )


def describe(mix: Mix) -> list[str]:
    mean = sum(m * n for m, n in mix.members.items()) / mix.groups
    sizes = ", ".join(f"{m}: {mix.members[m]}" for m in sorted(mix.members))
    lines = [
        f"{mix.groups:,} groups ({mix.java_groups:,} Java cooperative-sticky with v3 blobs, "
        f"{mix.groups - mix.java_groups:,} aiokafka range with v0 blobs), "
        f"{mean:.1f} members on average",
        f"  groups by members: {sizes}",
        f"  {len(TOPIC_PARTITIONS)} topics of {sum(TOPIC_PARTITIONS)} partitions; "
        f"{mix.group_partitions:,} group-partitions; {mix.rounds} commit rounds "
        f"(value v4 from round {mix.upgrade_round + 1}, the rebalances just before it)",
        f"  {len(mix.records):,} records:",
    ]
    lines += [f"    {n:>9,}  {kind}" for kind, n in sorted(mix.kinds.items())]
    return lines


# --- the baselines ------------------------------------------------------------------------------


async def bare_consumer_rate(bootstrap: str, expected: int, repeats: int = 3) -> tuple[float, float]:
    """(records/s, CPU microseconds per record) of a bare aiokafka consumer reading all of
    ``__consumer_offsets`` from its first fetch to its last record; best of ``repeats``."""
    best, cpu = 0.0, 0.0
    for _ in range(repeats):
        started, cpu_started = await _read_all(bootstrap, expected, keep=None)
        rate = expected / (time.perf_counter() - started)
        if rate > best:
            best, cpu = rate, (time.process_time() - cpu_started) / expected * 1e6
    return best, cpu


async def _read_all(
    bootstrap: str, expected: int, keep: list[ConsumerRecord[bytes, bytes]] | None, **options: int
) -> tuple[float, float]:
    """Read ``__consumer_offsets`` from its start until ``expected`` records came (into ``keep``, given
    one), with aiokafka's consumer ``options`` (its defaults, none given): perf_counter and process_time at
    the first fetch."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **options
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(OFFSETS_TOPIC, p) for p in range(OFFSETS_TOPIC_PARTITIONS)])
        await consumer.seek_to_beginning()
        seen, started, cpu_started = 0, time.perf_counter(), time.process_time()

        async def read() -> bool:
            nonlocal seen
            for messages in (await consumer.getmany(timeout_ms=1000)).values():
                seen += len(messages)
                if keep is not None:
                    keep.extend(messages)
            return seen >= expected

        await wait_until_async(read, 300, f"a bare consumer to read {expected:,} records", interval=0)
        return started, cpu_started
    finally:
        await consumer.stop()


PARTITIONS: int = Settings.model_fields["topic_partitions"].default
"""The derived-events partitions of the in-process lines: kagent's default."""


def in_process_rate(
    records: Sequence[ConsumerRecord[bytes, bytes]], batch: int = MAX_RECORDS
) -> tuple[float, list[tuple[int, bytes]]]:
    """Records/s of the source's pure work (decode, check, derive, group, encode and pack, on
    :data:`PARTITIONS`) on ``records`` in batches of ``batch``, in this process with no I/O, and the
    derived-events records it packed, (partition, value) each, in order. Raises unless every record derives
    one event."""
    events = 0
    seconds = 0.0
    packed: list[tuple[int, bytes]] = []
    for start in range(0, len(records), batch):
        started = time.process_time()
        result = ingest(records[start : start + batch], ())
        packed += packed_records(result.events, PARTITIONS)
        seconds += time.process_time() - started
        if result.malformed:
            _, failure = result.malformed[0]
            raise RuntimeError(f"{len(result.malformed)} malformed records, the first: {failure}")
        events += sum(len(derived.expanded()) for derived in result.events)  # a run holds many commits
    if events != len(records):
        raise RuntimeError(f"{len(records):,} records derived {events:,} events, not one each")
    return len(records) / seconds, packed


class _NoSendProducer:
    """Faust's producer as :func:`kagent.worker.record_batches.send_batches` uses it, sending nothing: its
    record batches come from an aiokafka producer never started (the builder only), and each batch handed
    to it is built (the bytes a send would carry) and acknowledged at once."""

    def __init__(self) -> None:
        self._kafka = AIOKafkaProducer(bootstrap_servers="127.0.0.1:9")  # never started: no connection

    async def maybe_start(self) -> None:
        pass

    def _ensure_producer(self) -> _NoSendProducer:
        return self

    def create_batch(self) -> BatchBuilder:
        return self._kafka.create_batch()

    async def send_batch(self, batch: BatchBuilder, topic: str, partition: int) -> asyncio.Future[None]:
        batch._build()  # what aiokafka's sender does with a batch before it goes out
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


async def storage_alone_rate(records: int, packed: Sequence[tuple[int, bytes]]) -> float:
    """Records/s of ``__consumer_offsets`` (``records`` of them) of storage's pure work on their derived
    events, ``packed`` (:func:`in_process_rate`'s), in this process with no I/O (the module's docstring); from
    the first batch of derived events given to storage to the last applied, process time."""
    settings = Settings(topic_partitions=PARTITIONS)
    app, topology = create_app(settings)  # no I/O until a worker starts it, and none here
    app.producer = _NoSendProducer()  # type: ignore[assignment]  # what send_batches uses of Faust's producer
    storage = next(stage for stage in build_stages(app, topology, settings, Metrics()) if isinstance(stage, Storage))
    for partition in range(settings.topic_partitions):  # applied from offset 0: no broker asked for log starts
        topology.applied_offsets.data[str(partition)] = b"0"
    offsets = [0] * settings.topic_partitions
    messages: list[_DerivedEventsMessage] = []
    for partition, value in packed:
        messages.append(_DerivedEventsMessage(partition, offsets[partition], value))
        offsets[partition] += 1
    started = time.process_time()
    for start in range(0, len(messages), BATCH_RECORDS):
        await storage._apply_batch(messages[start : start + BATCH_RECORDS])  # type: ignore[arg-type]
    seconds = time.process_time() - started
    if storage.applied != len(messages):
        raise RuntimeError(f"storage applied {storage.applied:,} of {len(messages):,} derived-events records")
    return records / seconds


@dataclass
class _DerivedEventsMessage:
    """What storage reads of a Faust message of the derived-events topic."""

    partition: int
    offset: int
    value: bytes
    topic: str = "derived-events"
    key: bytes | None = None
    timestamp: float = field(default_factory=time.time)


def faust_noop_rate(broker: EmbeddedBroker, workdir: Path, records: int) -> tuple[float, float]:
    """(records/s, CPU microseconds per record) of a Faust agent that does nothing with each of the first
    ``records`` records of ``__consumer_offsets`` it is given (``faust_noop_app.py``): what Faust's
    per-event machinery alone costs, the ceiling of a design reading that topic through a Faust stream."""
    env = {
        **os.environ,
        "BENCH_BROKER": broker.url,
        "BENCH_APP_ID": "bench-faust-noop",
        "BENCH_RECORDS": str(records),
        "BENCH_DATA_DIR": str(workdir / "faust-noop-data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "faust", "-A", "faust_noop_app", "worker", "-l", "warn"],
        env=env,
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=die_with_parent,
    )
    figures = re.search(r"faust-noop (\d+) ([\d.]+)", done.stdout + done.stderr)  # Faust logs what agents print
    if figures is not None:
        return float(figures[1]), float(figures[2])
    raise RuntimeError(f"the no-op Faust worker gave no figure; output tail:\n{(done.stdout + done.stderr)[-2000:]}")


# --- the workers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    workers: int
    records: int
    read: int
    """Records of ``__consumer_offsets`` the sources read, over all workers (more than ``records`` where
    some were read again)."""
    applied: int
    """Derived events applied, over all workers (more than ``records`` where some were applied twice)."""
    seconds: float
    """From the first record read to the last changelog write of the last batch applied."""
    read_seconds: float
    """From the first record read to the last derived-events record sent (the source's part)."""
    cpu_s: float
    broker_cpu_s: float
    peak_rss_kb: list[int]
    scrapes: int
    """Scrapes of ``/metrics`` after the first record was read."""

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.cpu_s / self.records * 1e6

    @property
    def broker_cpu_us(self) -> float:
        return self.broker_cpu_s / self.records * 1e6


@dataclass(frozen=True)
class _Sample:
    """The wall-clock time and the CPU seconds used so far by the workers and by the broker."""

    time: float
    cpu: float
    broker_cpu: float


def _counters(workers: Sequence[Worker]) -> tuple[float, float, bool]:
    """(records read, derived events applied, every stage's backlog gauge at 0) over ``workers``, from
    one scrape of each one's ``/metrics`` by ``name[]`` (a worker that polls end offsets takes seconds to
    compute every group's lag figures for a whole scrape)."""
    read = applied = 0.0
    idle = True
    for worker in workers:
        worker.check_alive()
        samples = worker.metrics("kagent_source_records_total", "kagent_derived_events_total", BACKLOG) or {}
        read += metric_total(samples, "kagent_source_records_total")
        applied += metric_total(samples, "kagent_derived_events_total")
        gauges = [v for k, v in samples.items() if k.startswith(BACKLOG + "{")]
        idle &= bool(gauges) and not any(gauges)
    return read, applied, idle


async def _newest_timestamps(bootstrap: str, prefix: str, until: float) -> dict[str, float]:
    """Per topic whose name starts with ``prefix``, the newest timestamp (s) of its records stamped no
    later than ``until`` (topics without one left out): every record is read, up to a fetch that brings
    nothing for 2 s (Tansu's end offsets cannot say where a batched topic ends)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    newest: dict[str, float] = {}
    try:
        topics = sorted(t for t in await consumer.topics() if t.startswith(prefix))
        consumer.assign([TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())])
        await consumer.seek_to_beginning()
        limit = until * 1000
        while batches := await consumer.getmany(timeout_ms=2000):
            for tp, messages in batches.items():
                stamped = [m.timestamp for m in messages if m.timestamp <= limit]
                if stamped:
                    newest[tp.topic] = max(newest.get(tp.topic, 0.0), max(stamped) / 1000)
    finally:
        await consumer.stop()
    return newest


async def into_tables(
    workers: Sequence[Worker], broker: EmbeddedBroker, app_id: str, expected: int, profile: Path | None = None
) -> Run:
    """Measure ``workers`` (of app ``app_id``) applying ``expected`` records, as the module docstring says.

    ``/metrics`` is scraped every :data:`POLL` s only until the first record is read (the workers hold
    no group yet, so a scrape is cheap): at 5,000 groups held, one scrape costs a worker more than a
    second of CPU (the lag exporter computes every group's figures), so polling it would measure the
    scraper. From then on the workers' and the broker's CPU time is sampled from ``/proc`` every
    :data:`POLL` s, and ``/metrics`` is scraped again only once the workers' CPU has been quiet for
    :data:`QUIET` s, to confirm that every record is applied. The end is the newest timestamp of the
    app's applied-offsets changelog records written by then: the last flush of the last batch applied.
    """
    assert broker.pid is not None
    broker_pid = broker.pid
    timeout = 300 + expected / 1_000

    def sample() -> _Sample:
        return _Sample(time.time(), sum(cpu_seconds(w.pid) for w in workers), cpu_seconds(broker_pid))

    async def first_read() -> _Sample | None:
        read, _, _ = await asyncio.to_thread(_counters, workers)
        return sample() if read > 0 else None

    start = await wait_until_async(
        first_read, 300, "a worker to read a record", interval=POLL, detail=workers[0].log_tail
    )
    samples = [start]
    scrapes = 0
    read = applied = 0.0
    last_scrape = start.time

    async def done() -> bool:
        nonlocal scrapes, read, applied, last_scrape
        now = sample()
        samples.append(now)
        quiet = [s for s in samples if s.time >= now.time - QUIET]
        if now.time - quiet[0].time < QUIET * 0.9 or now.time - last_scrape < QUIET:
            return False
        if (now.cpu - quiet[0].cpu) / (now.time - quiet[0].time) > IDLE_CPU * len(workers):
            return False
        read, applied, idle = await asyncio.to_thread(_counters, workers)
        scrapes += 1
        last_scrape = time.time()
        return read >= expected and applied >= expected and idle

    with profiled(workers[0].pid, profile):
        await wait_until_async(
            done,
            timeout,
            f"{len(workers)} worker(s) to apply {expected:,} events",
            interval=POLL,
            detail=lambda: "\n".join(w.log_tail() for w in workers),
        )
    confirmed = samples[-1].time
    peak_rss = [memory_kb(w.pid)["VmHWM"] for w in workers]
    newest = await _newest_timestamps(broker.bootstrap_servers, f"{app_id}-", confirmed)
    derived = f"{app_id}-derived-events"
    # The applied-offsets changelog is written by each batch's flush and by nothing else (a poll's lag
    # entries go to other topics, at any time): its newest record is the last batch applied.
    end = newest[f"{app_id}-applied-offsets-changelog"]
    at_end = min((s for s in samples if s.time >= end), key=lambda s: s.time, default=samples[-1])
    return Run(
        len(workers),
        expected,
        int(read),
        int(applied),
        end - start.time,
        newest.get(derived, end) - start.time,
        at_end.cpu - start.cpu,
        at_end.broker_cpu - start.broker_cpu,
        peak_rss,
        scrapes,
    )


@dataclass(frozen=True)
class LiveRun:
    """One worker holding the mix, reading commits as they are published (:func:`live_run`)."""

    records: int
    pace: float
    """Records/s published, from the first to the last acknowledged."""
    caught_up: float
    """Seconds from the last record acknowledged by the broker to every record applied."""
    behind: int
    """The most records published and not yet applied that a sample (every :data:`LIVE_SAMPLE` s) saw."""
    cpu_s: float
    """The worker's CPU from the first record published to every record applied."""
    seconds: float
    """From the first record published to every record applied."""
    idle_cores: float
    """The worker's CPU per second over the commit interval before the first record published, with
    nothing arriving (its first evaluations of the groups fall in it, and end-offset polls)."""
    collector: str
    """The garbage collector's pauses from the first record published to every record applied."""
    loop: str
    """How late the worker's loop ran its timers over the same span (its longest stall)."""
    evaluations: float
    """Evaluations the worker made over the same span."""
    evaluation_cpu_s: float
    """The CPU they took (``kagent_evaluation_cpu_seconds_total``): part of :attr:`cpu_s`, paced by the share of
    the loop a round may take while ingest keeps up or falls behind."""

    @property
    def cpu_us(self) -> float:
        return self.cpu_s / self.records * 1e6

    @property
    def cores(self) -> float:
        return self.cpu_s / self.seconds


LIVE_SAMPLE = 0.5
"""Seconds between two samples of the live worker's counters while records are published."""


async def publish_paced(
    bootstrap: str, messages: Sequence[OffsetsTopicMessage], rate: float, sent: list[int]
) -> tuple[float, float]:
    """Publish ``messages`` to ``__consumer_offsets`` at ``rate`` records/s: every :data:`LIVE_SLICE` s
    the next slice, appended to one record batch per partition (aiokafka's batch builder, so that this
    process's own work stays small beside the worker's); ``sent[0]`` counts the records handed to the
    producer. (time of the first send, time the broker acknowledged the last)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        step = max(1, round(rate * LIVE_SLICE))
        pending: list[asyncio.Future[object]] = []
        started = time.time()
        for index, begin in enumerate(range(0, len(messages), step)):
            await asyncio.sleep(max(0.0, started + index * LIVE_SLICE - time.time()))  # the pace, not a wait
            chains: dict[int, list[BatchBuilder]] = {}
            part = messages[begin : begin + step]
            for message in part:
                chain = chains.setdefault(message.partition, [producer.create_batch()])
                if chain[-1].append(timestamp=None, key=message.key, value=message.value) is None:
                    chain.append(producer.create_batch())  # the last one is full
                    chain[-1].append(timestamp=None, key=message.key, value=message.value)
            for partition, chain in chains.items():
                for batch in chain:
                    pending.append(await producer.send_batch(batch, OFFSETS_TOPIC, partition=partition))
            sent[0] += len(part)
        await asyncio.gather(*pending)
        return started, time.time()
    finally:
        await producer.stop()


async def live_run(
    worker: Worker, bootstrap: str, base: int, live: Sequence[Record], rate: float, profile: Path | None = None
) -> LiveRun:
    """``worker`` (of :data:`LIVE_SETTINGS`), once it has applied the ``base`` records already on
    ``__consumer_offsets`` and held them for a commit interval with nothing arriving, reading ``live`` published at
    ``rate`` records/s: its CPU per record, how far behind it fell, and how soon after the last record
    it had applied everything. ``profile``: py-spy's stacks of the worker from the first record published to
    every record applied."""
    messages = [coordinator_records.offsets_topic_message(r, OFFSETS_TOPIC_PARTITIONS) for r in live]
    expected = base + len(messages)

    async def applied(at_least: int) -> bool:
        read, events, idle = await asyncio.to_thread(_counters, [worker])
        return read >= at_least and events >= at_least and idle

    await wait_until_async(
        lambda: applied(base), 300 + base / 1_000, f"the live worker to apply {base:,} records", interval=1.0
    )
    idle_from = cpu_seconds(worker.pid), time.time()
    await asyncio.sleep(COMMIT_INTERVAL)  # the window over which the idle worker's CPU is measured
    idle_cores = (cpu_seconds(worker.pid) - idle_from[0]) / (time.time() - idle_from[1])

    sent = [0]
    behind = 0
    evaluated = await asyncio.to_thread(_evaluation_counters, worker)
    paused = await asyncio.to_thread(worker.collector_pauses)
    lagged = await asyncio.to_thread(worker.loop_lags)
    cpu_started = cpu_seconds(worker.pid)
    with profiled(worker.pid, profile):
        publishing = asyncio.create_task(publish_paced(bootstrap, messages, rate, sent))
        while not publishing.done():
            await asyncio.wait({publishing}, timeout=LIVE_SAMPLE)
            _, events, _ = await asyncio.to_thread(_counters, [worker])
            behind = max(behind, sent[0] - int(events - base))
        started, acknowledged = await publishing
        await wait_until_async(
            lambda: applied(expected),
            120 + len(messages) / 1_000,  # 1,000 records/s: far below any backlog rate a worker reads at
            f"the live worker to apply {expected:,} records",
            interval=POLL,
        )
        done = time.time()
    made, cpu = await asyncio.to_thread(_evaluation_counters, worker)
    return LiveRun(
        len(messages),
        len(messages) / (acknowledged - started),
        done - acknowledged,
        behind,
        cpu_seconds(worker.pid) - cpu_started,
        done - started,
        idle_cores,
        collector_line(paused, await asyncio.to_thread(worker.collector_pauses)),
        loop_lag_line(lagged, await asyncio.to_thread(worker.loop_lags)),
        made - evaluated[0],
        cpu - evaluated[1],
    )


EVALUATION_COUNTERS = ("kagent_evaluations_total", "kagent_evaluation_cpu_seconds_total")


def _evaluation_counters(worker: Worker) -> list[float]:
    """[evaluations made, their CPU seconds] so far, from one scrape of ``worker``'s ``/metrics`` by ``name[]``."""
    samples = worker.metrics(*EVALUATION_COUNTERS, timeout=30) or {}
    return [metric_total(samples, name) for name in EVALUATION_COUNTERS]


async def whole_scrape(worker: Worker) -> tuple[int, float, float]:
    """One scrape of all of ``worker``'s ``/metrics``: (samples, the worker's CPU s, this process's CPU s to
    parse it)."""
    worker_cpu, own_cpu = cpu_seconds(worker.pid), time.process_time()
    scraped = await asyncio.to_thread(worker.metrics)
    return len(scraped or ()), cpu_seconds(worker.pid) - worker_cpu, time.process_time() - own_cpu


# --- the benchmark ------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


async def _two_workers(broker: EmbeddedBroker, workdir: Path, n: int) -> Run:
    """Two workers of one app id sharing the work, measured like one."""
    with contextlib.ExitStack() as stack:
        pair = []
        for name in ("a", "b"):
            (workdir / name).mkdir()
            start = stack.enter_context(running_workers(broker.bootstrap_servers, workdir / name))
            pair.append(start("bench-ingest-two", **PAIR_SETTINGS))
        two = await into_tables(pair, broker, "bench-ingest-two", n)
        for worker in pair:
            worker.stop()
    return two


async def main(
    groups: int, records: int, seed: int, profile: Path | None, one_only: bool = False, profile_live: Path | None = None
) -> int:
    print(
        f"kagent ingest on the embedded broker (Tansu), {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs"
    )
    garbage_collection.tune()  # as a worker's, for the lines measured in this process
    started = time.perf_counter()
    mix = build_mix(groups, records, seed, first_offsets=FIRST_OFFSETS, steps=STEPS, live_rounds=LIVE_ROUNDS)
    n = len(mix.records)
    topic_records = max(commit.offset for commit in mix.live if isinstance(commit, OffsetCommit)) + TOPIC_RECORDS_ABOVE
    live, live_rate = mix.live, len(mix.live) / LIVE_ROUNDS / COMMIT_INTERVAL
    print(f"mix (seed {seed}, built in {time.perf_counter() - started:.0f} s):")
    print("\n".join(describe(mix)))
    topics = {f"orders-{t:02d}": count for t, count in enumerate(TOPIC_PARTITIONS)}
    with tempfile.TemporaryDirectory(prefix="kagent-bench-ingest-") as tmp, EmbeddedBroker(log_dir=Path(tmp)) as broker:
        workdir = Path(tmp)
        try:
            await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, **topics})
            started = time.perf_counter()
            await produce_topic_records(broker.bootstrap_servers, topics, topic_records)
            print(
                f"{topic_records:,} records in each partition of the {len(topics)} topics (past the highest commit) "
                f"in {time.perf_counter() - started:.0f} s"
            )
            started = time.perf_counter()
            await publish(broker.bootstrap_servers, mix.records, by_group=True, batched=True)
            print(
                f"published to {OFFSETS_TOPIC} ({OFFSETS_TOPIC_PARTITIONS} partitions, each group on its own) "
                f"with normal batching in {time.perf_counter() - started:.0f} s"
            )
            del mix  # the bytes are on the broker now
            bare_rate, bare_cpu = await bare_consumer_rate(broker.bootstrap_servers, n)
            fetched: list[ConsumerRecord[bytes, bytes]] = []
            # In the order the source's consumer fetches them (a partition's records up to its fetch size at once),
            # so that storage folds a group-partition's commits as it does in the worker.
            await _read_all(broker.bootstrap_servers, n, keep=fetched, max_partition_fetch_bytes=PARTITION_FETCH_BYTES)
            pure_rate, packed = in_process_rate(fetched)
            del fetched
            storage_rate = await storage_alone_rate(n, packed)
            del packed
            noop_records = min(n, FAUST_NOOP_RECORDS)
            noop_rate, noop_cpu = await asyncio.to_thread(faust_noop_rate, broker, workdir, noop_records)

            with running_workers(broker.bootstrap_servers, workdir / "one") as start:
                (workdir / "one").mkdir()
                worker = start("bench-ingest-one", **WORKER_SETTINGS)
                one = await into_tables([worker], broker, "bench-ingest-one", n, profile)
                one_collector = collector_line({}, await asyncio.to_thread(worker.collector_pauses))
                scrape = await whole_scrape(worker)
                worker.stop()
            with running_workers(broker.bootstrap_servers, workdir / "polling") as start:
                (workdir / "polling").mkdir()
                worker = start("bench-ingest-polling", **POLLING_SETTINGS)
                polling = await into_tables([worker], broker, "bench-ingest-polling", n)
                worker.stop()
            two = None if one_only else await _two_workers(broker, workdir, n)
            with running_workers(broker.bootstrap_servers, workdir / "live") as start:  # last: it adds records
                (workdir / "live").mkdir()
                worker = start("bench-ingest-live", **LIVE_SETTINGS)
                paced = await live_run(worker, broker.bootstrap_servers, n, live, live_rate, profile_live)
                live_rss = memory_kb(worker.pid)["VmHWM"]
                worker.stop()
            del live
        except BaseException:
            for log in sorted(workdir.rglob("*.log")):
                print(f"--- {log.name} (tail) ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
            raise

    print(
        f"\n{'':<46}{'records/s':>11}{'x bare':>8}{'seconds':>9}{'read s':>8}"
        f"{'CPU us/rec':>11}{'broker us':>10}{'peak RSS MB':>12}"
    )
    print(
        f"{'bare aiokafka consumer (best of 3)':<46}{bare_rate:>11,.0f}{1:>8.3f}{n / bare_rate:>9.1f}"
        f"{'':>8}{bare_cpu:>11.1f}"
    )
    print(
        f"{'decode+check+derive+encode alone, in process':<46}{pure_rate:>11,.0f}{pure_rate / bare_rate:>8.3f}"
        f"{n / pure_rate:>9.1f}{'':>8}{1e6 / pure_rate:>11.1f}"
    )
    print(
        f"{'storage applying the events alone, in process':<46}{storage_rate:>11,.0f}"
        f"{storage_rate / bare_rate:>8.3f}{n / storage_rate:>9.1f}{'':>8}{1e6 / storage_rate:>11.1f}"
    )
    noop = f"Faust agent doing nothing, first {noop_records:,}"
    print(
        f"{noop:<46}{noop_rate:>11,.0f}{noop_rate / bare_rate:>8.3f}{noop_records / noop_rate:>9.1f}"
        f"{'':>8}{noop_cpu:>11.1f}"
    )
    runs = [("one worker", one), ("one worker, end offsets polled every 5 s", polling)]
    if two is not None:
        runs.append((f"two workers, combined ({os.cpu_count()} CPUs)", two))
    for label, run in runs:
        rss = "+".join(f"{kb / 1024:.0f}" for kb in run.peak_rss_kb)
        print(
            f"{label:<46}{run.rate:>11,.0f}{run.rate / bare_rate:>8.3f}{run.seconds:>9.1f}{run.read_seconds:>8.1f}"
            f"{run.cpu_us:>11.1f}{run.broker_cpu_us:>10.1f}{rss:>12}"
        )
    print(
        f"one worker live, as shipped: {paced.records:,} commits published at {paced.pace:,.0f}/s "
        f"(every group-partition every {COMMIT_INTERVAL:g} s, {LIVE_ROUNDS} rounds):\n"
        f"  {paced.cpu_us:.1f} us of CPU per record ({paced.cpu_us / bare_cpu:.1f} x the bare consumer's), "
        f"{paced.cores:.2f} cores ({paced.idle_cores:.2f} in the 5 s before, nothing arriving); "
        f"at most {paced.behind:,} records behind; every record applied {paced.caught_up:.1f} s after the "
        f"last was acknowledged; peak RSS {live_rss / 1024:.0f} MB; the garbage collector meanwhile: "
        f"{paced.collector}; the event loop's timers meanwhile: {paced.loop}; evaluations meanwhile: "
        f"{paced.evaluations:,.0f}, {paced.evaluation_cpu_s:.1f} s of its CPU"
    )
    print(f"the garbage collector in the one worker, from its start to every record applied: {one_collector}")
    print(
        f"(/metrics scraped {one.scrapes}{f' and {two.scrapes}' if two else ''} times after the first record "
        "read: once the workers' CPU was quiet, to confirm the end)"
    )
    samples, worker_cpu, own_cpu = scrape
    print(
        f"(one scrape of the one worker's /metrics at the end: {samples:,} samples, "
        f"{worker_cpu:.2f} s of the worker's CPU, {own_cpu:.2f} s of this process's to parse it)"
    )
    for label, run in runs:
        if run.read > n or run.applied > n:
            print(
                f"({label}: {run.read - n:,} records read again, {run.applied - n:,} events applied twice: "
                "batches read again after a rebalance)"
            )
    checks = [
        (f"one worker >= {TARGET_RATE:,} records/s", one.rate >= TARGET_RATE, f"{one.rate:,.0f}/s"),
        (
            f"one worker >= {TARGET_RATIO} of the bare consumer",
            one.rate >= TARGET_RATIO * bare_rate,
            f"{one.rate / bare_rate:.3f}",
        ),
        (f"one worker < {TARGET_CPU_US:g} us of CPU per record", one.cpu_us < TARGET_CPU_US, f"{one.cpu_us:.1f} us"),
    ]
    for what, ok, figure in checks:
        print(f"target {what}: {verdict(ok)} ({figure})")
    if two is not None:
        print(
            f"two workers: {two.rate:,.0f} records/s combined on {os.cpu_count()} CPUs "
            f"({two.rate / one.rate:.2f} x one worker)"
        )
    if profile is not None:
        print(f"py-spy stacks of the one worker: {profile} (figures disturbed by the sampling, not of record)")
    if profile_live is not None:
        print(f"py-spy stacks of the live worker: {profile_live} (figures disturbed by the sampling, not of record)")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 groups, 100,000 records: a smoke run")
    parser.add_argument("--records", type=int, help="records on __consumer_offsets, at least (default 1,000,000)")
    parser.add_argument("--groups", type=int, help="consumer groups (default 5,000)")
    parser.add_argument("--seed", type=int, default=15, help="the mix's seed (default 15)")
    parser.add_argument("--profile", type=Path, help="py-spy raw stacks of the one worker's window, to this file")
    parser.add_argument(
        "--profile-live", type=Path, help="py-spy raw stacks of the live worker while it reads, to this file"
    )
    parser.add_argument("--one-only", action="store_true", help="measure one worker only, not two")
    args = parser.parse_args()
    groups = args.groups or (500 if args.quick else 5_000)
    records = args.records or (100_000 if args.quick else 1_000_000)
    sys.exit(asyncio.run(main(groups, records, args.seed, args.profile, args.one_only, args.profile_live)))
