"""What a Prometheus scrape costs a worker holding a large cluster, and whether it keeps up while scraped.

    python benchmarks/bench_scrape.py [--groups N] [--pool full|half] [--seed N] [--live-rounds N]
                                      [--scrape-interval S] [--prometheus-partitions N]
                                      [--workers N] [--catch-up S] [--profile FILE] [--profile-live FILE]

The default is the issue's mix: ``bench_ingest.py``'s 5,000 groups of 1-20
members on its 24 topics (552 partitions), about 198,000 group-partitions,
one commit on each. ``--groups 50000 --pool half`` is ``bench_hold.py``'s
cluster: about 1,000,000 group-partitions. Each topic partition holds 150
records, the last in a batch of its own (Tansu answers ListOffsets with the
last batch's base offset + 1, and the lag figures need the true end). Every
commit of the mix is below 120; then half the groups (by their name's hash)
commit the end of each of their partitions: those have no lag, the others
have lag and a time lag that every poll changes.

One worker as it ships (evaluation every 5 s), but for end offsets polled
every 15 s, Prometheus' usual scrape interval. Once it has applied the mix
and polled, it waits for the worker's evaluations to settle (after a
backlog every group comes due at once, more than once while the backlog
lasts; settled: every group evaluated, and more due times skipped than
groups evaluated over 5 s; 10 minutes at most), then prints the worker's
idle CPU from each end-offset poll to the next, over one refresh period of
the partition-lag table (12 polls, 3 minutes: every group's entries are
rewritten whole once in it), and in each the evaluator's CPU
(``kagent_evaluation_cpu_seconds``), the evaluations it ran and the due
times it skipped; then the median and the largest of them.
The figures printed for each scrape are: the CPU the worker counts for it
(``kagent_scrape_cpu_seconds``, the event loop thread's own stretches
rendering and writing the body) per sample, and the whole
process's CPU above its idle rate beside it; the body's size; how long it
took; the longest the scrape held the event loop at once
(``kagent_scrape_longest_hold_seconds``, the garbage collector's pauses in
it left out, and beside it how often and how long the collector held the
worker meanwhile); and the longest a ``/healthz``
request, sent every 5 ms meanwhile, waited (any stage's stall shows there;
printed idle beside it). The scrapes:

- **the first after the worker started**: every group's layout (its labels,
  each partition's owner) is made, once; printed on its own;
- **after every group committed a new position** (every group's figures
  changed since the last scrape): each group-partition commits one record
  further, the worker applies the round, and Prometheus' scrape comes;
  three times, the median printed;
- **after a poll, nothing committed**: the groups with lag are rendered
  again (their time lag grew), the others' kept text is joined;
- **the same again at once**;
- **the floor**: the same body cut into a piece per group and family and
  joined again with ``bytes.join``, in this process, per sample; and
  **prometheus_client** writing the same samples from its own families
  (``generate_latest``), the part of the old per-scrape cost that was
  formatting;
- **the worker's memory**: its RSS before any full scrape and after them, and
  the difference per group-partition: what it keeps between scrapes (the text
  of the groups without lag, every group's labels);
- **live, scraped by a real Prometheus**: ``--live-rounds`` commit rounds by
  every group, each member committing all its partitions every 5 s (the Java
  consumer's auto-commit pace, as ``bench_ingest.py``'s live line), with a
  real Prometheus scraping ``/metrics`` every 15 s (``--scrape-interval``;
  its timeout as long; above
  ``--prometheus-partitions`` group-partitions it drops the per-partition
  series at ingest, which it cannot hold in this machine's memory, but still
  fetches and parses every sample): the most
  records behind, how soon after the last one every record was applied, the
  longest ``/healthz`` wait, each scrape's duration and whether it
  succeeded (Prometheus' ``up`` and ``scrape_duration_seconds``), whether
  any of the worker's consumer sessions expired (its log), and how many
  evaluations each worker did meanwhile, with the smallest share of its loop
  a long round took (``kagent_evaluation_loop_share``: a fifth while its
  ingest was behind); and the cores each process on the machine used while
  the commits were published, then until every record was applied (the
  workers, the broker, Prometheus, and this process, which publishes and
  probes): on a cluster, the broker and the producers have machines of
  their own. A scrape that held a worker's loop over 20 ms logged how much of
  it ran on a core (the rest the thread waited for one); those lines are
  printed.

``--profile FILE`` writes py-spy's raw stacks of the worker during its first scrape to ``FILE``, and
during the scrapes after every group committed to ``FILE.changed-1`` to ``-3`` (one worker only; its
evaluations run meanwhile, so read the stacks under the scrape's view). ``--profile-live FILE`` writes
the first worker's stacks from the live part's first commit until every record is applied (figures
disturbed by the sampling, not of record).

``--workers 2 --groups 10000 --catch-up 10`` is the issue's live run at
10,000 groups (about 396,000 group-partitions, 78,000 commits/s): two
workers of one app id share the groups, and only the live part runs, with
Prometheus scraping each worker and the counters added up over both.

Targets (issue #36), printed with PASS or FAIL: at most 1 µs of worker CPU
per sample for a scrape with every group changed; no scrape holding the event loop
more than 20 ms at once; every scrape of the live part successful, no
session expired, and every live record applied within ``--catch-up`` s
(default ``CATCH_UP``) of the last (a worker that does not keep up is left behind: how many records it
still had to apply is printed). The exit code is 0 only if all pass.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import platform
import re
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_hold import FIRST_OFFSETS, POOL, STEPS, TOPIC_RECORDS, rss_kb
from bench_ingest import COMMIT_INTERVAL, LIVE_SAMPLE, TOPIC_PARTITIONS, build_mix, produce_topic_records, publish_paced
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from kagent.core.consumer_offsets import OffsetCommit
from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.simulator import coordinator_records
from kagent.worker.lag_figures import REFRESH_AFTER_POLLS
from tests.support.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, offset_commit, publish
from tests.support.monitoring import Prometheus
from tests.support.processes import cpu_seconds, machine_cpu, profiled
from tests.support.waiting import WaitTimedOut, wait_until
from tests.support.worker import (
    GC_FAMILIES,
    Worker,
    collector_line,
    metric_total,
    pauses_by_generation,
    running_workers,
)

TARGET_CPU_US = 1.0
TARGET_STALL = 0.020
SCRAPE_INTERVAL = 15.0
"""Seconds between end-offset polls: Prometheus' usual scrape interval."""
HEALTH_EVERY = 0.005
CATCH_UP = 300.0
"""Seconds after the last live record was acknowledged by which the worker must have applied every one."""
SCRAPES = 3
"""Scrapes after every group committed a new position; the median's figures are printed."""
CAUGHT_UP = 0.5
"""The share of groups committed to the end of their partitions: no lag."""
SETTLE_STEP = 5.0
"""Seconds over which the worker's evaluations are counted while they settle after the backlog."""
SETTLE_WITHIN = 600.0
"""Seconds after the polls the evaluations may take to settle before the idle CPU is measured anyway."""
SETTINGS = {"end_offset_interval": str(SCRAPE_INTERVAL), "one_record_batches": "false"}
COUNTERS = ("kagent_derived_events_total", "kagent_stage_backlog_records", "kagent_end_offset_polls_total")
EVALUATION_COUNTERS = (
    "kagent_evaluations_total",
    "kagent_evaluations_skipped_total",
    "kagent_evaluation_cpu_seconds_total",
)
"""The worker's evaluations, due times skipped and the evaluator's CPU seconds so far (:func:`counters`)."""
SCRAPE_COUNTERS = ("kagent_scrape_cpu_seconds_total", "kagent_scrape_longest_hold_seconds")
SESSION_LOST = re.compile(r"Heartbeat failed|heartbeat session expired|UnknownMemberId|rebalance failed", re.I)


class Scrape(NamedTuple):
    body: bytes | None
    """The body, when it was asked to be kept."""
    size: int
    samples: int
    seconds: float
    cpu: float
    """The CPU the worker counts for the scrape (its own stretches on the event loop)."""
    process_cpu: float
    """The worker process's CPU during the scrape, less its idle rate over as long."""
    longest_hold: float
    """The longest the scrape held the event loop at once, as the worker counts it (the collector's pauses
    left out)."""
    collector: str
    """The garbage collector's pauses in the worker during the scrape (:func:`collector_line`)."""
    longest_wait: float
    """The longest ``/healthz`` wait during the scrape."""


class HealthProbe:
    """``/healthz`` every :data:`HEALTH_EVERY` s in a thread; the longest wait since :meth:`reset`."""

    def __init__(self, worker: Worker) -> None:
        self._url = worker.url + "healthz"
        self._stop = threading.Event()
        self.longest = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> float:
        longest, self.longest = self.longest, 0.0
        return longest

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            with urllib.request.urlopen(self._url, timeout=60) as answer:
                answer.read()
            self.longest = max(self.longest, time.perf_counter() - started)
            time.sleep(HEALTH_EVERY)


def counters(worker: Worker, names: tuple[str, ...] = COUNTERS) -> dict[str, float]:
    """The worker's figures of ``names``, each summed over its series; raises if ``/metrics`` does not answer."""
    samples = worker.metrics(*names, timeout=60)
    if samples is None:
        raise RuntimeError("the worker's /metrics did not answer")
    return {name: metric_total(samples, name) for name in names}


def total(workers: list[Worker]) -> dict[str, float]:
    """:func:`counters` of every worker, added up."""
    each = [counters(one) for one in workers]
    return {name: sum(one[name] for one in each) for name in COUNTERS}


class Settled(NamedTuple):
    seconds: float
    """How long after the polls the worker's evaluations settled."""
    settled: bool
    """Whether they did within :data:`SETTLE_WITHIN` s."""


def settled_evaluations(worker: Worker) -> Settled:
    """Wait until the worker's evaluations have settled after the backlog: every group it holds has been
    evaluated, and over :data:`SETTLE_STEP` s it skipped more due times than it evaluated groups (the
    notices and first sightings of the backlog make every group due at once, more than once while the
    backlog lasts, and the worker is not idle until they are done); :data:`SETTLE_WITHIN` s at most. The
    worker counts a round's skipped due times as the round ends, so a round that ends in one step can read
    as settled early: the idle windows after it show whether it was."""
    started = time.perf_counter()
    groups = counters(worker, ("kagent_groups",))["kagent_groups"]
    now = counters(worker, EVALUATION_COUNTERS)
    while time.perf_counter() - started < SETTLE_WITHIN:
        time.sleep(SETTLE_STEP)
        was, now = now, counters(worker, EVALUATION_COUNTERS)
        evaluated, skipped = (now[name] - was[name] for name in EVALUATION_COUNTERS[:2])
        if now[EVALUATION_COUNTERS[0]] >= groups and skipped > evaluated:
            return Settled(time.perf_counter() - started, True)
    return Settled(time.perf_counter() - started, False)


class PollWindow(NamedTuple):
    """The idle worker from one end-offset poll to the next (evaluations and polls go on)."""

    seconds: float
    cores: float
    """The worker process's CPU per second."""
    evaluator_cores: float
    """The evaluator's (``kagent_evaluation_cpu_seconds``) per second."""
    evaluated: float
    skipped: float
    longest_wait: float
    """The longest ``/healthz`` wait."""


def polled(worker: Worker, after: float) -> float:
    """Wait for the worker's end-offset polls to count more than ``after``; how many they count then."""

    def more() -> float | None:
        count = counters(worker)["kagent_end_offset_polls_total"]
        return count if count > after else None

    return wait_until(more, 3 * SCRAPE_INTERVAL, "an end-offset poll", interval=0.1)


def spread(what: str, cores: list[float]) -> float:
    """Print the median and the largest of the ``cores`` of ``what`` over the poll windows; the median."""
    ordered = sorted(cores)
    median, largest = ordered[len(ordered) // 2], ordered[-1]
    ratio = f"{largest / median:.1f} x the median" if median > 0 else "the median 0"
    print(f"  {what}: {median:.2f} cores in the median window, {largest:.2f} in the largest ({ratio})", flush=True)
    return median


def poll_windows(worker: Worker, probe: HealthProbe, count: int) -> list[PollWindow]:
    """The idle worker over ``count`` windows, each from one end-offset poll to the next, one after the
    other."""
    polls = polled(worker, counters(worker)["kagent_end_offset_polls_total"])
    cpu, started, evaluations = cpu_seconds(worker.pid), time.perf_counter(), counters(worker, EVALUATION_COUNTERS)
    probe.reset()
    windows = []
    for _ in range(count):
        polls = polled(worker, polls)
        now_cpu, now, now_evaluations = (
            cpu_seconds(worker.pid),
            time.perf_counter(),
            counters(worker, EVALUATION_COUNTERS),
        )
        evaluated, skipped, evaluator_cpu = (now_evaluations[name] - evaluations[name] for name in EVALUATION_COUNTERS)
        seconds = now - started
        windows.append(
            PollWindow(seconds, (now_cpu - cpu) / seconds, evaluator_cpu / seconds, evaluated, skipped, probe.reset())
        )
        cpu, started, evaluations = now_cpu, now, now_evaluations
    return windows


def scrape_counters(worker: Worker) -> dict[str, float]:
    """The worker's scrape counters, and the collector's pauses by generation (:func:`pauses_by_generation`)."""
    samples = worker.metrics(*SCRAPE_COUNTERS, *GC_FAMILIES, timeout=60) or {}
    return {name: metric_total(samples, name) for name in SCRAPE_COUNTERS} | pauses_by_generation(samples)


def scrape(worker: Worker, probe: HealthProbe, idle: float, keep: bool = False) -> Scrape:
    """One scrape of everything; its body kept only with ``keep`` (at a million group-partitions a body is
    nearly 1 GB)."""
    counted = scrape_counters(worker)
    probe.reset()
    before, started = cpu_seconds(worker.pid), time.perf_counter()
    size = samples = 0
    kept: list[bytes] = []
    with urllib.request.urlopen(worker.url + "metrics", timeout=600) as answer:
        rest = b""
        while block := answer.read(1 << 20):
            size += len(block)
            if keep:
                kept.append(block)
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            samples += sum(1 for line in lines if line and not line.startswith(b"#"))
    seconds = time.perf_counter() - started
    process = cpu_seconds(worker.pid) - before - idle * seconds
    longest_wait = probe.reset()
    after = scrape_counters(worker)
    own = after["kagent_scrape_cpu_seconds_total"] - counted["kagent_scrape_cpu_seconds_total"]
    return Scrape(
        b"".join(kept) if keep else None,
        size,
        samples,
        seconds,
        own,
        max(0.0, process),
        after["kagent_scrape_longest_hold_seconds"],
        collector_line(counted, after),
        longest_wait,
    )


def join_floor(body: bytes, pieces: int, repeats: int = 5) -> float:
    """CPU seconds (this thread's, as the worker's figure is) ``bytes.join`` takes to join ``body`` cut into
    ``pieces`` pieces (the fastest of ``repeats``)."""
    size = max(1, len(body) // pieces)
    cut = [body[start : start + size] for start in range(0, len(body), size)]
    best = float("inf")
    for _ in range(repeats):
        started = time.thread_time()
        b"".join(cut)
        best = min(best, time.thread_time() - started)
    return best


PARSED = 64 << 20
"""Bytes of a body parsed for prometheus_client's figure: its parser holds several times as much in objects."""


def prometheus_client_seconds(body: bytes) -> tuple[float, int]:
    """CPU seconds (this thread's) ``prometheus_client`` takes to write the samples of ``body``'s first
    :data:`PARSED` bytes (to a line's end) from its own families, and how many samples they are."""
    head = body[: body.rfind(b"\n", 0, PARSED) + 1] if len(body) > PARSED else body
    families = list(text_string_to_metric_families(head.decode()))

    class Parsed(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return iter(families)

    registry = CollectorRegistry()
    registry.register(Parsed())
    started = time.thread_time()
    generate_latest(registry)
    return time.thread_time() - started, sum(len(family.samples) for family in families)


def catch_up(records: list[object], share: float) -> dict[tuple[str, str, int], int]:
    """Append to ``records`` a commit at the log end of each partition of ``share`` of the groups (by their
    name's hash): they have no lag. Every group-partition's position then."""
    positions: dict[tuple[str, str, int], int] = {}
    for record in records:
        if isinstance(record, OffsetCommit):
            positions[(record.group, record.topic, record.partition)] = record.offset
    for group, topic, partition in list(positions):
        if zlib.crc32(group.encode()) % 1000 < share * 1000:
            records.append(offset_commit(group, topic, partition, TOPIC_RECORDS))
            positions[(group, topic, partition)] = TOPIC_RECORDS
    return positions


def moves(positions: dict[tuple[str, str, int], int], step: int) -> list[OffsetCommit]:
    """A commit ``step`` records past its position on every group-partition (past the log end: no lag)."""
    return [
        offset_commit(group, topic, partition, offset + step) for (group, topic, partition), offset in positions.items()
    ]


class CpuReading(NamedTuple):
    """The CPU seconds each process named has used so far, the machine's busy CPU seconds, and when."""

    processes: dict[str, float]
    machine: float
    at: float


def cpu_reading(pids: dict[str, int | None]) -> CpuReading:
    """:class:`CpuReading` of the processes ``pids`` names (a pid of None counts nothing)."""
    return CpuReading(
        {name: cpu_seconds(pid) if pid is not None else 0.0 for name, pid in pids.items()},
        machine_cpu()[0],
        time.perf_counter(),
    )


def cpu_line(before: CpuReading, after: CpuReading) -> str:
    """The cores each process used between two readings, and the machine's in all."""
    wall = after.at - before.at
    used = ", ".join(f"{name} {(after.processes[name] - spent) / wall:.2f}" for name, spent in before.processes.items())
    return f"{used}; the machine {(after.machine - before.machine) / wall:.2f} of {os.cpu_count()} ({wall:.1f} s)"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


PER_PARTITION = "kafka_consumergroup_group_(offset|lag|lag_seconds)"
"""The families with a series per group-partition (what a Prometheus holding millions of series spends its
memory on: about 5 KB a series, 17 GB at a million group-partitions)."""


async def main(
    groups: int,
    pool: tuple[int, ...],
    seed: int,
    live_rounds: int,
    keep_partitions: int,
    every: float,
    worker_count: int = 1,
    within: float = CATCH_UP,
    profile: Path | None = None,
    profile_live: Path | None = None,
) -> int:
    print(
        f"a worker's /metrics on the embedded broker (Tansu), {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs"
    )
    mix = build_mix(
        groups, 0, seed, pool=pool, first_offsets=FIRST_OFFSETS, steps=STEPS, rounds=1, live_rounds=live_rounds
    )
    positions = catch_up(mix.records, CAUGHT_UP)
    records = len(mix.records)
    lagging = sum(offset < TOPIC_RECORDS for offset in positions.values()) / len(positions)
    live = [coordinator_records.offsets_topic_message(r, OFFSETS_TOPIC_PARTITIONS) for r in mix.live]
    print(
        f"mix (seed {seed}): {groups:,} groups, {mix.group_partitions:,} group-partitions on {len(pool)} topics of "
        f"{sum(pool)} partitions, {records:,} records, then {len(live):,} live"
    )
    checks: list[tuple[str, bool, str]] = []
    with tempfile.TemporaryDirectory(prefix="kagent-bench-scrape-") as tmp, EmbeddedBroker(log_dir=Path(tmp)) as broker:
        workdir = Path(tmp)
        topics = {f"orders-{t:02d}": count for t, count in enumerate(pool)}
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, **topics})
        await produce_topic_records(broker.bootstrap_servers, topics, TOPIC_RECORDS)
        print(f"{TOPIC_RECORDS} records in each topic partition")
        with contextlib.ExitStack() as stack:
            workers: list[Worker] = []
            for index in range(worker_count):  # one app id: the groups shared out by their partitions
                (workdir / f"worker-{index}").mkdir()
                start = stack.enter_context(running_workers(broker.bootstrap_servers, workdir / f"worker-{index}"))
                workers.append(start("bench-scrape", **SETTINGS))
            for worker in workers:
                worker.wait_ready(120)
            worker = workers[0]
            await publish(broker.bootstrap_servers, mix.records, by_group=True, batched=True)
            del mix.records[:]
            wait_until(
                lambda: (
                    any(one.check_alive() for one in workers)
                    or (
                        total(workers)["kagent_derived_events_total"] >= records
                        and all(counters(one)["kagent_stage_backlog_records"] == 0 for one in workers)
                    )
                ),
                3600,
                f"all {records:,} records applied",
                interval=2.0,
            )
            polls = [counters(one)["kagent_end_offset_polls_total"] for one in workers]
            wait_until(
                lambda: all(
                    counters(one)["kagent_end_offset_polls_total"] >= before + 2
                    for one, before in zip(workers, polls, strict=True)
                ),
                4 * SCRAPE_INTERVAL,
                "two polls after the records were applied",
                interval=0.5,
            )
            if len(workers) > 1:
                print(f"{len(workers)} workers of one app id share the groups; one scrape's own figures: --workers 1")

            if len(workers) == 1:  # one worker's scrapes, measured alone
                unscraped_kb = rss_kb(worker)
                settled = settled_evaluations(worker)
                print(
                    f"the worker's evaluations settled (more due times skipped than groups evaluated over "
                    f"{SETTLE_STEP:g} s) {settled.seconds:.0f} s after the polls"
                    if settled.settled
                    else f"the worker's evaluations had not settled {settled.seconds:.0f} s after the polls",
                    flush=True,
                )
                with HealthProbe(worker) as probe:
                    print(
                        f"worker idle from each end-offset poll to the next, over {REFRESH_AFTER_POLLS} polls (every "
                        "group's lag entries rewritten whole once):",
                        flush=True,
                    )
                    windows = poll_windows(worker, probe, REFRESH_AFTER_POLLS)
                    for each in windows:
                        print(
                            f"  {each.seconds:.1f} s: {each.cores:.2f} cores, the evaluator {each.evaluator_cores:.2f} "
                            f"({each.evaluated:,.0f} evaluations, {each.skipped:,.0f} due times skipped); longest "
                            f"/healthz wait {each.longest_wait * 1000:.1f} ms",
                            flush=True,
                        )
                    idle = spread("the worker", [each.cores for each in windows])  # what scrapes are measured above
                    spread("its evaluator", [each.evaluator_cores for each in windows])
                    spread("the rest of it", [each.cores - each.evaluator_cores for each in windows])
                    with profiled(worker.pid, profile):
                        first = scrape(worker, probe, idle)  # every group's layout made: once after a start
                    print(
                        f"  the first scrape after the worker started (every group's layout made): its CPU "
                        f"{first.cpu:.3f} s, {first.cpu / first.samples * 1e6:.3f} µs a sample, longest hold "
                        f"{first.longest_hold * 1000:.1f} ms",
                        flush=True,
                    )
                    moved = []
                    for step in range(1, SCRAPES + 1):  # every group commits a new position: every group changed
                        applied = counters(worker)["kagent_derived_events_total"]
                        await publish(broker.bootstrap_servers, moves(positions, step), by_group=True, batched=True)
                        wait_until(
                            lambda applied=applied: (
                                counters(worker)["kagent_derived_events_total"]  # type: ignore[misc]
                                >= applied + len(positions)
                            ),
                            600,
                            "a round of commits applied",
                            interval=0.5,
                        )
                        changed = profile.with_name(f"{profile.name}.changed-{step}") if profile else None
                        with profiled(worker.pid, changed):
                            moved.append(scrape(worker, probe, idle, keep=step == SCRAPES))
                        print(
                            f"  a scrape after every group committed a new position: its CPU {moved[-1].cpu:.3f} s, "
                            f"longest hold {moved[-1].longest_hold * 1000:.1f} ms",
                            flush=True,
                        )
                    polls = counters(worker)["kagent_end_offset_polls_total"]
                    wait_until(
                        lambda: counters(worker)["kagent_end_offset_polls_total"] > polls,
                        2 * SCRAPE_INTERVAL,
                        "a poll",
                        interval=0.2,
                    )
                    polled = scrape(worker, probe, idle)
                    polled_again = scrape(worker, probe, idle)
                scraped_kb = rss_kb(worker)
                print(
                    f"worker RSS: {unscraped_kb / 1024:.0f} MB before any full scrape, {scraped_kb / 1024:.0f} MB "
                    f"after them: {(scraped_kb - unscraped_kb) * 1024 / mix.group_partitions:.0f} bytes a "
                    "group-partition kept for scrapes (the text of the groups without lag, every group's labels)"
                )
                changed = sorted(moved, key=lambda one: one.cpu)[len(moved) // 2]._replace(body=None)  # the median
                samples = changed.samples
                per_sample = changed.cpu / samples * 1e6
                for what, one in (
                    (f"after every group committed (every group changed; the median of {SCRAPES})", changed),
                    (
                        f"after a poll (the {lagging:.0%} of group-partitions with lag rendered, the rest joined)",
                        polled,
                    ),
                    ("again at once (the same)", polled_again),
                ):
                    print(
                        f"/metrics {what}: {one.samples:,} samples, {one.size / 1e6:.0f} MB in {one.seconds:.2f} s; "
                        f"its CPU {one.cpu:.3f} s, {one.cpu / one.samples * 1e6:.3f} µs a sample (the process's "
                        f"above idle {one.process_cpu:.2f} s, {one.process_cpu / one.samples * 1e6:.3f} µs); longest "
                        f"hold of the event loop {one.longest_hold * 1000:.1f} ms; the garbage collector meanwhile: "
                        f"{one.collector}; longest /healthz wait {one.longest_wait * 1000:.1f} ms"
                    )
                body = moved[-1].body
                assert body is not None
                for line in [line for line in worker.log().splitlines() if "held the event loop" in line][:10]:
                    print(f"  the worker's log: {line}")
                families = body.count(b"# TYPE ")
                floor = join_floor(body, groups * families) / moved[-1].samples * 1e6
                writer_seconds, written = prometheus_client_seconds(body)
                moved[-1] = moved[-1]._replace(body=None)  # a body of a million group-partitions is nearly 1 GB
                del body
                writer = writer_seconds / written * 1e6
                print(
                    f"floor, bytes.join of a piece per group and family: {floor:.3f} µs a sample "
                    f"({per_sample / floor:.0f}x it)"
                )
                print(
                    f"prometheus_client writing the same samples (its text format alone, {written:,} of them): "
                    f"{writer:.3f} µs a sample "
                    f"({writer / per_sample:.1f}x kagent's whole scrape)"
                )
                checks.append(
                    (
                        f"a scrape with every group changed <= {TARGET_CPU_US:g} µs of CPU a sample",
                        per_sample <= TARGET_CPU_US,
                        f"{per_sample:.3f} µs",
                    )
                )
                stall = max(one.longest_hold for one in (*moved, polled, polled_again))
                checks.append(
                    (
                        f"a scrape holds the event loop <= {TARGET_STALL * 1000:g} ms at once",
                        stall <= TARGET_STALL,
                        f"{stall * 1000:.1f} ms",
                    )
                )

            if live:
                config = Prometheus.make_config(targets=[one.url for one in workers], interval=every)
                config["global"]["scrape_timeout"] = f"{every:g}s"
                if keep_partitions < mix.group_partitions:  # too many series for this machine's Prometheus to hold
                    config["scrape_configs"][0]["metric_relabel_configs"] = [
                        {"source_labels": ["__name__"], "regex": PER_PARTITION, "action": "drop"}
                    ]
                    print(
                        f"Prometheus drops the per-partition series at ingest ({mix.group_partitions:,} "
                        f"group-partitions, over --prometheus-partitions {keep_partitions:,}); it still fetches and "
                        "parses every sample"
                    )
                with Prometheus(config, workdir=workdir / "prometheus") as prom:

                    def scraped_after(moment: float) -> bool:
                        """Whether Prometheus has tried a scrape of every worker (succeeded or not) since ``moment``."""
                        last = prom.query('timestamp(up{job="kagent"})')
                        return len(last) == len(workers) and all(float(one["value"][1]) > moment for one in last)

                    wait_until(lambda: scraped_after(0), 4 * every, "Prometheus' first scrape", detail=prom.log_tail)
                    began = time.time()
                    applied = total(workers)["kagent_derived_events_total"]
                    logs_from = [len(one.log()) for one in workers]
                    rate = mix.group_partitions / COMMIT_INTERVAL
                    sent = [0]
                    behind = 0
                    paused = [one.collector_pauses() for one in workers]
                    pids: dict[str, int | None] = {f"worker {n}": one.pid for n, one in enumerate(workers, 1)}
                    pids.update(broker=broker.pid, Prometheus=prom.process.pid if prom.process else None)
                    pids["this process (publishing, probing)"] = os.getpid()
                    cpu_began = cpu_reading(pids)
                    with HealthProbe(worker) as probe, profiled(workers[0].pid, profile_live):
                        publishing = asyncio.create_task(publish_paced(broker.bootstrap_servers, live, rate, sent))
                        while not publishing.done():
                            await asyncio.wait({publishing}, timeout=LIVE_SAMPLE)
                            done = (await asyncio.to_thread(total, workers))["kagent_derived_events_total"]
                            behind = max(behind, sent[0] - int(done - applied))
                        _, acknowledged = await publishing
                        cpu_published = cpu_reading(pids)
                        try:
                            wait_until(
                                lambda: total(workers)["kagent_derived_events_total"] >= applied + len(live),
                                CATCH_UP,
                                "every live record applied",
                                interval=0.2,
                            )
                        except WaitTimedOut:  # it does not keep up: say how far behind it was left
                            left = applied + len(live) - total(workers)["kagent_derived_events_total"]
                            caught_up = math.inf
                            print(f"live: {left:,.0f} records still not applied {CATCH_UP:g} s after the last")
                        else:
                            caught_up = time.time() - acknowledged
                        cpu_caught_up = cpu_reading(pids)  # the wait's end, caught up or not
                        done_at = time.time()
                        wait_until(lambda: scraped_after(done_at), 4 * every, "a scrape after the traffic")
                        longest = probe.reset()
                    window = f"{int(time.time() - began) + 1}s"
                    ups = prom.query(f"count_over_time(up[{window}])")
                    downs = prom.query(f"count_over_time((up == 0)[{window}:{int(every)}s])")
                    durations = prom.query(f"max_over_time(scrape_duration_seconds[{window}])")
                    holds = prom.query(f"max_over_time(kagent_scrape_longest_hold_seconds[{window}])")
                    hold = max((float(one["value"][1]) for one in holds), default=float("nan"))
                    scrapes = sum(int(float(one["value"][1])) for one in ups)
                    failed = sum(int(float(one["value"][1])) for one in downs)
                    slowest = max((float(one["value"][1]) for one in durations), default=float("nan"))
                    errors = {target.get("lastError") for target in prom.targets()} - {"", None}
                    shares = prom.query(f"min_over_time(kagent_evaluation_loop_share[{window}])")
                    evaluated = prom.query(f"increase(kagent_evaluations_total[{window}])")
                    logged = [one.log()[log_from:] for one, log_from in zip(workers, logs_from, strict=True)]
                    lost = [found for log in logged for found in SESSION_LOST.findall(log)]
                    held = [line for log in logged for line in log.splitlines() if "held the event loop" in line]
                    print(
                        f"live, {len(live):,} commits at {rate:,.0f}/s to {len(workers)} worker(s) with a real "
                        f"Prometheus scraping each every {every:g} s (timeout as long): at most {behind:,} records "
                        "behind, every record applied "
                        f"{caught_up:.1f} s after the last was acknowledged; {scrapes} scrapes, {failed} failed, "
                        f"the slowest {slowest:.2f} s, holding the event loop {hold * 1000:.1f} ms at most; "
                        f"longest /healthz wait {longest * 1000:.0f} ms; "
                        f"{len(lost)} session losses in the workers' logs"
                        + (f"; Prometheus' last scrape error: {', '.join(sorted(errors))}" if errors else "")
                    )
                    print(f"  cores used while the commits were published: {cpu_line(cpu_began, cpu_published)}")
                    catching_up = cpu_line(cpu_published, cpu_caught_up)
                    print(f"  cores used from the last commit to every record applied: {catching_up}")
                    for line in held[:10]:  # a hold over 20 ms says how much of it ran on a core
                        print(f"  a worker's log: {line}")
                    for one, before in zip(workers, paused, strict=True):
                        print(f"  the garbage collector meanwhile: {collector_line(before, one.collector_pauses())}")
                    print(
                        "  evaluations meanwhile, as Prometheus saw them: "
                        + ", ".join(f"{float(one['value'][1]):,.0f}" for one in evaluated)
                        + " (each worker); the smallest share of the loop a long round took: "
                        + ", ".join(f"{float(one['value'][1]):g}" for one in shares)
                    )
                    checks.append(
                        (
                            "every scrape of the live part successful",
                            scrapes > 0 and failed == 0,
                            f"{scrapes - failed} of {scrapes}",
                        )
                    )
                    checks.append(("no consumer session of a worker expired", not lost, f"{len(lost)}"))
                    checks.append(
                        (
                            f"every live record applied within {within:g} s of the last",
                            caught_up <= within,
                            f"{caught_up:.1f} s",
                        )
                    )
            for one in workers:
                whole_run = collector_line({}, one.collector_pauses())
                print(f"the garbage collector over the worker's whole run: {whole_run}")
                one.stop()
    for what, ok, figure in checks:
        print(f"target {what}: {verdict(ok)} ({figure})")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=5_000, help="consumer groups (default 5,000)")
    parser.add_argument(
        "--pool",
        choices=("full", "half"),
        default="full",
        help="the topics: bench_ingest's (full, default) or bench_hold's (half)",
    )
    parser.add_argument("--seed", type=int, default=36, help="the mix's seed (default 36)")
    parser.add_argument("--live-rounds", type=int, default=8, help="live commit rounds (default 8; 0: none)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="workers of one app id (default 1); above 1 only the live part runs, on all of them",
    )
    parser.add_argument(
        "--scrape-interval", type=float, default=15.0, help="Prometheus' scrape interval and timeout, s (default 15)"
    )
    parser.add_argument(
        "--prometheus-partitions",
        type=int,
        default=250_000,
        help="above this many group-partitions, Prometheus drops the per-partition series at ingest (default 250,000)",
    )
    parser.add_argument(
        "--catch-up",
        type=float,
        default=CATCH_UP,
        help=f"the live target: every record applied within this many s of the last (default {CATCH_UP:g})",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy raw stacks of the worker's first scrape to this file, the later ones to FILE.changed-N",
    )
    parser.add_argument(
        "--profile-live",
        type=Path,
        help="py-spy raw stacks of the first worker to this file, from the live part's first commit to its end",
    )
    args = parser.parse_args()
    chosen = TOPIC_PARTITIONS if args.pool == "full" else POOL
    sys.exit(
        asyncio.run(
            main(
                args.groups,
                chosen,
                args.seed,
                args.live_rounds,
                args.prometheus_partitions,
                args.scrape_interval,
                args.workers,
                args.catch_up,
                args.profile,
                args.profile_live,
            )
        )
    )
