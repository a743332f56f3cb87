"""A bulk-restored store applies changelog records as Faust's recovery does and hands Faust the last
offset restored once (kagent.worker.changelog_restore.BulkRestoredStore)."""

from __future__ import annotations

import faust
import pytest
from aiokafka.structs import TopicPartition
from faust.types import TP

from kagent.worker.changelog_restore import BulkRestoredStore
from kagent.worker.topology import GroupPartitionedTable

APP = faust.App("restore-test", broker="kafka://localhost:1")


def table(name: str) -> GroupPartitionedTable:
    """A table declared as kagent's are (JSON keys, raw values)."""
    return GroupPartitionedTable(APP, group_of=lambda key: key, name=name, key_type=str, value_type=bytes, partitions=4)


def test_records_are_applied_last_value_wins_and_a_tombstone_deletes() -> None:
    states = table("states")
    store = states.data
    assert isinstance(store, BulkRestoredStore)
    tp = TopicPartition(states.changelog_topic.get_topic_name(), 2)
    for key, value in ((b'"a"', b"1"), (b'"b"', b"2"), (b'"a"', b"3"), (b'"b"', None)):
        store.apply(tp, key, value)
    assert dict(store.data) == {"a": b"3"}
    assert store._key_partition == {"a": 2}


def test_the_last_offset_restored_is_handed_to_faust_once_and_only_while_active() -> None:
    store = table("handed").data
    assert isinstance(store, BulkRestoredStore)
    kept, dropped = TopicPartition("handed-changelog", 0), TopicPartition("handed-changelog", 1)
    store.restored(kept, 41)
    store.restored(dropped, 7)
    store.forget_restored({TP("handed-changelog", 0)})
    assert store.persisted_offset(TP("handed-changelog", 0)) == 41
    assert store.persisted_offset(TP("handed-changelog", 0)) is None  # Faust reads on from its own offsets
    assert store.persisted_offset(TP("handed-changelog", 1)) is None


def test_a_table_without_json_keys_and_raw_values_is_refused() -> None:
    raw_keys = table("raw-keys")
    with pytest.raises(TypeError, match=r"table 'raw-keys'.*'raw' keys"):
        BulkRestoredStore(
            "memory://", APP, raw_keys, table_name="raw-keys", key_serializer="raw", value_serializer="raw"
        )
