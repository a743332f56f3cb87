"""A client of kagent's HTTP API (a worker's ``/api``), for the terminal commands and the demo.

Answers are parsed with the API's own models (:mod:`kagent.core.api_records`); every failure (a worker
that does not answer, an error status, an answer that does not parse) raises :class:`ApiFailure` with one
line naming the URL and what failed.
"""

from __future__ import annotations

from types import TracebackType
from typing import Literal, TypeVar
from urllib.parse import quote, urlsplit

import aiohttp
from pydantic import BaseModel, ValidationError

from kagent.core.api_records import ApiError, GroupDetail, GroupSort, GroupsPage

__all__ = ["API_TIMEOUT", "ApiClient", "ApiFailure"]

_Model = TypeVar("_Model", bound=BaseModel)

API_TIMEOUT = 15.0
"""Seconds a command waits for a worker's answer (a worker asks the others before it answers a list)."""


class ApiFailure(Exception):
    """A worker's API gave no usable answer; ``str()`` is one line naming the URL and what failed."""


class ApiClient:
    """A client of kagent's JSON API at ``base_url`` (a worker's web root; any worker answers for the cluster).

    Use as ``async with ApiClient(url) as api``. Every method returns the answer parsed with its model, or
    raises :class:`ApiFailure` (unreachable, timed out, an error status, a body its model rejects).
    """

    def __init__(self, base_url: str, timeout: float = API_TIMEOUT) -> None:
        """Raises :class:`ApiFailure` if ``base_url`` is not an ``http://`` or ``https://`` URL with a host."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ApiFailure(f"{base_url}: not an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ApiClient:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def groups(
        self,
        *,
        sort: GroupSort = GroupSort.GROUP,
        order: Literal["asc", "desc"] = "asc",
        offset: int = 0,
        limit: int | None = None,
        query: str = "",
    ) -> GroupsPage:
        """``GET /api/groups``: a page of the cluster's groups."""
        params = {"sort": sort.value, "order": order, "offset": str(offset)}
        if limit is not None:
            params["limit"] = str(limit)
        if query:
            params["q"] = query
        return await self._get("/api/groups", GroupsPage, params)

    async def group(self, name: str) -> GroupDetail:
        """``GET /api/groups/{group}``: one group, measured now."""
        return await self._get(f"/api/groups/{quote(name, safe='')}", GroupDetail)

    async def _get(self, path: str, model: type[_Model], params: dict[str, str] | None = None) -> _Model:
        assert self._session is not None, "use ApiClient in 'async with'"
        url = self.base_url + path
        shown = url + ("?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items()) if params else "")
        try:
            async with self._session.get(url, params=params) as response:
                body = await response.read()
                status, reason = response.status, response.reason
        except TimeoutError:
            raise ApiFailure(f"{shown}: no answer within {self.timeout:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            why = "connection refused" if isinstance(exc.os_error, ConnectionRefusedError) else exc.strerror
            raise ApiFailure(f"cannot reach the worker at {shown}: {why or 'connection failed'}") from None
        except aiohttp.ClientError as exc:
            raise ApiFailure(f"{shown}: {type(exc).__name__}: {exc}") from None
        if status != 200:
            raise ApiFailure(f"{shown}: HTTP {status} {reason or ''}".rstrip() + f": {_error_text(body)}")
        try:
            return model.model_validate_json(body)
        except ValidationError as exc:
            raise ApiFailure(f"{shown}: malformed answer: {_first_error(exc)}") from None


def _error_text(body: bytes) -> str:
    """What an error answer says: its ``error`` field, else its first line (cut to 200 characters)."""
    try:
        return ApiError.model_validate_json(body).error
    except ValidationError:
        text = body.decode(errors="replace").strip()
        first = text.splitlines()[0] if text else "(empty body)"
        return first if len(first) <= 200 else first[:199] + "…"


def _first_error(exc: ValidationError) -> str:
    """A validation error in one line: where and what of the first problem, and how many there are."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where + ': ' if where else ''}{first['msg']}{more}"
