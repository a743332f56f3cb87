"""Headless Chromium for the dashboard's tests, and a stand-in API for its pages.

- :func:`require_chromium`: the path of Debian's Chromium (``/usr/bin/chromium``, which
  ``tests/install-servers`` installs); without it the calling test is skipped, saying so, except
  under ``CI=true``, where it fails (as :func:`tests.support.monitoring.require_binary` does for
  the monitoring servers).
- :func:`chromium`: Playwright's sync API driving that browser, headless, with a fresh profile,
  kept off the network (no updates, sync or background requests). Playwright's own browsers are
  never used and never downloaded: the browser is launched by its path.
- :class:`StandInApi`: NOT kagent's API. A stand-in for ``GET /api/groups`` and
  ``GET /api/groups/{group}`` answering canned records of :mod:`kagent.core.api_records`, beside the
  real dashboard stage's pages, in a thread of its own: for what real workers seldom answer (an
  incomplete listing, thousands of groups, a worker that fails). The tests of the dashboard against
  real workers are in ``tests/integration/test_dashboard.py``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import faust
import pytest
from aiohttp import web
from faust.web.drivers.aiohttp import Web as AiohttpWeb
from playwright.sync_api import Browser, Playwright, sync_playwright

from kagent.core.api_records import (
    ApiError,
    GroupDetail,
    GroupSort,
    GroupSummary,
    WorkerAnswer,
)
from kagent.core.group_listing import listed, page_json
from kagent.core.group_ranking import GroupRanking
from kagent.tools.embedded import free_port
from kagent.worker.dashboard import Dashboard
from tests.support.monitoring import in_ci

__all__ = ["CHROMIUM", "INSTALL_COMMAND", "LAUNCH_ARGS", "StandInApi", "chromium", "require_chromium", "summaries"]

CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium (package ``chromium``)."""

INSTALL_COMMAND = "apt-get install -y --no-install-recommends chromium"
"""What installs it (as root; ``tests/install-servers`` runs it)."""

LAUNCH_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
"""Headless in a container as root (no sandbox, no GPU), and nothing fetched but what a test asks for."""

LAUNCH_TIMEOUT_MS = 30_000
"""How long the browser may take to start (CI's two cores are busy)."""


def require_chromium() -> str:
    """The path of Debian's Chromium; the calling test is skipped without it (failed under ``CI=true``)."""
    for candidate in (CHROMIUM, shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    reason = (
        f"Chromium is not installed at {CHROMIUM}; it comes with Debian's chromium package: "
        f"{INSTALL_COMMAND} (as root; tests/install-servers does it)"
    )
    if in_ci():
        pytest.fail(f"{reason}. Under CI=true a missing browser fails the test.", pytrace=False)
    pytest.skip(reason)


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium (:func:`require_chromium`) under Playwright's sync API, closed on the way
    out. Each browser context the test makes from it has a fresh profile of its own."""
    executable = require_chromium()
    playwright: Playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=executable, args=list(LAUNCH_ARGS), headless=True, timeout=LAUNCH_TIMEOUT_MS
        )
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@dataclass
class StandInApi:
    """NOT kagent's API: canned answers of its contract, for the dashboard's pages (see the module).

    The real :class:`~kagent.worker.dashboard.Dashboard` stage serves the pages (``/``,
    ``/groups/{group}``, ``/static/dashboard/...``) from a Faust app's web routes, beside:

    - ``GET /api/groups``: :attr:`groups` sorted, filtered and paged by
      :class:`kagent.core.group_ranking.GroupRanking` as the real one does, with :attr:`workers`
      (``complete`` is whether all of them are ok); every query is kept in :attr:`asked`;
    - ``GET /api/groups/{group}``: :attr:`details` of the group, else 404 with an ``ApiError``;
      while :attr:`failing` is set, every ``/api`` request answers 503 with it.

    The attributes may be changed while it runs. Use as a context manager: it listens on a free
    loopback port in a thread of its own.
    """

    groups: list[GroupSummary] = field(default_factory=list)
    details: dict[str, GroupDetail] = field(default_factory=dict)
    workers: list[WorkerAnswer] = field(default_factory=list)
    failing: str | None = None
    refresh_interval: float = 0.3
    asked: list[dict[str, str]] = field(default_factory=list)
    port: int = field(default_factory=free_port)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stand-in-api", daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The web root, ending in ``/``."""
        return f"http://127.0.0.1:{self.port}/"

    def _application(self) -> web.Application:
        app = faust.App("dashboard-stand-in", broker="kafka://127.0.0.1:1", web_port=self.port)
        Dashboard(refresh_interval=self.refresh_interval).register(app)
        server = app.web
        assert isinstance(server, AiohttpWeb)
        server.init_server()
        application = server.web_app
        application.router.add_get("/api/groups", self._groups_page)
        application.router.add_get("/api/groups/{group:.+}", self._group_detail)
        return application

    async def _groups_page(self, request: web.Request) -> web.Response:
        query = dict(request.query)
        self.asked.append(query)
        if self.failing is not None:
            return _json(ApiError(error=self.failing).model_dump_json(), 503)
        sort = GroupSort(query.get("sort", "skew"))
        order: Literal["asc", "desc"] = "asc" if query.get("order") == "asc" else "desc"
        offset = int(query.get("offset", "0"))
        limit = int(query["limit"]) if "limit" in query else None
        page, total = GroupRanking([listed(g) for g in self.groups]).page(
            sort=sort,
            order=order,
            offset=offset,
            limit=limit,
            query=query.get("q", ""),
        )
        workers = tuple(self.workers) or (WorkerAnswer(url=self.url.rstrip("/"), ok=True),)
        body = page_json(
            [g.json for g in page],
            total=total,
            offset=offset,
            limit=limit,
            sort=sort,
            order=order,
            workers=workers,
            complete=all(w.ok for w in workers),
        )
        return _json(body.decode(), 200)

    async def _group_detail(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        self.asked.append({"group": group})
        if self.failing is not None:
            return _json(ApiError(error=self.failing).model_dump_json(), 503)
        found = self.details.get(group)
        if found is None:
            return _json(ApiError(error=f"no group {group!r} on the cluster").model_dump_json(), 404)
        return _json(found.model_dump_json(), 200)

    def __enter__(self) -> StandInApi:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    async def _start(self) -> None:
        self._runner = web.AppRunner(self._application())
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


def _json(text: str, status: int) -> web.Response:
    return web.Response(text=text, status=status, content_type="application/json")


def summaries(names: Sequence[str], **figures: object) -> list[GroupSummary]:
    """A :class:`GroupSummary` per name (status OK, two members, lag and skew growing with the index),
    any field replaced by ``figures``."""
    return [
        GroupSummary.model_validate(
            {
                "group": name,
                "state": "Stable",
                "status": "OK",
                "generation": 1,
                "protocol": "range",
                "members": 2,
                "partitions": 4,
                "total_lag": float(10 * i),
                "max_lag": float(5 * i),
                "total_lag_seconds": None,
                "max_lag_seconds": None,
                "skew": 1.0 + i / 1000,
                "skew_metric": "peak-to-mean",
                "lag_unit": "messages",
                "min_total_lag": 1000.0,
                "evaluated_at": 1_700_000_000.0,
                "worker": "http://127.0.0.1:1",
                **figures,
            }
        )
        for i, name in enumerate(names)
    ]
