"""What the operator sees of each group this worker holds: its summary as of its last evaluation, and its
skew over the last hour.

The evaluator records a :class:`~kagent.core.api_records.GroupSummary` after each evaluation
(:meth:`GroupOverview.record`), kept as its JSON and sort figures
(:class:`~kagent.core.group_listing.ListedGroup`, about 5 µs to make, once per evaluation); the HTTP API
pages them (``GET /api/groups``, :meth:`GroupOverview.page`) without measuring anything, from the held
groups in each order asked for, kept sorted as summaries are recorded
(:class:`~kagent.core.group_ranking.GroupRanking`; sorted again only when this worker's partitions move): a
page is a slice and a join, even while every evaluation changes a summary. The skew history is kept per
minute (the largest skew measured in it), 60 minutes, in two arrays of floats per group (about 1 KB a group).

In memory only: a worker that takes a group over lists it from its first evaluation there, and its
history starts then.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Literal

from kagent.core.api_records import GroupSort, GroupSummary, SkewPoint
from kagent.core.collector import untrack
from kagent.core.group_listing import ListedGroup, listed
from kagent.core.group_ranking import GroupRanking

__all__ = ["GroupOverview", "SkewHistory"]

MINUTE = 60.0
HOUR = 3600.0


class SkewHistory:
    """One group's skew per minute over the last ``window`` seconds: the largest value measured in each.
    Numbers only: out of the garbage collector's watch (a worker keeps one per group it holds,
    :mod:`kagent.core.collector`)."""

    __slots__ = ("_skews", "_starts", "_window")

    def __init__(self, window: float = HOUR) -> None:
        self._window = window
        self._starts = array("d")
        self._skews = array("d")
        untrack([self, self._starts, self._skews])

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
        self._ranking: tuple[frozenset[int], GroupRanking] | None = None
        """The held partitions and the groups of :attr:`_listed` held then, in the orders pages asked
        for; None before the first page."""
        self._unchecked: set[str] = set()
        """Groups put in the ranking since the last page without a look at whether they are held: those
        that were not in it (new here, or left out as not held)."""

    def record(self, summary: GroupSummary) -> None:
        """Keep ``summary`` as its group's latest, and its skew (when measured) in the group's history."""
        entry = self._listed[summary.group] = listed(summary)
        if self._ranking is not None:
            ranking = self._ranking[1]
            if summary.group not in ranking:
                self._unchecked.add(summary.group)
            ranking.put(entry)
        if summary.skew is not None:
            history = self._histories.get(summary.group)
            if history is None:
                history = self._histories[summary.group] = SkewHistory(self._window)
            history.add(summary.evaluated_at, summary.skew)

    def forget(self, group: str) -> None:
        """Drop ``group`` (deleted, or no longer held)."""
        self._listed.pop(group, None)
        if self._ranking is not None:
            self._ranking[1].discard(group)
        self._unchecked.discard(group)
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
        makes the test of whether it holds a group) as :meth:`GroupRanking.page
        <kagent.core.group_ranking.GroupRanking.page>` cuts it, and how many matched. A group evaluated
        here but no longer held (until the evaluator forgets it) is left out. ``holding`` is asked only
        when the partitions moved since the last page or a group came that was not listed then."""
        if self._ranking is None or self._ranking[0] != held:
            holds = holding()
            self._ranking = held, GroupRanking(entry for group, entry in self._listed.items() if holds(group))
            self._unchecked.clear()
        ranking = self._ranking[1]
        if self._unchecked:
            holds = holding()
            for group in self._unchecked:
                if not holds(group):
                    ranking.discard(group)
            self._unchecked.clear()
        return ranking.page(sort=sort, order=order, offset=offset, limit=limit, query=query)

    def history(self, group: str, now: float) -> list[SkewPoint]:
        """``group``'s skew per minute over the last hour before ``now``, oldest first."""
        history = self._histories.get(group)
        return history.points(now) if history is not None else []
