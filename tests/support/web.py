"""A worker's web views: JSON bodies, and waiting for one to show a state."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from tests.support.waiting import wait_until_async

__all__ = ["get_answer", "get_json", "group_page", "group_recommendations", "wait_json"]


def get_json(url: str, timeout: float = 5.0) -> Any | None:
    """GET ``url`` and parse its JSON body; None while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError):
        return None


def get_answer(url: str, timeout: float = 5.0, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """GET ``url``: its status and JSON body, whatever the status (an error's body too); raises
    ``OSError`` when nothing answers there."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.load(error)


def group_page(base_url: str, group: str) -> dict[str, Any] | None:
    """``GET /api/groups/{group}`` of the worker at ``base_url``: the group's page; None until it answers 200."""
    status, body = get_answer(base_url + f"api/groups/{quote(group, safe='')}")
    return body if status == 200 else None


def group_recommendations(base_url: str, group: str, limit: int = 10) -> list[dict[str, Any]]:
    """``GET /api/recommendations?group=``: ``group``'s latest ``limit`` recommendations, newest first; empty
    until the worker answers 200."""
    status, body = get_answer(base_url + f"api/recommendations?group={quote(group)}&limit={limit}")
    return list(body["recommendations"]) if status == 200 else []


async def wait_json(url: str, predicate: Callable[[Any], bool], timeout: float, what: str | None = None) -> Any:
    """Poll ``url`` every 0.2 s until its JSON body satisfies ``predicate``, and return the body;
    fail after ``timeout`` s naming ``what`` (default: the URL) with the last body seen."""
    last: list[Any] = [None]

    async def probe() -> Any:
        last[0] = body = await asyncio.to_thread(get_json, url)
        return body if body is not None and predicate(body) else None

    return await wait_until_async(
        probe,
        timeout,
        what or f"{url} to reach the expected state",
        interval=0.2,
        detail=lambda: f"last body: {json.dumps(last[0])[:3000]}",
    )
