"""The vocabulary in which record layouts are declared.

A layout is plain data: a `Message` maps each version to a `Struct`, a
`Struct` is an ordered tuple of `Field`s, and a field's type is a Kafka type
name, an `Array` or a nested `Struct`. `_layouts.py` is written in this
vocabulary by `_specgen` from Kafka's JSON message definitions, and
`_machine` compiles it into decoders and encoders. Nothing here reads bytes.

Names are Kafka's own, exactly as in the JSON (`commitTimestamp`, `GroupId`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

#: `struct` format codes of Kafka's fixed-width types (big-endian on the wire).
FIXED_WIDTH_FORMATS: Mapping[str, str] = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}

#: Kafka's variable-length scalar types.
VARIABLE_LENGTH_TYPES: frozenset[str] = frozenset({"string", "bytes"})


@dataclass(frozen=True, slots=True)
class Array:
    """A Kafka array (`[]int32`, `[]string`, `[]SomeStruct`)."""

    element: FieldType


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct, as it is in one version.

    `tag` is set for a tagged field (flexible versions only); such a field is
    written in the struct's tagged-field section and only when its value
    differs from `default` (None for a nullable field whose default is null).
    """

    name: str
    type: FieldType
    nullable: bool = False
    tag: int | None = None
    default: int | None = None


@dataclass(frozen=True, slots=True)
class Struct:
    """The fields of a struct in one version, in wire order.

    A flexible struct uses the compact encoding (unsigned-varint lengths of
    length+1, 0 for null) and ends with a tagged-field section; a classic one
    uses int16 string lengths, int32 bytes and array lengths, -1 for null.
    """

    name: str
    fields: tuple[Field, ...]
    flexible: bool = False


FieldType: TypeAlias = str | Array | Struct


@dataclass(frozen=True, slots=True)
class Message:
    """Every known version of one message (a record key or value, or an
    embedded consumer-protocol blob).

    `record_type` is the `__consumer_offsets` record type for keys and
    values (the JSON's `apiKey`, or the single key version of files stored in
    the older "data" form), None for consumer-protocol blobs.
    """

    name: str
    record_type: int | None
    versions: Mapping[int, Struct]


def min_size(field_type: FieldType, flexible: bool) -> int:
    """The fewest bytes a value of `field_type` takes on the wire (a null or
    empty one); tagged fields take none. Bounds what an array count can
    claim before any element is read."""
    if isinstance(field_type, Array):
        return 1 if flexible else 4
    if isinstance(field_type, Struct):
        untagged = sum(min_size(field.type, field_type.flexible) for field in field_type.fields if field.tag is None)
        return untagged + (1 if field_type.flexible else 0)
    if field_type in FIXED_WIDTH_FORMATS:
        return struct.calcsize(">" + FIXED_WIDTH_FORMATS[field_type])
    if flexible:
        return 1
    return 2 if field_type == "string" else 4
