"""A worker's groups kept in the orders its pages are asked in, as their summaries change.

``GET /api/groups`` pages the groups a worker holds by a figure (:class:`~kagent.core.api_records.GroupSort`)
in either order, ties by name. Sorting them again for each page cost the page: under live commits every
evaluation changes a summary, so an order kept until the next change was never there when a page was
asked, and at 5,000 groups on a worker a page of 50 sorted them all (about 4 ms of its loop, beside
0.3 ms on a worker whose order was still kept). :class:`GroupRanking` keeps each order asked for in a
sorted list (sortedcontainers' ``SortedKeyList``) and moves a group in it when its summary changes, in
O(log n); a page is a slice of it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Literal

from sortedcontainers import SortedKeyList

from kagent.core.api_records import GroupSort
from kagent.core.group_listing import ListedGroup

__all__ = ["KEPT_ORDERS", "GroupRanking"]

KEPT_ORDERS = 4
"""The most orders a ranking keeps at once: the ones asked for last. Each costs every summary recorded a
move in its list (a few microseconds); one asked for again after it was dropped is sorted again once."""

_Order = tuple[GroupSort, bool]
"""A sort and whether it is descending (by name, only ascending is kept: descending reads it backwards)."""


def _key(sort: GroupSort, descending: bool) -> Callable[[ListedGroup], object]:
    """The sort key of an order: its figure (negated when descending), then the name, ascending."""
    if sort is GroupSort.GROUP:
        return itemgetter(0)
    figure: Callable[[ListedGroup], float] = itemgetter(ListedGroup._fields.index(sort.value))
    if descending:
        return lambda group: (-figure(group), group.group)
    return lambda group: (figure(group), group.group)


class GroupRanking:
    """Groups by name, each as pages list it, and the orders asked for, kept sorted.

    Contract: :meth:`page` pages the groups put and not discarded since (each as last put) by the rule it
    states, whatever was put, discarded or asked before. Figures are :class:`ListedGroup`'s as
    :func:`~kagent.core.group_listing.listed` makes them: never NaN (an unknown figure is ``-inf``), so
    that the orders are total."""

    def __init__(self, groups: Iterable[ListedGroup] = ()) -> None:
        self._groups: dict[str, ListedGroup] = {group.group: group for group in groups}
        self._orders: dict[_Order, SortedKeyList] = {}
        """The orders kept, the one asked for last at the end."""

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, name: object) -> bool:
        return name in self._groups

    def put(self, group: ListedGroup) -> None:
        """Keep ``group`` as its name's latest, in place of the one put before."""
        old = self._groups.get(group.group)
        self._groups[group.group] = group
        for ranked in self._orders.values():
            if old is not None:
                ranked.remove(old)
            ranked.add(group)

    def discard(self, name: str) -> None:
        """Drop the group named ``name``, if kept."""
        old = self._groups.pop(name, None)
        if old is not None:
            for ranked in self._orders.values():
                ranked.remove(old)

    def page(
        self, *, sort: GroupSort, order: Literal["asc", "desc"], offset: int, limit: int | None, query: str = ""
    ) -> tuple[list[ListedGroup], int]:
        """The page of the groups whose name contains ``query`` (case-insensitive), sorted by ``sort`` in
        ``order`` (ties by name, ascending), from ``offset``, at most ``limit`` (all when None), and how
        many matched. An unknown figure (``-inf``) sorts below every known one, so it comes last in
        ``desc``."""
        descending = order == "desc"
        ranked = self._ranked((sort, descending and sort is not GroupSort.GROUP))
        backwards = descending and sort is GroupSort.GROUP
        end = None if limit is None else offset + limit
        if query:
            needle = query.casefold()
            ordered: Iterator[ListedGroup] = reversed(ranked) if backwards else iter(ranked)
            matched = [group for group in ordered if needle in group.folded]
            return matched[offset:end], len(matched)
        total = len(ranked)
        stop = total if end is None else min(end, total)
        if offset >= stop:
            return [], total
        if backwards:
            return list(ranked.islice(total - stop, total - offset, reverse=True)), total
        return list(ranked.islice(offset, stop)), total

    def _ranked(self, order: _Order) -> SortedKeyList:
        """The groups in ``order``, kept from now on (the order asked for longest ago dropped beyond
        :data:`KEPT_ORDERS`)."""
        ranked = self._orders.pop(order, None)
        if ranked is None:
            ranked = SortedKeyList(self._groups.values(), key=_key(*order))
            while len(self._orders) >= KEPT_ORDERS:
                del self._orders[next(iter(self._orders))]
        self._orders[order] = ranked
        return ranked
