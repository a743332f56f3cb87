"""``GET /api/groups``' pages cut from group summaries kept as JSON, without models on the way.

A worker keeps each held group's :class:`~kagent.core.api_records.GroupSummary` as its JSON and the
figures a page sorts and filters by (:class:`ListedGroup`, made once per evaluation by :func:`listed`),
and another worker's answer is read as plain JSON (:func:`listed_from_answer`), not validated again
through the models: at 10,000 groups that was most of a list's cost. A
:class:`~kagent.core.group_ranking.GroupRanking` picks a page by :class:`~kagent.core.api_records.GroupSort`
and :func:`page_json` writes it, byte for byte the JSON of the :class:`~kagent.core.api_records.GroupsPage`
the models would make of the same summaries.

Between workers a page travels as a listing (:data:`LISTING`, :func:`listing_body`): what merging
pages reads (names, evaluation times, the figure the page is sorted by) as a JSON head, column by
column, then the summaries' JSON as they are kept, so the asking worker finds them by length
(:func:`ranked_from_listing`) and neither parses nor writes them again: at 5,000 summaries that was
most of a whole list's cost. Each worker's page comes in the page's order, so the asking worker writes
the page from its own page and the others' listings at once (:func:`merged_page_json`): the sorted pages
merged in one pass, each summary's JSON copied once into the body from where it is kept (a compiled
twin; :func:`merge_ranked` is the reference it is held to).

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import accumulate, chain, pairwise
from operator import itemgetter, neg
from typing import Any, Literal, NamedTuple, TypeVar

import orjson

from kagent.core.api_records import GroupSort, GroupSummary, WorkerAnswer
from kagent.core.collector import untrack
from kagent.core.group_health import GroupStatus
from kagent.core.lag_twins import twin_of

__all__ = [
    "LISTING",
    "ListedGroup",
    "Listing",
    "Ranked",
    "listed",
    "listed_from_answer",
    "listing_body",
    "listing_of",
    "merge_ranked",
    "merged_body",
    "merged_page_json",
    "page_json",
    "ranked",
    "ranked_from_listing",
]

LISTING = "application/vnd.kagent.ranked-listing"
"""The media type of a listing (:func:`listing_body`): what a worker asks another for a page in. A worker
of an earlier version, which does not know it, answers JSON (read by :func:`listed_from_answer`)."""

T = TypeVar("T")

_SORTED = tuple(sort for sort in GroupSort if sort is not GroupSort.GROUP)
"""The sorts by a figure, in the order :attr:`ListedGroup.figures` holds them."""
_FIGURES = slice(3, 3 + len(_SORTED))
"""Where a :class:`ListedGroup` holds its figures."""
_SEVERITY = {status.value: float(status.severity) for status in GroupStatus}


class ListedGroup(NamedTuple):
    """One group as a page lists it: its summary's JSON, and what pages sort and filter it by.

    Each sort by a figure has a field of the sort's name holding the figure (``-inf`` when unknown: it
    sorts below every known one; ``status`` holds its severity), so a page sorts by that field, in C."""

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


def _field(name: str) -> itemgetter[Any]:
    """A :class:`ListedGroup`'s field ``name`` by its index: in C, twice as fast as by its name."""
    return itemgetter(ListedGroup._fields.index(name))


_NAME, _EVALUATED_AT, _JSON = _field("group"), _field("evaluated_at"), _field("json")
_FIGURE = {sort: _field(sort.value) for sort in _SORTED}
"""Each sort by a figure -> the field holding it."""


def _figure(value: Any) -> float:
    if value is None:
        return -math.inf
    figure = float(value)
    return -math.inf if math.isnan(figure) else figure


def listed(summary: GroupSummary) -> ListedGroup:
    """``summary`` as pages list it, out of the garbage collector's watch (names, numbers and bytes; a
    worker keeps one per group it holds: :mod:`kagent.core.collector`)."""
    entry = ListedGroup._make(
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
    untrack([entry])
    return entry


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


def listing_body(groups: Sequence[ListedGroup], total: int, sort: GroupSort) -> bytes:
    """``groups`` (a page of ``total`` matches, sorted by ``sort``) as a listing: one line of JSON, the head,
    then each summary's JSON as kept, back to back.

    The head is an object: ``sort`` (the sort's name), ``total``, and columns of one value per group in
    page order: ``group``, ``evaluated_at``, ``figure`` (the figure the page is sorted by, null for
    unknown; the column itself is null when sorted by name) and ``lengths`` (each summary's JSON in
    bytes). Only what :func:`merge_ranked` reads: at 5,000 groups a head with every figure took most of a
    listing's time to write and read. A JSON text holds no raw line break, so the first one ends the head.
    """
    summaries = list(map(_JSON, groups))
    head = {
        "sort": sort.value,
        "total": total,
        "group": list(map(_NAME, groups)),
        "evaluated_at": list(map(_EVALUATED_AT, groups)),
        # -inf (unknown) is written null
        "figure": None if sort is GroupSort.GROUP else list(map(_FIGURE[sort], groups)),
        "lengths": list(map(len, summaries)),
    }
    summaries.insert(0, orjson.dumps(head) + b"\n")
    return b"".join(summaries)


class Ranked(NamedTuple):
    """One worker's page of summaries in the page's order, column by column: what :func:`merge_ranked`
    reads of it."""

    groups: list[str]
    evaluated_at: list[float]
    figures: list[float] | None
    """The figure the page is sorted by, per group (``-inf`` when unknown); None when it is sorted by name."""
    summaries: list[bytes]
    """Each summary's JSON."""


class Listing(NamedTuple):
    """Another worker's listing (:func:`listing_body`) as read: its head's columns, and its body, out of
    which each summary's JSON is read in place (summary ``i`` is ``body[bounds[i]:bounds[i + 1]]``)."""

    groups: list[str]
    evaluated_at: list[float]
    figures: list[float] | None
    """As :attr:`Ranked.figures`."""
    body: bytes
    bounds: list[int]
    """Where each summary starts in :attr:`body`, and where the last one ends: one more than the groups."""

    @property
    def summaries(self) -> list[bytes]:
        """Each summary's JSON, cut out of the body."""
        body = self.body
        return [body[start:stop] for start, stop in pairwise(self.bounds)]

    def ranked(self) -> Ranked:
        """The listing as :func:`merge_ranked` reads a page."""
        return Ranked(self.groups, self.evaluated_at, self.figures, self.summaries)


def ranked(groups: Sequence[ListedGroup], sort: GroupSort) -> Ranked:
    """``groups`` (a page sorted by ``sort``) as columns."""
    return Ranked(
        list(map(_NAME, groups)),
        list(map(_EVALUATED_AT, groups)),
        None if sort is GroupSort.GROUP else list(map(_FIGURE[sort], groups)),
        list(map(_JSON, groups)),
    )


def listing_of(groups: Sequence[ListedGroup], sort: GroupSort) -> Listing:
    """``groups`` (a page sorted by ``sort``) as :func:`ranked_from_listing` reads a listing of them."""
    summaries = list(map(_JSON, groups))
    return Listing(
        list(map(_NAME, groups)),
        list(map(_EVALUATED_AT, groups)),
        None if sort is GroupSort.GROUP else list(map(_FIGURE[sort], groups)),
        b"".join(summaries),
        list(accumulate(map(len, summaries), initial=0)),
    )


def ranked_from_listing(body: bytes, sort: GroupSort) -> tuple[Listing, int]:
    """Another worker's listing (:func:`listing_body`) of a page sorted by ``sort``, as columns, and its
    ``total``; raises ``ValueError`` naming what is not a listing's of that sort. The head's columns are
    checked (types and lengths, column by column); the summaries are passed on as they came, left in the
    body (cutting 5,000 of them out took a tenth of a whole list's time)."""
    end = body.find(b"\n")
    if end < 0:
        raise ValueError("a listing starts with a line of JSON: no line break in the body")
    try:
        head = orjson.loads(memoryview(body)[:end])
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"a listing's head is not JSON: {exc}") from None
    if not isinstance(head, dict):
        raise ValueError(f"a listing's head is an object, not {type(head).__name__}")
    if head.get("sort") != sort.value:
        raise ValueError(f"a listing of a page sorted by {sort.value} says its sort is {head.get('sort')!r}")
    total, figure = head.get("total"), head.get("figure")
    if type(total) is not int:
        raise ValueError(f"a listing's total is an integer, not {total!r}")
    count = len(head["group"]) if isinstance(head.get("group"), list) else -1
    names = _column("group", head.get("group"), count, {str})
    times = _column("evaluated_at", head.get("evaluated_at"), count, {float, int})
    lengths = _column("lengths", head.get("lengths"), count, {int})
    if sort is GroupSort.GROUP:
        if figure is not None:
            raise ValueError("a listing of a page sorted by name has no figure column")
    else:
        figure = [-math.inf if v is None else v for v in _column("figure", figure, count, {float, int, type(None)})]
    if count and min(lengths) < 0:
        raise ValueError("a listing's lengths are not negative")
    if len(body) - end - 1 != sum(lengths):
        raise ValueError(f"a listing's summaries are {sum(lengths)} bytes by its head, not {len(body) - end - 1}")
    return Listing(names, times, figure, body, list(accumulate(lengths, initial=end + 1))), total


def merge_ranked(
    pages: Sequence[Ranked], *, sort: GroupSort, order: Literal["asc", "desc"], offset: int, limit: int | None
) -> list[bytes]:
    """The summaries of the page from ``offset``, at most ``limit`` (all when None), of the groups of
    ``pages`` (each sorted by ``sort`` in ``order`` as :meth:`GroupRanking.page
    <kagent.core.group_ranking.GroupRanking.page>` sorts, and cut from its start): the page it cuts from
    all of them. A group in more than one page (it moved between workers) is listed once, from the page
    that evaluated it last (the first of those on a tie).

    The pages are sorted runs of one order, so one sort of their concatenation merges them, as rows made
    in C that compare as the order does: (figure, name, summary), the figure negated in ``desc`` (unknown,
    ``-inf``, then comes last); (name, summary) when sorted by name. Names are unique once merged, so a
    summary is never compared."""
    names = list(chain.from_iterable(page.groups for page in pages))
    summaries = chain.from_iterable(page.summaries for page in pages)
    rows: list[tuple[Any, ...]]
    if sort is GroupSort.GROUP:
        rows, reverse = list(zip(names, summaries, strict=True)), order == "desc"
    else:
        figures = chain.from_iterable(page.figures or () for page in pages)
        keys = map(neg, figures) if order == "desc" else figures
        rows, reverse = list(zip(keys, names, summaries, strict=True)), False
    if len(pages) > 1 and len(set(names)) < len(names):
        times = list(chain.from_iterable(page.evaluated_at for page in pages))
        rows = [rows[index] for index in _newest(names, times).values()]
    rows.sort(reverse=reverse)
    end = None if limit is None else offset + limit
    return list(map(_LAST, rows[offset:end]))


_LAST = itemgetter(-1)
_PAGE_HEAD = b'{"groups":['
"""What a page's JSON starts with, before its summaries."""


def _newest(names: list[str], times: list[float]) -> dict[str, int]:
    """Each name's place among ``names`` where ``times`` is the latest: the first of those on a tie."""
    newest: dict[str, int] = {}
    for index, name in enumerate(names):
        seen = newest.get(name)
        if seen is None or times[index] > times[seen]:
            newest[name] = index
    return newest


def _column(name: str, column: Any, count: int, types: set[type]) -> list[Any]:
    """``column``; raises ``ValueError`` unless it is a list of ``count`` values of ``types``."""
    if not isinstance(column, list) or len(column) != count:
        raise ValueError(f"a listing's {name} is a list with a value per group")
    found = set(map(type, column))
    if not found <= types:
        raise ValueError(f"a listing's {name} holds {sorted(t.__name__ for t in found - types)} values")
    return column


def merged_page_json(
    own: Sequence[ListedGroup],
    others: Sequence[Listing],
    *,
    total: int,
    offset: int,
    limit: int | None,
    sort: GroupSort,
    order: Literal["asc", "desc"],
    workers: Sequence[WorkerAnswer],
    complete: bool,
) -> bytes:
    """:func:`page_json` of :func:`merge_ranked`'s page of ``own`` (this worker's page, as
    :meth:`GroupRanking.page <kagent.core.group_ranking.GroupRanking.page>` cut it) and ``others`` (the
    other workers' listings of the same page), byte for byte, written straight from them: the summaries
    are read where they are kept (``own``'s, the listings' bodies) and copied once, into the body.

    The merge is :func:`merged_body`'s (a compiled twin where built): at 10,000 groups on two workers,
    making ``own`` into columns, cutting the summaries out of a listing, merging and joining them took
    half of a whole list's CPU in the worker."""
    figure = -1 if sort is GroupSort.GROUP else ListedGroup._fields.index(sort.value)
    return merged_body(
        own,
        others,
        figure,
        order == "desc",
        offset,
        limit,
        _superseded(own, others),
        _PAGE_HEAD,
        _page_tail(total=total, offset=offset, limit=limit, sort=sort, order=order, workers=workers, complete=complete),
    )


def _superseded(own: Sequence[ListedGroup], others: Sequence[Listing]) -> list[set[int]] | None:
    """For a group in more than one of the pages (``own``, then ``others``) the places of all but the one
    :func:`merge_ranked` keeps (the last evaluated, the first of those on a tie): a set per page; None
    when each group is in one page (the usual case, told from one set of the names)."""
    if not others:
        return None
    names = list(map(_NAME, own))
    for other in others:
        names += other.groups
    if len(set(names)) == len(names):
        return None
    times = list(map(_EVALUATED_AT, own))
    for other in others:
        times += other.evaluated_at
    kept = set(_newest(names, times).values())
    superseded: list[set[int]] = []
    start = 0
    for size in (len(own), *(len(other.groups) for other in others)):
        superseded.append({index - start for index in range(start, start + size) if index not in kept})
        start += size
    return superseded


def _merged_body(
    own: Sequence[ListedGroup],
    others: Sequence[Listing],
    figure: int,
    descending: bool,
    offset: int,
    limit: int | None,
    superseded: Sequence[set[int]] | None,
    head: bytes,
    tail: bytes,
) -> bytes:
    """``head``, the summaries of :func:`merge_ranked`'s page from ``offset``, at most ``limit`` (all when
    None), of the pages ``own`` and ``others`` (each sorted by the :class:`ListedGroup` field ``figure``,
    -1 for the name, descending or not, as :meth:`GroupRanking.page
    <kagent.core.group_ranking.GroupRanking.page>` sorts) joined by commas, then ``tail``;
    the groups at ``superseded``'s places (a set per page, ``own`` first) are left out.

    Contract of the compiled twin: the same bytes for the same arguments, as long as each page is sorted
    so and no name is left twice once the superseded are out (what :func:`merged_page_json` gives it);
    it merges the pages in one pass where this one sorts them."""
    sort = GroupSort.GROUP if figure < 0 else _SORTED[figure - _FIGURES.start]
    pages = [ranked(own, sort), *(other.ranked() for other in others)]
    if superseded is not None:
        pages = [
            Ranked(
                _without(page.groups, out),
                _without(page.evaluated_at, out),
                None if page.figures is None else _without(page.figures, out),
                _without(page.summaries, out),
            )
            for page, out in zip(pages, superseded, strict=True)
        ]
    summaries = merge_ranked(pages, sort=sort, order="desc" if descending else "asc", offset=offset, limit=limit)
    return _joined(head, summaries, tail)


merged_body = twin_of(_merged_body)


def _without(column: list[T], places: set[int]) -> list[T]:
    return [value for place, value in enumerate(column) if place not in places]


def _page_tail(
    *,
    total: int,
    offset: int,
    limit: int | None,
    sort: GroupSort,
    order: Literal["asc", "desc"],
    workers: Sequence[WorkerAnswer],
    complete: bool,
) -> bytes:
    """What follows a page's summaries in its JSON: the array's end, then the page's other fields."""
    rest: Mapping[str, Any] = {
        "total": total,
        "offset": offset,
        "limit": limit,
        "sort": sort.value,
        "order": order,
        "workers": [worker.model_dump(mode="json") for worker in workers],
        "complete": complete,
    }
    return b"]," + orjson.dumps(rest)[1:]


def page_json(
    summaries: Sequence[bytes],
    *,
    total: int,
    offset: int,
    limit: int | None,
    sort: GroupSort,
    order: Literal["asc", "desc"],
    workers: Sequence[WorkerAnswer],
    complete: bool,
) -> bytes:
    """The JSON of the :class:`~kagent.core.api_records.GroupsPage` of the groups of ``summaries`` (each
    one's JSON, in page order) and the rest: the summaries joined, the rest written around them, in one
    join (a second copy of a body of megabytes costs more in page faults than the join itself)."""
    tail = _page_tail(
        total=total, offset=offset, limit=limit, sort=sort, order=order, workers=workers, complete=complete
    )
    return _joined(_PAGE_HEAD, list(summaries), tail)


def _joined(head: bytes, summaries: list[bytes], tail: bytes) -> bytes:
    """``head``, ``summaries`` joined by commas, then ``tail``, in one join (``summaries`` is changed)."""
    if not summaries:
        return head + tail
    summaries[0] = head + summaries[0]
    summaries[-1] += tail
    return b",".join(summaries)
