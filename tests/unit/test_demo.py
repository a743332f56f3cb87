"""The demo's rendering of recommendations: a line each, or a live table whose figures now come from the
worker's API (asked of a real local HTTP server here) and are never the recommendation's own."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from io import StringIO

import pytest
from aiohttp import web
from rich.console import Console
from rich.table import Table

from kagent.core.api_records import GroupDetail, GroupSummary, MemberView, RecommendationRef
from kagent.core.events import PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import MemberRecommendation, PartitionMove, Recommendation
from kagent.tools.api_client import ApiClient
from kagent.tools.demo import CurrentFigures, render, summary
from tests.support.incidents import recommendation
from tests.support.waiting import wait_until_async

HOT, COLD = PartitionRef(topic="t", partition=0), PartitionRef(topic="t", partition=1)


def _recommendation(
    group: str, skew_before: float, skew_after: float, time: float, rec_id: str = "0" * 32
) -> Recommendation:
    """:func:`tests.support.incidents.recommendation` for members a (both partitions, 1,200 -> 1,000) and b
    (none -> the cold one, 200), moving the cold partition, skew ``skew_before`` -> ``skew_after``."""
    base = recommendation(rec_id, time=time, group=group)
    return base.model_copy(
        update={
            "trigger": base.trigger.model_copy(update={"value": skew_before, "total_lag": 1200, "improvement": 0.5}),
            "members": (
                MemberRecommendation(
                    member_id="a",
                    client_id="a",
                    client_host="/h",
                    current=(HOT, COLD),
                    current_lag=1200,
                    recommended=(HOT,),
                    recommended_lag=1000,
                ),
                MemberRecommendation(
                    member_id="b",
                    client_id="b",
                    client_host="/h",
                    current=(),
                    current_lag=0,
                    recommended=(COLD,),
                    recommended_lag=200,
                ),
            ),
            "skew_before": skew_before,
            "skew_after": skew_after,
            "lower_bound": 1000,
            "moves": (PartitionMove(topic="t", partition=1, from_member="a", to_member="b", lag=200),),
        }
    )


def _detail(group: str, hot_lag: float, cold_lag: float, skew: float, rec_id: str = "0" * 32) -> GroupDetail:
    """The group now: member a holds both partitions (``hot_lag + cold_lag``), b none; the latest recommendation
    (``rec_id``) gives a the hot one and b the cold one."""
    return GroupDetail(
        summary=GroupSummary(
            group=group,
            state="Stable",
            status=GroupStatus.WARN,
            generation=4,
            protocol="range",
            members=2,
            partitions=2,
            total_lag=hot_lag + cold_lag,
            max_lag=hot_lag,
            total_lag_seconds=None,
            max_lag_seconds=None,
            skew=skew,
            skew_metric=SkewMetric.PEAK_TO_MEAN,
            lag_unit=LagUnit.MESSAGES,
            evaluated_at=0.0,
            worker="http://127.0.0.1:1",
        ),
        members=(
            MemberView(
                member_id="a",
                client_id="a",
                client_host="/h",
                partitions=(HOT, COLD),
                offset_lag=hot_lag + cold_lag,
                time_lag=None,
                lag=hot_lag + cold_lag,
                recommended_partitions=(HOT,),
                recommended_lag=hot_lag,
            ),
            MemberView(
                member_id="b",
                client_id="b",
                client_host="/h",
                partitions=(),
                offset_lag=0,
                time_lag=0,
                lag=0,
                recommended_partitions=(COLD,),
                recommended_lag=cold_lag,
            ),
        ),
        partitions=(),
        recommendation=RecommendationRef(
            id=rec_id,
            time=0.0,
            generation=4,
            current=True,
            strategy="lag-sticky",
            skew_before=2.0,
            skew_after=1.67,
            moves=(),
            url=f"/api/recommendations/{rec_id}",
        ),
        skew_history=(),
    )


def _text(table: Table) -> list[str]:
    out = StringIO()
    Console(file=out, width=200, highlight=False).print(table)
    return out.getvalue().splitlines()


def _rows(lines: list[str]) -> list[list[str]]:
    """The table's body rows (those that start with a group's name), split into cells."""
    return [re.split(r"\s{2,}", line.strip()) for line in lines if line.split(" ")[0] in GROUPS]


GROUPS = {"alpha", "zeta", "orders"}


def test_summary_says_what_changes() -> None:
    assert summary(_recommendation("billing", 2.0, 1.67, 100.0)) == (
        "recommendation for billing (generation 4, range -> lag-sticky): peak-to-mean 2.00 -> 1.67, "
        "1 moves, largest member lag 1200 -> 1000 messages"
    )


def test_render_lists_groups_by_name_with_columns_that_say_what_they_show() -> None:
    latest = {"zeta": _recommendation("zeta", 2.0, 1.67, 100.0), "alpha": _recommendation("alpha", 3.0, 1.1, 90.0)}
    table = render(latest, {}, 130.0)
    assert table.title == "latest recommendation per group, beside the group now"
    assert [" ".join(str(column.header).split()) for column in table.columns] == [
        "group",
        "skew now",
        "largest member lag now",
        "largest member lag if applied",
        "for gen",
        "recommended skew before -> after",
        "moves",
        "age",
    ]
    lines = _text(table)
    rows = _rows(lines)
    assert [row[0] for row in rows] == ["alpha", "zeta"]
    assert rows[0] == ["alpha", "?", "?", "?", "4", "3.00 -> 1.10", "1", "40 s"]


def test_render_shows_the_figures_now_not_those_of_the_recommendation() -> None:
    """The issue: 'largest lag now' kept the recommendation's 1,200 while the member's lag had grown."""
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0)}
    current = {"orders": _detail("orders", hot_lag=5000, cold_lag=423, skew=2.45)}
    assert _rows(_text(render(latest, current, 189.0))) == [
        ["orders", "2.45", "5,423", "5,000", "4", "2.00 -> 1.67", "1", "1 min"]
    ]


def test_render_shows_no_figure_if_applied_for_another_recommendation_than_the_one_shown() -> None:
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0)}
    current = {"orders": _detail("orders", hot_lag=5000, cold_lag=423, skew=2.0, rec_id="f" * 32)}
    [row] = _rows(_text(render(latest, current, 100.0)))
    assert row[1:4] == ["2.00", "5,423", "?"]


def test_render_shows_unknown_figures_now_and_says_why() -> None:
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0)}
    lines = _text(render(latest, {}, 100.0, "cannot reach the worker at http://127.0.0.1:1/api/groups/orders"))
    [row] = _rows(lines)
    assert row[1:4] == ["?", "?", "?"]
    caption = " ".join(line.strip() for line in lines[lines.index(next(line for line in lines if "figures" in line)) :])
    assert caption == (
        "figures now unavailable for some groups: cannot reach the worker at http://127.0.0.1:1/api/groups/orders"
    )


def test_render_says_when_nothing_arrived_yet() -> None:
    assert _text(render({}, {}, 0.0))[-1].strip() == "(no recommendation yet)"


@pytest.fixture
async def worker_api() -> AsyncIterator[tuple[str, dict[str, GroupDetail]]]:
    """A real HTTP server answering ``GET /api/groups/{group}`` from a dict (404 with an error otherwise)."""
    groups: dict[str, GroupDetail] = {}

    async def group(request: web.Request) -> web.Response:
        name = request.match_info["group"]
        if name not in groups:
            return web.json_response({"error": f"unknown group {name!r}"}, status=404)
        return web.Response(body=groups[name].model_dump_json(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/groups/{group}", group)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", groups
    finally:
        await runner.cleanup()


async def test_current_figures_follow_the_api_every_poll(worker_api: tuple[str, dict[str, GroupDetail]]) -> None:
    url, groups = worker_api
    latest = {name: _recommendation(name, 2.0, 1.67, 100.0) for name in ("orders", "ghost")}
    groups["orders"] = _detail("orders", hot_lag=1000, cold_lag=200, skew=2.0)
    stop = asyncio.Event()
    async with ApiClient(url, timeout=2.0) as api:
        figures = CurrentFigures(api, latest)
        poller = asyncio.create_task(figures.poll(stop))
        try:

            async def answered(lag: float) -> bool:
                seen = figures.current.get("orders")
                return seen is not None and seen.members[0].lag == lag and figures.problem is not None

            await wait_until_async(lambda: answered(1200), 10, "the first answers")
            assert "ghost" not in figures.current
            assert figures.problem == f"{url}/api/groups/ghost: HTTP 404 Not Found: unknown group 'ghost'"
            groups["orders"] = _detail("orders", hot_lag=5000, cold_lag=423, skew=2.0)
            await wait_until_async(lambda: answered(5423), 10, "the figures of the next poll")
        finally:
            stop.set()
            await asyncio.wait_for(poller, 5)
