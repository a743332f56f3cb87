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
- ``recommendation_summary/``: Parquet, per group, kagent's own
  recommendations by kind (``recommendations.recommendation_summary``),
  when the backtest is given them;
- ``report.html``: the plots and tables of ``report``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kagent.connections import KafkaConnection
from kagent.core.policy import SkewMetric
from kagent.tools.pipeline.backtest_kernel import ACTUAL, STRATEGIES, backtest_group
from kagent.tools.pipeline.kafka_source import FORMAT
from kagent.tools.pipeline.recommendations import RecommendationsRead, recommendation_summary
from kagent.tools.pipeline.report import render_report

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


@dataclass(frozen=True)
class BacktestSummary:
    """Where a backtest wrote, and its per-(group, strategy) figures."""

    snapshot_results: str
    strategy_summary: str
    report: str
    summary: pd.DataFrame
    recommendation_summary: str | None = None
    """Where the per-group summary of kagent's recommendations went; None when none were given."""
    recommendations: pd.DataFrame | None = None
    """That summary, by group; None when no recommendations were given."""


def read_snapshots(spark: SparkSession, path: str) -> DataFrame:
    """Lag snapshots from Parquet with the columns of ``backtest_kernel.SNAPSHOT_COLUMNS``."""
    return spark.read.schema(_SNAPSHOT_SCHEMA).parquet(path)


def snapshots_from_changelogs(
    spark: SparkSession, kafka: KafkaConnection, app_id: str = "kagent", timeout: float = 10.0
) -> DataFrame:
    """Lag snapshots from a worker's changelogs: ``<app id>-partition-lag-changelog`` and
    ``<app id>-assignments-changelog``.

    Records are identified by their keys, the table keys JSON-encoded as
    Faust writes them (``"[\\"<group>\\",\\"<topic>\\",<partition>]"`` and
    ``"<group>"``, see ``tables/README.md``), so tombstones delete entries.

    The contract:

    - A group has one snapshot per distinct ``polled_at`` among its lag
      entries: one end-offset poll. Its time is ``polled_at``, to the nearest
      microsecond.
    - The snapshot is the group's tables as they stood when the last entry
      carrying that ``polled_at`` was written (by changelog record timestamp,
      ties broken by offset): every partition-lag entry of the group then
      current, not only those the poll rewrote (the worker rewrites an entry
      at a poll only when a commit since the last, a rebalance, data loss or
      the refresh period asks, so a poll often writes one entry or none);
      partitions whose last record then was a tombstone, or not yet written,
      or whose lag was unknown then (null: the poll had no answer for it),
      are left out; a snapshot none of whose partitions had a measured lag
      has no rows.
    - Each partition's ``member`` is its holder in the group's assignment
      current at that same moment (null: nobody, or the group was deleted).
      A rebalance has the group's entries rewritten at the next poll, so that
      poll's snapshot is the new generation's and those before it the old.

    One row per (group, snapshot, topic, partition). The history reaches as
    far back as the changelogs do: compaction keeps only each key's last
    record.
    """

    def changelog(table: str) -> DataFrame:
        raw = (
            spark.read.format(FORMAT)
            .options(**kafka.spark_options())
            .option("subscribe", f"{app_id}-{table}-changelog")
            .option("timeoutMs", str(int(timeout * 1000)))
            .load()
        )
        # A JSON-encoded string key: wrap it in an object to decode it with from_json.
        key = F.from_json(F.concat(F.lit('{"k":'), F.col("key").cast("string"), F.lit("}")), "k string")["k"]
        return raw.select(
            key.alias("key"),
            F.col("value").cast("string").alias("value"),
            F.unix_micros("timestamp").alias("written"),
            F.col("partition").alias("log_partition"),
            "offset",
        )

    def order(*extra: str) -> Column:
        """The position of a changelog record in write order, then ``extra``: max() is the last written."""
        return F.struct("written", "log_partition", "offset", *extra)

    lag_key = F.from_json("key", "array<string>")
    lag_value = F.from_json("value", "polled_at double, offset_lag bigint")
    entries = (
        changelog("partition-lag")
        .select(
            lag_key[0].alias("group"),
            lag_key[1].alias("topic"),
            lag_key[2].cast("int").alias("partition"),
            "written",
            "log_partition",
            "offset",
            lag_value["polled_at"].alias("polled_at"),
            lag_value["offset_lag"].alias("lag"),
        )
        .where(F.col("group").isNotNull())
    )
    polls = (
        entries.where(F.col("polled_at").isNotNull()).groupBy("group", "polled_at").agg(F.max("written").alias("as_of"))
    )
    grid = polls.join(entries.select("group", "topic", "partition").distinct(), "group")
    key_cols = ["group", "topic", "partition"]
    last_entry = Window.partitionBy(*key_cols).orderBy("written")
    lags = (
        grid.select(*key_cols, "polled_at", F.col("as_of").alias("written"), F.lit(None).alias("entry"))
        .unionByName(
            entries.select(
                *key_cols, F.lit(None).cast("double").alias("polled_at"), "written", order("lag").alias("entry")
            )
        )
        .withColumn("entry", F.max("entry").over(last_entry))  # range frame: every record written by then
        .where(F.col("polled_at").isNotNull() & F.col("entry.lag").isNotNull())
        .select(*key_cols, "polled_at", F.col("written").alias("as_of"), F.col("entry.lag").alias("lag"))
    )

    assignment_value = F.from_json(
        "value",
        "members array<struct<member_id: string, partitions: array<struct<topic: string, partition: int>>>>",
    )
    assignments = changelog("assignments").select(
        F.col("key").alias("group"), "written", "log_partition", "offset", assignment_value["members"].alias("members")
    )
    last_assignment = Window.partitionBy("group").orderBy("written")
    current = (
        polls.select("group", "polled_at", F.col("as_of").alias("written"), F.lit(None).alias("assignment"))
        .unionByName(
            assignments.select(
                "group", F.lit(None).cast("double").alias("polled_at"), "written", order().alias("assignment")
            )
        )
        .withColumn("assignment", F.max("assignment").over(last_assignment))
        .where(F.col("polled_at").isNotNull() & F.col("assignment").isNotNull())
        .select("group", "polled_at", "assignment")
    )
    held = (
        assignments.select("group", order().alias("assignment"), F.explode("members").alias("m"))
        .select("group", "assignment", F.col("m.member_id").alias("member"), F.explode("m.partitions").alias("p"))
        .select("group", "assignment", "member", "p.topic", "p.partition")
    )
    return (
        lags.join(current, ["group", "polled_at"], "left")
        .join(held, ["group", "assignment", "topic", "partition"], "left")
        .select(
            "group",
            # to the nearest microsecond, halves up: timestamp_seconds() truncates the double's error
            F.timestamp_micros(F.round(F.col("polled_at") * 1_000_000).cast("long")).alias("snapshot"),
            "topic",
            "partition",
            "lag",
            "member",
        )
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
    recommendations: RecommendationsRead | None = None,
) -> BacktestSummary:
    """Backtest ``strategies`` on ``snapshots`` and write the results, summary and report under ``output``.

    The report (a local file: ``output`` must be a local directory for it)
    plots skew over time for the ``worst_groups`` groups with the highest
    share of snapshots above ``threshold`` under their actual assignment.
    Given kagent's own ``recommendations``, it also writes their per-group
    summary, for the groups of ``snapshots``, and the report shows it.
    """
    base = output.rstrip("/")
    paths = {name: f"{base}/{name}" for name in ("snapshot_results", "strategy_summary", "recommendation_summary")}
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
        kagent = None
        if recommendations is not None:
            on_step("summarising kagent's recommendations")
            kagent = _kagent_summary(recommendations.rows, results, paths["recommendation_summary"])
        on_step("writing the report")
        actual = summary[summary["strategy"] == ACTUAL].sort_values(["share_above", "median_skew"], ascending=False)
        worst = actual["group"].head(worst_groups).tolist()
        series = results.where(F.col("group").isin(worst)).select("group", "snapshot", "strategy", "skew").toPandas()
    finally:
        results.unpersist()
    report = Path(base) / "report.html"
    skipped = 0 if recommendations is None else recommendations.skipped
    report.write_text(render_report(summary, series, worst, threshold, metric.value, kagent, skipped))
    return BacktestSummary(
        paths["snapshot_results"],
        paths["strategy_summary"],
        str(report),
        summary,
        None if kagent is None else paths["recommendation_summary"],
        kagent,
    )


def _kagent_summary(recommendations: DataFrame, results: DataFrame, path: str) -> pd.DataFrame:
    """The per-group summary of ``recommendations`` for the groups of ``results``, written to ``path``."""
    frame = recommendation_summary(recommendations, results.select("group"))
    frame.write.mode("overwrite").parquet(path)
    kagent: pd.DataFrame = frame.toPandas()
    return kagent.sort_values("group", ignore_index=True)
