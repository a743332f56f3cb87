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
from collections.abc import Callable
from functools import lru_cache
from json.encoder import encode_basestring as _json_string  # what json.dumps(..., ensure_ascii=False) writes for a str

from aiokafka.partitioner import murmur2 as _aiokafka_murmur2

from kagent.core.lag_twins import twin_of

__all__ = ["group_of_partition_key", "murmur2", "partition_key", "partition_of_group"]

murmur2: Callable[[bytes], int] = twin_of(_aiokafka_murmur2, "kagent.core._events_twins")
"""Kafka's murmur2 of a record's key (aiokafka's function, 8.6 µs for a member id of 60 bytes), compiled
where built: the same hash, in C (``_events_twins.pyx``; ``tests/unit/test_events_twins.py`` holds it to
aiokafka's)."""

_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""The standard library's parser of one JSON string (its C one where built), from just after the
opening quote to (the string, the index after its closing quote); typeshed omits it."""


@lru_cache(maxsize=1 << 17)
def partition_of_group(group: str, partitions: int) -> int:
    """The partition the default partitioner gives a record keyed by ``group`` on a topic of ``partitions``.

    Remembered for the last 131,072 (group, partitions): every table write asks, and murmur2 in
    Python costs 3 µs (0.1 µs where its compiled twin is built: :data:`murmur2`)."""
    hashed: int = murmur2(group.encode())
    return (hashed & 0x7FFFFFFF) % partitions


def _partition_key(group: str, topic: str, partition: int) -> str:
    """Key of a table with one entry per (group, topic, partition): a compact JSON array.

    JSON keeps the three parts apart whatever characters group and topic names hold.
    Tables with one entry per group are keyed by the group itself.
    """
    return f"[{_json_string(group)},{_json_string(topic)},{int(partition)}]"


partition_key: Callable[[str, str, int], str] = twin_of(_partition_key, "kagent.core._events_twins")
"""Compiled where built (``_events_twins.pyx``: 0.4 µs a key in Python): storage keys every commit it applies,
and an evaluation reads each partition's entry by its key."""


def group_of_partition_key(key: str) -> str:
    """The group of a key made by :func:`partition_key`."""
    if key.startswith('["'):
        group, _end = _scanstring(key, 2)  # the first element only: each table write asks this
        return group
    group, _topic, _partition = json.loads(key)
    return str(group)
