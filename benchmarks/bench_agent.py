"""Memory and detection latency of a real kagent worker on the embedded broker.

    python benchmarks/bench_agent.py [--quick]

Each part starts its own embedded broker (Tansu) and real worker processes
(``faust -A kagent.app worker``, configured by ``KAGENT_*`` variables as the
integration tests do), publishes coordinator records in Kafka's binary
format to ``__consumer_offsets`` (Tansu keeps none of its own; records go
to the partition Kafka's rule gives their group, of 50), and stops every
process by its pid at the end, also on failure or Ctrl-C.

Ingest throughput is ``bench_ingest.py``'s (a realistic 1,000,000-record
mix with normal batching, beside a bare consumer and a Faust agent that does
nothing per record), not this benchmark's: the rate of a worker writing
one-record batches, as the latency part's must (below), is the embedded
broker's workaround's, not what a cluster sees.

Memory. 1,000 groups of 10 members on 10 topics of 100 partitions (100,000
group-partitions), each group's metadata and one commit per partition. The
worker's RSS (``VmRSS`` of ``/proc/<pid>/status``; ``VmHWM`` is its peak)
once every record is applied and an end-offset poll that began after that
has rewritten every group-partition's lag entry, beside the RSS of an idle
worker on an empty ``__consumer_offsets`` as the baseline.

Detection latency. A fresh broker and worker (evaluate and end-offset
intervals of 1 s, 3 evaluations to hold, the other settings their
defaults), groups of 4 members x 2 partitions on an 8-partition topic with
1,000 records per partition, committed so that skew is 1.23 (below the
threshold of 1.5) with total lag above the floor. Then, one group at a
time, one commit that takes the group's skew to 2.11; the latency runs from
just before that commit is sent to the recommendation's arrival at a
consumer of the recommendations topic. Where the time goes is printed
beside it: when the group-partition's new lag entry was written (its
partition-lag changelog record's timestamp) and when the evaluation that
triggered ran (the recommendation's ``time``).

On the embedded broker the worker produces one record per batch
(``KAGENT_ONE_RECORD_BATCHES``), as ``kagent run`` and the tests set it:
Tansu's ListOffsets is right only then. Except in the memory part, whose
worker batches as on a real cluster: nothing there reads the end offsets of
the topics the worker writes, and at 100,000 group-partitions its changelog
flushes of one record per batch took minutes (72,112 of 101,000 records
applied in 151 s), which is the workaround's cost, not what a cluster sees.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# The repository root, for this checkout's kagent and the shared tests.support (sys.path[0] is benchmarks/).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import GroupMetadata, OffsetCommit, encode
from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker
from kagent.tools.simulator.partitioners import offsets_partition_for
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.processes import memory_kb
from tests.support.waiting import WaitTimedOut, wait_until_async
from tests.support.web import wait_json
from tests.support.worker import Worker, metric_total, running_workers


@dataclass(frozen=True)
class DataSet:
    """Consumer groups of ``members`` members (range), each reading all partitions of one of ``topics`` topics."""

    groups: int
    topics: int
    partitions: int
    """Partitions per topic, so also per group."""
    members: int
    commit_rounds: int
    rebalance_every: int = 10
    """Every this-many-th group rebalances (new generation, new member ids) before each later round."""
    records_per_partition: int = 5

    @property
    def group_partitions(self) -> int:
        return self.groups * self.partitions


@dataclass(frozen=True)
class Sizes:
    memory: DataSet
    latency_repeats: int


FULL = Sizes(
    memory=DataSet(groups=1_000, topics=10, partitions=100, members=10, commit_rounds=1),
    latency_repeats=5,
)
QUICK = Sizes(
    memory=DataSet(groups=50, topics=2, partitions=20, members=4, commit_rounds=1),
    latency_repeats=2,
)

MEMORY_TARGET_MB = 400
INGEST_TIMEOUT = 150.0
"""A worker that has not applied every record by then is reported with the rate it reached."""
INGEST_COUNTERS = ("kagent_source_records_total", "kagent_derived_events_total")
POLLS = "kagent_end_offset_polls_total"
LOOKED_AT = ("kagent_evaluations_total", "kagent_evaluations_skipped_total")
"""The counters this benchmark reads (above), each by ``/metrics?name[]=``: a whole scrape at 100,000
group-partitions costs the worker seconds of CPU (the lag exporter's every series), and polling it every
0.1 s stalled the worker's event loop for seconds at a time, its end-offset polls with it."""
MEMORY_SETTINGS = {"end_offset_interval": "5", "evaluate_interval": "5", "one_record_batches": "false"}
"""The default intervals, stated so the output says them, and the producer's batching of a real cluster.
(Before changelog writes were batched, a worker with these fell behind for good at 100,000
group-partitions; the benchmark had to use 60 s.)"""
LATENCY_SETTINGS = {"evaluate_interval": "1", "end_offset_interval": "1", "hold_evaluations": "3"}
LATENCY_TOPIC, LATENCY_PARTITIONS, LATENCY_RECORDS = "bench-latency-orders", 8, 1_000
# Lag per partition before and after the decisive commit (members own partitions 2m and 2m + 1).
LATENCY_LAG_BEFORE = {0: 400, 2: 300, 4: 300, 6: 300}  # member lag 400/300/300/300: skew 1.23, total 1,300
LATENCY_DECISIVE = (1, 600)  # partition 1 to lag 600: member lag 1000/300/300/300, skew 2.11


# --- records ------------------------------------------------------------------------------------


def topic_of(data: DataSet, group: int) -> str:
    return f"bench-topic-{group % data.topics:02d}"


def group_name(group: int) -> str:
    return f"bench-app-{group:05d}"


def range_members(
    group: str, topic: str, partitions: int, members: int, generation: int
) -> dict[str, list[TopicPartition]]:
    """Range assignment of ``partitions`` over ``members`` members named for ``generation``."""
    per, extra = divmod(partitions, members)
    result, start = {}, 0
    for m in range(members):
        count = per + (1 if m < extra else 0)
        result[f"{group}-consumer-{m}-g{generation}"] = [TopicPartition(topic, p) for p in range(start, start + count)]
        start += count
    return result


def coordinator_records(data: DataSet) -> tuple[list[OffsetCommit | GroupMetadata], int]:
    """The records of the whole data set, in order, and how many are group metadata.

    Each group's metadata, then round by round every group's commits on all its
    partitions, every ``rebalance_every``-th group rebalancing before each later round.
    """
    records: list[OffsetCommit | GroupMetadata] = []
    metadata = 0
    names = [group_name(g) for g in range(data.groups)]
    for g, name in enumerate(names):
        records.append(
            group_metadata(name, 1, range_members(name, topic_of(data, g), data.partitions, data.members, 1))
        )
        metadata += 1
    for r in range(data.commit_rounds):
        for g, name in enumerate(names):
            topic = topic_of(data, g)
            if r and g % data.rebalance_every == 0:
                records.append(
                    group_metadata(name, r + 1, range_members(name, topic, data.partitions, data.members, r + 1))
                )
                metadata += 1
            records += [
                offset_commit(name, topic, p, min(r + 1, data.records_per_partition)) for p in range(data.partitions)
            ]
    return records, metadata


def describe(data: DataSet, records: int, metadata: int) -> str:
    return (
        f"{data.groups:,} groups x {data.partitions} partitions = {data.group_partitions:,} group-partitions "
        f"on {data.topics} topics; {records:,} records: {records - metadata:,} offset commits (value v3), "
        f"{metadata:,} group metadata (value v3, {data.members} members)"
    )


async def prepare(broker: EmbeddedBroker, data: DataSet) -> tuple[int, int]:
    """Topics, a few records per partition, and the data set on ``__consumer_offsets``: (records, metadata)."""
    topics = {topic_of(data, t): data.partitions for t in range(data.topics)}
    await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, **topics})
    for topic, count in topics.items():
        await produce(broker.bootstrap_servers, topic, {p: data.records_per_partition for p in range(count)})
    records, metadata = coordinator_records(data)
    await publish(broker.bootstrap_servers, records, by_group=True, batched=True)  # nothing reads its ListOffsets
    return len(records), metadata


@dataclass(frozen=True)
class Ingest:
    records: int
    applied: int
    seconds: float
    rate: float
    """Derived events applied per second, first record read to last applied (or to the time limit)."""

    @property
    def finished(self) -> bool:
        return self.applied >= self.records


async def ingest(worker: Worker, expected: int, timeout: float = INGEST_TIMEOUT) -> Ingest:
    """Poll the worker's counters every 0.1 s until it has read a record, then until it has applied
    ``expected`` derived events or ``timeout`` s have passed since that first record."""
    read = applied = 0.0

    async def sample() -> bool:
        """Take the counters (read, applied); true once the worker has read a record."""
        nonlocal read, applied
        worker.check_alive()
        samples = await asyncio.to_thread(worker.metrics, *INGEST_COUNTERS)
        if samples is None:
            return False
        read, applied = (metric_total(samples, name) for name in INGEST_COUNTERS)
        return read > 0

    await wait_until_async(sample, timeout, f"worker {worker.app_id} to read a record", detail=worker.log_tail)
    first, first_applied = time.perf_counter(), applied  # the first poll that saw one

    async def all_applied() -> bool:
        await sample()
        return applied >= expected

    with contextlib.suppress(WaitTimedOut):  # reported with the rate it reached
        await wait_until_async(all_applied, timeout, f"worker {worker.app_id} to apply {expected:,} events")
    seconds = time.perf_counter() - first
    return Ingest(expected, int(applied), seconds, (applied - first_applied) / seconds)


# --- the parts -------------------------------------------------------------------------------


def mb(kb: int) -> float:
    return kb / 1024


async def idle_baseline(workdir: Path) -> dict[str, int]:
    with EmbeddedBroker(log_dir=workdir) as broker, running_workers(broker.bootstrap_servers, workdir) as start:
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS})
        worker = start("bench-idle")
        await asyncio.to_thread(worker.wait_serving, 60)
        await asyncio.sleep(5)  # a measurement window, not a synchronisation: the RSS after 5 s idle
        worker.check_alive()
        rss = memory_kb(worker.pid)
        worker.stop()
        return rss


async def memory(workdir: Path, data: DataSet, idle: dict[str, int]) -> bool:
    with EmbeddedBroker(log_dir=workdir) as broker, running_workers(broker.bootstrap_servers, workdir) as start:
        n, metadata = await prepare(broker, data)
        print(f"data set: {describe(data, n, metadata)}")
        worker = start("bench-memory", **MEMORY_SETTINGS)
        run = await ingest(worker, n, timeout=INGEST_TIMEOUT)
        # Once /metrics shows a poll that began after the last record was applied, and storage
        # has taken it, every group-partition has its partition-lag entry.
        polls = metric_total(worker.metrics(POLLS) or {}, POLLS)

        async def polled_again() -> dict[str, float] | None:
            worker.check_alive()
            samples = await asyncio.to_thread(worker.metrics, POLLS)
            return samples if samples and metric_total(samples, POLLS) > polls else None

        samples = await wait_until_async(
            polled_again,
            float(MEMORY_SETTINGS["end_offset_interval"]) * 2,
            "an end-offset poll after the last record",
            interval=0.2,
            detail=worker.log_tail,
        )
        if samples.get('kagent_end_offset_polls_total{outcome="error"}', 0) > 0:
            raise RuntimeError(f"an end-offset poll failed\n{worker.log_tail()}")
        await asyncio.sleep(2)  # a measurement window, not a synchronisation: the poll's changelog writes under way
        rss = memory_kb(worker.pid)
        worker.stop()
    if run.finished:
        print(f"applied in {run.seconds:.1f} s ({run.rate:,.0f} records/s), then one full end-offset poll")
    else:
        print(f"NOT all applied: {run.applied:,} of {n:,} in {run.seconds:.0f} s; RSS taken after the next poll anyway")
    print(f"{'worker':<44}{'RSS MB':>9}{'peak MB':>9}")
    print(f"{'idle (baseline)':<44}{mb(idle['VmRSS']):>9.0f}{mb(idle['VmHWM']):>9.0f}")
    label = f"{data.group_partitions:,} group-partitions"
    print(f"{label:<44}{mb(rss['VmRSS']):>9.0f}{mb(rss['VmHWM']):>9.0f}")
    ok = mb(rss["VmRSS"]) <= MEMORY_TARGET_MB and run.finished
    verdict = "met" if ok else "MISSED" if run.finished else "NOT MEASURED (data set not applied)"
    print(f"target RSS <= {MEMORY_TARGET_MB} MB: {verdict} ({mb(rss['VmRSS']):.0f} MB)")
    return ok


async def latency(workdir: Path, sizes: Sizes) -> bool:
    settings = LATENCY_SETTINGS
    hold, interval = int(settings["hold_evaluations"]), float(settings["evaluate_interval"])
    bound = hold * interval + 1
    groups = [f"bench-skew-{i:02d}" for i in range(sizes.latency_repeats)]
    with EmbeddedBroker(log_dir=workdir) as broker, running_workers(broker.bootstrap_servers, workdir) as start:
        bootstrap = broker.bootstrap_servers
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, LATENCY_TOPIC: LATENCY_PARTITIONS})
        await produce(bootstrap, LATENCY_TOPIC, {p: LATENCY_RECORDS for p in range(LATENCY_PARTITIONS)})
        setup: list[OffsetCommit | GroupMetadata] = []
        for group in groups:
            members = {
                f"{group}-consumer-{m}": [
                    TopicPartition(LATENCY_TOPIC, 2 * m),
                    TopicPartition(LATENCY_TOPIC, 2 * m + 1),
                ]
                for m in range(LATENCY_PARTITIONS // 2)
            }
            setup.append(group_metadata(group, 1, members))
            setup += [
                offset_commit(group, LATENCY_TOPIC, p, LATENCY_RECORDS - LATENCY_LAG_BEFORE.get(p, 0))
                for p in range(LATENCY_PARTITIONS)
            ]
        await publish(bootstrap, setup, by_group=True)

        worker = start("bench-latency", **settings)
        recommendations = f"{worker.app_id}-recommendations"
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=50
        )
        await consumer.start()
        changelog = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="latest", fetch_max_wait_ms=50
        )
        await changelog.start()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=ONE_RECORD_BATCH, linger_ms=0)
        await producer.start()
        try:
            # The worker holds every group with its lag, and has evaluated them for a few rounds: quietly.
            expected = {f"{g}-consumer-{m}": LATENCY_LAG_BEFORE.get(2 * m, 0) for g in groups for m in range(4)}

            def lag_set_up(body: dict) -> bool:
                worker.check_alive()
                return {m: v for g in body["groups"].values() for m, v in g["member_lag"].items()} == expected

            await wait_json(worker.url + "api/local/groups", lag_set_up, 90, "every group's lag on the worker")
            evaluated = looked_at(worker.metrics(*LOOKED_AT) or {})

            async def held_long_enough() -> bool:  # each group looked at hold + 1 more times, a recommendation's due
                worker.check_alive()
                samples = await asyncio.to_thread(worker.metrics, *LOOKED_AT) or {}
                return looked_at(samples) >= evaluated + (hold + 1) * len(groups)

            await wait_until_async(
                held_long_enough, 30, f"{hold + 1} evaluation rounds", interval=0.2, detail=worker.log_tail
            )
            await consumer.topics()  # the worker created the topic on start
            own_partitions = range(int(worker.env.get("KAGENT_TOPIC_PARTITIONS", "8")))
            consumer.assign([TopicPartition(recommendations, p) for p in own_partitions])
            changelog.assign([TopicPartition(f"{worker.app_id}-partition-lag-changelog", p) for p in own_partitions])
            await changelog.seek_to_end()
            early = await consumer.getmany(timeout_ms=500)
            if any(early.values()):
                raise RuntimeError("a recommendation came before any group's skew crossed the threshold")

            results = []
            partition, lag_after = LATENCY_DECISIVE
            for group in groups:
                key, value = encode(offset_commit(group, LATENCY_TOPIC, partition, LATENCY_RECORDS - lag_after))
                sent = time.time()
                await (await producer.send(OFFSETS_TOPIC, value, key=key, partition=offsets_partition_for(group)))

                async def recommended(group: str = group) -> tuple[float, float, dict] | None:
                    """(arrival, time on the topic, body) of the recommendation for ``group``, once it came."""
                    worker.check_alive()
                    batches = await consumer.getmany(timeout_ms=200)
                    arrived = time.time()
                    for messages in batches.values():
                        for message in messages:
                            body = json.loads(message.value)
                            if body["group"] != group:
                                raise RuntimeError(f"unexpected recommendation for {body['group']}")
                            return arrived, message.timestamp / 1000, body
                    return None

                arrived, produced, body = await wait_until_async(
                    recommended, 60, f"the recommendation for {group}", interval=0, detail=worker.log_tail
                )
                in_table = await lag_written(changelog, group, partition, LATENCY_RECORDS - lag_after)
                results.append(arrived - sent)
                print(
                    f"  {group}: {arrived - sent:.2f} s to the subscriber; "
                    f"lag entry written at +{in_table - sent:.2f} s, "
                    f"recommendation evaluated at +{body['time'] - sent:.2f} s, "
                    f"on the topic at +{produced - sent:.2f} s; "
                    f"skew {body['skew_before']:.2f} -> {body['skew_after']:.2f}, "
                    f"held {body['trigger']['evaluations_held']}"
                )
            worker.stop()
        finally:
            await producer.stop()
            await changelog.stop()
            await consumer.stop()
    median = statistics.median(results)
    ok = median <= bound and max(results) <= bound
    print(
        f"detection latency: median {median:.2f} s, max {max(results):.2f} s over {len(results)} groups; "
        f"target <= {hold} x {interval:g} s + 1 s = {bound:g} s: {'met' if ok else 'MISSED'}"
    )
    return ok


def looked_at(samples: dict[str, float]) -> float:
    """Groups the worker's evaluation rounds looked at so far: evaluated, or skipped as quiet with nothing
    they read changed (a quiet group is evaluated in full only now and then)."""
    return sum(metric_total(samples, name) for name in LOOKED_AT)


async def lag_written(changelog: AIOKafkaConsumer, group: str, partition: int, committed: int) -> float:
    """Timestamp (s) of the first partition-lag changelog record of ``group`` on ``partition`` with ``committed``."""

    async def written() -> float | None:
        for messages in (await changelog.getmany(timeout_ms=200)).values():
            for message in messages:
                key = json.loads(message.key)
                key = json.loads(key) if isinstance(key, str) else key
                if key[0] == group and key[2] == partition and json.loads(message.value)["committed"] == committed:
                    return message.timestamp / 1000
        return None

    return await wait_until_async(written, 10, f"the lag entry of {group} on partition {partition}", interval=0)


async def main(sizes: Sizes) -> int:
    print(
        f"kagent worker on the embedded broker (Tansu), {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs"
    )
    met = True
    with tempfile.TemporaryDirectory(prefix="kagent-bench-") as tmp:
        workdir = Path(tmp)
        try:
            idle = await idle_baseline(workdir)
            settings = ", ".join(f"KAGENT_{k.upper()}={v}" for k, v in MEMORY_SETTINGS.items())
            print(f"\n== memory (one worker, {settings}) ==")
            met &= await memory(workdir, sizes.memory, idle)
            variables = ", ".join(f"KAGENT_{k.upper()}={v}" for k, v in LATENCY_SETTINGS.items())
            print(f"\n== detection latency ({variables}) ==")
            met &= await latency(workdir, sizes)
        except BaseException:
            for log in sorted(workdir.glob("*.log")):
                print(f"--- {log.name} (tail) ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
            raise
    return 0 if met else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run (not the figures of record)")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(QUICK if args.quick else FULL)))
