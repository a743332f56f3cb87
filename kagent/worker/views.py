"""The worker's web views: the groups it holds, and its Prometheus metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import faust
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kagent.core.skew import member_lag
from kagent.worker.evaluator import Evaluator
from kagent.worker.metrics import Metrics

__all__ = ["install"]

METRICS_CONTENT_TYPE = "; ".join(
    part.strip() for part in CONTENT_TYPE_LATEST.split(";") if not part.strip().startswith("charset")
)
"""Prometheus' text content type less its charset, which aiohttp wants passed apart (and defaults to UTF-8)."""


def install(
    app: faust.App, evaluator: Evaluator, metrics: Metrics, held_groups: Callable[[], Iterable[str]]
) -> None:
    """Add ``/groups/`` and ``/metrics`` to ``app``'s web server."""

    @app.page("/groups/")
    class GroupsView(View):
        """``GET /groups/``: each held group's generation, assignor and per-member offset lag."""

        async def get(self, request: Request) -> Response:
            now = time.time()
            groups = {}
            for group in sorted(held_groups()):
                snapshot = evaluator.snapshot(group, now)
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
