"""What ``kagent run`` shows: recommendations as they arrive on the recommendations topic.

On a terminal, a live table (rich): one row per group with a recommendation,
its figures NOW beside those of its latest recommendation. The figures now
come from the worker's API (``GET /api/groups/{group}``), polled every
:data:`POLL_EVERY` seconds: the group's skew and largest member lag under its
current assignment, and the largest member lag its recommended assignment
would have with today's lag. The recommendation's own figures (skew before ->
after, moves, age) come from the record and do not change until the next one.

Otherwise (logs, pipes), one :func:`summary` line per recommendation.

:func:`summary` and :func:`render` are pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping

from aiokafka import AIOKafkaConsumer
from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kagent.connections import KafkaConnection
from kagent.core.api_records import GroupDetail
from kagent.core.recommendation import Recommendation
from kagent.tools.api_client import ApiClient, ApiFailure
from kagent.tools.recommendations_topic import parse_recommendation
from kagent.tools.terminal_views import format_age, format_lag

__all__ = ["CurrentFigures", "render", "summary", "watch_recommendations"]

REDRAW_EVERY = 1.0
"""Seconds between redraws of the live table (its age column moves)."""
POLL_EVERY = 1.0
"""Seconds between two rounds of asking the worker's API for the shown groups' figures now."""
API_TIMEOUT = 2.0
"""Seconds the live table waits for one answer of the API before it shows the figures as unknown."""

UNKNOWN = "?"


def summary(recommendation: Recommendation) -> str:
    """One line: group, generation, skew before -> after, moves, largest member lag before -> after."""
    before = max((m.current_lag for m in recommendation.members), default=0)
    after = max((m.recommended_lag for m in recommendation.members), default=0)
    return (
        f"recommendation for {recommendation.group} (generation {recommendation.generation}, "
        f"{recommendation.protocol or '?'} -> {recommendation.strategy}): "
        f"{recommendation.trigger.metric.value} {recommendation.skew_before:.2f} -> {recommendation.skew_after:.2f}, "
        f"{len(recommendation.moves)} moves, largest member lag {before:g} -> {after:g} {recommendation.lag_unit.value}"
    )


def render(
    latest: Mapping[str, Recommendation], current: Mapping[str, GroupDetail], now: float, problem: str | None = None
) -> Table:
    """The table of each group's latest recommendation, groups by name.

    ``current``: what the worker's API answered last for each group; a group missing from it shows its
    figures now as ``?``. ``problem``: why some answer is missing (shown under the table)."""
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
    table.add_column("skew\nnow", justify="right")
    table.add_column("largest\nmember\nlag now", justify="right")
    table.add_column("largest\nmember lag\nif applied", justify="right")
    table.add_column("for\ngen", justify="right")
    table.add_column("recommended\nskew before\n-> after", justify="right")
    table.add_column("moves", justify="right")
    table.add_column("age", justify="right")
    for group in sorted(latest):
        r = latest[group]
        detail = current.get(group)
        table.add_row(
            group,
            *_now(r, detail),
            str(r.generation),
            f"{r.skew_before:.2f} -> {r.skew_after:.2f}",
            str(len(r.moves)),
            format_age(now - r.time),
        )
    if not latest:
        table.caption = "(no recommendation yet)"
    elif problem:
        table.caption = Text(f"figures now unavailable for some groups: {problem}", style="yellow")
    return table


def _now(recommendation: Recommendation, detail: GroupDetail | None) -> tuple[str, str, str]:
    """The cells of the group's figures now: skew, largest member lag, and the largest member lag the
    recommendation's assignment would have now (``?`` when unknown, or when the API's latest
    recommendation is another one)."""
    if detail is None:
        return UNKNOWN, UNKNOWN, UNKNOWN
    unit = detail.summary.lag_unit
    skew = UNKNOWN if detail.summary.skew is None else f"{detail.summary.skew:.2f}"
    largest = format_lag(max((m.lag for m in detail.members), default=0.0), unit)
    applied = UNKNOWN
    if detail.recommendation is not None and detail.recommendation.id == recommendation.id:
        recommended = [m.recommended_lag for m in detail.members if m.recommended_lag is not None]
        if recommended:
            applied = format_lag(max(recommended), unit)
    return skew, largest, applied


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
                        screen.update(render(latest, figures.current, time.time(), figures.problem), refresh=True)
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
    """The worker API's latest answer for each group of ``latest``, asked every :data:`POLL_EVERY` s."""

    def __init__(self, api: ApiClient, latest: Mapping[str, Recommendation]) -> None:
        self._api = api
        self._latest = latest
        self.current: dict[str, GroupDetail] = {}
        """Group -> its detail as last answered; a group whose last request failed is absent."""
        self.problem: str | None = None
        """The last round's first failure, if any."""

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
        return detail
