"""The worker's Prometheus metrics page (the API and the dashboard have modules of their own)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import aclosing

import faust
from aiohttp import web
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST

from kagent.worker.metrics import Metrics
from kagent.worker.scrape import LoopHold, RenderedSeries, scrape_body
from kagent.worker.stage import Stage

__all__ = ["Views"]

log = logging.getLogger(__name__)


class Views(Stage):
    """``GET /metrics``: the worker's metrics in Prometheus' text exposition, all of them or the names asked for."""

    name = "views"

    def __init__(self, metrics: Metrics, series: Sequence[RenderedSeries]) -> None:
        """``series``: what follows the registry in the body (:func:`kagent.worker.scrape.scrape_body`)."""
        self._metrics = metrics
        self._series = series

    def register(self, app: faust.App) -> None:
        metrics = self._metrics
        registry = metrics.registry
        series = self._series

        @app.page("/metrics")
        class MetricsView(View):
            """``GET /metrics``: Prometheus text exposition, streamed a block at a time; with
            ``name[]=...`` (repeated), only the samples of those names, as prometheus_client's own
            exporters do. The per-group series are rendered again only for the groups whose figures
            changed since the last scrape, a slice of the event loop at a time; a scrape of the
            counters alone renders none."""

            async def get(self, request: Request) -> Response:
                names = request.query.getall("name[]", [])
                response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE_LATEST})
                hold = LoopHold()
                try:
                    await response.prepare(request)  # type: ignore[arg-type]  # Faust's aiohttp driver hands aiohttp's request
                    async with aclosing(scrape_body(registry, series, hold, names)) as body:
                        async for block in body:
                            hold.let_go()
                            await response.write(block)  # a copy into the transport, or a wait for the client
                            await asyncio.sleep(0)  # let others run after each block, whether the write waited or not
                            hold.take()
                    await response.write_eof()
                except ConnectionError:  # the scraper hung up (its timeout, a restart): nothing to answer, no error
                    log.info("/metrics: %s hung up before the scrape's end", request.remote)
                finally:
                    hold.let_go()
                    metrics.scrapes.inc()
                    metrics.scrape_cpu.inc(hold.cpu)
                    if not names:  # a scrape of a few names by name[] would hide the last full one's
                        metrics.scrape_longest_hold.set(hold.longest)
                return response  # type: ignore[return-value]  # aiohttp serves a prepared StreamResponse as it is
