"""The terminal's views of groups and recommendations: rich tables from the API's records.

Pure: data and a clock reading in, rich renderables out (and :func:`render_to`, which prints them).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from kagent.core.api_records import (
    GroupDetail,
    GroupsPage,
    GroupSummary,
    MemberView,
    PartitionView,
    RecommendationRef,
)
from kagent.core.drain_time import Drain, DrainState, drain_text
from kagent.core.events import PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.heavy_partitions import heavy_partition_text
from kagent.core.hot_partitions import hot_partition_text
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import PartitionMove, Recommendation, RecommendationKind
from kagent.core.remedies import Remedy, remedy_drain_text, remedy_text

__all__ = [
    "STATUS_STYLE",
    "asks_for",
    "format_age",
    "format_count",
    "format_lag",
    "format_partitions",
    "format_seconds",
    "format_time",
    "group_view",
    "groups_table",
    "members_table",
    "missing_workers",
    "moves_table",
    "partitions_table",
    "recommendation_line",
    "recommendation_view",
    "recommendations_table",
    "remedies_table",
    "render_to",
]

STATUS_STYLE = {
    GroupStatus.UNKNOWN: "dim",
    GroupStatus.OK: "green",
    GroupStatus.WARN: "yellow",
    GroupStatus.STOP: "bold red",
    GroupStatus.STALL: "bold red",
    GroupStatus.REWIND: "magenta",
}


UNKNOWN = "unknown"
"""What a figure kagent does not know reads as (never 0, never ``-``, which says "none")."""


def format_count(value: float | None) -> str:
    """A count with thousands separators (``12,345``); ``unknown`` for unknown."""
    return UNKNOWN if value is None else f"{value:,.0f}"


def format_seconds(value: float | None) -> str:
    """Seconds to one decimal with thousands separators (``1,234.5``); ``unknown`` for unknown."""
    return UNKNOWN if value is None else f"{value:,.1f}"


def format_lag(value: float | None, unit: LagUnit) -> str:
    """A lag in ``unit``: records as a count (``5,423``), seconds with an ``s`` (``12.3 s``); ``unknown``
    for unknown."""
    if value is None:
        return UNKNOWN
    return format_count(value) if unit is LagUnit.MESSAGES else f"{format_seconds(value)} s"


def format_offset_lag(view: PartitionView) -> str:
    """A partition's offset lag; without one, ``auto.offset.reset``'s estimate marked as one (``~120 est.``)."""
    if view.offset_lag is None and view.estimated_lag is not None:
        return f"~{view.estimated_lag:,} est."
    return format_count(view.offset_lag)


def format_age(seconds: float) -> str:
    """How long ago, coarsely: ``42 s``, ``12 min``, ``3 h``, ``2 d`` (``0 s`` for the future)."""
    seconds = max(0.0, seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:.0f} s"


def format_time(epoch: float) -> str:
    """A moment in local time, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def format_partitions(partitions: Iterable[PartitionRef] | None) -> str:
    """Partitions by topic: ``orders[0,1,5] audit[2]``; ``-`` for none; ``unknown`` when not known."""
    if partitions is None:
        return "unknown"
    by_topic: dict[str, list[int]] = {}
    for ref in partitions:
        by_topic.setdefault(ref.topic, []).append(ref.partition)
    return " ".join(f"{topic}[{','.join(map(str, sorted(ps)))}]" for topic, ps in sorted(by_topic.items())) or "-"


def _moves(count: int) -> str:
    return f"{count:,} move" + ("" if count == 1 else "s")


def _status(status: GroupStatus) -> Text:
    return Text(status.value, style=STATUS_STYLE[status])


def _skew(value: float | None) -> str:
    return UNKNOWN if value is None else f"{value:.2f}"


def _incidents(summary: GroupSummary) -> Text:
    if not summary.open_incidents:
        return Text("-")
    return Text(", ".join(sorted(i.kind.value for i in summary.open_incidents)), style="red")


def _last_recommendation(summary: GroupSummary, now: float) -> str:
    if summary.last_recommendation_id is None:
        return "-"
    when = "" if summary.last_recommendation_at is None else f"{format_age(now - summary.last_recommendation_at)} ago "
    return f"{when}({summary.last_recommendation_id[:8]})"


# --- rendering ------------------------------------------------------------------------------------------------


def groups_table(page: GroupsPage, now: float) -> Table:
    """The groups of ``page``, one row each in the page's order, with a caption saying how many of how many."""
    table = Table(
        title=f"consumer groups, by {page.sort.value} {page.order}",
        caption=f"{len(page.groups):,} of {page.total:,} groups, from {page.offset:,}",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("group", overflow="fold")
    table.add_column("status")
    table.add_column("state")
    for name in ("members", "gen"):
        table.add_column(name, justify="right")
    table.add_column("assignor")
    for name in ("total lag", "max lag", "max lag s", "skew"):
        table.add_column(name, justify="right")
    table.add_column("incidents")
    table.add_column("last recommendation")
    for summary in page.groups:
        table.add_row(
            summary.group,
            _status(summary.status),
            summary.state,
            format_count(summary.members),
            UNKNOWN if summary.generation is None else str(summary.generation),
            summary.protocol or "?",
            format_count(summary.total_lag),
            format_count(summary.max_lag),
            format_seconds(summary.max_lag_seconds),
            _skew(summary.skew),
            _incidents(summary),
            _last_recommendation(summary, now),
        )
    return table


def missing_workers(page: GroupsPage) -> str | None:
    """The warning an incomplete page deserves: which workers did not answer and why; None when complete."""
    if page.complete:
        return None
    silent = [f"{w.url} ({w.error or 'no answer'})" for w in page.workers if not w.ok]
    named = ", ".join(silent) if silent else "not named by the answer"
    return f"incomplete answer: the groups of workers that did not answer are missing: {named}"


def group_view(detail: GroupDetail, now: float) -> Group:
    """One group: its summary, its members (lag now and under the latest recommendation), the latest
    recommendation's moves, and its partitions."""
    summary = detail.summary
    unit = summary.lag_unit
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    incidents = ", ".join(
        f"{i.kind.value} ({i.severity.value}, {format_age(now - i.opened_at)})" for i in summary.open_incidents
    )
    for label, value in (
        ("group", Text(summary.group)),
        ("status", _status(summary.status)),
        (
            "state",
            Text(
                f"{summary.state}, generation {UNKNOWN if summary.generation is None else summary.generation}, "
                f"assignor {summary.protocol or '?'}"
            ),
        ),
        (
            "members",
            Text(
                f"{format_count(summary.members)}, reading {summary.partitions:,} partitions"
                + (f" ({summary.partitions_unknown:,} of unknown lag)" if summary.partitions_unknown else "")
            ),
        ),
        (
            "lag",
            Text(f"total {format_count(summary.total_lag)} records, largest partition {format_count(summary.max_lag)}"),
        ),
        (
            "time lag",
            Text(
                f"total {format_seconds(summary.total_lag_seconds)} s, "
                f"largest partition {format_seconds(summary.max_lag_seconds)} s"
            ),
        ),
        ("skew", Text(f"{_skew(summary.skew)} ({summary.skew_metric.value}, member lag in {unit.value})")),
        ("drain time", _drain(detail.drain, " (its slowest member, at the rates of the rate window)")),
        ("open incidents", Text(incidents or "none")),
        ("recommendation", Text(_recommendation_ref(detail.recommendation, now))),
        ("evaluated", Text(f"{format_age(now - summary.evaluated_at)} ago, by {summary.worker}")),
    ):
        facts.add_row(label, value)
    members = [*detail.members, *([detail.unassigned] if detail.unassigned is not None else [])]
    parts: list[RenderableType] = [facts, members_table(members, unit)]
    if detail.recommendation is not None and detail.recommendation.moves:
        parts.append(moves_table(detail.recommendation.moves, unit, "moves of the latest recommendation"))
    if detail.recommendation is not None and detail.recommendation.remedies:
        parts.append(
            remedies_table(detail.recommendation.remedies, summary.skew_metric, "remedies of the latest recommendation")
        )
    parts.append(partitions_table(detail.partitions))
    return Group(*parts)


_DRAIN_STYLE = {DrainState.FALLING_BEHIND: "bold red", DrainState.UNKNOWN: "dim"}


def _drain(drain: Drain, note: str = "") -> Text:
    """A drain time as :func:`kagent.core.drain_time.drain_text` says it; falling behind in red, unknown dimmed."""
    known = drain.state is not DrainState.UNKNOWN
    return Text(drain_text(drain) + (note if known else ""), style=_DRAIN_STYLE.get(drain.state, ""))


def _recommendation_ref(ref: RecommendationRef | None, now: float) -> str:
    if ref is None:
        return "none"
    stale = "" if ref.current else f", made for generation {ref.generation}: the group rebalanced since"
    hot = "" if ref.hot is None else f", {hot_partition_text(ref.hot)} (left where it is)"
    isolated = "" if ref.isolated is None else f", {heavy_partition_text(ref.isolated)}"
    return (
        f"{ref.id} ({format_age(now - ref.time)} ago, {ref.strategy}): skew {ref.skew_before:.2f} -> "
        f"{ref.skew_after:.2f}, {_moves(len(ref.moves))}{isolated}{hot}{stale}"
    )


def members_table(members: Sequence[MemberView], unit: LagUnit) -> Table:
    """Each member: its partitions and lag now, and those the latest recommendation gives it."""
    table = Table(title=f"members (lag in {unit.value})", title_justify="left")
    table.add_column("member", overflow="fold")
    table.add_column("client")
    table.add_column("host")
    table.add_column("partitions now", overflow="fold")
    table.add_column("lag now", justify="right")
    table.add_column("offset lag", justify="right")
    table.add_column("time lag s", justify="right")
    table.add_column("recommended partitions", overflow="fold")
    table.add_column("lag if applied", justify="right")
    table.add_column("drain time")
    for member in members:
        recommended = member.recommended_partitions
        table.add_row(
            member.member_id,
            member.client_id,
            member.client_host,
            format_partitions(member.partitions),
            format_lag(member.lag, unit),
            format_count(member.offset_lag),
            format_seconds(member.time_lag),
            "-" if recommended is None else format_partitions(recommended),
            format_lag(member.recommended_lag, unit),
            _drain(member.drain),
        )
    return table


def remedies_table(remedies: Sequence[Remedy], metric: SkewMetric, title: str = "remedies compared") -> Table:
    """The options a recommendation weighed: each one's skew and drain time, and which it asks for."""
    table = Table(title=title, title_justify="left")
    table.add_column("option", overflow="fold")
    table.add_column(f"skew ({metric.value})", justify="right")
    table.add_column("drain time")
    table.add_column("chosen")
    for remedy in remedies:
        table.add_row(
            remedy_text(remedy),
            "-" if remedy.skew is None else f"{remedy.skew:.2f}",
            Text(remedy_drain_text(remedy), style=_DRAIN_STYLE.get(remedy.drain.state, "")),
            Text("chosen", style="bold") if remedy.chosen else "",
        )
    return table


def moves_table(moves: Sequence[PartitionMove], unit: LagUnit, title: str = "moves") -> Table:
    """The partitions a recommendation moves, and from whom to whom."""
    table = Table(title=title, title_justify="left")
    table.add_column("partition")
    table.add_column("from", overflow="fold")
    table.add_column("to", overflow="fold")
    table.add_column(f"lag ({unit.value})", justify="right")
    for move in moves:
        table.add_row(
            f"{move.topic}[{move.partition}]",
            move.from_member or "-",
            move.to_member or "-",
            format_lag(move.lag, unit),
        )
    return table


def partitions_table(partitions: Sequence[PartitionView]) -> Table:
    """Each partition the group reads: its member, committed and log-end offsets, lag and flags."""
    table = Table(title="partitions", title_justify="left")
    table.add_column("topic", overflow="fold")
    table.add_column("partition", justify="right")
    table.add_column("member", overflow="fold")
    for name in ("committed", "log end", "lag", "time lag s"):
        table.add_column(name, justify="right")
    table.add_column("drain time")
    table.add_column("flags")
    for view in partitions:
        table.add_row(
            view.topic,
            str(view.partition),
            view.member_id or "-",
            "none" if view.committed is None else format_count(view.committed),
            format_count(view.log_end),
            format_offset_lag(view),
            format_seconds(view.time_lag),
            _drain(view.drain),
            Text(", ".join(flag.value for flag in view.flags), style="yellow") if view.flags else "-",
        )
    return table


def _largest(values: Iterable[float]) -> float:
    return max(values, default=0.0)


def recommendation_line(recommendation: Recommendation) -> str:
    """One line: when, id, group, generation, assignor -> strategy, skew before -> after, moves, largest
    member lag before -> after."""
    r = recommendation
    before = _largest(m.current_lag for m in r.members)
    after = _largest(m.recommended_lag for m in r.members)
    return (
        f"{format_time(r.time)}  {r.id}  {r.group}  generation {r.generation}, {r.protocol or '?'} -> {r.strategy}: "
        f"{r.trigger.metric.value} {r.skew_before:.2f} -> {r.skew_after:.2f}, {asks_for(r)}, "
        f"largest member lag {format_lag(before, r.lag_unit)} -> {format_lag(after, r.lag_unit)} {r.lag_unit.value}"
    )


def asks_for(recommendation: Recommendation) -> str:
    """What the recommendation asks for: its moves, or (kind ``scale``) the member count, or (kind
    ``hot-partition``) nothing moved and the hot partitions' rates; a rebalance that isolates heavy
    partitions names them, and a rebalance or scale that leaves hot partitions where they are says so."""
    scale, hot = recommendation.scale, recommendation.hot
    if recommendation.kind is RecommendationKind.HOT_PARTITION and hot is not None:
        return f"no moves: {hot_partition_text(hot)}"
    asks = f"scale {scale.members} -> {scale.members_needed} members" if scale is not None else None
    asks = asks or _moves(len(recommendation.moves))
    if recommendation.isolated is not None:
        asks = f"{asks}, {heavy_partition_text(recommendation.isolated)}"
    return asks if hot is None else f"{asks}, {hot_partition_text(hot)} (left where it is)"


def recommendations_table(found: Sequence[Recommendation], now: float) -> Table:
    """Recommendations, one row each in the given order."""
    table = Table(title="recommendations, newest first", title_justify="left")
    table.add_column("time")
    table.add_column("age", justify="right")
    table.add_column("id", no_wrap=True)
    table.add_column("group", overflow="fold")
    table.add_column("gen", justify="right")
    table.add_column("assignor -> strategy")
    table.add_column("skew before -> after", justify="right")
    table.add_column("asks for", justify="right")
    table.add_column("largest member lag before -> after", justify="right")
    for r in found:
        table.add_row(
            format_time(r.time),
            format_age(now - r.time),
            r.id,
            r.group,
            str(r.generation),
            f"{r.protocol or '?'} -> {r.strategy}",
            f"{r.skew_before:.2f} -> {r.skew_after:.2f}",
            asks_for(r),
            f"{format_lag(_largest(m.current_lag for m in r.members), r.lag_unit)} -> "
            f"{format_lag(_largest(m.recommended_lag for m in r.members), r.lag_unit)}",
        )
    return table


def recommendation_view(recommendation: Recommendation, now: float) -> Group:
    """One recommendation whole: why it was made, each member before and after, the moves, the alternatives."""
    r = recommendation
    unit = r.lag_unit
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    t = r.trigger
    for label, value in (
        ("id", r.id),
        ("group", r.group),
        ("time", f"{format_time(r.time)} ({format_age(now - r.time)} ago)"),
        ("generation", f"{r.generation}, assignor {r.protocol or '?'}"),
        ("strategy", r.strategy),
        (
            "trigger",
            f"{t.metric.value} {t.value:.2f} {'>=' if t.value >= t.threshold else '<'} {t.threshold:g} "
            f"for {t.evaluations_held} evaluations, "
            f"total lag {format_lag(t.total_lag, unit)} {unit.value}, improvement {t.improvement:.0%}",
        ),
        ("skew", f"{r.skew_before:.2f} -> {r.skew_after:.2f} ({t.metric.value})"),
        ("lower bound", f"{format_lag(r.lower_bound, unit)} {unit.value} (largest member lag, count-balanced)"),
        ("asks for", asks_for(r)),
        *((("remedy", r.hot.remedy),) if r.hot is not None else ()),
    ):
        facts.add_row(label, Text(value))
    members = Table(title=f"members (lag in {unit.value})", title_justify="left")
    members.add_column("member", overflow="fold")
    members.add_column("client")
    members.add_column("host")
    members.add_column("partitions", overflow="fold")
    members.add_column("lag", justify="right")
    members.add_column("recommended partitions", overflow="fold")
    members.add_column("lag after", justify="right")
    for m in r.members:
        members.add_row(
            m.member_id,
            m.client_id,
            m.client_host,
            format_partitions(m.current),
            format_lag(m.current_lag, unit),
            format_partitions(m.recommended),
            format_lag(m.recommended_lag, unit),
        )
    parts: list[RenderableType] = [facts, members, moves_table(r.moves, unit)]
    if r.remedies:
        parts.append(remedies_table(r.remedies, t.metric))
    if r.alternatives:
        alternatives = Table(title="other strategies", title_justify="left")
        alternatives.add_column("strategy")
        alternatives.add_column("skew", justify="right")
        alternatives.add_column(f"largest member lag ({unit.value})", justify="right")
        alternatives.add_column("moves", justify="right")
        for a in r.alternatives:
            alternatives.add_row(a.strategy, f"{a.skew:.2f}", format_lag(a.largest_lag, unit), format_count(a.moves))
        parts.append(alternatives)
    return Group(*parts)


def render_to(console: Console, *renderables: RenderableType) -> None:
    """Print ``renderables`` on ``console``; a console that is not a terminal is widened first to the widest
    renderable's natural width, so that nothing is wrapped or cut for a pipe or a file."""
    if not console.is_terminal:
        wide = console.options.update_width(100_000)
        width = max((Measurement.get(console, wide, r).maximum for r in renderables), default=80)
        console.width = max(80, width)
    for renderable in renderables:
        console.print(renderable)
