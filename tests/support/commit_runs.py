"""Commit runs built from their commits: how tests write the derived events the source packs."""

from __future__ import annotations

from kagent.core.events import CommitRun

__all__ = ["commit_run"]


def commit_run(topic: str, partition: int, *commits: tuple[int, int, int | None]) -> CommitRun:
    """The run of ``commits`` (each ``(offset, commit_timestamp, leader_epoch)``, oldest first) on a partition."""
    return [topic, partition, *(field for commit in commits for field in commit)]
