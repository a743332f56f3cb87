"""Table keys and group placement agree with the producer's partitioner."""

from __future__ import annotations

import json

from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from kagent.core.table_keys import group_of_partition_key, partition_key, partition_of_group

names = st.text(min_size=1, max_size=40)


@given(group=names, partitions=st.integers(min_value=1, max_value=200))
def test_a_group_lands_where_the_default_partitioner_puts_its_key(group: str, partitions: int) -> None:
    everything = list(range(partitions))
    assert partition_of_group(group, partitions) == DefaultPartitioner()(group.encode(), everything, everything)


@given(group=names, topic=names, partition=st.integers(min_value=0, max_value=2**31 - 1))
def test_partition_keys_give_back_their_group_whatever_the_characters(group: str, topic: str, partition: int) -> None:
    assert group_of_partition_key(partition_key(group, topic, partition)) == group


def test_partition_keys_are_distinct_where_naive_joining_would_collide() -> None:
    assert partition_key("a/b", "c", 0) != partition_key("a", "b/c", 0)


@given(group=names, topic=names, partition=st.integers(min_value=0, max_value=2**31 - 1))
def test_partition_keys_are_the_compact_json_earlier_versions_wrote(group: str, topic: str, partition: int) -> None:
    # Changelogs written before keys were built by hand hold this form: a worker must find them.
    assert partition_key(group, topic, partition) == json.dumps(
        [group, topic, partition], separators=(",", ":"), ensure_ascii=False
    )
