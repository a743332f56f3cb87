"""Table keys, and which partition of kagent's own topics a group belongs to.

Every record of one group must land on one partition of the derived-events
topic and of every table changelog, so that one worker holds the whole group
and restores all of its state after a failover. Records on the
derived-events topic are keyed by the group's UTF-8 bytes and placed by the
producer's default partitioner (murmur2, as Java clients do);
:func:`partition_of_group` computes the same partition, so tables written
outside stream iteration (timers) land where the stream's would. Pure.
"""

from __future__ import annotations

import json

from aiokafka.partitioner import murmur2

__all__ = ["group_of_partition_key", "partition_key", "partition_of_group"]


def partition_of_group(group: str, partitions: int) -> int:
    """The partition the default partitioner gives a record keyed by ``group`` on a topic of ``partitions``."""
    hashed: int = murmur2(group.encode())
    return (hashed & 0x7FFFFFFF) % partitions


def partition_key(group: str, topic: str, partition: int) -> str:
    """Key of a table with one entry per (group, topic, partition): a compact JSON array.

    JSON keeps the three parts apart whatever characters group and topic names hold.
    Tables with one entry per group are keyed by the group itself.
    """
    return json.dumps([group, topic, partition], separators=(",", ":"), ensure_ascii=False)


def group_of_partition_key(key: str) -> str:
    """The group of a key made by :func:`partition_key`."""
    group, _topic, _partition = json.loads(key)
    return str(group)
