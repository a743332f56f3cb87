"""The worker's Prometheus metrics page (the API and the dashboard have modules of their own)."""

from __future__ import annotations

import faust
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kagent.worker.metrics import Metrics
from kagent.worker.stage import Stage

__all__ = ["Views"]

METRICS_CONTENT_TYPE = "; ".join(
    part.strip() for part in CONTENT_TYPE_LATEST.split(";") if not part.strip().startswith("charset")
)
"""Prometheus' text content type less its charset, which aiohttp wants passed apart (and defaults to UTF-8)."""


class Views(Stage):
    """``GET /metrics``: the worker's registry in Prometheus' text exposition, all of it or the names asked for."""

    name = "views"

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def register(self, app: faust.App) -> None:
        registry = self._metrics.registry

        @app.page("/metrics")
        class MetricsView(View):
            """``GET /metrics``: Prometheus text exposition; with ``name[]=...`` (repeated), only the
            samples of those names, as prometheus_client's own exporters do. The per-group lag
            figures are computed only when one of their names is asked for: a scrape of them all costs
            about 0.3 ms of CPU per group held, one of the counters alone almost nothing."""

            async def get(self, request: Request) -> Response:
                names = request.query.getall("name[]", [])
                source = registry.restricted_registry(names) if names else registry
                return self.bytes(generate_latest(source), content_type=METRICS_CONTENT_TYPE)
