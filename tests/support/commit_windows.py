"""The model form of a commit joining a health window: the oracle tests hold the stored window to."""

from __future__ import annotations

from typing import Any

from kagent.core.group_health import CommitObservation, CommitWindow, add_commit

__all__ = ["append_commit"]


def append_commit(window: CommitWindow, observation: CommitObservation) -> CommitWindow:
    """``window`` with ``observation`` added as its newest commit, by :func:`add_commit`'s rules, as a model."""
    commits: list[Any] = list(window.commits)
    if not add_commit(commits, observation, window.capacity, window.min_distance):
        return window
    return window.model_copy(update={"commits": tuple(CommitObservation(*commit) for commit in commits)})
