"""Seconds and peak memory of every assignment strategy on large groups.

    python benchmarks/bench_assignors.py

Case (a): 2,100 members x 2,100 partitions, the size at which Kafka's old
sticky assignor took 2.5 minutes (target: 0.1 s or less for every strategy).
Case (b): 1,000,000 partitions (100 topics x 10,000) x 10,000 members
(targets for `lag` and `lag-sticky`: 10 s or less and within 20x of
`sorted()` over the same lag values, printed as the floor). Each case is
measured fresh (nothing owned) and, for the sticky strategies, one
generation later: members own their previous assignment, 5 % of them were
replaced by new members, and every lag changed by up to 20 %.

Lag is lognormal (median about 3,000 records, a long tail) with 10 % idle
partitions at 0. Each measurement runs in a forked child: one timed call,
then one call under `tracemalloc` for the peak of memory allocated during it
(the input, built beforehand, is not counted). A strategy that takes longer
than the time limit is reported as such.
"""

from __future__ import annotations

import gc
import multiprocessing
import random
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection

from aiokafka.structs import TopicPartition

from kagent.core.assignors import STRATEGIES, Assignment, Member, assign

STICKY = ("sticky", "cooperative-sticky", "lag-sticky")
TIME_LIMIT = 60.0


@dataclass(frozen=True)
class Case:
    partitions: dict[str, int]
    members: dict[str, Member]
    lag: dict[TopicPartition, int]


def lags(partitions: Mapping[str, int], rng: random.Random) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, p): 0 if rng.random() < 0.1 else int(rng.lognormvariate(8, 2))
        for topic, count in partitions.items()
        for p in range(count)
    }


def group(topics: int, per_topic: int, members: int, seed: int, mixed: bool = False) -> Case:
    """`members` members on `topics` topics of `per_topic` partitions each; with
    `mixed`, each member subscribes to a random half of the topics."""
    rng = random.Random(seed)
    partitions = {f"topic-{i:03d}": per_topic for i in range(topics)}
    names = list(partitions)
    group_members = {
        f"consumer-{i}-{rng.getrandbits(64):016x}": Member(rng.sample(names, len(names) // 2) if mixed else names)
        for i in range(members)
    }
    return Case(partitions, group_members, lags(partitions, rng))


def rebalanced(case: Case, previous: Assignment, replace: float, lag_change: float, seed: int) -> Case:
    """The group one generation later: members own `previous`, a `replace` share
    of them is replaced by new members, and every lag is scaled by a random
    factor within `1 +- lag_change`."""
    rng = random.Random(seed)
    members = {}
    for i, (member_id, member) in enumerate(case.members.items()):
        if rng.random() < replace:
            members[f"consumer-new-{i}"] = Member(member.topics)
        else:
            members[member_id] = Member(member.topics, owned=previous[member_id], generation=1)
    lag = {tp: int(value * rng.uniform(1 - lag_change, 1 + lag_change)) for tp, value in case.lag.items()}
    return Case(case.partitions, members, lag)


def _measure(run: Callable[[], object], pipe: Connection) -> None:
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    del result
    gc.collect()
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    pipe.send((seconds, peak))


def measure(run: Callable[[], object]) -> tuple[float, float] | None:
    """(seconds, peak MiB) of `run()` in a forked child, or None past the time limit."""
    receive, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_measure, args=(run, send))
    child.start()
    ready = receive.poll(TIME_LIMIT * 4)  # the traced run is slower than the timed one
    if not ready:
        child.kill()
        child.join()
        return None
    seconds, peak = receive.recv()
    child.join()
    return None if seconds > TIME_LIMIT else (seconds, peak / 2**20)


def report(title: str, case: Case, strategies: tuple[str, ...], target: float | None = None) -> dict[str, float]:
    n = sum(case.partitions.values())
    print(f"\n{title}: {len(case.members):,} members x {n:,} partitions ({len(case.partitions)} topics)")
    gc.collect()
    gc.freeze()  # the input is long-lived: keep it out of the children's collections and copy-on-write
    times: dict[str, float] = {}
    for strategy in strategies:

        def run(strategy: str = strategy) -> Assignment:
            return assign(strategy, case.partitions, case.members, case.lag)

        measured = measure(run)
        if measured is None:
            print(f"  {strategy:<20} over {TIME_LIMIT:.0f} s")
            continue
        seconds, mib = measured
        times[strategy] = seconds
        verdict = "" if target is None else ("  ok" if seconds <= target else f"  OVER the {target} s target")
        print(f"  {strategy:<20} {seconds:8.3f} s  {mib:8.1f} MiB peak{verdict}")
    return times


def report_floor(case: Case, times: Mapping[str, float]) -> None:
    values = list(case.lag.values())
    floor = min(seconds for seconds, _ in filter(None, (measure(lambda: sorted(values)) for _ in range(3))))
    print(f"  {'sorted() floor':<20} {floor:8.3f} s  (sorted() over the same {len(values):,} lag values)")
    for strategy in ("lag", "lag-sticky"):
        if strategy in times:
            ratio = times[strategy] / floor
            verdict = "ok" if times[strategy] <= 10 and ratio <= 20 else "OVER a target (10 s, 20x floor)"
            print(f"  {strategy:<20} {ratio:8.1f} x floor  {verdict}")


def main() -> None:
    every = tuple(STRATEGIES)
    small = group(topics=21, per_topic=100, members=2100, seed=1)
    report("(a) fresh", small, every, target=0.1)
    for strategy in STICKY:
        previous = assign(strategy, small.partitions, small.members, small.lag)
        moved = rebalanced(small, previous, replace=0.05, lag_change=0.2, seed=2)
        report(f"(a) {strategy}, 5 % of members replaced, lag changed", moved, (strategy,), target=0.1)
    mixed = group(topics=21, per_topic=100, members=2100, seed=3, mixed=True)
    report("(a) fresh, each member on a random half of the topics", mixed, every, target=0.1)

    large = group(topics=100, per_topic=10_000, members=10_000, seed=4)
    report_floor(large, report("(b) fresh", large, every))
    for strategy in STICKY:
        previous = assign(strategy, large.partitions, large.members, large.lag)
        moved = rebalanced(large, previous, replace=0.05, lag_change=0.2, seed=5)
        del previous
        times = report(f"(b) {strategy}, 5 % of members replaced, lag changed", moved, (strategy,))
        if strategy == "lag-sticky":
            report_floor(moved, times)


if __name__ == "__main__":
    main()
