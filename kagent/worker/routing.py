"""Which worker holds a group, and asking the others: how any worker answers for the whole cluster.

Every table's changelog partition is its group's partition of the derived-events topic
(:func:`kagent.core.table_keys.partition_of_group`), and Faust's partition assignor tells every worker
which worker's web server holds each changelog partition (``app.router.table_metadata``: the URLs are
each worker's ``canonical_url``, ``KAGENT_ADVERTISED_URL``). A request about one group is forwarded to
its holder; a list is asked of every worker, each answering for what it holds, and merged.

A forwarded request carries :data:`FORWARDED`, so a worker that no longer holds the group (the assignment
moved between the two hops) answers for itself instead of forwarding it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aiohttp
import faust
from yarl import URL

from kagent.core.api_records import WorkerAnswer
from kagent.core.table_keys import partition_of_group

__all__ = ["FORWARDED", "JSON", "ClusterRouter", "Forwarded"]

FORWARDED = "X-Kagent-Forwarded"
"""Header of a request one worker makes of another on a client's behalf."""
JSON = "application/json"

ASK_TIMEOUT = 5.0
"""Seconds a worker waits for another's answer before it answers without it (saying so)."""


@dataclass(frozen=True)
class Forwarded:
    """Another worker's answer: its status and JSON body, or why there is none."""

    url: str
    status: int | None
    """None when it did not answer (``error`` says why)."""
    body: bytes = b""
    """What it answered (any status)."""
    error: str | None = None
    content_type: str = JSON
    """``body``'s media type: JSON, or the one asked for in its place."""

    @property
    def answer(self) -> WorkerAnswer:
        ok = self.status is not None and self.status < 500
        return WorkerAnswer(url=self.url, ok=ok, error=None if ok else self.error or f"status {self.status}")


class ClusterRouter:
    """Where groups are held, from Faust's assignment metadata, and requests to the other workers."""

    def __init__(self, app: faust.App, *, table: str, partitions: int, own_url: str, timeout: float = ASK_TIMEOUT):
        self._app = app
        self._table = table
        self._partitions = partitions
        self.own_url = own_url.rstrip("/")
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _distribution(self) -> Mapping[str, Sequence[int]]:
        """Worker URL -> the changelog partitions of ``table`` it holds, as the last assignment said."""
        metadata = self._app.router.table_metadata(self._table)
        return {
            str(url).rstrip("/"): [p for partitions in topics.values() for p in partitions]
            for url, topics in metadata.items()
        }

    def workers(self) -> list[str]:
        """Every worker of the last assignment (this one first), by URL; just this one before any."""
        others = sorted(url for url in self._distribution() if url != self.own_url)
        return [self.own_url, *others]

    def holder(self, group: str) -> str | None:
        """The URL of the worker holding ``group``; None while no assignment names one."""
        partition = partition_of_group(group, self._partitions)
        for url, partitions in self._distribution().items():
            if partition in partitions:
                return url
        return None

    def own_answer(self) -> WorkerAnswer:
        """This worker's part in a fanned-out answer: answered."""
        return WorkerAnswer(url=self.own_url, ok=True)

    def is_own(self, url: str | None) -> bool:
        return url is not None and URL(url) == URL(self.own_url)

    async def ask(self, url: str, path: str, params: Mapping[str, str] | None = None, accept: str = JSON) -> Forwarded:
        """GET ``path`` of the worker at ``url`` (marked :data:`FORWARDED`), preferring ``accept`` to JSON;
        never raises for its sake. An answer in neither is no answer."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        headers = {FORWARDED: "1", "Accept": accept if accept == JSON else f"{accept}, {JSON};q=0.5"}
        try:
            async with self._session.get(
                URL(url).with_path(path, encoded=True), params=params or {}, headers=headers
            ) as response:
                body = await response.read()
                if response.content_type not in (accept, JSON):
                    return Forwarded(url, None, error=f"answered {response.status} with {response.content_type}")
                return Forwarded(url, response.status, body, content_type=response.content_type)
        except TimeoutError:
            return Forwarded(url, None, error=f"no answer within {self._timeout:g} s")
        except aiohttp.ClientError as exc:
            return Forwarded(url, None, error=str(exc) or type(exc).__name__)

    def asking_others(
        self, path: str, params: Mapping[str, str] | None = None, accept: str = JSON
    ) -> asyncio.Future[list[Forwarded]]:
        """Ask every other worker at once, each in a task started now: their answers in :meth:`workers`
        order once all came. A request is on its way by the end of its task's first step (with a kept
        connection), so a caller that yields once (``asyncio.sleep(0)``) may work while they answer."""
        return asyncio.gather(
            *(asyncio.ensure_future(self.ask(url, path, params, accept)) for url in self.workers()[1:])
        )

    async def ask_others(
        self, path: str, params: Mapping[str, str] | None = None, accept: str = JSON
    ) -> list[Forwarded]:
        """Ask every other worker at once; their answers in :meth:`workers` order."""
        return list(await self.asking_others(path, params, accept))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
