"""The OpenAPI 3.1 description of kagent's HTTP API, generated from the records it serves.

Served at ``/api/openapi.json``. The schemas are those of :mod:`kagent.core.api_records` (and the
:class:`~kagent.core.recommendation.Recommendation` record), so the description cannot drift from what the
views send. Pure.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from kagent.core.api_records import (
    ApiError,
    GroupDetail,
    GroupSort,
    GroupsPage,
    HeldGroups,
    ReadinessReport,
    RecommendationsPage,
)
from kagent.core.recommendation import Recommendation

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_MODELS: tuple[type[BaseModel], ...] = (
    GroupsPage,
    GroupDetail,
    RecommendationsPage,
    Recommendation,
    HeldGroups,
    ReadinessReport,
    ApiError,
)


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _error(description: str) -> dict[str, Any]:
    return _json(ApiError, description)


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _path(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "description": description}


_SCOPE = _query(
    "scope",
    {"type": "string", "enum": ["cluster", "local"], "default": "cluster"},
    "`local`: only what the worker asked holds (what workers ask each other).",
)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``/api``, ``/healthz`` and ``/readyz``."""
    _, definitions = models_json_schema([(m, "serialization") for m in _MODELS], ref_template=_REF)
    try:
        release = version("kagent")
    except PackageNotFoundError:  # running from a source tree that was not installed
        release = "0"
    bad_request = _error("A query parameter is not what the API takes; the error names it.")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kagent",
            "version": release,
            "description": (
                "Consumer-lag balancing agent for Kafka. Every worker answers for every group of the cluster: "
                "it forwards a request about one group to the worker holding it, and asks every worker for lists."
            ),
        },
        "paths": {
            "/api/groups": {
                "get": {
                    "summary": "The cluster's groups, as of each one's last evaluation",
                    "operationId": "listGroups",
                    "parameters": [
                        _query(
                            "sort",
                            {"type": "string", "enum": [s.value for s in GroupSort], "default": "skew"},
                            "What to sort by; unknown figures sort below known ones.",
                        ),
                        _query("order", {"type": "string", "enum": ["asc", "desc"], "default": "desc"}, "Sort order."),
                        _query("q", {"type": "string"}, "Only groups whose name contains this (case-insensitive)."),
                        _query("offset", {"type": "integer", "minimum": 0, "default": 0}, "Groups to skip."),
                        _query(
                            "limit", {"type": "integer", "minimum": 0}, "At most this many groups (all by default)."
                        ),
                        _SCOPE,
                    ],
                    "responses": {"200": _json(GroupsPage, "A page of groups."), "400": bad_request},
                }
            },
            "/api/groups/{group}": {
                "get": {
                    "summary": "One group, measured now by the worker holding it",
                    "operationId": "getGroup",
                    "parameters": [_path("group", "The group id, percent-encoded.")],
                    "responses": {
                        "200": _json(GroupDetail, "The group."),
                        "404": _error("No worker holds such a group."),
                        "502": _error("The worker holding the group did not answer."),
                        "503": _error("The worker has no assignment yet."),
                    },
                }
            },
            "/api/recommendations": {
                "get": {
                    "summary": "Recent recommendations, newest first",
                    "operationId": "listRecommendations",
                    "parameters": [
                        _query("group", {"type": "string"}, "Only this group's (each group keeps its last 10)."),
                        _query(
                            "limit",
                            {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20},
                            "At most this many.",
                        ),
                        _SCOPE,
                    ],
                    "responses": {
                        "200": _json(RecommendationsPage, "Recommendations."),
                        "400": bad_request,
                        "502": _error("The worker holding the group did not answer."),
                    },
                }
            },
            "/api/recommendations/{id}": {
                "get": {
                    "summary": "One recommendation (the record on the recommendations topic)",
                    "operationId": "getRecommendation",
                    "parameters": [_path("id", "The recommendation id.")],
                    "responses": {
                        "200": _json(Recommendation, "The recommendation."),
                        "404": _error("No worker keeps it."),
                        "502": _error("Not found, and some worker did not answer."),
                    },
                }
            },
            "/api/local/groups": {
                "get": {
                    "summary": "The groups the worker asked holds now, from its tables (for debugging placement)",
                    "operationId": "listHeldGroups",
                    "responses": {"200": _json(HeldGroups, "The worker's groups.")},
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Whether the worker runs",
                    "operationId": "health",
                    "responses": {"200": {"description": "It runs."}},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "Whether the worker serves what it holds",
                    "operationId": "readiness",
                    "responses": {
                        "200": _json(ReadinessReport, "Ready."),
                        "503": _json(ReadinessReport, "Not ready; the report says why."),
                    },
                }
            },
        },
        "components": {"schemas": definitions["$defs"]},
    }
