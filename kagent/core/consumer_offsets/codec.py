"""`decode` and `encode` of `__consumer_offsets` records.

At import, every (record type, value version) in `_bindings` is compiled by
the machine into one decoder (its compiled twin where one was built, see
`_native`) and one encoder; these functions only read the record type and
value version and dispatch.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kagent.core.consumer_offsets._bindings import BINDINGS, Binding
from kagent.core.consumer_offsets._decoder import (
    RecordDecoder,
    TombstoneDecoder,
    compile_record_decoder,
    compile_tombstone_decoder,
)
from kagent.core.consumer_offsets._encoder import (
    BytesEncoder,
    RecordEncoder,
    compile_record_encoder,
    compile_tombstone_encoder,
)
from kagent.core.consumer_offsets._layouts import RECORD_TYPES
from kagent.core.consumer_offsets.errors import DecodeError
from kagent.core.consumer_offsets.layout import Struct
from kagent.core.consumer_offsets.records import Record, UnknownRecord

_INT16 = struct.Struct(">h").unpack_from
_ENCODING_FAILURES = (struct.error, TypeError, AttributeError, OverflowError)


def decode(key: bytes, value: bytes | None) -> Record:
    """The record of one `__consumer_offsets` message.

    `key` and `value` are `bytes` (the compiled decoders refuse a bytearray
    with TypeError). A null `value` is the tombstone of the key's record type; a record type
    this codec does not know comes back as `UnknownRecord`. Raises
    `DecodeError` (and nothing else) for malformed bytes, including a value
    version newer than any known.
    """
    try:
        record_type: int = _INT16(key, 0)[0]
    except struct.error:
        raise DecodeError(None, "key", None, 0, f"{len(key)} bytes cannot hold a record type") from None
    known = _DECODERS.get(record_type)
    if known is None:
        return UnknownRecord(record_type, key, value)
    decode_tombstone, decoders = known
    if value is None:
        return decode_tombstone(key)  # type: ignore[return-value]
    try:
        version: int = _INT16(value, 0)[0]
    except struct.error:
        raise DecodeError(record_type, "value", None, 0, f"{len(value)} bytes cannot hold a version") from None
    if not 0 <= version < len(decoders):
        raise DecodeError(record_type, "value", version, 0, f"unknown value version (known: 0-{len(decoders) - 1})")
    return decoders[version](key, value)  # type: ignore[return-value]


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """The exact (key, value) Kafka writes for `record` (value None for a
    tombstone). ValueError if a field does not fit the record's version or
    wire type; TypeError if `record` is not a record."""
    if type(record) is UnknownRecord:
        return record.key, record.value
    writer = _WRITERS.get(type(record))
    if writer is None:
        raise TypeError(f"{type(record).__name__} is not a __consumer_offsets record")
    record_type = getattr(record, writer.record_type_field) if writer.record_type_field else writer.record_types[0]
    if record_type not in writer.record_types:
        raise ValueError(f"{type(record).__name__} cannot have record type {record_type!r}")
    compiled = _COMPILED[record_type]
    try:
        if writer.version_field is None:
            return compiled.encode_tombstone(record), None
        version = getattr(record, writer.version_field)
        if version not in range(len(compiled.encoders)):
            raise ValueError(f"record type {record_type} has no value version {version!r}")
        encoded: tuple[bytes, bytes] = compiled.encoders[version](record)
        return encoded
    except _ENCODING_FAILURES as exc:
        raise ValueError(f"cannot encode {record!r}: {exc}") from exc


@dataclass(frozen=True)
class _Writer:
    """How to find the encoder of a record class: the record types it is
    written as, and the fields naming its type and its value version (no
    version field: a tombstone)."""

    record_types: tuple[int, ...]
    record_type_field: str | None
    version_field: str | None


@dataclass(frozen=True)
class _Compiled:
    """The decoders and encoders of one record type; value codecs are
    indexed by value version."""

    decode_tombstone: TombstoneDecoder
    decoders: tuple[RecordDecoder, ...]
    encode_tombstone: BytesEncoder
    encoders: tuple[RecordEncoder, ...]


def _compile(record_type: int, binding: Binding) -> _Compiled:
    key_message, value_message = RECORD_TYPES[record_type]
    values = (binding.value or value_message).versions
    if sorted(values) != list(range(len(values))):
        raise ValueError(f"record type {record_type}: value versions are not 0..n: {sorted(values)}")
    (key,) = key_message.versions.values()
    layouts: list[Struct] = [values[version] for version in range(len(values))]
    return _Compiled(
        compile_tombstone_decoder(record_type, key, binding.tombstone),
        tuple(compile_record_decoder(record_type, key, v, n, binding.record) for n, v in enumerate(layouts)),
        compile_tombstone_encoder(record_type, key, binding.tombstone),
        tuple(compile_record_encoder(record_type, key, v, n, binding.record) for n, v in enumerate(layouts)),
    )


def _writers(bindings: Mapping[int, Binding]) -> dict[type[Any], _Writer]:
    writers: dict[type[Any], _Writer] = {}
    for record_type, binding in bindings.items():
        if binding.record.version_field is None or binding.tombstone.version_field is not None:
            raise ValueError(f"record type {record_type}: records need a version field, tombstones none")
        for shape in (binding.record, binding.tombstone):
            known = writers[shape.cls].record_types if shape.cls in writers else ()
            writers[shape.cls] = _Writer((*known, record_type), shape.record_type_field, shape.version_field)
    return writers


_COMPILED = {record_type: _compile(record_type, binding) for record_type, binding in BINDINGS.items()}
#: The hot path's view: record type -> (tombstone decoder, value decoders).
_DECODERS = {record_type: (c.decode_tombstone, c.decoders) for record_type, c in _COMPILED.items()}
_WRITERS = _writers(BINDINGS)
