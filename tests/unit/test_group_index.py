"""The committed-offsets table's index of each group's partitions follows its keys through every way they
come and go: kagent's writes, a bulk restore, Faust's recovery and its cleanup (kagent.worker.group_index)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import faust
from aiokafka.structs import TopicPartition
from faust.types import TP

from kagent.core.table_keys import group_of_partition_key, partition_key
from kagent.worker.group_index import IndexedStore, PartitionIndex, interned, parse_partition_key, topic_partitions
from kagent.worker.topology import GroupPartitionedTable

APP = faust.App("index-test", broker="kafka://localhost:1")


def indexed(name: str) -> tuple[GroupPartitionedTable, IndexedStore, PartitionIndex]:
    index = PartitionIndex()
    table = GroupPartitionedTable(
        APP, group_of=group_of_partition_key, index=index, name=name, key_type=str, value_type=bytes, partitions=4
    )
    store = table.data
    assert isinstance(store, IndexedStore)
    return table, store, index


def partitions(index: PartitionIndex, group: str) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in index.partitions(group)}


def test_writes_and_deletes_through_the_table_keep_the_index() -> None:
    table, _store, index = indexed("writes")
    table.data[partition_key("g", "t", 0)] = b"1"
    table.data[partition_key("g", "t", 0)] = b"2"  # the same key again: still one entry
    table.data[partition_key("g", "u", 3)] = b"1"
    table.data[partition_key("h", "t", 0)] = b"1"
    assert set(index.groups()) == {"g", "h"}
    assert partitions(index, "g") == {("t", 0), ("u", 3)}
    assert set(index.all_partitions()) == {TopicPartition("t", 0), TopicPartition("u", 3)}
    del table.data[partition_key("g", "t", 0)]
    del table.data[partition_key("g", "u", 3)]
    assert set(index.groups()) == {"h"} and partitions(index, "g") == set()
    assert set(index.all_partitions()) == {TopicPartition("t", 0)}  # h still has it


def test_a_bulk_restore_and_faust_recovery_keep_the_index() -> None:
    table, store, index = indexed("restores")
    tp = TopicPartition(table.changelog_topic.get_topic_name(), 1)
    a, b = partition_key("g", "t", 0), partition_key("g", "t", 1)
    store.apply(tp, json.dumps(a).encode(), b"1")  # changelog keys are the JSON of the table's keys
    assert partitions(index, "g") == {("t", 0)}

    def event(key: str, value: bytes | None) -> Any:
        return SimpleNamespace(key=key, value=value, message=SimpleNamespace(value=value, partition=1))

    store.apply_changelog_batch([event(b, b"1"), event(a, None), event(b, None), event(b, b"2")], str, lambda v: v)
    assert partitions(index, "g") == {("t", 1)}
    assert dict(store.data) == {b: b"2"}


async def test_faust_dropping_the_keys_of_partitions_not_active_here_drops_them_from_the_index() -> None:
    table, store, index = indexed("cleanup")
    for group, partition in (("g", 1), ("h", 2)):
        key = partition_key(group, "t", 0)
        table.data[key] = b"1"
        store._key_partition[key] = partition
    await store.on_recovery_completed({TP(table.changelog_topic.get_topic_name(), 1)}, set())
    assert set(index.groups()) == {"g"}


def test_a_groups_version_changes_with_the_partitions_it_has_entries_on_and_its_keys_are_the_tables() -> None:
    table, store, index = indexed("versions")
    empty = index.version("g")
    table.data[partition_key("g", "t", 0)] = b"1"
    one = index.version("g")
    table.data[partition_key("g", "t", 0)] = b"2"  # the same entry written again
    table.data[partition_key("h", "t", 0)] = b"1"  # another group's
    assert index.version("g") == one != empty
    table.data[partition_key("g", "t", 1)] = b"1"
    two = index.version("g")
    assert two != one
    del table.data[partition_key("g", "t", 1)]
    table.data[partition_key("g", "u", 5)] = b"1"  # one removed, one added: as many entries, other partitions
    assert index.version("g") not in (one, two)
    assert dict(index.keyed("g")) == {
        partition_key("g", "t", 0): TopicPartition("t", 0),
        partition_key("g", "u", 5): TopicPartition("u", 5),
    }
    held = {id(key) for key in store.data}
    assert all(id(key) in held for key in index.keyed("g"))  # the very strings the store holds


def test_a_key_parses_back_to_its_group_and_partition_whatever_the_names_hold() -> None:
    for group in ["g", 'é "quoted" \\ back\nline', "\ud800 a lone surrogate"]:
        assert parse_partition_key(partition_key(group, "orders", 7)) == (group, TopicPartition("orders", 7))


def test_a_topics_partitions_are_the_interned_objects_made_once_per_count() -> None:
    held = interned(TopicPartition("interned-topic", 1))  # held first, as a group's assignment would
    first = topic_partitions("interned-topic", 3)
    assert first == tuple(TopicPartition("interned-topic", p) for p in range(3))
    assert first[1] is held
    assert topic_partitions("interned-topic", 3) is first  # asked again: the same tuple, nothing made
    grown = topic_partitions("interned-topic", 5)  # the topic has more partitions now
    assert grown == tuple(TopicPartition("interned-topic", p) for p in range(5))
    assert all(a is b for a, b in zip(first, grown, strict=False))
    assert topic_partitions("interned-topic", 0) == ()
