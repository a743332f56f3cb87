"""The demo's rendering of recommendations: a line each, or a live table whose figures now come from the
worker's API (asked of a real local HTTP server here) and are never the recommendation's own, and whose
skew before and after the rebalance that applied a recommendation is the API's measurements, followed
answer by answer (:func:`follow_applied`)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from io import StringIO

import pytest
from aiohttp import web
from rich.console import Console
from rich.table import Table

from kagent.core.api_records import GroupDetail, GroupSummary, MemberView, RecommendationRef
from kagent.core.events import PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import (
    HOT_PARTITION_REMEDY,
    HotPartitionEvidence,
    HotPartitionRate,
    MemberRecommendation,
    PartitionMove,
    Recommendation,
    RecommendationKind,
)
from kagent.tools.api_client import ApiClient
from kagent.tools.demo import (
    AFTER_MEASUREMENTS,
    SETTLE_ANSWERS,
    SETTLE_LIMIT,
    Applied,
    CurrentFigures,
    follow_applied,
    render,
    summary,
)
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
            min_total_lag=1000,
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


def _measured(generation: int, skew: float | None, at: float, *, applied: bool, lag: float = 1200) -> GroupDetail:
    """The API's answer at ``at`` (the worker's clock) for group ``orders`` in ``generation``, measuring
    ``skew`` and a total lag of ``lag``: with ``applied``, a holds the hot partition and b the cold one (the
    recommended assignment of :func:`_recommendation`); otherwise a holds both, as in :func:`_detail`."""
    detail = _detail("orders", hot_lag=1000, cold_lag=200, skew=2.0)
    summary = detail.summary.model_copy(
        update={"generation": generation, "skew": skew, "evaluated_at": at, "total_lag": lag}
    )
    members = detail.members
    if applied:
        members = (
            members[0].model_copy(update={"partitions": (HOT,)}),
            members[1].model_copy(update={"partitions": (COLD,)}),
        )
    return detail.model_copy(update={"summary": summary, "members": members})


def _follow(recommendation: Recommendation, *answers: GroupDetail, applied: Applied | None = None) -> Applied:
    """:func:`follow_applied` over ``answers``, in order, from ``applied``."""
    for answer in answers:
        applied = follow_applied(applied, recommendation, answer)
    assert applied is not None, "no answer given"
    return applied


def _text(table: Table) -> list[str]:
    out = StringIO()
    Console(file=out, width=200, highlight=False).print(table)
    return out.getvalue().splitlines()


def _rows(lines: list[str]) -> list[list[str]]:
    """The table's body rows (those that start with a group's name), split into cells."""
    return [re.split(r"\s{2,}", line.strip()) for line in lines if line.split(" ")[0] in GROUPS]


GROUPS = {"alpha", "zeta", "orders", "clicks"}


def test_summary_says_what_changes() -> None:
    assert summary(_recommendation("billing", 2.0, 1.67, 100.0)) == (
        "recommendation for billing (generation 4, range -> lag-sticky): rebalance, peak-to-mean 2.00 -> 1.67, "
        "1 move, largest member lag 1200 -> 1000 messages"
    )


def _hot_partition(group: str, time: float) -> Recommendation:
    """A ``hot-partition`` recommendation for ``group``: a holds partition t-0, written at 33/s, and reads
    20/s; b holds t-1 and reads 4/s; nothing moves."""
    base = _recommendation(group, 3.0, 3.0, time)
    members = tuple(
        m.model_copy(update={"recommended": m.current, "recommended_lag": m.current_lag}) for m in base.members
    )
    hot = HotPartitionEvidence(
        partitions=(
            HotPartitionRate(topic="t", partition=0, member_id="a", production_rate=33.0, member_capacity=20.0),
        ),
        best_capacity=20.0,
        window=300.0,
        remedy=HOT_PARTITION_REMEDY,
    )
    return base.model_copy(
        update={"kind": RecommendationKind.HOT_PARTITION, "hot": hot, "members": members, "moves": ()}
    )


def test_summary_of_a_hot_partition_says_nothing_moves_and_names_the_partition_and_rates() -> None:
    assert summary(_hot_partition("clicks", 100.0)) == (
        "recommendation for clicks (generation 4, range -> lag-sticky): hot-partition, peak-to-mean 3.00 -> 3.00, "
        "no moves: hot partition t-0 written at 33/s (its member a reads 20/s); the fastest member reads 20/s, "
        "largest member lag 1200 -> 1200 messages"
    )


def test_render_shows_each_groups_kind_and_under_the_table_each_hot_partition_with_its_rates() -> None:
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0), "zeta": _hot_partition("zeta", 100.0)}
    lines = _text(render(latest, {}, 130.0, "cannot reach the worker"))
    rows = _rows(lines)
    assert [row[:2] for row in rows] == [["orders", "rebalance"], ["zeta", "hot-partition"]]
    assert rows[1][-2:] == ["0", "30 s"]
    # Under the table (wrapped to its width): the hot partition, then, on a line of its own, the problem.
    notes = [line.strip() for line in lines[lines.index(next(line for line in lines if line.startswith("zeta"))) + 1 :]]
    assert " ".join(notes) == (
        "zeta: no assignment helps: hot partition t-0 written at 33/s (its member a reads 20/s); the fastest "
        "member reads 20/s figures now unavailable for some groups: cannot reach the worker"
    )
    assert notes[0].startswith("zeta: ") and notes[-1].startswith("figures now unavailable")


def test_render_lists_groups_by_name_with_columns_that_say_what_they_show() -> None:
    latest = {"zeta": _recommendation("zeta", 2.0, 1.67, 100.0), "alpha": _recommendation("alpha", 3.0, 1.1, 90.0)}
    table = render(latest, {}, 130.0)
    assert table.title == "latest recommendation per group, beside the group now"
    assert [" ".join(str(column.header).split()) for column in table.columns] == [
        "group",
        "kind",
        "skew now",
        "largest member lag now",
        "largest member lag if applied",
        "for gen",
        "recommended skew before -> after",
        "applied in gen",
        "measured skew before -> after",
        "moves",
        "age",
    ]
    lines = _text(table)
    rows = _rows(lines)
    assert [row[0] for row in rows] == ["alpha", "zeta"]
    assert rows[0] == [
        "alpha",
        "rebalance",
        "unknown",
        "unknown",
        "unknown",
        "4",
        "3.00 -> 1.10",
        "-",
        "-",
        "1",
        "40 s",
    ]


def test_render_shows_the_figures_now_not_those_of_the_recommendation() -> None:
    """The issue: 'largest lag now' kept the recommendation's 1,200 while the member's lag had grown."""
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0)}
    current = {"orders": _detail("orders", hot_lag=5000, cold_lag=423, skew=2.45)}
    assert _rows(_text(render(latest, current, 189.0))) == [
        ["orders", "rebalance", "2.45", "5,423", "5,000", "4", "2.00 -> 1.67", "-", "-", "1", "1 min"]
    ]


def test_render_shows_no_figure_if_applied_for_another_recommendation_than_the_one_shown() -> None:
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0)}
    current = {"orders": _detail("orders", hot_lag=5000, cold_lag=423, skew=2.0, rec_id="f" * 32)}
    [row] = _rows(_text(render(latest, current, 100.0)))
    assert row[2:5] == ["2.00", "5,423", "unknown"]


def test_render_shows_unknown_figures_now_and_says_why() -> None:
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0)}
    lines = _text(render(latest, {}, 100.0, "cannot reach the worker at http://127.0.0.1:1/api/groups/orders"))
    [row] = _rows(lines)
    assert row[2:5] == ["unknown", "unknown", "unknown"]
    caption = " ".join(line.strip() for line in lines[lines.index(next(line for line in lines if "figures" in line)) :])
    assert caption == (
        "figures now unavailable for some groups: cannot reach the worker at http://127.0.0.1:1/api/groups/orders"
    )


def test_render_says_when_nothing_arrived_yet() -> None:
    assert _text(render({}, {}, 0.0))[-1].strip() == "(no recommendation yet)"


def test_the_skew_before_is_the_last_measured_in_the_recommendations_generation() -> None:
    advice = _recommendation("orders", 2.0, 1.67, 100.0)  # for generation 4
    followed = _follow(
        advice,
        _measured(4, 2.4, 101.0, applied=False, lag=1500),
        _measured(4, None, 102.0, applied=False, lag=1600),  # no skew measured: nothing changes
        _measured(4, 2.6, 103.0, applied=False, lag=1700),
    )
    assert followed == Applied(advice.id, skew_before=2.6, lag_before=1700)


def test_the_rebalance_that_applied_it_is_the_first_later_generation_holding_the_recommended_assignment() -> None:
    advice = _recommendation("orders", 2.0, 1.67, 100.0)
    before = _follow(advice, _measured(4, 2.6, 103.0, applied=False))
    # A generation formed before every member rejoined holds something else: passed over.
    passed_over = _follow(advice, _measured(5, 1.0, 104.0, applied=False), applied=before)
    assert passed_over == before
    applied = _follow(advice, _measured(6, 1.9, 105.0, applied=True), applied=passed_over)
    assert applied == replace(before, generation=6, settle_by=105.0 + SETTLE_LIMIT)


def test_the_skew_after_averages_the_measurements_once_the_backlog_is_worked_off() -> None:
    advice = _recommendation("orders", 2.0, 1.67, 100.0)
    applied = _follow(
        advice, _measured(4, 2.6, 103.0, applied=False, lag=2000), _measured(5, 1.9, 105.0, applied=True, lag=1900)
    )
    # A fifth of the backlog before is 400: a lag above it in the last answer starts the count again.
    lags = [300] * (SETTLE_ANSWERS - 1) + [401]
    draining = _follow(
        advice, *(_measured(5, 3.0, 110.0 + i, applied=True, lag=lag) for i, lag in enumerate(lags)), applied=applied
    )
    assert draining.calm == 0 and not draining.skews_after
    skews = [1.0 + i / 10 for i in range(SETTLE_ANSWERS + AFTER_MEASUREMENTS + 1)]
    lags = [400] * SETTLE_ANSWERS + [900] * (len(skews) - SETTLE_ANSWERS)  # settled: a later jump changes nothing
    answers = [
        _measured(5, skew, 130.0 + i, applied=True, lag=lag)
        for i, (skew, lag) in enumerate(zip(skews, lags, strict=True))
    ]
    done = _follow(advice, *answers, applied=draining)
    assert done.skews_after == tuple(skews[SETTLE_ANSWERS - 1 : SETTLE_ANSWERS - 1 + AFTER_MEASUREMENTS])
    assert done.done
    assert _follow(advice, _measured(6, 3.0, 200.0, applied=False), applied=done) == done  # final


def test_a_group_that_never_works_its_backlog_off_settles_after_the_limit() -> None:
    advice = _recommendation("orders", 2.0, 1.67, 100.0)
    applied = _follow(
        advice, _measured(4, 2.6, 103.0, applied=False, lag=2000), _measured(5, 2.9, 105.0, applied=True, lag=2500)
    )
    waiting = _follow(advice, _measured(5, 2.9, 104.9 + SETTLE_LIMIT, applied=True, lag=4000), applied=applied)
    assert waiting == applied
    counted = _follow(advice, _measured(5, 2.95, 105.0 + SETTLE_LIMIT, applied=True, lag=4100), applied=waiting)
    assert counted.skews_after == (2.95,)
    later = _follow(advice, _measured(5, 2.9, 106.0 + SETTLE_LIMIT, applied=True, lag=4200), applied=counted)
    assert later.skews_after == (2.95, 2.9)


def test_leaving_the_applied_generation_ends_the_count_with_what_was_measured() -> None:
    advice = _recommendation("orders", 2.0, 1.67, 100.0)
    applied = _follow(
        advice,
        _measured(5, 1.9, 105.0, applied=True),
        _measured(5, 1.2, 105.0 + SETTLE_LIMIT, applied=True),
        _measured(5, 1.4, 106.0 + SETTLE_LIMIT, applied=True),
        _measured(6, 3.0, 107.0 + SETTLE_LIMIT, applied=False),
    )
    assert applied == Applied(
        advice.id, generation=5, settle_by=105.0 + SETTLE_LIMIT, skews_after=(1.2, 1.4), done=True
    )


def test_a_new_recommendation_is_followed_afresh() -> None:
    first = _follow(_recommendation("orders", 2.0, 1.67, 100.0), _measured(4, 2.6, 103.0, applied=False))
    second = _recommendation("orders", 2.0, 1.67, 200.0, rec_id="1" * 32)
    assert _follow(second, _measured(7, 1.5, 201.0, applied=False), applied=first) == Applied(second.id)


def test_render_shows_the_generation_that_applied_it_and_the_skew_measured_before_and_after() -> None:
    advice = _recommendation("orders", 2.0, 1.67, 100.0)
    latest = {"orders": advice}
    current = {"orders": _measured(5, 1.2, 150.0, applied=True)}

    def row(applied: Applied) -> list[str]:
        [cells] = _rows(_text(render(latest, current, 150.0, applied={"orders": applied})))
        return cells[7:9]

    settling = Applied(advice.id, skew_before=2.61, lag_before=2000, generation=5, settle_by=225.0)
    assert row(settling) == ["5", "2.61 -> settling"]
    assert row(replace(settling, skews_after=(1.2, 1.4), done=True)) == ["5", "2.61 -> 1.30"]
    assert row(replace(settling, skew_before=None, done=True)) == ["5", "unknown -> unknown"]
    assert row(Applied(advice.id, skew_before=2.61)) == ["-", "-"]  # not applied (yet)
    assert row(replace(settling, recommendation_id="f" * 32)) == ["-", "-"]  # for another recommendation


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
            assert figures.applied == {"orders": Applied(latest["orders"].id, skew_before=2.0, lag_before=1200)}
            groups["orders"] = _detail("orders", hot_lag=5000, cold_lag=423, skew=2.0)
            await wait_until_async(lambda: answered(5423), 10, "the figures of the next poll")
            groups["orders"] = _measured(5, 1.1, 300.0, applied=True)

            async def rebalanced() -> bool:
                return figures.applied["orders"].generation == 5

            await wait_until_async(rebalanced, 10, "the rebalance that applied the recommendation")
        finally:
            stop.set()
            await asyncio.wait_for(poller, 5)


def test_render_says_unknown_when_a_members_lag_is_unknown_not_the_largest_of_the_others() -> None:
    """A member of unknown lag may hold the largest: neither the largest lag now nor the one under the
    recommendation is stated (and nothing fails on the null)."""
    latest = {"orders": _recommendation("orders", 2.0, 1.67, 100.0)}
    known = _detail("orders", hot_lag=5000, cold_lag=423, skew=2.0)
    a, b = known.members
    blind = known.model_copy(
        update={"members": (a.model_copy(update={"offset_lag": None, "lag": None, "recommended_lag": None}), b)}
    )
    [row] = _rows(_text(render(latest, {"orders": blind}, 100.0)))
    assert row[2:5] == ["2.00", "unknown", "unknown"]
