"""``GET /api/groups``' pages cut from group summaries kept as JSON, without models on the way.

A worker keeps each held group's :class:`~kagent.core.api_records.GroupSummary` as its JSON and the
figures a page sorts and filters by (:class:`ListedGroup`, made once per evaluation by :func:`listed`),
and another worker's answer is read as plain JSON (:func:`listed_from_answer`), not validated again
through the models: at 10,000 groups that was most of a list's cost. :func:`page_listed` picks a page
by :func:`~kagent.core.api_records.GroupSort` and :func:`page_json` writes it, byte for byte the JSON of
the :class:`~kagent.core.api_records.GroupsPage` the models would make of the same summaries.

Pure: no I/O.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import orjson

from kagent.core.api_records import GroupSort, GroupSummary, WorkerAnswer
from kagent.core.group_health import GroupStatus

__all__ = ["ListedGroup", "listed", "listed_from_answer", "page_json", "page_listed"]

_SORTED = tuple(sort for sort in GroupSort if sort is not GroupSort.GROUP)
"""The sorts by a figure, in the order :attr:`ListedGroup.figures` holds them."""
_INDEX = {sort: index for index, sort in enumerate(_SORTED)}
_SEVERITY = {status.value: float(status.severity) for status in GroupStatus}


class ListedGroup(NamedTuple):
    """One group as a page lists it: its summary's JSON, and what pages sort and filter it by."""

    group: str
    folded: str
    """The name case-folded, for ``q``."""
    evaluated_at: float
    figures: tuple[float, ...]
    """The figure of each sort but by name (``-inf`` when unknown: it sorts below every known one)."""
    json: bytes
    """The summary's JSON."""


def _figure(value: Any) -> float:
    if value is None:
        return -math.inf
    figure = float(value)
    return -math.inf if math.isnan(figure) else figure


def listed(summary: GroupSummary) -> ListedGroup:
    """``summary`` as pages list it."""
    return ListedGroup(
        summary.group,
        summary.group.casefold(),
        summary.evaluated_at,
        tuple(
            float(summary.status.severity) if sort is GroupSort.STATUS else _figure(getattr(summary, sort.value))
            for sort in _SORTED
        ),
        summary.model_dump_json().encode(),
    )


def listed_from_answer(value: Any) -> ListedGroup:
    """A summary of another worker's page, as parsed JSON, as pages list it; raises ``ValueError`` naming
    what is not a summary's (the figures a page reads are checked; the rest is passed on as it came)."""
    if not isinstance(value, dict):
        raise ValueError(f"a group summary is an object, not {type(value).__name__}")
    group, evaluated_at, status = value.get("group"), value.get("evaluated_at"), value.get("status")
    if not isinstance(group, str):
        raise ValueError(f"a group summary's group is a string, not {group!r}")
    if not isinstance(evaluated_at, int | float) or isinstance(evaluated_at, bool):
        raise ValueError(f"group {group!r}: evaluated_at is a number, not {evaluated_at!r}")
    if status not in _SEVERITY:
        raise ValueError(f"group {group!r}: status {status!r} is not one of {sorted(_SEVERITY)}")
    figures = []
    for sort in _SORTED:
        if sort is GroupSort.STATUS:
            figures.append(_SEVERITY[status])
            continue
        figure = value.get(sort.value)
        if figure is not None and (not isinstance(figure, int | float) or isinstance(figure, bool)):
            raise ValueError(f"group {group!r}: {sort.value} is a number or null, not {figure!r}")
        figures.append(_figure(figure))
    return ListedGroup(group, group.casefold(), float(evaluated_at), tuple(figures), orjson.dumps(value))


def page_listed(
    groups: Iterable[ListedGroup],
    *,
    sort: GroupSort,
    order: Literal["asc", "desc"],
    offset: int,
    limit: int | None,
    query: str = "",
) -> tuple[list[ListedGroup], int]:
    """The page of ``groups`` whose name contains ``query`` (case-insensitive), sorted by ``sort`` in
    ``order`` (ties by name, ascending), from ``offset``, at most ``limit`` (all when None), and how many
    matched. Unknown figures sort below every known one, so they come last in ``desc``. A page of a limit
    picks its groups without sorting all of them."""
    needle = query.casefold()
    matched = [g for g in groups if needle in g.folded] if needle else list(groups)
    key: Callable[[ListedGroup], Any]
    reverse = False
    if sort is GroupSort.GROUP:
        key, reverse = _name, order == "desc"
    else:
        index, sign = _INDEX[sort], -1.0 if order == "desc" else 1.0

        def key(g: ListedGroup) -> tuple[float, str]:
            return sign * g.figures[index], g.group

    if limit is None:
        ordered = sorted(matched, key=key, reverse=reverse)
    else:
        pick = heapq.nlargest if reverse else heapq.nsmallest
        ordered = pick(offset + limit, matched, key=key)
    end = None if limit is None else offset + limit
    return ordered[offset:end], len(matched)


def _name(group: ListedGroup) -> str:
    return group.group


def page_json(
    groups: Sequence[ListedGroup],
    *,
    total: int,
    offset: int,
    limit: int | None,
    sort: GroupSort,
    order: Literal["asc", "desc"],
    workers: Sequence[WorkerAnswer],
    complete: bool,
) -> bytes:
    """The JSON of the :class:`~kagent.core.api_records.GroupsPage` of ``groups`` and the rest: the
    summaries' own JSON joined, the rest written around them."""
    rest: Mapping[str, Any] = {
        "total": total,
        "offset": offset,
        "limit": limit,
        "sort": sort.value,
        "order": order,
        "workers": [worker.model_dump(mode="json") for worker in workers],
        "complete": complete,
    }
    return b"".join((b'{"groups":[', b",".join(group.json for group in groups), b"],", orjson.dumps(rest)[1:]))
