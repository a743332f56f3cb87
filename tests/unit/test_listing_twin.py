"""The compiled twin of the API's merge of pages (``merged_body`` in kagent/core/_lag_twins.pyx): built, in
use, and writing exactly the bytes its Python function writes for the same pages (the contract in
:func:`kagent.core.group_listing._merged_body`), which are the page :func:`merge_ranked` and
:func:`page_json` make.

The pages are cut as workers cut them (:meth:`kagent.core.group_ranking.GroupRanking.page`, then a listing
of the others' read back), from groups with tied, unknown and integer figures, names beyond ASCII, and
groups listed by two workers at once (moved between them), so that the superseded are left out as the
Python leaves them out.
"""

from __future__ import annotations

from typing import Literal

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core import _lag_twins, group_listing
from kagent.core.api_records import GroupSort, WorkerAnswer
from kagent.core.group_listing import (
    ListedGroup,
    Listing,
    listing_body,
    merge_ranked,
    merged_page_json,
    page_json,
    ranked,
    ranked_from_listing,
)
from kagent.core.group_ranking import GroupRanking

NAMES = st.text(alphabet="abcAB-é€😀", min_size=1, max_size=4)
FIGURES = st.one_of(st.just(float("-inf")), st.sampled_from([0.0, -0.0, 1.0, 2.5]), st.floats(-10, 1e6))
WORKERS = (WorkerAnswer(url="http://a:6066/", ok=True),)


def test_the_merge_runs_its_compiled_twin() -> None:
    assert group_listing.merged_body is _lag_twins.merged_body, "run the README's install to build it"


@st.composite
def listed_groups(draw: st.DrawFn, name: str) -> ListedGroup:
    figures = [draw(FIGURES) for _ in range(5)]
    at = draw(st.sampled_from([1.0, 2.0, 3.0]))
    return ListedGroup(name, name.casefold(), at, *figures, orjson.dumps({"group": name, "at": at, "f": figures[0]}))


@st.composite
def workers_pages(draw: st.DrawFn) -> list[list[ListedGroup]]:
    """1 to 3 workers' groups; a few names held by two workers at once, with their own figures and times."""
    names = draw(st.lists(NAMES, unique=True, max_size=14))
    workers: list[list[ListedGroup]] = [[] for _ in range(draw(st.integers(1, 3)))]
    for name in names:
        holders = draw(st.sets(st.integers(0, len(workers) - 1), min_size=1, max_size=2))
        for holder in holders:
            workers[holder].append(draw(listed_groups(name)))
    return workers


def _pages(
    workers: list[list[ListedGroup]], sort: GroupSort, order: Literal["asc", "desc"], wanted: int | None
) -> tuple[list[ListedGroup], list[Listing]]:
    own = GroupRanking(workers[0]).page(sort=sort, order=order, offset=0, limit=wanted)[0]
    others = [
        ranked_from_listing(
            listing_body(GroupRanking(w).page(sort=sort, order=order, offset=0, limit=wanted)[0], 0, sort), sort
        )[0]
        for w in workers[1:]
    ]
    return own, others


@settings(max_examples=600)
@given(
    workers_pages(),
    st.sampled_from(list(GroupSort)),
    st.sampled_from(["asc", "desc"]),
    st.integers(0, 6),
    st.one_of(st.none(), st.integers(0, 8)),
)
def test_the_twin_writes_the_page_the_python_writes(
    workers: list[list[ListedGroup]], sort: GroupSort, order: Literal["asc", "desc"], offset: int, limit: int | None
) -> None:
    own, others = _pages(workers, sort, order, None if limit is None else offset + limit)
    figure = -1 if sort is GroupSort.GROUP else ListedGroup._fields.index(sort.value)
    superseded = group_listing._superseded(own, others)
    arguments = (own, others, figure, order == "desc", offset, limit, superseded, b'{"groups":[', b"]}")
    compiled = _lag_twins.merged_body(*arguments)
    assert compiled == group_listing._merged_body(*arguments)
    # ... which is the page the models' merge and page_json make
    merged = merge_ranked(
        [ranked(own, sort), *(other.ranked() for other in others)], sort=sort, order=order, offset=offset, limit=limit
    )
    kept = {"total": 9, "offset": offset, "limit": limit, "sort": sort, "order": order, "workers": WORKERS}
    assert merged_page_json(own, others, **kept, complete=True) == page_json(merged, **kept, complete=True)


def test_integer_figures_of_another_workers_listing_compare_as_the_python_compares_them() -> None:
    big = 2**53 + 1  # not a double: compared as an integer, as Python compares it with a float
    own = [ListedGroup("a", "a", 1.0, float(2**53), 0.0, 0.0, 0.0, 0.0, b'"a"')]
    for descending, other, expected in (
        (True, Listing(["b", "c"], [1.0, 1.0], [big, 3], b'"b""c"', [0, 3, 6]), b'["b","a","c"]'),
        (False, Listing(["c", "b"], [1.0, 1.0], [3, big], b'"c""b"', [0, 3, 6]), b'["c","a","b"]'),
    ):
        arguments = (own, [other], 3, descending, 0, None, None, b"[", b"]")
        assert _lag_twins.merged_body(*arguments) == group_listing._merged_body(*arguments) == expected


@pytest.mark.parametrize(
    ("own", "other", "error"),
    [
        ([("a", 1.0)], None, "holds ListedGroups, not tuple"),
        ([], Listing(["b"], [1.0], [1.0], b'"b"', [0, 9]), "bounds are past its body"),
        ([], Listing(["b"], [1.0], [1.0], b'"b"', [3, 0]), "bounds go back"),
        ([], Listing(["b"], [1.0], [1.0], b'"b"', [0]), "a bound more than its groups"),
        ([], Listing(["b"], [1.0], None, b'"b"', [0, 3]), "a figure per group"),
    ],
)
def test_the_twin_refuses_what_is_not_a_page_naming_it(own: list[object], other: Listing | None, error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        _lag_twins.merged_body(own, [other] if other else [], 3, True, 0, None, None, b"[", b"]")
