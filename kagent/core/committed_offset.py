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

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict

from kagent.core.constructed import constructed
from kagent.core.group_health import CommitObservation, CommitWindow, add_commit
from kagent.core.json_bytes import kept
from kagent.core.lag_twins import twin_of

__all__ = ["Applied", "CommittedOffset", "StoredCommit", "applied", "decode", "offset_of", "window_of"]

_new_tuple = tuple.__new__
"""A NamedTuple of its fields without its Python ``__new__`` (storage makes one or two per group-partition
a batch commits to)."""


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
        """The health check's window of this value (its newest ``capacity`` commits), for a ``capacity``
        of at least 1 and a ``min_distance`` of at least 0 (the settings' bounds).

        Not validated again: every evaluation reads the window of each partition of its group, and
        pydantic's checks cost 10 µs a window of 10 where building it costs 3.9; the value holds what
        :func:`applied` kept, which is a window by :func:`~kagent.core.group_health.add_commit`'s rules
        (in timestamp order, at most the capacity it was written with, cut here to ``capacity``)."""
        commits = tuple([_new_tuple(CommitObservation, commit) for commit in self.commits[-capacity:]])
        return constructed(CommitWindow, {"capacity": capacity, "min_distance": min_distance, "commits": commits})


def decode(raw: bytes) -> StoredCommit:
    """Parse a value of either version; raises ``orjson.JSONDecodeError`` or ``KeyError`` on bytes that are
    neither (the table holds only what kagent wrote)."""
    return _new_tuple(StoredCommit, _parsed(raw))


_OFFSET_FIRST = re.compile(rb'\{"offset":(-?[0-9]+),')
"""How a value kagent wrote since version 2 begins: the committed offset is its first field."""


def offset_of(raw: bytes) -> int:
    """The committed offset of a stored value: :func:`decode`'s ``offset``, read from the bytes before the
    window where the value begins with it (every value written since version 2), without parsing the
    window. Lag is computed from the committed offset alone, for every group-partition at every
    refresh, evaluation and scrape, and parsing a window of 10 commits costs about 1 µs. Raises as
    :func:`decode` does for bytes it cannot read."""
    found = _OFFSET_FIRST.match(raw)
    return int(found[1]) if found is not None else decode(raw).offset


def _offsets_of(values: Iterable[bytes | None]) -> list[int | None]:
    """:func:`offset_of` each of ``values`` (None for None), in one call: a scrape reads every
    group-partition's."""
    match = _OFFSET_FIRST.match
    return [
        None if raw is None else int(found[1]) if (found := match(raw)) is not None else offset_of(raw)
        for raw in values
    ]


offsets_of = twin_of(_offsets_of)
"""Compiled where built (:mod:`kagent.core.lag_twins`): the scrape's read of every committed offset."""


def _window_of(raw: bytes, capacity: int, min_distance: float) -> CommitWindow:
    """The health check's window of the stored value ``raw``: ``decode(raw).window(capacity, min_distance)``."""
    return decode(raw).window(capacity, min_distance)


window_of = twin_of(_window_of)
"""Compiled where built (:mod:`kagent.core.lag_twins`): every evaluation reads the window of each partition its
group reads. The twin reads a value as :func:`applied` writes one; any other goes to the Python."""


def _parsed(raw: bytes) -> tuple[int, int, int | None, list[Sequence[Any]]]:
    """:func:`decode`'s fields, as a plain tuple."""
    value = orjson.loads(raw)
    offset, stamp = value["offset"], value["commit_timestamp"]
    commits = value.get("commits")
    if commits is None:  # version 1: the offset-committed event
        commits = [[offset, stamp / 1000, None]]
    return offset, stamp, value.get("leader_epoch"), commits


def _encoded(offset: int, commit_timestamp: int, leader_epoch: int | None, commits: Sequence[Sequence[Any]]) -> bytes:
    """A value's bytes (version 2) from its fields, right-sized to be kept (:func:`kagent.core.json_bytes.kept`)."""
    return kept(
        {"offset": offset, "commit_timestamp": commit_timestamp, "leader_epoch": leader_epoch, "commits": commits}
    )


class Applied(NamedTuple):
    """What :func:`applied` made of a stored value and a partition's commits."""

    value: bytes | None
    """The value to store; None when it stays as it was (every commit stale, or read again)."""
    offset: int | None
    """The newest commit's offset among those applied; None when every commit was stale."""
    stale: int
    """Commits older than the commit stored (or applied before them) when their turn came, skipped."""
    moved: bool
    """Whether the committed offset is another than the one stored before (or none was): the group's lag
    on the partition may have changed. A consumer committing the same position again (Java's auto-commit
    does every 5 s) leaves it False."""


def _applied(
    raw: bytes | None,
    commits: Sequence[Any],
    log_end_offset: int | None,
    *,
    capacity: int,
    min_distance: float,
) -> Applied:
    """The stored value ``raw`` (None: nothing stored) after a group's ``commits`` on one partition, in
    order, three fields each as a :data:`~kagent.core.events.CommitRun` lays them out (``offset,
    commit_timestamp, leader_epoch``, ...), seen when the log end was ``log_end_offset``.

    Each commit not older than the newest so far becomes the newest, and the window takes it by
    :func:`~kagent.core.group_health.add_commit` (a commit read again leaves it as it was),
    cut to ``capacity``; an older one (a record read again must not undo a newer commit) is skipped
    as stale. The value is parsed once and written once however many commits there are (storage
    passes a batch's).
    """
    window: list[Sequence[Any]]
    if raw is None:
        before: int | None = None
        newest_stamp: int | None = None
        window = []
        leader_epoch = None
    else:
        before, newest_stamp, leader_epoch, stored = _parsed(raw)
        window = stored[-capacity:]  # a new list
    newest: int | None = None
    stale = 0
    for index in range(0, len(commits), 3):
        offset, commit_timestamp = commits[index], commits[index + 1]
        if newest_stamp is not None and commit_timestamp < newest_stamp:
            stale += 1
            continue
        add_commit(window, (offset, commit_timestamp / 1000, log_end_offset), capacity, min_distance)
        newest, newest_stamp, leader_epoch = offset, commit_timestamp, commits[index + 2]
    if newest is None:
        return _new_tuple(Applied, (None, None, stale, False))
    assert newest_stamp is not None
    value = _encoded(newest, newest_stamp, leader_epoch, window)
    return _new_tuple(Applied, (None if value == raw else value, newest, stale, newest != before))


applied = twin_of(_applied)
"""Compiled where built (:mod:`kagent.core.lag_twins`): storage applies every commit it reads through it,
tens of thousands a second. The twin keeps the stored window's commits as their text where a value is
as this function writes it, and hands any other value to this function."""
