"""``backtest`` on a small history whose best strategy is known in advance."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from kagent.tools.pipeline.backtest import backtest, read_snapshots
from kagent.tools.pipeline.backtest_kernel import SNAPSHOT_COLUMNS, backtest_group
from kagent.tools.pipeline.cli import pipeline
from kagent.tools.pipeline.report import strategy_comparison
from tests.support.backtest_summary import summarise

START = pd.Timestamp("2024-01-01", tz="UTC")
# Under range, a-1 holds the two hottest partitions: 1400 of 2600, peak-to-mean 1400 * 3 / 2600.
HOT = [(900, "a-1"), (500, "a-1"), (500, "b-2"), (100, "b-2"), (300, "c-3"), (300, "c-3")]
CALM = [(100, "a-1"), (100, "b-2"), (100, "a-1"), (100, "b-2")]


def _history() -> pd.DataFrame:
    rows = [
        {
            "group": group,
            "snapshot": START + pd.Timedelta(minutes=s),
            "topic": "t",
            "partition": p,
            "lag": lag * (s + 1),
            "member": member,
        }
        for group, layout in (("hot", HOT), ("calm", CALM))
        for s in range(12)
        for p, (lag, member) in enumerate(layout)
    ]
    return pd.DataFrame(rows).astype(SNAPSHOT_COLUMNS)


def test_known_best_strategy(spark: SparkSession, tmp_path: Path) -> None:
    history = _history()
    spark.createDataFrame(history).write.parquet(str(tmp_path / "snapshots"))

    result = backtest(read_snapshots(spark, str(tmp_path / "snapshots")), str(tmp_path / "out"), threshold=1.5)

    hot = result.summary[result.summary["group"] == "hot"].set_index("strategy")
    assert hot.loc[["actual", "range", "sticky"], "share_above"].tolist() == [1.0, 1.0, 1.0]
    assert hot.loc[["roundrobin", "fair", "lag", "lag-sticky"], "share_above"].tolist() == [0.0] * 4
    assert hot.loc["actual", "median_skew"] == pytest.approx(1400 * 3 / 2600)
    assert hot.loc["lag-sticky", "p95_skew"] == pytest.approx(1000 * 3 / 2600)
    # lag-sticky balances as well as any, and moves the fewest partitions to do it: 3 per snapshot
    assert hot.loc["lag-sticky", "total_moves"] == 36 < hot.loc["lag", "total_moves"]
    comparison = strategy_comparison(result.summary).set_index("strategy")
    assert comparison["best_in_groups"].idxmax() == "lag-sticky"
    assert (result.summary[result.summary["group"] == "calm"]["share_above"] == 0).all()

    # Spark's aggregation agrees with the single-process kernels
    expected = summarise(pd.concat(backtest_group(rows) for _, rows in history.groupby("group")), 1.5)
    pd.testing.assert_frame_equal(
        result.summary.sort_values(["group", "strategy"], ignore_index=True)[expected.columns],
        expected.sort_values(["group", "strategy"], ignore_index=True),
        check_dtype=False,
    )
    results = spark.read.parquet(result.snapshot_results)
    assert results.count() == 2 * 12 * 7
    report = Path(result.report).read_text()
    assert report.count("<img") == 3  # the comparison, and the two groups (both worst of two)
    assert report.index("<h3>hot</h3>") < report.index("<h3>calm</h3>")


def test_cli_backtest_prints_the_comparison(spark: SparkSession, tmp_path: Path) -> None:
    spark.createDataFrame(_history()).write.parquet(str(tmp_path / "snapshots"))

    result = CliRunner().invoke(
        pipeline,
        [
            "backtest",
            "--snapshots",
            str(tmp_path / "snapshots"),
            "--output",
            str(tmp_path / "out"),
            "--strategy",
            "range",
            "--strategy",
            "lag-sticky",
        ],
    )

    assert result.exit_code == 0, result.output
    assert "backtesting each group" in result.output
    lines = [line.split() for line in result.output.splitlines()]
    assert [line[0] for line in lines if line and line[0] in ("lag-sticky", "range", "actual")] == [
        "lag-sticky",
        "actual",
        "range",
    ]
    assert f"report: {tmp_path}/out/report.html" in result.output


def test_cli_backtest_needs_one_source(tmp_path: Path) -> None:
    result = CliRunner().invoke(pipeline, ["backtest", "--output", str(tmp_path)])

    assert result.exit_code == 2
    assert "exactly one of --snapshots and --broker" in result.output
