"""GroupRanking: its pages are those of a plain sort of the groups it keeps, whatever came before."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core import group_ranking
from kagent.core.api_records import GroupSort
from kagent.core.group_listing import ListedGroup
from kagent.core.group_ranking import KEPT_ORDERS, GroupRanking

FIGURES = len(ListedGroup._fields) - 4  # between the evaluation time and the JSON


def reference(
    groups: Iterable[ListedGroup], *, sort: GroupSort, order: str, offset: int, limit: int | None, query: str = ""
) -> tuple[list[ListedGroup], int]:
    """The page by the rule, in two stable sorts: by name, then by the figure (unknown, -inf, lowest)."""
    matched = sorted((g for g in groups if query.casefold() in g.folded), key=lambda g: g.group)
    if sort is GroupSort.GROUP:
        ordered = matched[::-1] if order == "desc" else matched
    else:
        ordered = sorted(matched, key=lambda g: getattr(g, sort.value), reverse=order == "desc")
    return ordered[offset : None if limit is None else offset + limit], len(matched)


def entry(name: str, *figures: float) -> ListedGroup:
    padded = (*figures, *[0.0] * (FIGURES - len(figures)))
    return ListedGroup(name, name.casefold(), 0.0, *padded, json=name.encode())


names = st.sampled_from(["a", "B", "b", "ab", "Ba", "c", "ca", "d"])
figures = st.lists(st.sampled_from([-math.inf, 0.0, 1.0, 1.5, 2.0, 1e9]), min_size=FIGURES, max_size=FIGURES)
puts = st.tuples(st.just("put"), names, figures)
discards = st.tuples(st.just("discard"), names)
pages = st.tuples(
    st.just("page"),
    st.sampled_from(list(GroupSort)),
    st.sampled_from(["asc", "desc"]),
    st.integers(0, 9),
    st.none() | st.integers(0, 9),
    st.sampled_from(["", "a", "B", "zz"]),
)


@settings(max_examples=300)
@given(st.lists(puts | discards | pages, max_size=60))
def test_every_page_is_the_reference_page_of_the_groups_kept(steps: list[tuple[Any, ...]]) -> None:
    ranking = GroupRanking([entry("x", 3.0), entry("y", 3.0)])
    kept = {"x": entry("x", 3.0), "y": entry("y", 3.0)}
    for step in steps:
        if step[0] == "put":
            ranking.put(entry(step[1], *step[2]))
            kept[step[1]] = entry(step[1], *step[2])
        elif step[0] == "discard":
            ranking.discard(step[1])
            kept.pop(step[1], None)
        else:
            _, sort, order, offset, limit, query = step
            asked = {"sort": sort, "order": order, "offset": offset, "limit": limit, "query": query}
            assert ranking.page(**asked) == reference(kept.values(), **asked)
        assert len(ranking) == len(kept) and all(name in ranking for name in kept)


def test_an_order_dropped_beyond_those_kept_is_sorted_again_when_asked() -> None:
    ranking = GroupRanking([entry("a", 1.0, 4.0), entry("b", 2.0, 3.0)])
    sorts = [s for s in GroupSort if s is not GroupSort.GROUP]
    for sort in sorts[: KEPT_ORDERS + 1]:  # the first asked is dropped
        ranking.page(sort=sort, order="desc", offset=0, limit=None)
    ranking.put(entry("a", 3.0, 4.0))
    for sort in sorts[: KEPT_ORDERS + 1]:
        page, total = ranking.page(sort=sort, order="desc", offset=0, limit=1)
        expected = reference([entry("a", 3.0, 4.0), entry("b", 2.0, 3.0)], sort=sort, order="desc", offset=0, limit=1)
        assert (page, total) == expected
    assert ranking.page(sort=GroupSort.SKEW, order="desc", offset=0, limit=None)[0][0].group == "a"


def test_a_changed_summary_moves_its_group_and_sorts_no_order_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under live commits every evaluation changes a summary: a page after one must not sort every group."""
    made: list[int] = []

    class Counted(group_ranking.SortedKeyList):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(group_ranking, "SortedKeyList", Counted)
    ranking = GroupRanking(entry(f"g{i}", float(i)) for i in range(100))
    assert [g.group for g in ranking.page(sort=GroupSort.SKEW, order="desc", offset=0, limit=2)[0]] == ["g99", "g98"]
    for i in range(50):
        ranking.put(entry(f"g{i}", 1000.0 + i))
    ranking.discard("g49")
    assert [g.group for g in ranking.page(sort=GroupSort.SKEW, order="desc", offset=0, limit=2)[0]] == ["g48", "g47"]
    assert len(made) == 1  # the order was sorted once, when first asked
