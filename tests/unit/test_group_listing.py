"""`kagent.core.group_listing`: pages of group summaries cut and written without models, byte for byte the
models' JSON; another worker's answer read as plain JSON and checked for what a page reads."""

from __future__ import annotations

import math
from typing import Any, Literal

import orjson
import pytest

from kagent.core.api_records import GroupSort, GroupsPage, GroupSummary, IncidentRef, WorkerAnswer
from kagent.core.group_listing import (
    ListedGroup,
    listed,
    listed_from_answer,
    listing_body,
    listing_of,
    merge_ranked,
    merged_page_json,
    page_json,
    ranked,
    ranked_from_listing,
)
from kagent.core.group_ranking import GroupRanking
from kagent.core.incidents import IncidentKind, Severity
from tests.unit.test_api_records import named


def named_listed(group: str, skew: float | None, max_lag: float | None = None) -> ListedGroup:
    return listed(named(group, skew, max_lag))


def test_paging_sorts_unknown_figures_last_and_ties_by_name() -> None:
    groups = [named_listed(g, skew) for g, skew in (("b", 2.0), ("a", 2.0), ("c", None), ("d", 3.0), ("e", math.nan))]
    page, total = GroupRanking(groups).page(sort=GroupSort.SKEW, order="desc", offset=0, limit=None)
    assert [g.group for g in page] == ["d", "a", "b", "c", "e"] and total == 5
    page, _ = GroupRanking(groups).page(sort=GroupSort.SKEW, order="asc", offset=0, limit=None)
    assert [g.group for g in page] == ["c", "e", "a", "b", "d"]
    page, total = GroupRanking(groups).page(sort=GroupSort.SKEW, order="desc", offset=1, limit=2)
    assert [g.group for g in page] == ["a", "b"] and total == 5
    page, _ = GroupRanking(groups).page(sort=GroupSort.GROUP, order="desc", offset=0, limit=None)
    assert [g.group for g in page] == ["e", "d", "c", "b", "a"]


def test_paging_filters_by_name_case_insensitively_and_counts_the_matches() -> None:
    groups = [named_listed(group, 1.0) for group in ("Orders-EU", "orders-us", "payments")]
    page, total = GroupRanking(groups).page(sort=GroupSort.GROUP, order="asc", offset=0, limit=1, query="ORDERS")
    assert [g.group for g in page] == ["Orders-EU"] and total == 2


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("sort", list(GroupSort))
def test_a_page_merged_from_workers_pages_equals_the_page_of_all_groups(sort: GroupSort, order: str) -> None:
    # ties (i % 7), unknown figures (every fifth), and names out of figure order
    groups = [
        named_listed(f"g{(i * 17) % 40:02d}", None if i % 5 == 0 else float(i % 7), max_lag=float(i)) for i in range(40)
    ]
    left, right = groups[::2], groups[1::2]
    direction: Literal["asc", "desc"] = "asc" if order == "asc" else "desc"
    for offset, limit in ((10, 5), (0, None), (35, 10), (0, 0)):
        whole, _ = GroupRanking(groups).page(sort=sort, order=direction, offset=offset, limit=limit)
        # Each worker answers its first offset + limit; the asking worker merges them.
        wanted = None if limit is None else offset + limit
        parts = [
            GroupRanking(part).page(sort=sort, order=direction, offset=0, limit=wanted)[0] for part in (left, right)
        ]
        merged = merge_ranked(
            [ranked(part, sort) for part in parts], sort=sort, order=direction, offset=offset, limit=limit
        )
        assert merged == [g.json for g in whole], (offset, limit)
        # The asking worker writes the page straight from its own page and the other's listing.
        listing, _ = ranked_from_listing(listing_body(parts[1], len(right), sort), sort)
        rest: dict[str, Any] = {
            "total": len(groups),
            "offset": offset,
            "limit": limit,
            "sort": sort,
            "order": direction,
        }
        body = merged_page_json(parts[0], [listing], **rest, workers=WORKERS, complete=False)
        expected = page_json(merged, **rest, workers=WORKERS, complete=False)
        assert body == expected, (offset, limit)


def test_a_group_two_workers_list_is_merged_once_from_the_later_evaluation() -> None:
    older, newer = named("moving", 1.0), named("moving", 5.0)
    newer = newer.model_copy(update={"evaluated_at": older.evaluated_at + 1})
    stays = listed(named("stays", 3.0))

    def merged_body(own: list[ListedGroup], other: list[ListedGroup]) -> list[bytes]:
        body = merged_page_json(
            own,
            [listing_of(other, GroupSort.SKEW)],
            total=0,
            offset=0,
            limit=None,
            sort=GroupSort.SKEW,
            order="desc",
            workers=(),
            complete=True,
        )
        return [orjson.dumps(summary) for summary in orjson.loads(body)["groups"]]

    for first, second in ((older, newer), (newer, older)):
        pages = [ranked([listed(first), stays], GroupSort.SKEW), ranked([listed(second)], GroupSort.SKEW)]
        merged = merge_ranked(pages, sort=GroupSort.SKEW, order="desc", offset=0, limit=None)
        assert merged == [listed(newer).json, stays.json]
        assert merged_body([listed(first), stays], [listed(second)]) == merged
    same = [
        ranked([listed(older)], GroupSort.SKEW),
        ranked([listed(older.model_copy(update={"skew": 9.0}))], GroupSort.SKEW),
    ]
    assert merge_ranked(same, sort=GroupSort.SKEW, order="desc", offset=0, limit=None) == [listed(older).json]
    assert merged_body([listed(older)], [listed(older.model_copy(update={"skew": 9.0}))]) == [listed(older).json]


WORKERS = (WorkerAnswer(url="http://a:6066/", ok=True), WorkerAnswer(url="http://b:6066/", ok=False, error="timed out"))


def _summaries() -> list[GroupSummary]:
    incident = IncidentRef(id="i-1", kind=IncidentKind.STOP, severity=Severity.CRITICAL, opened_at=1.5e9)
    orders = named("orders", 2.5, max_lag=1e7).model_copy(
        update={"open_incidents": (incident,), "total_lag_seconds": 1 / 3}
    )
    return [orders, named('pay"ments\\ü', None), named("audit", 1e-7, max_lag=0.0)]


@pytest.mark.parametrize("limit", [None, 2])
def test_a_page_is_the_models_json_byte_for_byte(limit: int | None) -> None:
    summaries = _summaries()
    page, total = GroupRanking([listed(s) for s in summaries]).page(
        sort=GroupSort.SKEW, order="desc", offset=0, limit=limit
    )

    body = page_json(
        [g.json for g in page],
        total=total,
        offset=0,
        limit=limit,
        sort=GroupSort.SKEW,
        order="desc",
        workers=WORKERS,
        complete=False,
    )

    by_name = {s.group: s for s in summaries}
    expected = GroupsPage(
        groups=tuple(by_name[g.group] for g in page),
        total=total,
        offset=0,
        limit=limit,
        sort=GroupSort.SKEW,
        order="desc",
        workers=WORKERS,
        complete=False,
    )
    assert body == expected.model_dump_json().encode()
    assert GroupsPage.model_validate_json(body) == expected


def test_another_workers_summary_reads_as_the_same_listing() -> None:
    for summary in _summaries():
        ours = listed(summary)
        theirs = listed_from_answer(orjson.loads(ours.json))
        assert theirs == ours


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ([], "an object"),
        ({"evaluated_at": 1.0, "status": "OK"}, "group is a string"),
        ({"group": "g", "evaluated_at": "soon", "status": "OK"}, "evaluated_at is a number"),
        ({"group": "g", "evaluated_at": 1.0, "status": "FINE"}, "status 'FINE'"),
        ({"group": "g", "evaluated_at": 1.0, "status": "OK", "skew": "high"}, "skew is a number or null"),
        ({"group": "g", "evaluated_at": 1.0, "status": "OK", "max_lag": True}, "max_lag is a number or null"),
    ],
)
def test_an_answer_that_is_not_a_summary_is_refused_naming_what(value: object, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        listed_from_answer(value)


def test_unknown_and_nan_figures_sort_as_unknown() -> None:
    assert listed(named("n", math.nan)).figures == listed(named("n", None)).figures


@pytest.mark.parametrize("sort", list(GroupSort))
@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_listing_reads_back_as_the_page_it_lists(count: int, sort: GroupSort) -> None:
    groups = [listed(s) for s in _summaries()][:count]
    groups += [listed(named("line\nbreak", math.nan))] if count else []
    found, total = ranked_from_listing(listing_body(groups, 17, sort), sort)
    assert found.ranked() == ranked(groups, sort) == listing_of(groups, sort).ranked() and total == 17
    assert found.summaries == [g.json for g in groups]  # each summary's JSON as kept, cut out whole


def _body(head: dict[str, object], rest: bytes = b"") -> bytes:
    return orjson.dumps(head) + b"\n" + rest


GOOD = {"sort": "skew", "total": 1, "group": ["g"], "evaluated_at": [1.0], "figure": [None], "lengths": [2]}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"total": 1}', "no line break"),
        (b"[1,\n", "head is not JSON"),
        (_body({**GOOD, "total": "1"}, b"{}"), "total is an integer"),
        (_body({**GOOD, "group": [1]}, b"{}"), "group holds \\['int'\\]"),
        (_body({**GOOD, "evaluated_at": []}, b"{}"), "evaluated_at is a list with a value per group"),
        (_body({**GOOD, "sort": "max_lag"}, b"{}"), "sorted by skew says its sort is 'max_lag'"),
        (_body({**GOOD, "figure": None}, b"{}"), "figure is a list with a value per group"),
        (_body({**GOOD, "figure": ["high"]}, b"{}"), "figure holds \\['str'\\]"),
        (_body(GOOD, b"{}{}"), "2 bytes by its head, not 4"),
        (_body({**GOOD, "lengths": [-1]}, b""), "not negative"),
    ],
)
def test_a_body_that_is_not_a_listing_is_refused_naming_what(body: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ranked_from_listing(body, GroupSort.SKEW)


def test_a_listing_by_name_has_no_figure_column() -> None:
    body = _body({**GOOD, "sort": "group", "figure": [1.0]}, b"{}")
    with pytest.raises(ValueError, match="sorted by name has no figure column"):
        ranked_from_listing(body, GroupSort.GROUP)
    assert ranked_from_listing(_body({**GOOD, "sort": "group", "figure": None}, b"{}"), GroupSort.GROUP)[1] == 1
