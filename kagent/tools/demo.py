"""What ``kagent run`` shows: recommendations as they arrive on the recommendations topic.

On a terminal, a live table (rich): one row per group with a recommendation,
its kind (rebalance, scale, hot-partition) and its figures NOW beside those
of its latest recommendation; under the table, each hot partition with its
rate beside the fastest member's. The figures now
come from the worker's API (``GET /api/groups/{group}``), polled every
:data:`POLL_EVERY` seconds: the group's skew and largest member lag under its
current assignment, and the largest member lag its recommended assignment
would have with today's lag. The recommendation's own figures (skew before ->
after, moves, age) come from the record and do not change until the next one.

A group that applies its recommendation (the simulator's ``shipments-processors``,
with kagent's ``RecommendedAssignor`` and ``RecommendationFollower``) also shows
the generation it applied it in and its skew as the API measured it before and
after that rebalance (:class:`Applied`, followed one answer at a time by
:func:`follow_applied`): measured, not the recommendation's prediction.

Otherwise (logs, pipes), one :func:`summary` line per recommendation.

:func:`summary`, :func:`render` and :func:`follow_applied` are pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from statistics import mean

from aiokafka import AIOKafkaConsumer
from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kagent.connections import KafkaConnection
from kagent.core.api_records import GroupDetail
from kagent.core.hot_partitions import hot_partition_text
from kagent.core.recommendation import Recommendation, RecommendationKind
from kagent.tools.api_client import ApiClient, ApiFailure
from kagent.tools.recommendations_topic import parse_recommendation
from kagent.tools.terminal_views import UNKNOWN, asks_for, format_age, format_lag

__all__ = ["Applied", "CurrentFigures", "follow_applied", "render", "summary", "watch_recommendations"]

REDRAW_EVERY = 1.0
"""Seconds between redraws of the live table (its age column moves)."""
POLL_EVERY = 1.0
"""Seconds between two rounds of asking the worker's API for the shown groups' figures now."""
API_TIMEOUT = 2.0
"""Seconds the live table waits for one answer of the API before it shows the figures as unknown."""
SETTLED_SHARE = 0.2
"""A group that applied a recommendation has worked off the backlog the recommendation was made for once its
total lag is at most this share of its total lag before the rebalance ..."""
SETTLE_ANSWERS = 10
"""... in this many answers of the API in a row (one a second: two of the worker's end-offset polls at its
default interval of 5 s, between which a member's measured lag falls as it commits and jumps at the next
poll)."""
SETTLE_LIMIT = 120.0
"""Seconds, on the worker's clock, from the first answer showing a group in the generation that applied its
recommendation after which it counts as settled however much lag it has (one that does not work its
backlog off shows the skew it keeps)."""
AFTER_MEASUREMENTS = 20
"""Measurements (one per answer of the API) averaged into the skew after: among small lags one measurement
swings with each commit and each end-offset poll of the worker."""


def summary(recommendation: Recommendation) -> str:
    """One line: group, generation, kind, skew before -> after, what it asks for (its moves, the member
    count, or for a hot partition nothing moved and its rate beside the fastest member's), largest member
    lag before -> after."""
    before = max((m.current_lag for m in recommendation.members), default=0)
    after = max((m.recommended_lag for m in recommendation.members), default=0)
    return (
        f"recommendation for {recommendation.group} (generation {recommendation.generation}, "
        f"{recommendation.protocol or '?'} -> {recommendation.strategy}): {recommendation.kind.value}, "
        f"{recommendation.trigger.metric.value} {recommendation.skew_before:.2f} -> {recommendation.skew_after:.2f}, "
        f"{asks_for(recommendation)}, largest member lag {before:g} -> {after:g} {recommendation.lag_unit.value}"
    )


def render(
    latest: Mapping[str, Recommendation],
    current: Mapping[str, GroupDetail],
    now: float,
    problem: str | None = None,
    applied: Mapping[str, Applied] | None = None,
) -> Table:
    """The table of each group's latest recommendation, groups by name, and under it the hot partitions
    of each ``hot-partition`` recommendation with their rates.

    ``current``: what the worker's API answered last for each group; a group missing from it shows its
    figures now as ``?``. ``problem``: why some answer is missing (shown under the table). ``applied``:
    each group's :class:`Applied` for its latest recommendation; a group missing from it, or one that
    has not applied it, shows ``-`` for the generation and the measured skew."""
    table = Table(
        title="latest recommendation per group, beside the group now",
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("group", overflow="fold")
    table.add_column("kind")
    table.add_column("skew\nnow", justify="right")
    table.add_column("largest\nmember\nlag now", justify="right")
    table.add_column("largest\nmember lag\nif applied", justify="right")
    table.add_column("for\ngen", justify="right")
    table.add_column("recommended\nskew before\n-> after", justify="right")
    table.add_column("applied\nin gen", justify="right")
    table.add_column("measured\nskew before\n-> after", justify="right")
    table.add_column("moves", justify="right")
    table.add_column("age", justify="right")
    for group in sorted(latest):
        r = latest[group]
        detail = current.get(group)
        seen = (applied or {}).get(group)
        table.add_row(
            group,
            r.kind.value,
            *_now(r, detail),
            str(r.generation),
            f"{r.skew_before:.2f} -> {r.skew_after:.2f}",
            *_applied(seen if seen is not None and seen.recommendation_id == r.id else None),
            str(len(r.moves)),
            format_age(now - r.time),
        )
    if not latest:
        table.caption = "(no recommendation yet)"
        return table
    notes = [
        Text(f"{group}: no assignment helps: {hot_partition_text(r.hot)}")
        for group, r in sorted(latest.items())
        if r.kind is RecommendationKind.HOT_PARTITION and r.hot is not None
    ]
    if problem:
        notes.append(Text(f"figures now unavailable for some groups: {problem}", style="yellow"))
    if notes:
        table.caption = Text("\n").join(notes)
    return table


def _now(recommendation: Recommendation, detail: GroupDetail | None) -> tuple[str, str, str]:
    """The cells of the group's figures now: skew, largest member lag, and the largest member lag the
    recommendation's assignment would have now (``unknown`` when one member's is, or when the API's
    latest recommendation is another one)."""
    if detail is None:
        return UNKNOWN, UNKNOWN, UNKNOWN
    unit = detail.summary.lag_unit
    skew = UNKNOWN if detail.summary.skew is None else f"{detail.summary.skew:.2f}"
    lags = [m.lag for m in detail.members]
    # The largest member lag is known only when every member's is: one unknown could be the largest.
    largest = format_lag(max(lag for lag in lags if lag is not None), unit) if lags and None not in lags else UNKNOWN
    applied = UNKNOWN
    if detail.recommendation is not None and detail.recommendation.id == recommendation.id:
        recommended = [m.recommended_lag for m in detail.members if m.recommended_partitions is not None]
        if recommended and None not in recommended:
            applied = format_lag(max(lag for lag in recommended if lag is not None), unit)
    return skew, largest, applied


def _applied(applied: Applied | None) -> tuple[str, str]:
    """The cells of the rebalance that applied the recommendation: its generation, and the skew measured
    before -> after it (``settling`` until the skew after is known, ``?`` for what was not measured);
    ``-`` for both before it was applied."""
    if applied is None or applied.generation is None:
        return "-", "-"
    before = UNKNOWN if applied.skew_before is None else f"{applied.skew_before:.2f}"
    if not applied.done:
        return str(applied.generation), f"{before} -> settling"
    after = f"{mean(applied.skews_after):.2f}" if applied.skews_after else UNKNOWN
    return str(applied.generation), f"{before} -> {after}"


@dataclass(frozen=True)
class Applied:
    """A group's skew around the rebalance that applied recommendation ``recommendation_id``, as the worker's
    API measured it (:func:`follow_applied` builds it, one answer at a time)."""

    recommendation_id: str
    skew_before: float | None = None
    """The skew of the last answer showing the group in the recommendation's generation; None if none did."""
    generation: int | None = None
    """The first later generation in which the group held exactly the recommended assignment (what kagent's
    ``RecommendedAssignor`` hands out when its leader takes the recommendation's path); None until one did."""
    lag_before: float | None = None
    """The group's total lag in the same answer as ``skew_before``."""
    settle_by: float = math.inf
    """Seconds since the epoch, on the worker's clock: :data:`SETTLE_LIMIT` s after the first answer in
    ``generation`` (never before the group applied the recommendation)."""
    calm: int = 0
    """Answers in a row, up to the last, in ``generation`` with a total lag of at most :data:`SETTLED_SHARE`
    of ``lag_before``."""
    skews_after: tuple[float, ...] = ()
    """The skews measured in ``generation`` once the group settled, at most :data:`AFTER_MEASUREMENTS`."""
    done: bool = False
    """Whether ``skews_after`` is final: it holds :data:`AFTER_MEASUREMENTS` skews, or the group left
    ``generation`` before (with what it measured until then)."""


def follow_applied(applied: Applied | None, recommendation: Recommendation, detail: GroupDetail) -> Applied:
    """``applied`` after one more answer of the API for the recommendation's group, ``detail``.

    Starts afresh when ``applied`` is None or for another recommendation. Before the group applies it, an
    answer in the recommendation's generation gives the skew (and total lag) before, and the first answer
    in a later generation whose assignment is exactly the recommended one marks the rebalance that applied
    it (a later generation with another assignment, such as one formed before every member rejoined, is
    passed over). In that generation the group has settled once :data:`SETTLE_ANSWERS` answers in a row
    had a total lag of at most :data:`SETTLED_SHARE` of the total lag before, or at the first answer measured
    :data:`SETTLE_LIMIT` s or more after the first answer in it; from there each answer adds its skew, up to
    :data:`AFTER_MEASUREMENTS` of them. The first answer in another generation ends the count. An answer
    without a skew adds nothing.
    """
    if applied is None or applied.recommendation_id != recommendation.id:
        applied = Applied(recommendation.id)
    summary = detail.summary
    if applied.generation is None:
        if summary.generation == recommendation.generation and summary.skew is not None:
            return replace(applied, skew_before=summary.skew, lag_before=summary.total_lag)
        if summary.generation > recommendation.generation and _holds_recommended(detail, recommendation):
            return replace(applied, generation=summary.generation, settle_by=summary.evaluated_at + SETTLE_LIMIT)
        return applied
    if applied.done:
        return applied
    if summary.generation != applied.generation:
        return replace(applied, done=True)
    if applied.calm < SETTLE_ANSWERS and summary.evaluated_at < applied.settle_by:  # not settled yet
        low = applied.lag_before is not None and summary.total_lag <= SETTLED_SHARE * applied.lag_before
        applied = replace(applied, calm=applied.calm + 1 if low else 0)
        if applied.calm < SETTLE_ANSWERS:
            return applied
    if summary.skew is None:
        return applied
    skews = (*applied.skews_after, summary.skew)
    return replace(applied, skews_after=skews, done=len(skews) >= AFTER_MEASUREMENTS)


def _holds_recommended(detail: GroupDetail, recommendation: Recommendation) -> bool:
    """Whether the group's assignment in ``detail`` is exactly the one ``recommendation`` recommends (not
    when a member's partitions are unknown)."""
    if any(m.partitions is None for m in detail.members):
        return False
    holds = {m.member_id: frozenset(m.partitions or ()) for m in detail.members}
    recommended = {m.member_id: frozenset(m.recommended) for m in recommendation.members}
    return holds == recommended


async def watch_recommendations(
    kafka: KafkaConnection,
    topic: str,
    stop: asyncio.Event,
    write: Callable[[str], object],
    live: bool,
    *,
    api_url: str,
    console: Console | None = None,
) -> dict[str, Recommendation]:
    """Read ``topic`` until ``stop`` is set, showing each recommendation as it arrives.

    ``live``: redraw :func:`render`'s table on ``console`` (default: stdout) every second, its figures now
    from the API of the worker at ``api_url``; otherwise ``write`` one :func:`summary` line each.
    Records that are not recommendations, and repeats of an id already shown, are skipped.
    Returns the latest recommendation per group.
    """
    latest: dict[str, Recommendation] = {}
    shown: set[str] = set()
    consumer = kafka.consumer(topic, auto_offset_reset="earliest")
    await consumer.start()
    try:
        if live:
            await _show_live(consumer, shown, latest, stop, api_url, console or Console())
        else:
            while not stop.is_set():
                for recommendation in await _news(consumer, shown):
                    latest[recommendation.group] = recommendation
                    write(summary(recommendation) + "\n")
    finally:
        await consumer.stop()
    return latest


async def _show_live(
    consumer: AIOKafkaConsumer,
    shown: set[str],
    latest: dict[str, Recommendation],
    stop: asyncio.Event,
    api_url: str,
    console: Console,
) -> None:
    """Keep ``latest`` up to date from ``consumer`` and redraw the table until ``stop`` is set: every
    :data:`REDRAW_EVERY` s, and at once when a recommendation arrives."""
    async with ApiClient(api_url, timeout=API_TIMEOUT) as api:
        figures = CurrentFigures(api, latest)
        poller = asyncio.create_task(figures.poll(stop))
        try:
            with Live(console=console, auto_refresh=False) as screen:
                drawn = 0.0
                while not stop.is_set():
                    if time.monotonic() - drawn >= REDRAW_EVERY:
                        table = render(latest, figures.current, time.time(), figures.problem, figures.applied)
                        screen.update(table, refresh=True)
                        drawn = time.monotonic()
                    for recommendation in await _news(consumer, shown):
                        latest[recommendation.group] = recommendation
                        drawn = 0.0
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller


async def _news(consumer: AIOKafkaConsumer, shown: set[str]) -> list[Recommendation]:
    """The recommendations fetched within half a second whose ids were not seen before (marked seen)."""
    batches = await consumer.getmany(timeout_ms=500)
    news = []
    for records in batches.values():
        for record in records:
            recommendation = parse_recommendation(record.value)
            if recommendation is None or recommendation.id in shown:
                continue  # not a recommendation, or the same proposal for the same generation: not news
            shown.add(recommendation.id)
            news.append(recommendation)
    return news


class CurrentFigures:
    """The worker API's latest answer for each group of ``latest``, asked every :data:`POLL_EVERY` s, and
    what the answers tell of the rebalance that applied each group's latest recommendation."""

    def __init__(self, api: ApiClient, latest: Mapping[str, Recommendation]) -> None:
        self._api = api
        self._latest = latest
        self.current: dict[str, GroupDetail] = {}
        """Group -> its detail as last answered; a group whose last request failed is absent."""
        self.problem: str | None = None
        """The last round's first failure, if any."""
        self.applied: dict[str, Applied] = {}
        """Group -> :func:`follow_applied` over every answer for it since its latest recommendation."""

    async def poll(self, stop: asyncio.Event) -> None:
        """Ask for every group's figures now, every :data:`POLL_EVERY` s, until ``stop`` is set."""
        while not stop.is_set():
            groups = sorted(self._latest)
            answers = await asyncio.gather(*(self._ask(group) for group in groups))
            failures = [answer for answer in answers if isinstance(answer, str)]
            self.problem = failures[0] if failures else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), POLL_EVERY)

    async def _ask(self, group: str) -> GroupDetail | str:
        try:
            detail = await self._api.group(group)
        except ApiFailure as exc:
            self.current.pop(group, None)
            return str(exc)
        self.current[group] = detail
        recommendation = self._latest.get(group)
        if recommendation is not None:
            self.applied[group] = follow_applied(self.applied.get(group), recommendation, detail)
        return detail
