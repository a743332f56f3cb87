"""The backtest's HTML report: one self-contained page, plots embedded as PNG.

Pure apart from drawing (matplotlib, Agg backend: no display needed):
:func:`render_report` takes the per-(group, strategy) summary, the skew
series of the worst groups and, optionally, the per-group summary of kagent's
own recommendations, and returns the page's HTML.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

__all__ = ["GROUPS_SHOWN", "render_report", "strategy_comparison"]

GROUPS_SHOWN = 20
"""The report's table of kagent's recommendations shows at most this many groups, those with the most."""


def strategy_comparison(summary: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, over groups: mean ``share_above``, median of ``median_skew``, mean ``p95_skew``,
    sum of ``total_moves``, and the number of groups where it is the best (lowest ``share_above``,
    then ``median_skew``, then ``total_moves``; the actual assignment excluded), best first."""
    ranked = summary[summary["strategy"] != "actual"].sort_values(
        ["group", "share_above", "median_skew", "total_moves", "strategy"]
    )
    wins = ranked.groupby("group").head(1)["strategy"].value_counts()
    table = summary.groupby("strategy").agg(
        share_above=("share_above", "mean"),
        median_skew=("median_skew", "median"),
        p95_skew=("p95_skew", "mean"),
        total_moves=("total_moves", "sum"),
    )
    table["best_in_groups"] = wins.reindex(table.index, fill_value=0)
    return table.sort_values(["share_above", "median_skew", "total_moves"]).reset_index()


def render_report(
    summary: pd.DataFrame,
    series: pd.DataFrame,
    worst: Sequence[str],
    threshold: float,
    metric: str,
    kagent: pd.DataFrame | None = None,
    skipped: int = 0,
) -> str:
    """The report page: strategy comparison (plot and table); given ``kagent``, the per-group summary of
    kagent's own recommendations (``recommendations.recommendation_summary``), with the ``skipped`` records
    that were not recommendations; then skew over time of each ``worst`` group under every strategy, with
    the threshold drawn."""
    comparison = strategy_comparison(summary)
    sections = [
        f"<h1>kagent backtest</h1><p>{summary['group'].nunique()} groups; skew metric {html.escape(metric)}, "
        f"threshold {threshold:g}.</p>",
        "<h2>Strategy comparison</h2>",
        _img(_comparison_plot(comparison, threshold)),
        comparison.to_html(index=False, float_format=lambda v: f"{v:.3f}"),
    ]
    if kagent is not None:
        sections += _kagent_section(kagent, skipped)
    sections.append("<h2>Skew over time, worst groups under their actual assignment</h2>")
    for group in worst:
        sections.append(f"<h3>{html.escape(group)}</h3>")
        sections.append(_img(_series_plot(series[series["group"] == group], threshold, metric)))
    body = "\n".join(sections)
    head = "<meta charset='utf-8'><title>kagent backtest</title>"
    return f"<!doctype html><html><head>{head}</head><body>{body}</body></html>"


def _kagent_section(kagent: pd.DataFrame, skipped: int) -> list[str]:
    """Totals by kind, then a table of the :data:`GROUPS_SHOWN` groups with the most recommendations."""
    counts = kagent["kagent_rebalances"] + kagent["kagent_scales"] + kagent["kagent_hot_partitions"]
    ranked = kagent.assign(total=counts)[counts > 0].sort_values(["total", "group"], ascending=[False, True])
    shown = ranked.drop(columns="total").head(GROUPS_SHOWN).astype({"kagent_members_needed": "Int64"})
    shown = shown.astype(object).where(shown.notna(), "")  # a figure kagent did not give is blank
    notes = [
        f"Rebalances: {int(kagent['kagent_rebalances'].sum())}; scale recommendations: "
        f"{int(kagent['kagent_scales'].sum())}; hot-partition recommendations: "
        f"{int(kagent['kagent_hot_partitions'].sum())}; groups with any: {len(ranked)} of {len(kagent)}."
    ]
    if len(ranked) > len(shown):
        notes.append(f"The {len(shown)} groups with the most are shown.")
    if skipped:
        notes.append(f"Records skipped (not recommendations): {skipped}.")
    return [
        "<h2>kagent's recommendations</h2>",
        f"<p>{' '.join(notes)}</p>",
        shown.to_html(index=False),
    ]


def _comparison_plot(comparison: pd.DataFrame, threshold: float) -> Figure:
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.bar(comparison["strategy"], comparison["share_above"])
    left.set_title(f"share of snapshots with skew >= {threshold:g}")
    right.bar(comparison["strategy"], comparison["median_skew"])
    right.set_title("median skew (median over groups)")
    for axes in (left, right):
        axes.tick_params(axis="x", rotation=30)
    figure.tight_layout()
    return figure


def _series_plot(series: pd.DataFrame, threshold: float, metric: str) -> Figure:
    figure, axes = plt.subplots(figsize=(11, 3.5))
    for strategy, points in series.sort_values("snapshot").groupby("strategy"):
        axes.plot(points["snapshot"], points["skew"], label=strategy, linewidth=2.5 if strategy == "actual" else 1)
    axes.axhline(threshold, color="red", linestyle="--", linewidth=1)
    axes.set_ylabel(metric)
    axes.legend(loc="upper left", fontsize="small", ncols=4)
    figure.tight_layout()
    return figure


def _img(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    plt.close(figure)
    return f"<img alt='plot' src='data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}'>"
