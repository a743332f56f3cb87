"""The worker's web views: the groups it holds, its readiness, and its Prometheus metrics."""

from __future__ import annotations

import time
from typing import Any

import faust
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kagent.core.skew import member_lag
from kagent.worker.group_state import GroupStateReader
from kagent.worker.metrics import Metrics
from kagent.worker.stage import Stage
from kagent.worker.stalls import StallDetector

__all__ = ["Views"]

METRICS_CONTENT_TYPE = "; ".join(
    part.strip() for part in CONTENT_TYPE_LATEST.split(";") if not part.strip().startswith("charset")
)
"""Prometheus' text content type less its charset, which aiohttp wants passed apart (and defaults to UTF-8)."""


class Views(Stage):
    """The worker's web pages: ``/groups/`` and ``/metrics``."""

    name = "views"

    def __init__(self, groups: GroupStateReader, stalls: StallDetector, metrics: Metrics) -> None:
        self._groups = groups
        self._stalls = stalls
        self._metrics = metrics

    def register(self, app: faust.App) -> None:
        """Add ``/groups/``, ``/readyz`` and ``/metrics`` to ``app``'s web server."""
        _pages(app, self._groups, self._stalls, self._metrics)


def _pages(app: faust.App, reader: GroupStateReader, stalls: StallDetector, metrics: Metrics) -> None:
    @app.page("/readyz")
    class ReadyView(View):
        """``GET /readyz``: 200 while every stage makes progress; 503 naming the stalled ones."""

        async def get(self, request: Request) -> Response:
            stalled = stalls.stalled()
            body = {"ready": not stalled, "stalled_stages": sorted(stalled)}
            return self.json(body, status=503 if stalled else 200)

    def describe(group: str, now: float) -> dict[str, Any] | None:
        snapshot = reader.snapshot(group, now)
        if snapshot is None:
            return None
        lag = {tp: entry.offset_lag for tp, entry in snapshot.lag.items()}
        assignment = {m.member_id: [ref.topic_partition for ref in m.partitions] for m in snapshot.assignment.members}
        return {
            "generation": snapshot.assignment.generation,
            "protocol": snapshot.assignment.protocol,
            "member_lag": member_lag(assignment, lag),
            "partitions_with_lag": len(lag),
        }

    @app.page("/groups/")
    class GroupsView(View):
        """``GET /groups/``: each held group's generation, assignor and per-member offset lag."""

        async def get(self, request: Request) -> Response:
            now = time.time()
            groups = {group: found for group in reader.held_groups() if (found := describe(group, now)) is not None}
            return self.json({"groups": groups})

    @app.page("/groups/{group}")
    class GroupView(View):
        """``GET /groups/<group>``: one held group as in ``/groups/`` (the page alerts link to); 404 if
        this worker does not hold it."""

        async def get(self, request: Request, group: str) -> Response:
            found = describe(group, time.time()) if group in reader.held_groups() else None
            if found is None:
                return self.json({"error": f"group {group!r} is not held by this worker"}, status=404)
            return self.json({"group": group, **found})

    @app.page("/metrics")
    class MetricsView(View):
        """``GET /metrics``: Prometheus text exposition."""

        async def get(self, request: Request) -> Response:
            return self.bytes(generate_latest(metrics.registry), content_type=METRICS_CONTENT_TYPE)
