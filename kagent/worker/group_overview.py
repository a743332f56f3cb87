"""What the operator sees of each group this worker holds: its summary as of its last evaluation, and its
skew over the last hour.

The evaluator records a :class:`~kagent.core.api_records.GroupSummary` after each evaluation
(:meth:`GroupOverview.record`), kept as its JSON and sort figures
(:class:`~kagent.core.group_listing.ListedGroup`, about 5 µs to make, once per evaluation); the HTTP API
pages them (``GET /api/groups``, :meth:`GroupOverview.page`) without measuring anything, from the held
groups in each order asked for, sorted once per change (a recorded summary, a group forgotten, this
worker's partitions moving) and kept until the next: between evaluations, a page of thousands of groups is
a slice and a join. The skew history is kept per minute (the largest skew measured in it), 60 minutes,
in two arrays of floats per group (about 1 KB a group).

In memory only: a worker that takes a group over lists it from its first evaluation there, and its
history starts then.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Literal

from kagent.core.api_records import GroupSort, GroupSummary, SkewPoint
from kagent.core.group_listing import ListedGroup, listed, page_listed

__all__ = ["GroupOverview", "SkewHistory"]

MINUTE = 60.0
HOUR = 3600.0


class SkewHistory:
    """One group's skew per minute over the last ``window`` seconds: the largest value measured in each."""

    __slots__ = ("_skews", "_starts", "_window")

    def __init__(self, window: float = HOUR) -> None:
        self._window = window
        self._starts = array("d")
        self._skews = array("d")

    def add(self, time: float, skew: float) -> None:
        """Note ``skew`` measured at ``time`` (times come in order; an older one joins the newest minute)."""
        start = time - time % MINUTE
        if self._starts and start <= self._starts[-1]:
            self._skews[-1] = max(self._skews[-1], skew)
        else:
            self._starts.append(start)
            self._skews.append(skew)
        cut = 0
        while cut < len(self._starts) and self._starts[cut] <= start - self._window:
            cut += 1
        if cut:
            del self._starts[:cut]
            del self._skews[:cut]

    def points(self, now: float) -> list[SkewPoint]:
        """The minutes within ``window`` of ``now``, oldest first."""
        return [
            SkewPoint(time=start, skew=skew)
            for start, skew in zip(self._starts, self._skews, strict=True)
            if start > now - self._window - MINUTE
        ]


class GroupOverview:
    """The latest summary and the skew history of each group evaluated here."""

    def __init__(self, window: float = HOUR) -> None:
        self._window = window
        self._listed: dict[str, ListedGroup] = {}
        """Group -> its latest summary as lists show it."""
        self._histories: dict[str, SkewHistory] = {}
        self._orders: dict[tuple[GroupSort, str], tuple[frozenset[int], list[ListedGroup]]] = {}
        """(sort, order) -> the held partitions it was made at, and the held groups in that order; emptied
        by every change, so no summary outlives its replacement here."""
        self._held: tuple[frozenset[int], list[str]] | None = None
        """The held partitions and the groups of :attr:`_listed` held then, by name; None when a group
        came or went since."""

    def record(self, summary: GroupSummary) -> None:
        """Keep ``summary`` as its group's latest, and its skew (when measured) in the group's history."""
        if summary.group not in self._listed:
            self._held = None
        self._listed[summary.group] = listed(summary)
        self._orders.clear()
        if summary.skew is not None:
            history = self._histories.get(summary.group)
            if history is None:
                history = self._histories[summary.group] = SkewHistory(self._window)
            history.add(summary.evaluated_at, summary.skew)

    def forget(self, group: str) -> None:
        """Drop ``group`` (deleted, or no longer held)."""
        if self._listed.pop(group, None) is not None:
            self._orders.clear()
            self._held = None
        self._histories.pop(group, None)

    def page(
        self,
        *,
        held: frozenset[int],
        holding: Callable[[], Callable[[str], bool]],
        sort: GroupSort,
        order: Literal["asc", "desc"],
        offset: int,
        limit: int | None,
        query: str = "",
    ) -> tuple[list[ListedGroup], int]:
        """The page of the groups held here (``held``: the partitions this worker holds now; ``holding``
        makes the test of whether it holds a group) as :func:`~kagent.core.group_listing.page_listed`
        cuts it, and how many matched. A group evaluated here but no longer held (until the evaluator
        forgets it) is left out."""
        kept = self._orders.get((sort, order))
        if kept is None or kept[0] != held:
            if self._held is None or self._held[0] != held:
                holds = holding()
                self._held = held, sorted(group for group in self._listed if holds(group))
            ours = [self._listed[group] for group in self._held[1]]  # in name order: page_listed's first pass is linear
            kept = self._orders[sort, order] = held, page_listed(ours, sort=sort, order=order, offset=0, limit=None)[0]
        ordered = kept[1]
        if query:
            needle = query.casefold()
            ordered = [g for g in ordered if needle in g.folded]
        end = None if limit is None else offset + limit
        return ordered[offset:end], len(ordered)

    def history(self, group: str, now: float) -> list[SkewPoint]:
        """``group``'s skew per minute over the last hour before ``now``, oldest first."""
        history = self._histories.get(group)
        return history.points(now) if history is not None else []
