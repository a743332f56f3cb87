"""The backtest's per-(group, strategy) summary in pandas: the figures ``kagent pipeline backtest`` computes
in Spark (:mod:`kagent.tools.pipeline.backtest`), as the tests and ``benchmarks/bench_pipeline.py`` check
and time them in one process."""

from __future__ import annotations

import pandas as pd

__all__ = ["summarise"]


def summarise(results: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per (group, strategy) of :data:`~kagent.tools.pipeline.backtest_kernel.RESULT_COLUMNS` rows:
    ``snapshots``, ``share_above`` (the share of snapshots whose skew is at least ``threshold``),
    ``median_skew``, ``p95_skew`` (linear interpolation, as Spark's ``percentile``) and ``total_moves``."""
    grouped = results.assign(above=results["skew"] >= threshold).groupby(["group", "strategy"], sort=True)
    return grouped.agg(
        snapshots=("skew", "size"),
        share_above=("above", "mean"),
        median_skew=("skew", "median"),
        p95_skew=("skew", lambda s: s.quantile(0.95)),
        total_moves=("moves", "sum"),
    ).reset_index()
