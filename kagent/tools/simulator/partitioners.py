"""Where Kafka puts things: keys on a topic's partitions, groups on `__consumer_offsets`.

Pure functions, no I/O.

- A keyed record goes to `toPositive(murmur2(key)) % partitions`, the Java
  producer's rule (`BuiltInPartitioner.partitionForKey`). aiokafka's
  `DefaultPartitioner` applies the same rule with the same murmur2, so the
  simulator places keys with it and nothing of its own.
- Every record of a group goes to the `__consumer_offsets` partition
  `Utils.abs(group.hashCode()) % partitions` (Kafka's group coordinator,
  `partitionFor`), where `hashCode` is Java's `String.hashCode` and
  `Utils.abs` maps `Integer.MIN_VALUE` to 0.
"""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner

__all__ = [
    "OFFSETS_TOPIC",
    "OFFSETS_TOPIC_PARTITIONS",
    "java_abs",
    "java_string_hash_code",
    "key_partition",
    "offsets_partition_for",
]

#: Kafka's internal topic of group coordinator records.
OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka's default `offsets.topic.num.partitions`.
OFFSETS_TOPIC_PARTITIONS = 50

_INT_MIN = -(2**31)
_PARTITIONER = DefaultPartitioner()


def java_string_hash_code(text: str) -> int:
    """Java's `String.hashCode()` of `text`, as a signed 32-bit int.

    `s[0]*31^(n-1) + ... + s[n-1]` in int arithmetic (wrapping), over the
    string's UTF-16 code units, so a character outside the BMP counts as its
    two surrogates, as in Java.
    """
    utf16 = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(utf16), 2):
        value = (value * 31 + (utf16[index] << 8 | utf16[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def java_abs(number: int) -> int:
    """Kafka's `Utils.abs`: the absolute value of a 32-bit int, with
    `Integer.MIN_VALUE` (whose absolute value an int cannot hold) mapped to 0."""
    return 0 if number == _INT_MIN else abs(number)


def offsets_partition_for(group: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """The `__consumer_offsets` partition Kafka writes `group`'s records to,
    when that topic has `partitions` partitions."""
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return java_abs(java_string_hash_code(group)) % partitions


def key_partition(key: bytes, partitions: int) -> int:
    """The partition of a topic with `partitions` partitions that a record
    keyed `key` goes to, by aiokafka's default (murmur2) partitioner."""
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    all_partitions = list(range(partitions))
    partition: int = _PARTITIONER(key, all_partitions, all_partitions)
    return partition
