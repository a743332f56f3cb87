"""The committed-offsets table's value: a group's last commit on a partition, with its recent commits.

One value per group-partition holds both what lag needs (the committed
offset) and what the health check needs (the window of the last commits,
:class:`~kagent.core.group_health.CommitWindow`'s rules), so that applying a
commit reads one value, writes one, and sends one changelog record. The
group, topic and partition are the table key's (:func:`~kagent.core.table_keys.partition_key`),
not repeated in the value. Version 2 of the value; version 1 (kagent 0.x up to
this change) was the ``offset-committed`` event itself, with no window, and
still reads: as a commit whose window holds that commit alone.

JSON, as every table value is (``tables/committed-offset.schema.json``),
encoded and parsed with orjson: a worker applies one per commit it reads,
tens of thousands a second, and pydantic's model round trip costs about
13 µs of CPU per window where orjson's costs about 1.5 µs.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict

from kagent.core.group_health import CommitObservation, CommitWindow, appended_commits
from kagent.core.json_bytes import kept

__all__ = ["Applied", "CommittedOffset", "StoredCommit", "applied", "decode", "encode"]


class CommittedOffset(BaseModel):
    """A group's last commit on one partition, and its recent commits (the table key names the group, the
    topic and the partition). Version 2; a value without ``commits`` is version 1's."""

    model_config = ConfigDict(frozen=True, extra="allow", use_attribute_docstrings=True)

    offset: int
    """The committed offset: the next record the group will read."""
    commit_timestamp: int
    """Milliseconds since the epoch, as the coordinator stamped the commit."""
    leader_epoch: int | None = None
    commits: tuple[CommitObservation, ...] = ()
    """The group's last commits on the partition, oldest first, each with the log-end offset kagent knew
    when it saw the commit (Burrow's offset ring; at most the health check's ``KAGENT_HEALTH_COMMITS``)."""


class StoredCommit(NamedTuple):
    """A parsed value: the newest commit and the window, as plain data (no validation on the hot path)."""

    offset: int
    commit_timestamp: int
    leader_epoch: int | None
    commits: Sequence[Sequence[Any]]
    """``[offset, timestamp (s), log_end_offset | None]`` each, oldest first."""

    def window(self, capacity: int, min_distance: float) -> CommitWindow:
        """The health check's window of this value (its newest ``capacity`` commits)."""
        return CommitWindow(
            capacity=capacity,
            min_distance=min_distance,
            commits=tuple(CommitObservation(*commit) for commit in self.commits[-capacity:]),
        )


def decode(raw: bytes) -> StoredCommit:
    """Parse a value of either version; raises ``orjson.JSONDecodeError`` or ``KeyError`` on bytes that are
    neither (the table holds only what kagent wrote)."""
    value = orjson.loads(raw)
    offset, stamp = value["offset"], value["commit_timestamp"]
    commits = value.get("commits")
    if commits is None:  # version 1: the offset-committed event
        commits = [[offset, stamp / 1000, None]]
    return StoredCommit(offset, stamp, value.get("leader_epoch"), commits)


def encode(value: StoredCommit) -> bytes:
    """The bytes of ``value`` (version 2), right-sized to be kept (:func:`kagent.core.json_bytes.kept`)."""
    return kept(
        {
            "offset": value.offset,
            "commit_timestamp": value.commit_timestamp,
            "leader_epoch": value.leader_epoch,
            "commits": value.commits,
        }
    )


class Applied(NamedTuple):
    """What :func:`applied` made of a stored value and a partition's commits."""

    value: bytes | None
    """The value to store; None when it stays as it was (every commit stale, or read again)."""
    offset: int | None
    """The newest commit's offset among those applied; None when every commit was stale."""
    stale: int
    """Commits older than the commit stored (or applied before them) when their turn came, skipped."""


def applied(
    raw: bytes | None,
    commits: Iterable[Sequence[Any]],
    log_end_offset: int | None,
    *,
    capacity: int,
    min_distance: float,
) -> Applied:
    """The stored value ``raw`` (None: nothing stored) after a group's ``commits`` on one partition, in
    order, each ``[..., offset, commit_timestamp, leader_epoch]`` as its last three fields (a
    :class:`~kagent.core.events.Committed`), seen when the log end was ``log_end_offset``.

    Each commit not older than the newest so far becomes the newest, and the window takes it by
    :func:`~kagent.core.group_health.appended_commits` (a commit read again leaves it as it was),
    cut to ``capacity``; an older one (a record read again must not undo a newer commit) is skipped
    as stale. The value is parsed once and written once however many commits there are (storage
    passes a batch's).
    """
    if raw is None:
        newest_stamp: int | None = None
        window: Sequence[Sequence[Any]] = ()
        leader_epoch = None
    else:
        stored = decode(raw)
        newest_stamp, leader_epoch, window = stored.commit_timestamp, stored.leader_epoch, stored.commits[-capacity:]
    newest: int | None = None
    stale = 0
    for commit in commits:
        offset, commit_timestamp = commit[-3], commit[-2]
        if newest_stamp is not None and commit_timestamp < newest_stamp:
            stale += 1
            continue
        appended = appended_commits(window, (offset, commit_timestamp / 1000, log_end_offset), capacity, min_distance)
        if appended is not None:
            window = appended
        newest, newest_stamp, leader_epoch = offset, commit_timestamp, commit[-1]
    if newest is None:
        return Applied(None, None, stale)
    assert newest_stamp is not None
    value = encode(StoredCommit(newest, newest_stamp, leader_epoch, window))
    return Applied(None if value == raw else value, newest, stale)
