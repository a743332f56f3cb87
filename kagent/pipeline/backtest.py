"""``backtest``: every strategy replayed on a history of lag snapshots, per group, at fleet scale.

Input: lag snapshots, rows of ``backtest_kernel.SNAPSHOT_COLUMNS``, from
Parquet (:func:`read_snapshots`) or from kagent's changelog topics
(:func:`snapshots_from_changelogs`). The job runs
``backtest_kernel.backtest_group`` once per group (``applyInPandas``: one
Python call per group, not per snapshot), aggregates per (group, strategy)
in Spark, and writes under the output directory:

- ``snapshot_results/``: Parquet, one row per (group, snapshot, strategy),
  ``actual`` included, partitioned by ``strategy``;
- ``strategy_summary/``: Parquet, per (group, strategy): ``snapshots``,
  ``share_above`` (share of snapshots with skew >= threshold),
  ``median_skew``, ``p95_skew`` and ``total_moves``;
- ``report.html``: the plots and tables of ``report``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kagent.pipeline.backtest_kernel import ACTUAL, STRATEGIES, backtest_group
from kagent.pipeline.kafka_source import FORMAT
from kagent.pipeline.report import render_report
from kagent.settings import SkewMetric

__all__ = [
    "RESULT_SCHEMA",
    "BacktestSummary",
    "backtest",
    "read_snapshots",
    "snapshots_from_changelogs",
    "strategy_summary",
]

RESULT_SCHEMA = (
    "group string, snapshot timestamp, strategy string, members int, total_lag bigint, "
    "max_member_lag bigint, skew double, moves int"
)
"""Spark's schema of ``backtest_kernel.RESULT_COLUMNS``."""

_SNAPSHOT_SCHEMA = "group string, snapshot timestamp, topic string, partition int, lag bigint, member string"

_PARTITION_LAG_JSON = "group string, topic string, partition int, offset_lag bigint, polled_at double"
_ASSIGNMENT_JSON = (
    "group string, generation int, members array<struct<member_id: string, "
    "partitions: array<struct<topic: string, partition: int>>>>"
)


@dataclass(frozen=True)
class BacktestSummary:
    """Where a backtest wrote, and its per-(group, strategy) figures."""

    snapshot_results: str
    strategy_summary: str
    report: str
    summary: pd.DataFrame


def read_snapshots(spark: SparkSession, path: str) -> DataFrame:
    """Lag snapshots from Parquet with the columns of ``backtest_kernel.SNAPSHOT_COLUMNS``."""
    return spark.read.schema(_SNAPSHOT_SCHEMA).parquet(path)


def snapshots_from_changelogs(
    spark: SparkSession, bootstrap_servers: str, app_id: str = "kagent", timeout: float = 10.0
) -> DataFrame:
    """Lag snapshots from the worker's changelogs: ``<app id>-partition-lag-changelog`` and
    ``<app id>-assignments-changelog``.

    A snapshot is one end-offset poll (``polled_at``, to the second) of a
    group; each partition's member is its holder in the group's last
    assignment written at or before the poll (by the changelog record's
    timestamp). Tombstones are ignored.
    """

    def changelog(table: str, schema: str) -> DataFrame:
        raw = (
            spark.read.format(FORMAT)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", f"{app_id}-{table}-changelog")
            .option("timeoutMs", str(int(timeout * 1000)))
            .load()
            .where(F.col("value").isNotNull())
        )
        return raw.select(F.from_json(F.col("value").cast("string"), schema).alias("v"), "timestamp").select(
            "v.*", "timestamp"
        )

    lag = changelog("partition-lag", _PARTITION_LAG_JSON).select(
        "group",
        F.date_trunc("second", F.timestamp_seconds("polled_at")).alias("snapshot"),
        "topic",
        "partition",
        F.col("offset_lag").alias("lag"),
    )
    held = (
        changelog("assignments", _ASSIGNMENT_JSON)
        .select("group", F.col("timestamp").alias("assigned_at"), F.explode("members").alias("m"))
        .select("group", "assigned_at", F.col("m.member_id").alias("member"), F.explode("m.partitions").alias("p"))
        .select("group", "assigned_at", "member", "p.topic", "p.partition")
    )
    keys = ["group", "topic", "partition"]
    before = [lag[k] == held[k] for k in keys] + [held["assigned_at"] <= lag["snapshot"]]
    latest = Window.partitionBy(*(lag[k] for k in keys), lag["snapshot"]).orderBy(held["assigned_at"].desc_nulls_last())
    return (
        lag.join(held, before, "left")
        .withColumn("rank", F.row_number().over(latest))
        .where("rank = 1")
        .select(*(lag[k] for k in ("group", "snapshot", "topic", "partition", "lag")), held["member"])
    )


def strategy_summary(results: DataFrame, threshold: float) -> DataFrame:
    """Per (group, strategy) of result rows: the figures of ``backtest_kernel.summarise``, in Spark."""
    return results.groupBy("group", "strategy").agg(
        F.count("*").alias("snapshots"),
        F.avg((F.col("skew") >= threshold).cast("double")).alias("share_above"),
        F.percentile("skew", 0.5).alias("median_skew"),
        F.percentile("skew", 0.95).alias("p95_skew"),
        F.sum("moves").alias("total_moves"),
    )


def backtest(
    snapshots: DataFrame,
    output: str,
    threshold: float = 1.5,
    strategies: Sequence[str] = STRATEGIES,
    metric: SkewMetric = SkewMetric.PEAK_TO_MEAN,
    worst_groups: int = 5,
    on_step: Callable[[str], None] = lambda step: None,
) -> BacktestSummary:
    """Backtest ``strategies`` on ``snapshots`` and write the results, summary and report under ``output``.

    The report (a local file: ``output`` must be a local directory for it)
    plots skew over time for the ``worst_groups`` groups with the highest
    share of snapshots above ``threshold`` under their actual assignment.
    """
    base = output.rstrip("/")
    paths = {name: f"{base}/{name}" for name in ("snapshot_results", "strategy_summary")}
    chosen = tuple(strategies)

    def kernel(rows: pd.DataFrame) -> pd.DataFrame:
        return backtest_group(rows, chosen, metric)

    results = snapshots.groupBy("group").applyInPandas(kernel, RESULT_SCHEMA).persist()
    try:
        on_step("backtesting each group")
        results.write.mode("overwrite").partitionBy("strategy").parquet(paths["snapshot_results"])
        on_step("aggregating per group and strategy")
        summary_frame = strategy_summary(results, threshold)
        summary_frame.write.mode("overwrite").parquet(paths["strategy_summary"])
        summary: pd.DataFrame = summary_frame.toPandas()
        summary = summary.sort_values(["group", "strategy"], ignore_index=True)
        on_step("writing the report")
        actual = summary[summary["strategy"] == ACTUAL].sort_values(["share_above", "median_skew"], ascending=False)
        worst = actual["group"].head(worst_groups).tolist()
        series = results.where(F.col("group").isin(worst)).select("group", "snapshot", "strategy", "skew").toPandas()
    finally:
        results.unpersist()
    report = Path(base) / "report.html"
    report.write_text(render_report(summary, series, worst, threshold, metric.value))
    return BacktestSummary(paths["snapshot_results"], paths["strategy_summary"], str(report), summary)

