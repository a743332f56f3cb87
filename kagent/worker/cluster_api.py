"""The HTTP API: every worker answers for every group of the cluster (``/api/...``, ``/healthz``, ``/readyz``).

A group's state lives only on the worker holding it (its tables' changelog partition), so:

- ``GET /api/groups/{group}`` and ``GET /api/recommendations?group=`` are answered by the group's holder:
  any other worker forwards the request to it (:class:`~kagent.worker.routing.ClusterRouter`, from Faust's
  table routing metadata) and returns its answer as is;
- ``GET /api/groups``, ``GET /api/recommendations`` and ``GET /api/recommendations/{id}`` ask every worker
  for what it holds (``scope=local``) at once, and merge; an answer that misses a worker says so
  (``complete: false`` and ``workers``) rather than fail.

Lists come from the summaries the evaluator recorded at each group's last evaluation
(:class:`~kagent.worker.group_overview.GroupOverview`), so a list of thousands of groups measures nothing;
a group's page is measured when asked. The records are :mod:`kagent.core.api_records`; their OpenAPI
description is at ``/api/openapi.json``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import faust
import orjson
from faust.web import Request, Response, View
from pydantic import BaseModel, ValidationError

from kagent.core.api_records import (
    ApiError,
    GroupDetail,
    GroupSort,
    HeldGroup,
    HeldGroups,
    RecommendationsPage,
    WorkerAnswer,
    group_detail,
    newest_recommendations,
    summarize,
)
from kagent.core.group_listing import (
    LISTING,
    ListedGroup,
    Listing,
    listed_from_answer,
    listing_body,
    listing_of,
    merged_page_json,
    page_json,
    ranked_from_listing,
)
from kagent.core.member_lag import current_skew, member_lags
from kagent.core.openapi import openapi_document
from kagent.core.policy import EvaluationPolicy
from kagent.core.recommendation import Recommendation
from kagent.worker.group_overview import GroupOverview
from kagent.worker.group_state import GroupStateReader, OpenIncidentsReader
from kagent.worker.readiness import Readiness
from kagent.worker.recommendation_history import RecommendationHistory
from kagent.worker.request_view import RequestView
from kagent.worker.routing import FORWARDED, JSON, ClusterRouter, Forwarded
from kagent.worker.stage import Stage

__all__ = ["ClusterApi"]

DEFAULT_RECOMMENDATIONS = 20
MAX_RECOMMENDATIONS = 1000


class BadRequest(Exception):
    """A query parameter that is not what the API takes (answered 400, naming it)."""


M = TypeVar("M", bound=BaseModel)


def _json(view: View, model: BaseModel, status: int = 200) -> Response:
    return view.bytes(model.model_dump_json().encode(), content_type=JSON, status=status)


def _error(view: View, status: int, message: str) -> Response:
    return _json(view, ApiError(error=message), status)


def _forwarded(view: View, answer: Forwarded, what: str) -> Response:
    """Another worker's answer, as is; 502 naming it when it did not answer."""
    if answer.status is None:
        return _error(view, 502, f"the worker at {answer.url} holding {what} did not answer: {answer.error}")
    return view.bytes(answer.body, content_type=JSON, status=answer.status)


def _dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _int(
    query: Mapping[str, str], name: str, default: int | None, minimum: int, maximum: int | None = None
) -> int | None:
    """Query parameter ``name`` as an integer in [``minimum``, ``maximum``]; ``default`` when absent or empty.
    Raises :class:`BadRequest` naming the parameter otherwise."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"query parameter {name}={raw!r}: not an integer") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"at least {minimum}" + (f" and at most {maximum}" if maximum is not None else "")
        raise BadRequest(f"query parameter {name}={raw!r}: must be {bounds}")
    return value


def _choice(query: Mapping[str, str], name: str, choices: list[str], default: str) -> str:
    """Query parameter ``name``, one of ``choices``; ``default`` when absent. Raises :class:`BadRequest`."""
    raw = query.get(name) or default
    if raw not in choices:
        raise BadRequest(f"query parameter {name}={raw!r}: expected one of {', '.join(choices)}")
    return raw


class ClusterApi(Stage):
    """The ``/api`` views, ``/healthz`` and ``/readyz`` of one worker."""

    name = "api"

    def __init__(
        self,
        *,
        router: ClusterRouter,
        groups: GroupStateReader,
        overview: GroupOverview,
        history: RecommendationHistory,
        incidents: OpenIncidentsReader,
        readiness: Readiness,
        policy: EvaluationPolicy,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._router = router
        self._groups = groups
        self._overview = overview
        self._history = history
        self._incidents = incidents
        self._readiness = readiness
        self._policy = policy
        self._clock = clock
        self._openapi = _dumps(openapi_document())

    def register(self, app: faust.App) -> None:
        _views(app, self, self._router, self._readiness, self._openapi)

    async def stop(self) -> None:
        await self._router.close()

    # ----------------------------------------------------------------------------------------------------------
    # What this worker holds.

    def local_groups(
        self, *, sort: GroupSort, order: Literal["asc", "desc"], offset: int, limit: int | None, query: str
    ) -> tuple[list[ListedGroup], int]:
        """The page of the groups held here, and how many matched."""
        return self._overview.page(
            held=self._groups.held_partitions(),
            holding=self._groups.holding,
            sort=sort,
            order=order,
            offset=offset,
            limit=limit,
            query=query,
        )

    def local_group(self, group: str) -> GroupDetail | None:
        """``group`` measured now, if it is held here with an assignment."""
        if not self._groups.holding()(group):  # held here; one with nothing stored has no snapshot below
            return None
        now = self._clock()
        snapshot = self._groups.snapshot(group, now)
        if snapshot is None:
            return None
        latest = self._history.latest(group)
        summary = summarize(
            snapshot,
            status=self._groups.health(snapshot, now).status,
            skew=current_skew(snapshot, self._policy.lag_unit, self._policy.skew_metric),
            skew_metric=self._policy.skew_metric,
            lag_unit=self._policy.lag_unit,
            min_total_lag=self._policy.min_total_lag,
            state=None,
            incidents=[i for i in self._incidents.open_incidents() if i.group == group],
            worker=self._router.own_url,
        )
        if latest is not None:
            summary = summary.model_copy(
                update={"last_recommendation_id": latest.id, "last_recommendation_at": latest.time}
            )
        return group_detail(
            summary,
            snapshot,
            self._policy.lag_unit,
            latest,
            self._overview.history(group, now),
            self._groups.throughput(snapshot, self._policy.rate_window),
            self._groups.consumer_group(group),
        )

    def held(self) -> HeldGroups:
        """Every group held here, measured now: each member's offset lag (None when unknown), the partitions
        no member holds as member ``unknown``."""
        now = self._clock()
        groups = {}
        for group in self._groups.held_groups():
            snapshot = self._groups.snapshot(group, now)
            if snapshot is None:
                continue
            rows, rest = member_lags(snapshot)
            groups[group] = HeldGroup(
                generation=(
                    snapshot.assignment.generation
                    if snapshot.described and snapshot.assignment.generation >= 0
                    else None
                ),
                protocol=snapshot.assignment.protocol,
                member_lag={row.member_id: row.offset_lag for row in [*rows, *([rest] if rest else [])]},
                partitions_with_lag=sum(1 for entry in snapshot.lag.values() if entry.offset_lag),
            )
        return HeldGroups(worker=self._router.own_url, groups=groups)

    def local_recommendations(self, group: str | None, limit: int) -> list[Recommendation]:
        """The newest ``limit`` recommendations of ``group`` (of every held group when None) kept here."""
        held = self._groups.held_groups()
        groups = held if group is None else [group] if group in held else []
        return newest_recommendations([self._history.recent(g) for g in groups], limit)

    def local_recommendation(self, recommendation_id: str) -> Recommendation | None:
        return self._history.find(recommendation_id, self._groups.held_groups())


def _views(app: faust.App, api: ClusterApi, router: ClusterRouter, readiness: Readiness, openapi: bytes) -> None:
    """Add the routes to ``app``'s web server, answering from ``api``."""

    @app.page("/healthz")
    class HealthView(RequestView):
        """``GET /healthz``: 200 while the worker runs (its web server answers)."""

        async def get(self, request: Request) -> Response:
            return self.json({"status": "ok", "worker": router.own_url})

    @app.page("/readyz")
    class ReadyView(RequestView):
        """``GET /readyz``: 200 when the worker serves what it holds; 503 saying what is missing."""

        async def get(self, request: Request) -> Response:
            report = await readiness.report()
            return _json(self, report, 200 if report.ready else 503)

    @app.page("/api/openapi.json")
    class OpenApiView(RequestView):
        """``GET /api/openapi.json``: the API's OpenAPI 3.1 description."""

        async def get(self, request: Request) -> Response:
            return self.bytes(openapi, content_type=JSON)

    @app.page("/api/local/groups")
    class HeldGroupsView(RequestView):
        """``GET /api/local/groups``: the groups this worker holds, from its tables, measured now."""

        async def get(self, request: Request) -> Response:
            return _json(self, api.held())

    @app.page("/api/groups")
    class GroupsView(RequestView):
        """``GET /api/groups``: a page of the cluster's groups (``scope=local``: of this worker's)."""

        async def get(self, request: Request) -> Response:
            query = request.query
            try:
                sort = GroupSort(_choice(query, "sort", [s.value for s in GroupSort], GroupSort.SKEW.value))
                order: Literal["asc", "desc"] = (
                    "asc" if _choice(query, "order", ["asc", "desc"], "desc") == "asc" else "desc"
                )
                offset = _int(query, "offset", 0, 0) or 0
                limit = _int(query, "limit", None, 0)
                scope = _choice(query, "scope", ["cluster", "local"], "cluster")
            except BadRequest as exc:
                return _error(self, 400, str(exc))
            text = query.get("q", "")
            if scope == "local" or request.headers.get(FORWARDED):
                groups, total = api.local_groups(sort=sort, order=order, offset=offset, limit=limit, query=text)
                if request.headers.get(FORWARDED) and LISTING in request.headers.get("Accept", ""):
                    return self.bytes(listing_body(groups, total, sort), content_type=LISTING)
                body = page_json(
                    [g.json for g in groups],
                    total=total,
                    offset=offset,
                    limit=limit,
                    sort=sort,
                    order=order,
                    workers=[router.own_answer()],
                    complete=True,
                )
                return self.bytes(body, content_type=JSON)
            wanted = None if limit is None else offset + limit
            params = {"scope": "local", "sort": sort.value, "order": order, "q": text}
            if wanted is not None:
                params["limit"] = str(wanted)
            # The others cut their pages while this one cuts its own: the yield sends the requests.
            asking = router.asking_others("/api/groups", params, accept=LISTING)
            try:
                await asyncio.sleep(0)
                own, total = api.local_groups(sort=sort, order=order, offset=0, limit=wanted, query=text)
                answers = await asking
            finally:
                asking.cancel()  # a no-op once answered; if the client went, the others are asked no more
            listings: list[Listing] = []
            workers = [router.own_answer()]
            for answer in answers:
                found = _listing(answer, sort)
                if found is None:
                    workers.append(_failed(answer))
                    continue
                workers.append(answer.answer)
                listings.append(found[0])
                total += found[1]
            body = merged_page_json(
                own,
                listings,
                total=total,
                offset=offset,
                limit=limit,
                sort=sort,
                order=order,
                workers=workers,
                complete=all(w.ok for w in workers),
            )
            return self.bytes(body, content_type=JSON)

    @app.page("/api/groups/{group:.+}")
    class GroupView(RequestView):
        """``GET /api/groups/{group}``: one group, from the worker holding it; 404 if no worker does."""

        async def get(self, request: Request, group: str) -> Response:
            holder = router.holder(group)
            if holder is None or router.is_own(holder) or request.headers.get(FORWARDED):
                found = api.local_group(group)
                if found is None:
                    if holder is None:
                        return _error(
                            self, 503, "this worker has no assignment yet: it cannot tell who holds the group"
                        )
                    return _error(self, 404, f"no group {group!r} on the cluster")
                return _json(self, found)
            return _forwarded(self, await router.ask(holder, _path("/api/groups/", group)), f"group {group!r}")

    @app.page("/api/recommendations")
    class RecommendationsView(RequestView):
        """``GET /api/recommendations?group=&limit=``: recent recommendations, newest first."""

        async def get(self, request: Request) -> Response:
            query = request.query
            try:
                limit = _int(query, "limit", DEFAULT_RECOMMENDATIONS, 1, MAX_RECOMMENDATIONS) or DEFAULT_RECOMMENDATIONS
                scope = _choice(query, "scope", ["cluster", "local"], "cluster")
            except BadRequest as exc:
                return _error(self, 400, str(exc))
            group = query.get("group") or None
            own = (router.own_answer(),)
            local = scope == "local" or bool(request.headers.get(FORWARDED))
            if group is not None and not local:
                holder = router.holder(group)
                if holder is not None and not router.is_own(holder):
                    answer = await router.ask(holder, "/api/recommendations", {"group": group, "limit": str(limit)})
                    return _forwarded(self, answer, f"group {group!r}")
                local = True
            if local:
                found = api.local_recommendations(group, limit)
                return _json(self, RecommendationsPage(recommendations=tuple(found), workers=own, complete=True))
            lists = [api.local_recommendations(None, limit)]
            workers = [*own]
            for answer in await router.ask_others("/api/recommendations", {"scope": "local", "limit": str(limit)}):
                page = _parse(RecommendationsPage, answer)
                workers.append(answer.answer if page is not None else _failed(answer))
                if page is not None:
                    lists.append(list(page.recommendations))
            return _json(
                self,
                RecommendationsPage(
                    recommendations=tuple(newest_recommendations(lists, limit)),
                    workers=tuple(workers),
                    complete=all(w.ok for w in workers),
                ),
            )

    @app.page("/api/recommendations/{recommendation_id}")
    class RecommendationView(RequestView):
        """``GET /api/recommendations/{id}``: one recommendation, from whichever worker keeps it."""

        async def get(self, request: Request, recommendation_id: str) -> Response:
            found = api.local_recommendation(recommendation_id)
            if found is not None:
                return _json(self, found)
            if request.headers.get(FORWARDED):
                return _error(self, 404, f"no recommendation {recommendation_id!r} on this worker")
            path = _path("/api/recommendations/", recommendation_id)
            silent = []
            for answer in await router.ask_others(path):
                if answer.status == 200:
                    return self.bytes(answer.body, content_type=JSON)
                if answer.status is None or answer.status >= 500:
                    silent.append(f"{answer.url} ({answer.error or answer.status})")
            if silent:
                return _error(
                    self,
                    502,
                    f"no recommendation {recommendation_id!r} found; workers that did not answer: {', '.join(silent)}",
                )
            return _error(
                self, 404, f"no recommendation {recommendation_id!r} on the cluster (each group keeps its last 10)"
            )


def _path(prefix: str, name: str) -> str:
    """``prefix`` + ``name`` percent-encoded (a group name may hold ``/``, ``?``, ``%``...)."""
    return prefix + quote(name, safe="")


def _parse(model: type[M], answer: Forwarded) -> M | None:
    if answer.status != 200:
        return None
    try:
        return model.model_validate_json(answer.body)
    except ValidationError:
        return None


def _listing(answer: Forwarded, sort: GroupSort) -> tuple[Listing, int] | None:
    """Another worker's page of groups sorted by ``sort``, and its total: a listing, or (from a worker of
    an earlier version) plain JSON, its summaries checked for what a page reads of them, not validated
    again through the models; None when it is neither."""
    if answer.status != 200:
        return None
    if answer.content_type == LISTING:
        try:
            return ranked_from_listing(answer.body, sort)
        except ValueError:
            return None
    try:
        page = orjson.loads(answer.body)
        total = page["total"]
        if not isinstance(total, int) or isinstance(total, bool) or not isinstance(page["groups"], list):
            return None
        return listing_of([listed_from_answer(summary) for summary in page["groups"]], sort), total
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _failed(answer: Forwarded) -> WorkerAnswer:
    """How a worker that gave no usable answer answered."""
    if answer.status is None:
        return answer.answer
    return WorkerAnswer(url=answer.url, ok=False, error=f"answered {answer.status} with an unexpected body")
