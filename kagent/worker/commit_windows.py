"""The health check's history: each held group's last commits per partition, in a changelog table.

Part of the storage stage, which owns it. Every offset commit storage
applies is appended to the group-partition's :class:`CommitWindow` (Burrow's
offset ring: the last ``capacity`` commits, a commit closer than
``min_distance`` seconds to the newest replacing it) with the log-end offset
kagent knew when it saw the commit, so that the commit's lag is the one the
group had then. The windows live in the ``commit-windows`` table, keyed like
the committed offsets, so a worker that takes a group over judges its health
on the same history, not on an empty window that would call every group OK
(and resolve its incidents) after each failover.

A window is written only when a commit changes it: a commit read again
(the same offset and timestamp) writes nothing.
"""

from __future__ import annotations

import faust
from aiokafka.structs import TopicPartition

from kagent.core.events import OffsetCommitted
from kagent.core.group_health import CommitObservation, CommitWindow, append_commit
from kagent.core.table_keys import partition_key
from kagent.worker.changelog import ChangelogWriter

__all__ = ["CommitWindows"]


class CommitWindows:
    """Each group-partition's last commits (the ``commit-windows`` table), appended as commits come."""

    def __init__(self, table: faust.Table, writer: ChangelogWriter, *, capacity: int, min_distance: float) -> None:
        self._table = table
        self._writer = writer
        self._capacity = capacity
        self._min_distance = min_distance

    def observe(self, commit: OffsetCommitted, log_end_offset: int | None) -> None:
        """Append ``commit`` to its group-partition's window; ``log_end_offset`` is the partition's log
        end at the latest poll before it (None when never polled)."""
        key = partition_key(commit.group, commit.topic, commit.partition)
        window = self._load(key) or CommitWindow(capacity=self._capacity, min_distance=self._min_distance)
        observation = CommitObservation(commit.offset, commit.commit_timestamp / 1000, log_end_offset)
        appended = append_commit(window, observation)
        if appended is not window:
            self._writer.set(self._table, key, appended.model_dump_json().encode())

    def window(self, group: str, tp: TopicPartition) -> CommitWindow | None:
        """The group's window on ``tp``; None when no commit of it was seen."""
        return self._load(partition_key(group, tp.topic, tp.partition))

    def forget(self, group: str, tp: TopicPartition) -> None:
        """Drop the group's window on ``tp`` (its committed offset was deleted)."""
        self._writer.delete(self._table, partition_key(group, tp.topic, tp.partition))

    def _load(self, key: str) -> CommitWindow | None:
        """The stored window, resized to the configured capacity and distance if they changed since it
        was written (the newest commits kept)."""
        raw = self._table.get(key)
        if raw is None:
            return None
        window = CommitWindow.model_validate_json(raw)
        if (window.capacity, window.min_distance) != (self._capacity, self._min_distance):
            window = CommitWindow(
                capacity=self._capacity,
                min_distance=self._min_distance,
                commits=window.commits[-self._capacity :],
            )
        return window
