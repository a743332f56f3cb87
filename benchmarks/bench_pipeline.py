"""Benchmark of the backtest: Spark on local[2] against the same kernels in one process.

    python benchmarks/bench_pipeline.py [--groups 1000] [--snapshots 50] [--partitions 20] [--scale 1,2,4]

Builds a synthetic history (``groups`` groups x ``snapshots`` snapshots x
about ``partitions`` partitions, Zipf-skewed lags, range-like actual
assignments), backtests the six strategies with Spark (``applyInPandas``
per group, then the per-(group, strategy) aggregation) and with
``backtest_kernel`` over ``pandas.groupby`` in this process, and prints the
wall times and their ratio; then Spark's time at each ``--scale`` multiple
of the groups, to show how it grows.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pandas as pd

from kagent.tools.pipeline.backtest import backtest
from kagent.tools.pipeline.backtest_kernel import SNAPSHOT_COLUMNS, backtest_group
from kagent.tools.pipeline.session import spark_session
from tests.support.backtest_summary import summarise


def history(groups: int, snapshots: int, partitions: int, seed: int = 0) -> pd.DataFrame:
    """Rows of SNAPSHOT_COLUMNS: per group 16-24 partitions of one topic, 3-6 members holding
    contiguous ranges, and lags that follow a per-group Zipf profile drifting between snapshots."""
    rng = np.random.default_rng(seed)
    frames = []
    start = pd.Timestamp("2024-01-01", tz="UTC")
    times = start + pd.to_timedelta(np.arange(snapshots), unit="min")
    for g in range(groups):
        count = int(rng.integers(partitions - 4, partitions + 5))
        members = int(rng.integers(3, 7))
        owner = np.array([f"g{g}-m{m}" for m in range(members)])[np.arange(count) * members // count]
        profile = 1000.0 / (1 + rng.permutation(count)) ** 1.1
        drift = rng.lognormal(0, 0.3, size=(snapshots, count))
        lag = (profile * drift * np.linspace(1, 3, snapshots)[:, None]).astype(np.int64)
        frames.append(
            pd.DataFrame(
                {
                    "group": f"group-{g:05d}",
                    "snapshot": np.repeat(times, count),
                    "topic": f"topic-{g % 50}",
                    "partition": np.tile(np.arange(count), snapshots),
                    "lag": lag.ravel(),
                    "member": np.tile(owner, snapshots),
                }
            )
        )
    return pd.concat(frames, ignore_index=True).astype(SNAPSHOT_COLUMNS)


def single_process(rows: pd.DataFrame, threshold: float) -> float:
    started = time.perf_counter()
    results = pd.concat(backtest_group(group_rows) for _, group_rows in rows.groupby("group", sort=False))
    summarise(results, threshold)
    return time.perf_counter() - started


def on_spark(spark, path: str, output: str, threshold: float) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    backtest(spark.read.parquet(path), output, threshold, worst_groups=3)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--snapshots", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--scale", default="1,2,4", help="multiples of --groups Spark runs to show growth")
    parser.add_argument("--threshold", type=float, default=1.5)
    args = parser.parse_args()

    spark = spark_session(
        "local[2]",
        "kagent-bench-pipeline",
        {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "8"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="kagent-bench-") as work:
        base = history(args.groups, args.snapshots, args.partitions)
        base.to_parquet(f"{work}/x1.parquet")
        print(f"history: {args.groups} groups x {args.snapshots} snapshots, {len(base):,} rows, 6 strategies")
        on_spark(spark, f"{work}/x1.parquet", f"{work}/warm", args.threshold)  # JVM and Python workers warm up
        spark_time = on_spark(spark, f"{work}/x1.parquet", f"{work}/out1", args.threshold)
        local_time = single_process(base, args.threshold)
        print(f"spark local[2]:         {spark_time:8.1f} s")
        print(f"one process (pandas):   {local_time:8.1f} s")
        print(f"spark / one process:    {spark_time / local_time:8.2f}x  (target <= 3x)")
        print("growth on spark local[2]:")
        for factor in (int(f) for f in args.scale.split(",")):
            rows = base if factor == 1 else history(args.groups * factor, args.snapshots, args.partitions, seed=factor)
            rows.to_parquet(f"{work}/x{factor}.parquet")
            seconds = (
                spark_time
                if factor == 1
                else on_spark(spark, f"{work}/x{factor}.parquet", f"{work}/out{factor}", args.threshold)
            )
            print(f"  {len(rows):>12,} rows  {seconds:8.1f} s  {len(rows) / seconds:>10,.0f} rows/s")
    spark.stop()


if __name__ == "__main__":
    main()
