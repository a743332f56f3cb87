"""The worker's web views: the groups it holds, its readiness, and its Prometheus metrics."""

from __future__ import annotations

import time

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

    @app.page("/groups/")
    class GroupsView(View):
        """``GET /groups/``: each held group's generation, assignor and per-member offset lag."""

        async def get(self, request: Request) -> Response:
            now = time.time()
            groups = {}
            for group in reader.held_groups():
                snapshot = reader.snapshot(group, now)
                if snapshot is None:
                    continue
                lag = {tp: entry.offset_lag for tp, entry in snapshot.lag.items()}
                assignment = {
                    m.member_id: [ref.topic_partition for ref in m.partitions] for m in snapshot.assignment.members
                }
                groups[group] = {
                    "generation": snapshot.assignment.generation,
                    "protocol": snapshot.assignment.protocol,
                    "member_lag": member_lag(assignment, lag),
                    "partitions_with_lag": len(lag),
                }
            return self.json({"groups": groups})

    @app.page("/metrics")
    class MetricsView(View):
        """``GET /metrics``: Prometheus text exposition."""

        async def get(self, request: Request) -> Response:
            return self.bytes(generate_latest(metrics.registry), content_type=METRICS_CONTENT_TYPE)
