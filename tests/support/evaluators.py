"""An evaluator built for a unit test of one of its parts: only the collaborators that part uses are given."""

from __future__ import annotations

from typing import Any, cast

from kagent.worker.evaluator import Evaluator
from kagent.worker.metrics import Metrics


def bare_evaluator(interval: float = 5.0, **given: Any) -> Evaluator:
    """An :class:`~kagent.worker.evaluator.Evaluator` of ``interval`` whose collaborators are ``given``
    (by the constructor's names), None where not given (a test that reaches one fails on it), with fresh
    :class:`~kagent.worker.metrics.Metrics` unless given."""
    unused = cast(Any, None)
    parts: dict[str, Any] = {
        "policy": unused,
        "groups": unused,
        "changes": unused,
        "states": unused,
        "recommendations": unused,
        "incidents": unused,
        "history": unused,
        "overview": unused,
        "writer": unused,
        "metrics": Metrics(),
        "cluster_name": "c",
        "worker_url": "http://w/",
    }
    return Evaluator(interval=interval, **(parts | given))
