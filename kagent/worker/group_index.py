"""Which entries of a table keyed per group-partition belong to each group, kept as entries come and go.

The committed-offsets table is keyed by :func:`~kagent.core.table_keys.partition_key` (group, topic,
partition): a million entries at 50,000 groups. Storage must know, for each group, the partitions it
has a committed offset on, whether or not its assignment names them: a group whose members all
crashed (Kafka's ``Empty`` state), one whose assignment the cluster never described, or a partition
no member holds still has lag, and must show it. Scanning the table per group would cost a second.

:class:`IndexedStore` is the table's store (Faust's in-memory store, restoring in bulk) that keeps a
:class:`PartitionIndex` in step through every way an entry arrives or leaves: kagent's own writes
(``table.data[key] = value``, ``del table.data[key]``), a bulk restore, Faust's recovery, and Faust
dropping the entries of partitions no longer active here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, KeysView, Mapping
from typing import Any

import orjson
from aiokafka.structs import TopicPartition
from faust.types import TP, EventT

from kagent.worker.changelog_restore import BulkRestoredStore

__all__ = ["IndexedStore", "PartitionIndex", "interned", "parse_partition_key", "topic_partitions"]

_PARTITIONS: dict[TopicPartition, TopicPartition] = {}
"""One ``TopicPartition`` object per partition named by the held groups (a million group-partitions read
far fewer partitions)."""


_TOPICS: dict[str, tuple[TopicPartition, ...]] = {}
"""Topic -> its partitions as :func:`topic_partitions` last gave them."""


def interned(tp: TopicPartition) -> TopicPartition:
    """The one object kept for ``tp``."""
    return _PARTITIONS.setdefault(tp, tp)


def topic_partitions(topic: str, count: int) -> tuple[TopicPartition, ...]:
    """Partitions 0 to ``count - 1`` of ``topic``, in order, each the object :func:`interned` keeps.

    Made once per topic and partition count, not once per group that reads the topic: a group's
    partitions, its shape and each evaluation's throughput are laid out from these, and a
    ``TopicPartition`` made for each of them was a copy kept per group-partition (and, made afresh
    and kept, young objects for the collector to go over)."""
    known = _TOPICS.get(topic)
    if known is None or len(known) != count:
        known = _TOPICS[topic] = tuple(interned(TopicPartition(topic, partition)) for partition in range(count))
    return known


def parse_partition_key(key: str) -> tuple[str, TopicPartition]:
    """The group and partition of a :func:`~kagent.core.table_keys.partition_key`. Every new entry of the
    committed-offsets table asks (a fifth of bench_ingest's commits): orjson, 0.14 µs against json's 1 µs,
    and json for a name orjson refuses (a lone surrogate, which a str may hold and UTF-8 may not)."""
    try:
        group, topic, partition = orjson.loads(key)
    except orjson.JSONDecodeError:
        group, topic, partition = json.loads(key)
    return str(group), TopicPartition(str(topic), int(partition))


class PartitionIndex:
    """Group -> its entries' keys -> the partition each names.

    ``intern`` maps a partition to the one object kept for it (:func:`interned`), so that a partition
    many groups read is held once.
    """

    def __init__(
        self,
        parse: Callable[[str], tuple[str, TopicPartition]] = parse_partition_key,
        intern: Callable[[TopicPartition], TopicPartition] = interned,
    ) -> None:
        self._parse = parse
        self._intern = intern
        self._groups: dict[str, dict[str, TopicPartition]] = {}
        self._groups_of: dict[TopicPartition, int] = {}
        """Partition -> how many groups have an entry on it."""
        self._removals = 0
        """Entries removed since the index was made (see :meth:`version`)."""

    def add(self, key: str) -> None:
        """An entry of ``key`` is in the table (again)."""
        group, tp = self._parse(key)
        keys = self._groups.get(group)
        if keys is None:
            keys = self._groups[group] = {}
        if key not in keys:
            tp = keys[key] = self._intern(tp)
            self._groups_of[tp] = self._groups_of.get(tp, 0) + 1

    def discard(self, key: str) -> None:
        """No entry of ``key`` is in the table (any more)."""
        group, _tp = self._parse(key)
        keys = self._groups.get(group)
        if keys is not None and (tp := keys.pop(key, None)) is not None:
            self._removals += 1
            if not keys:
                del self._groups[group]
            left = self._groups_of[tp] - 1
            if left:
                self._groups_of[tp] = left
            else:
                del self._groups_of[tp]

    def clear(self) -> None:
        self._removals += 1
        self._groups.clear()
        self._groups_of.clear()

    def rebuild(self, keys: Iterable[str]) -> None:
        """Index exactly ``keys``."""
        self.clear()
        for key in keys:
            self.add(key)

    def groups(self) -> KeysView[str]:
        """The groups with at least one entry."""
        return self._groups.keys()

    def partitions(self, group: str) -> Iterable[TopicPartition]:
        """The partitions of ``group``'s entries (none when it has none)."""
        keys = self._groups.get(group)
        return keys.values() if keys is not None else ()

    def keyed(self, group: str) -> Mapping[str, TopicPartition]:
        """``group``'s entries' keys (the strings the table holds) -> the partition each names."""
        return self._groups.get(group, {})

    def version(self, group: str) -> tuple[int, int]:
        """The same for as long as which partitions ``group`` has entries on stays the same: an entry
        added to it makes it larger, and an entry removed from any group changes it."""
        keys = self._groups.get(group)
        return (len(keys) if keys is not None else 0), self._removals

    def all_partitions(self) -> KeysView[TopicPartition]:
        """Every partition some group has an entry on."""
        return self._groups_of.keys()


class IndexedStore(BulkRestoredStore):
    """A bulk-restored in-memory store whose :attr:`index` follows its keys.

    Every path that adds or removes a key goes through a method here: the table's writes
    (:meth:`__setitem__`, :meth:`__delitem__`), the bulk restore (:meth:`apply`), Faust's recovery
    (:meth:`apply_changelog_batch`, records applied in order, the last value of a key winning), Faust's
    cleanup after recovery (:meth:`on_recovery_completed`) and :meth:`_clear`.
    """

    index: PartitionIndex

    def __init__(self, *args: Any, index: PartitionIndex, **kwargs: Any) -> None:
        self.index = index
        super().__init__(*args, **kwargs)

    def __setitem__(self, key: Any, value: Any) -> None:
        data = self.data
        if key not in data:
            self.index.add(key)
        data[key] = value

    def __delitem__(self, key: Any) -> None:
        del self.data[key]
        self.index.discard(key)

    def apply(self, tp: TopicPartition, key: bytes | None, value: bytes | None) -> None:
        super().apply(tp, key, value)
        if key is not None:
            decoded = json.loads(key)
            if value is None:
                self.index.discard(decoded)
            else:
                self.index.add(decoded)

    def apply_changelog_batch(
        self, batch: Iterable[EventT], to_key: Callable[[Any], Any], to_value: Callable[[Any], Any]
    ) -> None:
        """Faust's recovery: each record in order, a tombstone removing its key."""
        data, partitions, index = self.data, self._key_partition, self.index
        for event in batch:
            key = to_key(event.key)
            if event.message.value is None:
                if data.pop(key, None) is not None:
                    index.discard(key)
                partitions.pop(key, None)
            else:
                if key not in data:
                    index.add(key)
                data[key] = to_value(event.value)
                partitions[key] = event.message.partition

    async def on_recovery_completed(self, active_tps: set[TP], standby_tps: set[TP]) -> None:
        await super().on_recovery_completed(active_tps, standby_tps)
        self.index.rebuild(self.data.keys())  # Faust dropped the keys of partitions not active here

    def _clear(self) -> None:
        super()._clear()
        self.index.clear()
