"""How a layout's fields become record fields: the second input of the machine.

A layout (`layout.Struct`) says what is on the wire; a shape says what the
decoder builds from it. Record fields are matched to spec fields by name
(Kafka's name in snake_case, or as renamed); a record field the version does
not have is None. The machine refuses a shape that leaves a spec field
unmapped, so a new field in the specs cannot be dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kagent.core.consumer_offsets.layout import Message


def snake_case(name: str) -> str:
    """Kafka's field name in snake_case: `commitTimestamp` -> `commit_timestamp`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Blob(Protocol):
    """The codec of a blob embedded in a bytes field (consumer-protocol
    subscription or assignment): an int16 version and a struct.

    The decoder of the embedding record reads the blob's newest version
    inline, from `message` and `shape`, and calls `decode_at` for the
    others; both report failures naming `part` and the version.
    """

    #: The blob's name in error reports ("subscription").
    part: str
    #: Its layouts, versions 0..n.
    message: Message
    #: The record it decodes to; its version field takes the blob's version.
    shape: RecordShape
    #: Whether consecutive elements of an array often hold the same blob
    #: (the subscriptions of an eager group's members): a blob whose bytes
    #: are the previous element's then takes its decoded value.
    repeats: bool

    def decode_at(self, buf: bytes, start: int, end: int) -> Any:
        """Decode `buf[start:end]` in place; raise `Malformed` with offsets into `buf`."""

    def encode(self, value: Any) -> bytes:
        """The blob's bytes; ValueError if `value` is not this blob's record."""


@dataclass(frozen=True)
class Embedding:
    """Bytes fields decoded as blobs when a field of an enclosing struct has
    a given value (a member's subscription when the group's protocol type is
    "consumer"). An empty field stays empty: it decodes to None."""

    blobs: Mapping[str, Blob]
    when_field: str
    when_value: str


@dataclass(frozen=True)
class RecordShape:
    """A struct built as an instance of `cls` (a NamedTuple).

    `renames` maps record field -> spec field (snake_case) where they differ;
    `none_if` maps record field -> the wire value that reads as None (and is
    written for None); `nested` gives the shape of each struct-typed spec
    field; `version_field` / `record_type_field` name record fields that
    carry the layout version / the record type rather than a spec field.
    """

    cls: type[tuple[Any, ...]]
    renames: Mapping[str, str] = field(default_factory=dict)
    none_if: Mapping[str, int] = field(default_factory=dict)
    nested: Mapping[str, Shape] = field(default_factory=dict)
    embedding: Embedding | None = None
    version_field: str | None = None
    record_type_field: str | None = None

    def spec_name(self, record_field: str) -> str:
        """The spec field (snake_case) a record field is read from."""
        return self.renames.get(record_field, record_field)

    def data_fields(self) -> tuple[str, ...]:
        """Record fields that come from spec fields (not version or type)."""
        meta = (self.version_field, self.record_type_field)
        return tuple(name for name in self.cls._fields if name not in meta)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TopicPartitionsShape:
    """An array of {Topic, Partitions} structs seen as one flat tuple of
    aiokafka `TopicPartition`s; written back grouping adjacent partitions of
    a topic into one entry."""


Shape = RecordShape | TopicPartitionsShape

#: The shape of the consumer protocol's per-topic partition lists.
FLAT_TOPIC_PARTITIONS = TopicPartitionsShape()


class ShapeError(Exception):
    """A shape does not fit its layout (raised while compiling, at import)."""
