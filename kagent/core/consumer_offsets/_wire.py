"""Wire primitives that generated decoders and encoders call.

Everything else of the encoding (fixed-width runs, length prefixes, loops)
is written inline by the machine; what is here is either rare (long
varints, error reports) or shared (topic-partition grouping).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from itertools import groupby
from operator import attrgetter
from typing import Any

from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets.errors import Malformed

#: Kafka caps string lengths at 0x7fff even where the prefix could say more.
MAX_STRING_LENGTH = 0x7FFF

#: Fixed-width arrays shorter than this are read with a precompiled struct.
PRECOMPILED_ARRAY_LENGTHS = 64

_SMALL_UVARINTS = tuple(bytes((value,)) for value in range(0x80))


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at `pos` and the offset after it. IndexError if
    `buf` ends inside it; Malformed if it is longer than 5 bytes or above 32
    bits (Kafka's limits)."""
    start = pos
    value = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > 0xFFFFFFFF:
                raise Malformed(start, "varint exceeds 32 bits")
            return value, pos
        shift += 7
        if shift == 35:
            raise Malformed(start, "varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    """`value` (0 <= value < 2**32) as an unsigned varint."""
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    if value > 0xFFFFFFFF:
        raise ValueError(f"{value} does not fit an unsigned 32-bit varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_error(offset: int, length: int, end: int) -> Malformed:
    """A string or bytes length that is null where not allowed, or overruns."""
    if length < 0:
        return Malformed(offset, f"length {length} where a non-null value is required")
    if length > end - offset:
        return Malformed(offset, f"length {length} overruns the {end - offset} bytes left")
    return Malformed(offset, f"string length {length} exceeds {MAX_STRING_LENGTH}")


def count_error(offset: int, count: int, end: int, min_size: int) -> Malformed:
    """An array count that is null where not allowed, or cannot fit."""
    if count < 0:
        return Malformed(offset, f"array count {count} where a non-null array is required")
    return Malformed(
        offset,
        f"array of {count} elements of at least {min_size} bytes overruns the {end - offset} bytes left",
    )


def fixed_array_unpackers(code: str) -> tuple[Callable[[bytes, int], tuple[Any, ...]], ...]:
    """`unpack_from` of `n` big-endian `code` values, for each n below
    PRECOMPILED_ARRAY_LENGTHS."""
    return tuple(struct.Struct(f">{n}{code}").unpack_from for n in range(PRECOMPILED_ARRAY_LENGTHS))


def group_topic_partitions(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Adjacent partitions of the same topic as (topic, [partition, ...])."""
    return [(topic, [tp.partition for tp in run]) for topic, run in groupby(partitions, attrgetter("topic"))]
