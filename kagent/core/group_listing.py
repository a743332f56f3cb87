"""``GET /api/groups``' pages cut from group summaries kept as JSON, without models on the way.

A worker keeps each held group's :class:`~kagent.core.api_records.GroupSummary` as its JSON and the
figures a page sorts and filters by (:class:`ListedGroup`, made once per evaluation by :func:`listed`),
and another worker's answer is read as plain JSON (:func:`listed_from_answer`), not validated again
through the models: at 10,000 groups that was most of a list's cost. :func:`page_listed` picks a page
by :func:`~kagent.core.api_records.GroupSort` and :func:`page_json` writes it, byte for byte the JSON of
the :class:`~kagent.core.api_records.GroupsPage` the models would make of the same summaries.

Between workers a page travels as a listing (:data:`LISTING`, :func:`listing_body`): the figures a page
sorts and filters by as a JSON head, column by column, then the summaries' JSON as they are kept, so the
asking worker cuts them out by length (:func:`listed_from_listing`) and neither parses nor writes them
again: at 5,000 summaries that was most of a whole list's cost.

Pure: no I/O.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, pairwise
from operator import attrgetter
from typing import Any, Literal, NamedTuple

import orjson

from kagent.core.api_records import GroupSort, GroupSummary, WorkerAnswer
from kagent.core.group_health import GroupStatus

__all__ = [
    "LISTING",
    "ListedGroup",
    "listed",
    "listed_from_answer",
    "listed_from_listing",
    "listing_body",
    "page_json",
    "page_listed",
]

LISTING = "application/vnd.kagent.listing"
"""The media type of a listing (:func:`listing_body`): what a worker asks another for a page in."""

_SORTED = tuple(sort for sort in GroupSort if sort is not GroupSort.GROUP)
"""The sorts by a figure, in the order :attr:`ListedGroup.figures` holds them."""
_FIGURES = slice(3, 3 + len(_SORTED))
"""Where a :class:`ListedGroup` holds its figures."""
_SEVERITY = {status.value: float(status.severity) for status in GroupStatus}


class ListedGroup(NamedTuple):
    """One group as a page lists it: its summary's JSON, and what pages sort and filter it by.

    Each sort by a figure has a field of the sort's name holding the figure (``-inf`` when unknown: it
    sorts below every known one; ``status`` holds its severity), so a page sorts by
    ``operator.attrgetter(sort.value)``, in C."""

    group: str
    folded: str
    """The name case-folded, for ``q``."""
    evaluated_at: float
    skew: float
    max_lag: float
    max_lag_seconds: float
    total_lag: float
    status: float
    json: bytes
    """The summary's JSON."""

    @property
    def figures(self) -> tuple[float, ...]:
        """The figure of each sort but by name, in :data:`_SORTED`'s order."""
        return self[_FIGURES]  # type: ignore[return-value]


def _figure(value: Any) -> float:
    if value is None:
        return -math.inf
    figure = float(value)
    return -math.inf if math.isnan(figure) else figure


def listed(summary: GroupSummary) -> ListedGroup:
    """``summary`` as pages list it."""
    return ListedGroup._make(
        (
            summary.group,
            summary.group.casefold(),
            summary.evaluated_at,
            *(
                float(summary.status.severity) if sort is GroupSort.STATUS else _figure(getattr(summary, sort.value))
                for sort in _SORTED
            ),
            summary.model_dump_json().encode(),
        )
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
    return ListedGroup._make((group, group.casefold(), float(evaluated_at), *figures, orjson.dumps(value)))


def listing_body(groups: Sequence[ListedGroup], total: int) -> bytes:
    """``groups`` (a page of ``total`` matches) as a listing: one line of JSON, the head, then each
    summary's JSON as kept, back to back.

    The head is an object of columns, one value per group in page order: ``group``, ``evaluated_at``,
    ``figures`` (a column per sort by a figure, in :attr:`ListedGroup.figures`' order, null for unknown),
    ``lengths`` (each summary's JSON in bytes), and ``total``. A JSON text holds no raw line break, so the
    first one ends the head.
    """
    head = {
        "total": total,
        "group": [g.group for g in groups],
        "evaluated_at": [g.evaluated_at for g in groups],
        # -inf (unknown) is written null; the columns are the figures' tuples transposed
        "figures": list(zip(*(g[_FIGURES] for g in groups), strict=True)) if groups else [[]] * len(_SORTED),
        "lengths": [len(g.json) for g in groups],
    }
    return b"".join([orjson.dumps(head), b"\n", *(g.json for g in groups)])


def listed_from_listing(body: bytes) -> tuple[list[ListedGroup], int]:
    """Another worker's listing (:func:`listing_body`) as pages list it, and its ``total``; raises
    ``ValueError`` naming what is not a listing's. The head's columns are checked (types and lengths,
    column by column); the summaries are passed on as they came."""
    end = body.find(b"\n")
    if end < 0:
        raise ValueError("a listing starts with a line of JSON: no line break in the body")
    try:
        head = orjson.loads(body[:end])
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"a listing's head is not JSON: {exc}") from None
    if not isinstance(head, dict):
        raise ValueError(f"a listing's head is an object, not {type(head).__name__}")
    total, figures = head.get("total"), head.get("figures")
    if type(total) is not int:
        raise ValueError(f"a listing's total is an integer, not {total!r}")
    count = len(head["group"]) if isinstance(head.get("group"), list) else -1
    names = _column("group", head.get("group"), count, {str})
    times = _column("evaluated_at", head.get("evaluated_at"), count, {float, int})
    lengths = _column("lengths", head.get("lengths"), count, {int})
    if not isinstance(figures, list) or len(figures) != len(_SORTED):
        raise ValueError(f"a listing's figures are {len(_SORTED)} columns, one per sort by a figure")
    columns = []
    for sort, column in zip(_SORTED, figures, strict=True):
        _column(f"figures of {sort.value}", column, count, {float, int, type(None)})
        columns.append([-math.inf if v is None else float(v) for v in column])
    if count and min(lengths) < 0:
        raise ValueError("a listing's lengths are not negative")
    if len(body) - end - 1 != sum(lengths):
        raise ValueError(f"a listing's summaries are {sum(lengths)} bytes by its head, not {len(body) - end - 1}")
    bounds = list(accumulate(lengths, initial=end + 1))
    return list(
        map(
            ListedGroup._make,
            zip(
                names,
                [name.casefold() for name in names],
                [float(t) for t in times] if int in set(map(type, times)) else times,
                *columns,
                [body[start:stop] for start, stop in pairwise(bounds)],
                strict=True,
            ),
        )
    ), total


def _column(name: str, column: Any, count: int, types: set[type]) -> list[Any]:
    """``column``; raises ``ValueError`` unless it is a list of ``count`` values of ``types``."""
    if not isinstance(column, list) or len(column) != count:
        raise ValueError(f"a listing's {name} is a list with a value per group")
    found = set(map(type, column))
    if not found <= types:
        raise ValueError(f"a listing's {name} holds {sorted(t.__name__ for t in found - types)} values")
    return column


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
    picks its groups without sorting all of them by the figure.

    Sorted in two stable passes with keys in C: by name (linear on runs already in name order), then by
    the figure (``reverse`` keeps equal figures in name order)."""
    needle = query.casefold()
    matched = [g for g in groups if needle in g.folded] if needle else list(groups)
    matched.sort(key=_NAME)
    end = None if limit is None else offset + limit
    if sort is GroupSort.GROUP:
        ordered = matched[::-1] if order == "desc" else matched
    elif limit is None:
        ordered = sorted(matched, key=attrgetter(sort.value), reverse=order == "desc")
    else:
        pick = heapq.nlargest if order == "desc" else heapq.nsmallest  # each as stable as sorted()
        ordered = pick(offset + limit, matched, key=attrgetter(sort.value))
    return ordered[offset:end], len(matched)


_NAME = attrgetter("group")


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
    summaries' own JSON joined, the rest written around them, in one join (a second copy of a body of
    megabytes costs more in page faults than the join itself)."""
    rest: Mapping[str, Any] = {
        "total": total,
        "offset": offset,
        "limit": limit,
        "sort": sort.value,
        "order": order,
        "workers": [worker.model_dump(mode="json") for worker in workers],
        "complete": complete,
    }
    tail = b"]," + orjson.dumps(rest)[1:]
    if not groups:
        return b'{"groups":[' + tail
    parts = [group.json for group in groups]
    parts[0] = b'{"groups":[' + parts[0]
    parts[-1] += tail
    return b",".join(parts)
