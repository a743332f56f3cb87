"""What the operator sees of each group this worker holds: its summary as of its last evaluation, and its
skew over the last hour.

The evaluator records a :class:`~kagent.core.api_records.GroupSummary` after each evaluation
(:meth:`GroupOverview.record`); the HTTP API lists them (``GET /api/groups``) without measuring anything,
each as its JSON and sort figures (:class:`~kagent.core.group_listing.ListedGroup`), made at the first
listing after the summary was recorded and kept until the next: listing thousands of groups costs a
join, and an evaluation round pays nothing for a list nobody asks for. The skew history is kept per
minute (the largest skew measured in it), 60 minutes, in two arrays of floats per group (about 1 KB a
group).

In memory only: a worker that takes a group over lists it from its first evaluation there, and its
history starts then.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from kagent.core.api_records import GroupSummary, SkewPoint
from kagent.core.group_listing import ListedGroup, listed

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
        self._summaries: dict[str, GroupSummary] = {}
        self._listed: dict[str, ListedGroup] = {}
        """Group -> its latest summary as lists show it, once a list asked for it."""
        self._histories: dict[str, SkewHistory] = {}

    def record(self, summary: GroupSummary) -> None:
        """Keep ``summary`` as its group's latest, and its skew (when measured) in the group's history."""
        self._summaries[summary.group] = summary
        self._listed.pop(summary.group, None)
        if summary.skew is not None:
            history = self._histories.get(summary.group)
            if history is None:
                history = self._histories[summary.group] = SkewHistory(self._window)
            history.add(summary.evaluated_at, summary.skew)

    def forget(self, group: str) -> None:
        """Drop ``group`` (deleted, or no longer held)."""
        self._summaries.pop(group, None)
        self._listed.pop(group, None)
        self._histories.pop(group, None)

    def listed(self, groups: Iterable[str]) -> list[ListedGroup]:
        """The latest summaries of those of ``groups`` evaluated here as lists show them, in the order given."""
        found = []
        for group in groups:
            entry = self._listed.get(group)
            if entry is None:
                summary = self._summaries.get(group)
                if summary is None:
                    continue
                entry = self._listed[group] = listed(summary)
            found.append(entry)
        return found

    def history(self, group: str, now: float) -> list[SkewPoint]:
        """``group``'s skew per minute over the last hour before ``now``, oldest first."""
        history = self._histories.get(group)
        return history.points(now) if history is not None else []
