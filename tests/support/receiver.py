"""A real HTTP server on loopback that records what is posted to it: the far end of an alert sink.

It runs aiohttp in a thread of its own, with its own event loop, so it answers while the test
blocks (waiting for a worker's exit, say). Each request is recorded with its path, headers, body
and arrival time; :attr:`Receiver.answer` decides each response (202 by default) and can be
changed while it runs, to play a sink that is down (503), rejects (400) or limits the rate (429).
:meth:`Receiver.close_port` and :meth:`Receiver.open_port` stop and resume listening on the same
port: a sink that is really gone, its connections refused.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from kagent.tools.embedded import free_port

__all__ = ["Answer", "Posted", "Receiver"]


@dataclass(frozen=True)
class Posted:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    """``time.time()`` when it arrived."""
    status: int
    """What the receiver answered."""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    """A response: its status, and headers such as ``Retry-After``."""

    status: int = 202
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""


class Receiver:
    """Records every request to ``http://127.0.0.1:<port>/...``; answers with :attr:`answer`."""

    def __init__(self, answer: Callable[[str, bytes], Answer] | None = None) -> None:
        self.port = free_port()
        self.answer: Callable[[str, bytes], Answer] = answer or (lambda path, body: Answer())
        self._posted: list[Posted] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="receiver", daemon=True)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def posted(self) -> list[Posted]:
        """Every request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._posted)

    def __enter__(self) -> Receiver:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def close_port(self) -> None:
        """Stop listening: connections to the port are refused until :meth:`open_port`."""
        self._call(self._stop_site())

    def open_port(self) -> None:
        """Listen again on the same port."""
        self._call(self._start_site())

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        answer = self.answer(request.path, body)
        with self._lock:
            self._posted.append(Posted(request.path, dict(request.headers), body, time.time(), answer.status))
        return web.Response(status=answer.status, headers=answer.headers, text=answer.body)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await self._start_site()

    async def _start_site(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await self._site.start()

    async def _stop_site(self) -> None:
        if self._site is not None:
            await self._site.stop()
            self._site = None

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
