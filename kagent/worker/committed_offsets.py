"""The committed-offsets table: each held group-partition's last commit and its recent commits.

Part of the storage stage, which owns it. Every offset commit storage
applies becomes the group-partition's newest commit and joins its window
(Burrow's offset ring: the last ``capacity`` commits, a commit closer than
``min_distance`` seconds to the newest replacing it) with the log-end offset
kagent knew when it saw the commit, so that the commit's lag is the one the
group had then. Both live in one value (:mod:`kagent.core.committed_offset`),
so a worker that takes a group over computes its lag and judges its health
on the same history, not on an empty window that would call every group OK
(and resolve its incidents) after each failover.

A group-partition's commits in one batch of derived events are applied
together: its value is parsed once and written once. A value is written
only when the commits change it: a commit read again (the same offset and
timestamp) writes nothing, and one older than the stored commit is refused.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Protocol

from aiokafka.structs import TopicPartition

from kagent.core import committed_offset
from kagent.core.committed_offset import Applied, StoredCommit
from kagent.core.group_health import CommitWindow
from kagent.core.table_keys import partition_key
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.group_index import PartitionIndex

__all__ = ["CommittedOffsets"]


class _Table(Protocol):
    """What is read of the table: what it holds now (a :class:`~kagent.worker.topology.GroupPartitionedTable`'s
    store, or a dict in a test)."""

    @property
    def stored(self) -> Mapping[str, bytes]: ...


class CommittedOffsets:
    """The committed-offsets table, read and written a commit at a time."""

    def __init__(
        self,
        table: _Table,
        writer: ChangelogWriter,
        *,
        capacity: int,
        min_distance: float,
        index: PartitionIndex | None = None,
    ) -> None:
        """``index`` follows the table's keys (its store keeps it in step,
        :class:`~kagent.worker.group_index.IndexedStore`); without one, it is built from the table's keys
        at each read of it (for tests on a plain mapping)."""
        self._table = table
        self._index = index
        self._writer = writer
        self._capacity = capacity
        self._min_distance = min_distance

    def commit(
        self, group: str, tp: TopicPartition, commits: Sequence[int | None], log_end_offset: int | None
    ) -> Applied:
        """Apply the group's ``commits`` on ``tp``, oldest first, three fields each (offset,
        commit_timestamp, leader_epoch: :func:`kagent.core.committed_offset.applied`);
        ``log_end_offset`` is the partition's log end at the latest poll before them (None when never
        polled). A commit older than the one stored when its turn comes (a record read again) is
        counted stale and skipped; the value is written once, and only if it changed."""
        key = partition_key(group, tp.topic, tp.partition)
        result = committed_offset.applied(
            self._table.stored.get(key),
            commits,
            log_end_offset,
            capacity=self._capacity,
            min_distance=self._min_distance,
        )
        if result.value is not None:
            self._writer.set(self._table, key, result.value)  # type: ignore[arg-type]  # a Faust table in the worker
        return result

    def delete(self, group: str, tp: TopicPartition) -> None:
        """Drop the group's entry on ``tp`` (its committed offset was deleted or expired)."""
        self._writer.delete(self._table, partition_key(group, tp.topic, tp.partition))  # type: ignore[arg-type]

    def groups(self) -> Collection[str]:
        """The groups with a committed offset on some partition."""
        return self._indexed().groups()

    def partitions(self, group: str) -> Iterable[TopicPartition]:
        """The partitions ``group`` has a committed offset on."""
        return self._indexed().partitions(group)

    def all_partitions(self) -> Collection[TopicPartition]:
        """Every partition some group has a committed offset on."""
        return self._indexed().all_partitions()

    def _indexed(self) -> PartitionIndex:
        if self._index is not None:
            return self._index
        index = PartitionIndex()
        index.rebuild(self._table.stored.keys())
        return index

    def _value(self, group: str, tp: TopicPartition) -> bytes | None:
        """The stored value of the group's entry on ``tp``; None when it has none."""
        return self._table.stored.get(partition_key(group, tp.topic, tp.partition))

    def stored(self, group: str, tp: TopicPartition) -> StoredCommit | None:
        """The group's entry on ``tp``; None when no commit of it is stored."""
        raw = self._value(group, tp)
        return committed_offset.decode(raw) if raw is not None else None

    def offset(self, group: str, tp: TopicPartition) -> int | None:
        """The group's committed offset on ``tp``; None when none is stored."""
        raw = self._value(group, tp)
        return committed_offset.offset_of(raw) if raw is not None else None

    def partitions_version(self, group: str) -> Hashable:
        """The same for as long as which partitions ``group`` has committed offsets on stays the same;
        None when that is not followed (no index kept: see the constructor)."""
        return self._index.version(group) if self._index is not None else None

    def entry_keys(self, group: str, partitions: Iterable[TopicPartition]) -> list[str | None]:
        """The key of ``group``'s entry on each of ``partitions`` (the very strings the table holds), None
        where it has none: to read its offsets again and again with :meth:`offsets_at` while the partitions
        it has entries on stay the same (:meth:`partitions_version`)."""
        keys = {tp: key for key, tp in self._indexed().keyed(group).items()}
        return [keys.get(tp) for tp in partitions]

    def offsets_at(self, keys: Iterable[str | None]) -> list[int | None]:
        """The committed offset of each entry of ``keys`` (:meth:`entry_keys`), in order; None where there
        is no key or no entry is stored."""
        return committed_offset.offsets_of(map(self._table.stored.get, keys))  # get(None) is None

    def window(self, group: str, tp: TopicPartition) -> CommitWindow | None:
        """The group's commit window on ``tp``, at the configured capacity and distance; None when no
        commit of it is stored."""
        raw = self._value(group, tp)
        return committed_offset.window_of(raw, self._capacity, self._min_distance) if raw is not None else None
