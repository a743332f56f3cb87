"""Each held group's latest recommendations, in the recent-recommendations table: what the HTTP API serves.

The evaluator adds a recommendation (:meth:`RecommendationHistory.add`) when it decides it, in the same
changelog flush as the trigger state that holds it, so a worker that takes the group over serves the same
history. The table keeps :data:`~kagent.core.recommendation.KEPT_RECOMMENDATIONS` per group
(``RecentRecommendations``, ``tables/recent-recommendations.schema.json``); the topic keeps them all.

Reads parse a group's value once and reuse it until the value changes.
"""

from __future__ import annotations

from collections.abc import Iterable

import faust

from kagent.core.recommendation import KEPT_RECOMMENDATIONS, RecentRecommendations, Recommendation
from kagent.worker.changelog import ChangelogWriter

__all__ = ["RecommendationHistory"]


class RecommendationHistory:
    """The recent-recommendations table, written through the evaluator's changelog writer."""

    def __init__(self, table: faust.Table, writer: ChangelogWriter, keep: int = KEPT_RECOMMENDATIONS) -> None:
        self._table = table
        self._writer = writer
        self._keep = keep
        self._parsed: dict[str, tuple[bytes, RecentRecommendations]] = {}

    def add(self, recommendation: Recommendation) -> None:
        """Put ``recommendation`` first in its group's list (staged; the writer's next flush sends it)."""
        group = recommendation.group
        current = self._read(group) or RecentRecommendations(group=group, recommendations=())
        self._writer.set(self._table, group, current.adding(recommendation, self._keep).model_dump_json().encode())

    def forget(self, group: str) -> None:
        """Drop a deleted group's list."""
        if self._table.get(group) is not None:
            self._writer.delete(self._table, group)
        self._parsed.pop(group, None)

    def recent(self, group: str) -> tuple[Recommendation, ...]:
        """``group``'s recommendations kept here, newest first (empty when none, or not held here)."""
        found = self._read(group)
        return found.recommendations if found is not None else ()

    def latest(self, group: str) -> Recommendation | None:
        recent = self.recent(group)
        return recent[0] if recent else None

    def find(self, recommendation_id: str, groups: Iterable[str]) -> Recommendation | None:
        """The recommendation with that id among ``groups``' (the groups held here); None if none."""
        for group in groups:
            for recommendation in self.recent(group):
                if recommendation.id == recommendation_id:
                    return recommendation
        return None

    def _read(self, group: str) -> RecentRecommendations | None:
        raw = self._table.get(group)
        if raw is None:
            self._parsed.pop(group, None)
            return None
        cached = self._parsed.get(group)
        if cached is not None and cached[0] is raw:
            return cached[1]
        parsed = RecentRecommendations.model_validate_json(raw)
        self._parsed[group] = (raw, parsed)
        return parsed
