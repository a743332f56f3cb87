"""Decoders compiled from layout data: the reading half of the machine.

For one version of a layout and a shape, the machine writes one Python
function that reads every field inline: consecutive fixed-width fields (and
the classic length prefix that follows them) with one precompiled
`struct.Struct`, strings and bytes by slicing after one bounds check, arrays
in loops whose counts are checked against the bytes left (so a forged count
or length can never make it allocate more than the input holds), tagged
fields in a loop that skips unknown tags. Nested structs are inlined, and so
is the newest version of a blob embedded in a record, so a record costs one
call however deep it is (older blob versions call the blob's own decoder).

Every generated function turns low-level failures into `Malformed` (or, at a
record's entry point, `DecodeError`) carrying the byte offset where reading
stopped; nothing else escapes.

Each decoder is written with its Cython twin (`_native`): offsets, lengths
and counts are declared `Py_ssize_t`, `buf` is `bytes`, and a run of integer
fields is read in place after one bounds check instead of with `struct`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any
from uuid import UUID

from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets._native import READERS as _READERS
from kagent.core.consumer_offsets._source import Source
from kagent.core.consumer_offsets._wire import (
    MAX_STRING_LENGTH,
    PRECOMPILED_ARRAY_LENGTHS,
    count_error,
    fixed_array_unpackers,
    length_error,
    read_uvarint,
)
from kagent.core.consumer_offsets.errors import DecodeError, Malformed
from kagent.core.consumer_offsets.layout import (
    FIXED_WIDTH_FORMATS,
    Array,
    Field,
    FieldType,
    Message,
    Struct,
    min_size,
)
from kagent.core.consumer_offsets.shape import (
    Blob,
    Embedding,
    RecordShape,
    Shape,
    ShapeError,
    TopicPartitionsShape,
    snake_case,
)

#: The C type of offsets, lengths and counts in the Cython twins.
_OFFSET = "Py_ssize_t"

#: A record decoder: (key, value) -> record.
RecordDecoder = Callable[[bytes, bytes], tuple[Any, ...]]
#: A tombstone decoder: key -> record.
TombstoneDecoder = Callable[[bytes], tuple[Any, ...]]
#: A blob decoder: (buf, start, end) -> record.
BlobDecoder = Callable[[bytes, int, int], tuple[Any, ...]]


def compile_record_decoder(
    record_type: int, key: Struct, value: Struct, version: int, shape: RecordShape
) -> RecordDecoder:
    """A decoder of (key, value) bytes of `record_type` whose value has
    `version`. Both start after their int16 type / version prefix, which the
    caller has read; neither may have trailing bytes."""
    source = Source(native=True)
    emitter = _Emitter(source)
    name = f"decode_record_type_{record_type}_value_v{version}"
    with source.function(name, [("key", None), ("value", None)]):
        scope: dict[str, str] = {}
        values = emitter.entry_part("key", key, shape, scope, record_type, None)
        value_values = emitter.entry_part("value", value, shape, scope, record_type, version)
        if values.keys() & value_values.keys():
            raise ShapeError(f"{key.name} and {value.name} share field names")
        values.update(value_values)
        source.line(f"return {emitter.build(shape, values, repr(version), repr(record_type))}")
    return source.compile(name)


def compile_tombstone_decoder(record_type: int, key: Struct, shape: RecordShape) -> TombstoneDecoder:
    """A decoder of the key of a `record_type` record whose value is null."""
    source = Source(native=True)
    emitter = _Emitter(source)
    name = f"decode_tombstone_type_{record_type}"
    with source.function(name, [("key", None)]):
        values = emitter.entry_part("key", key, shape, {}, record_type, None)
        source.line(f"return {emitter.build(shape, values, None, repr(record_type))}")
    return source.compile(name)


def compile_blob_decoder(message: Message, shape: RecordShape, part: str) -> BlobDecoder:
    """A decoder of a version-prefixed blob in place: reads `buf[start:end]`,
    raises `Malformed` with offsets into `buf`. A version newer than the
    newest known is read with the newest layout and may have trailing bytes
    (the consumer protocol's rule); known versions may not."""
    versions = _blob_versions(message)
    source = Source(native=True)
    emitter = _Emitter(source)
    line = source.line
    name = f"decode_{snake_case(message.name)}"
    with source.function(name, [("buf", "bytes"), ("start", _OFFSET), ("end", _OFFSET)]):
        line(f"if end - start < 2: raise _Malformed(start, f'{part} of {{end - start}} bytes has no version')")
        line(f"version = {emitter.unpacker('>h')}(buf, start)[0]")
        line(f"if version < 0: raise _Malformed(start, f'{part} version {{version}}')")
        line("pos = start + 2")
        emitter.blob(message, versions, shape, part, "version", "record")
        line("return record")
    return source.compile(name)


class _Emitter:
    """Writes decoding code into one `Source`. Generated code reads `buf`
    at `pos` and may not trust bytes at or past `end`."""

    def __init__(self, source: Source) -> None:
        self.source = source
        source.declare("buf", "bytes")
        source.declare("pos", _OFFSET)
        source.declare("end", _OFFSET)
        #: The local holding the offset where the bytes being read end.
        self.end = "end"
        #: Blob field -> the locals holding the previous element's raw blob
        #: and its decoded value.
        self._blob_memos: dict[str, tuple[str, str]] = {}
        source.namespace.update(
            _DecodeError=DecodeError,
            _Malformed=Malformed,
            _struct_error=struct.error,
            _uvarint=read_uvarint,
            _length_error=length_error,
            _count_error=count_error,
            _new=tuple.__new__,
            _UUID=UUID,
            _TopicPartition=TopicPartition,
            _unpack_from=struct.unpack_from,
        )

    def entry_part(
        self,
        part: str,
        layout: Struct,
        shape: RecordShape,
        scope: dict[str, str],
        record_type: int,
        version: int | None,
    ) -> dict[str, str]:
        """Decode `part` (the key or the value argument) after its 2-byte
        prefix, reporting failures as `DecodeError`s of that part."""
        line = self.source.line
        line(f"buf = {part}")
        line("end = len(buf)")
        line("pos = 2")
        context = f"{record_type!r}, {part!r}, {version!r}"
        with self.source.block("try:"):
            values = self.fields(layout, shape, scope)
            line(f"if pos != end: raise _Malformed(pos, f'{{end - pos}} bytes after the {part}')")
        self._failures(lambda offset, reason: f"_DecodeError({context}, {offset}, {reason})")
        return values

    def _failures(self, error: Callable[[str, str], str]) -> None:
        """Emit the handlers that follow a `try:` block of decoding code:
        a nested `Malformed`, a read past the bytes and invalid UTF-8, each
        re-raised as `error(offset expression, reason expression)`."""
        for caught, offset, reason in (
            ("_Malformed as exc", "exc.offset", "exc.reason"),
            ("(_struct_error, IndexError)", "pos", "'truncated'"),
            ("UnicodeDecodeError as exc", "pos + exc.start", "'invalid UTF-8'"),
        ):
            with self.source.block(f"except {caught}:"):
                self.source.line(f"raise {error(offset, reason)} from None")

    def fields(
        self,
        layout: Struct,
        shape: RecordShape | None,
        scope: dict[str, str],
        before: tuple[str, str] | None = None,
        read: tuple[str, str] | None = None,
    ) -> dict[str, str]:
        """Emit code that decodes `layout`'s fields at `pos`; return spec
        field name (snake_case) -> the local holding its value. `scope`
        holds the fields of enclosing structs and gains these.

        `before` is a fixed-width value (type, local) preceding the fields
        (a blob's version), read with the first struct. `read` is
        (expression, format) where the caller has already read that first
        struct (of format `_first_format`)."""
        values: dict[str, str] = {}
        run: list[tuple[str, str]] = [before] if before is not None else []
        for field in layout.fields:
            if field.tag is not None:
                continue
            name = snake_case(field.name)
            target = self.source.local(name)
            if isinstance(field.type, str) and field.type in FIXED_WIDTH_FORMATS:
                run.append((field.type, target))
            elif isinstance(field.type, Struct):
                raise ShapeError(f"{layout.name}.{field.name}: untagged struct fields are not supported")
            else:
                if layout.flexible:
                    self._flush(run, read)
                    length = self._compact_length()
                else:
                    length = self.source.local("n", _OFFSET)
                    run.append((_length_type(field.type), length))
                    self._flush(run, read)
                read = None
                self._variable(field, name, target, length, layout.flexible, shape, scope)
            values[name] = scope[name] = target
        self._flush(run, read)
        if layout.flexible:
            self._tagged_fields(layout, shape, scope, values)
        return values

    def build(self, shape: RecordShape, values: dict[str, str], version: str | None, record_type: str | None) -> str:
        """An expression building `shape.cls` from decoded `values`."""
        args = []
        for record_field in shape.cls._fields:  # type: ignore[attr-defined]
            if record_field == shape.version_field:
                args.append(_required(version, shape, record_field))
            elif record_field == shape.record_type_field:
                args.append(_required(record_type, shape, record_field))
            else:
                variable = values.get(shape.spec_name(record_field))
                sentinel = shape.none_if.get(record_field)
                if variable is None:
                    args.append("None")
                elif sentinel is None:
                    args.append(variable)
                else:
                    args.append(f"(None if {variable} == {sentinel!r} else {variable})")
        unmapped = set(values) - {shape.spec_name(name) for name in shape.data_fields()}
        if unmapped:
            raise ShapeError(f"{shape.cls.__name__} has no field for {sorted(unmapped)}")
        cls = self.source.constant(shape.cls, "cls")
        return f"_new({cls}, ({', '.join(args)},))"

    def blob(
        self,
        message: Message,
        versions: list[int],
        shape: RecordShape,
        part: str,
        version: str,
        target: str,
        read: tuple[str, str] | None = None,
    ) -> None:
        """Emit code that decodes a blob of `message` into the local
        `target`: its version (at least 0) is in the local `version` and
        its fields start at `pos`; or, given `read` (local, format), its
        version and the first struct of its layout (`_first_format`) were
        read at `pos` into that local. `versions` lists the layouts to read,
        newest first; a version above the newest known is read with the
        newest layout and may have trailing bytes, known versions may not.
        Failures are `Malformed` naming `part` and the version."""
        line = self.source.line
        end = self.end
        with self.source.block("try:"):
            for index, layout_version in enumerate(versions):
                if len(versions) == 1:
                    branch: AbstractContextManager[None] = nullcontext()
                elif index == 0:
                    branch = self.source.block(f"if {version} >= {layout_version}:")
                else:
                    branch = self.source.block(f"elif {version} == {layout_version}:")
                with branch:
                    layout = message.versions[layout_version]
                    before = None if read is None else ("int16", version)
                    values = self.fields(layout, shape, {}, before, read)
                    line(f"{target} = {self.build(shape, values, version, None)}")
        self._failures(lambda offset, reason: f"_Malformed({offset}, f'{part} v{{{version}}}: ' + {reason})")
        with self.source.block(f"if pos != {end}:"):
            line(f"if pos > {end}: raise _Malformed({end}, f'{part} v{{{version}}}: truncated')")
            with self.source.block(f"if {version} <= {max(message.versions)}:"):
                line(f"raise _Malformed(pos, f'{part} v{{{version}}}: {{{end} - pos}} bytes after it')")

    @contextmanager
    def _ending_at(self, stop: str) -> Iterator[None]:
        """Emit code that reads bytes ending at the local `stop`."""
        outer, self.end = self.end, stop
        try:
            yield
        finally:
            self.end = outer

    def unpacker(self, fmt: str) -> str:
        """The global name of a precompiled `unpack_from` of `fmt`."""
        return self.source.constant(struct.Struct(fmt).unpack_from, "unpack", key=fmt)

    def _flush(self, run: list[tuple[str, str]], read: tuple[str, str] | None = None) -> None:
        """Read the pending fixed-width fields with one precompiled struct,
        or take them from `read`: (expression, format) already read."""
        fmt = _format(type_name for type_name, _ in run)
        if read is not None and read[1] != fmt:
            raise ShapeError(f"{read[1]} was read where {fmt} is due")
        if not run:
            return
        source = f"{self.unpacker(fmt)}(buf, pos)" if read is None else read[0]
        targets = [target for _, target in run]
        text = f"{targets[0]} = {source}[0]" if len(targets) == 1 else f"{', '.join(targets)} = {source}"
        self.source.line(text, _native_reads(run, text))
        self.source.line(f"pos += {struct.calcsize(fmt)}")
        for type_name, target in run:
            if type_name == "uuid":
                self.source.line(f"{target} = _UUID(bytes={target})")
        run.clear()

    def _compact_length(self) -> str:
        """Read an unsigned-varint length+1; the local holds the length (-1: null)."""
        length = self.source.local("n", _OFFSET)
        self.source.line(f"{length} = buf[pos]")
        with self.source.block(f"if {length} < 0x80:"):
            self.source.line("pos += 1")
        with self.source.block("else:"):
            self.source.line(f"{length}, pos = _uvarint(buf, pos)")
        self.source.line(f"{length} -= 1")
        return length

    def _null_or(self, field: Field, length: str, target: str) -> AbstractContextManager[None]:
        """For a nullable field, emit the null branch and return the context
        of the non-null one."""
        if not field.nullable:
            return nullcontext()
        with self.source.block(f"if {length} == -1:"):
            self.source.line(f"{target} = None")
        return self.source.block("else:")

    def _variable(
        self,
        field: Field,
        name: str,
        target: str,
        length: str,
        flexible: bool,
        shape: RecordShape | None,
        scope: dict[str, str],
    ) -> None:
        """Emit the body of a string, bytes or array whose length (or
        count) is in the local `length`."""
        if isinstance(field.type, Array):
            self._array(field, field.type.element, name, target, length, flexible, shape, scope)
            return
        line = self.source.line
        with self._null_or(field, length, target):
            too_long = f" or {length} > {MAX_STRING_LENGTH}" if flexible and field.type == "string" else ""
            end = self.end
            stop = self.source.local("stop", _OFFSET)
            line(f"{stop} = pos + {length}")
            line(f"if {length} < 0 or {stop} > {end}{too_long}: raise _length_error(pos, {length}, {end})")
            embedding = shape.embedding if shape is not None else None
            if embedding is not None and name in embedding.blobs:
                self._embedded(embedding, name, target, length, stop, scope)
            else:
                decode = ".decode()" if field.type == "string" else ""
                line(f"{target} = buf[pos:{stop}]{decode}")
            line(f"pos = {stop}")

    def _open_blob_memos(self, shape: Shape | None) -> None:
        """Before a loop over structs that embed blobs: for each blob field
        whose blobs repeat, the previous element's raw blob and its value,
        so that a run of identical blobs decodes once."""
        if isinstance(shape, RecordShape) and shape.embedding is not None:
            for name, blob in shape.embedding.blobs.items():
                if blob.repeats:
                    memo = self.source.local(f"last_{name}_raw"), self.source.local(f"last_{name}")
                    self.source.line(f"{memo[0]} = {memo[1]} = None")
                    self._blob_memos[name] = memo

    def _embedded(
        self, embedding: Embedding, name: str, target: str, length: str, stop: str, scope: dict[str, str]
    ) -> None:
        """A bytes field holding a blob that ends at `stop`, its length
        checked: decoded when the embedding's condition holds (or, for a
        blob that repeats, taken from the previous element when the bytes
        are the same); empty decodes to None."""
        line = self.source.line
        condition = f"{_in_scope(scope, embedding.when_field)} == {embedding.when_value!r}"
        blob = embedding.blobs[name]
        with self.source.block(f"if {condition}:"):
            if blob.repeats:
                memo = self._blob_memos.get(name)
                if memo is None:
                    raise ShapeError(f"blob field {name!r} must belong to the elements of an array")
                last_raw, last = memo
                raw = self.source.local("raw")
                line(f"{raw} = buf[pos:{stop}]")
                with self.source.block(f"if {raw} == {last_raw}:"):
                    line(f"{target} = {last}")
                with self.source.block("else:"):
                    self._blob_value(blob, name, target, length, stop)
                    line(f"{last_raw} = {raw}")
                    line(f"{last} = {target}")
            else:
                self._blob_value(blob, name, target, length, stop)
        with self.source.block("else:"):
            line(f"{target} = buf[pos:{stop}]")

    def _blob_value(self, blob: Blob, name: str, target: str, length: str, stop: str) -> None:
        """Decode the blob from `pos` to `stop` into `target`: None if
        empty; inline if its version is the newest or above and it holds
        the first struct that layout reads; otherwise with the blob's own
        decoder (which also reports whatever is wrong)."""
        latest = max(blob.message.versions)
        fmt = _first_format(blob.message.versions[latest], "int16")
        head, version = self.source.local("head"), self.source.local("version")
        read = f"({head} := {self.unpacker(fmt)}(buf, pos))"
        size = struct.calcsize(fmt)
        newest = self.source.block(
            f"if {length} >= {size} and {read}[0] >= {latest}:",
            # The blob's length was checked against the bytes left: its
            # version is there to read. `_flush` reads the rest anew.
            native=f"if {length} >= {size} and {_READERS['h']}(buf, pos) >= {latest}:",
        )
        with newest, self._ending_at(stop):
            self.blob(blob.message, [latest], blob.shape, blob.part, version, target, (head, fmt))
        with self.source.block(f"elif {length}:"):
            decode_at = self.source.constant(blob.decode_at, "blob", key=name)
            self.source.line(f"{target} = {decode_at}(buf, pos, {stop})")
        with self.source.block("else:"):
            self.source.line(f"{target} = None")

    def _array(
        self,
        field: Field,
        element: FieldType,
        name: str,
        target: str,
        count: str,
        flexible: bool,
        shape: RecordShape | None,
        scope: dict[str, str],
    ) -> None:
        line = self.source.line
        smallest = min_size(element, flexible)
        if smallest < 1:
            raise ShapeError(f"{field.name}: array elements must take at least one byte")
        end = self.end
        with self._null_or(field, count, target):
            if isinstance(element, str) and element in FIXED_WIDTH_FORMATS:
                self._fixed_array(element, target, count)
                return
            room = f"{end} - pos" if smallest == 1 else f"({end} - pos) // {smallest}"
            line(f"if not 0 <= {count} <= {room}: raise _count_error(pos, {count}, {end}, {smallest})")
            items = self.source.local("items")
            line(f"{items} = []")
            if isinstance(element, Struct):
                self._open_blob_memos(shape.nested.get(name) if shape is not None else None)
            with self.source.block(f"for _ in range({count}):"):
                if isinstance(element, Struct):
                    self._struct_element(element, name, items, shape, scope)
                else:
                    item = self.source.local("item")
                    if flexible:
                        length = self._compact_length()
                    else:
                        length = self.source.local("n", _OFFSET)
                        self._flush([(_length_type(element), length)])
                    self._variable(Field(field.name, element), "", item, length, flexible, None, scope)
                    line(f"{items}.append({item})")
            line(f"{target} = tuple({items})")

    def _fixed_array(self, element: str, target: str, count: str) -> None:
        """Emit the checked read of `count` fixed-width values."""
        if element == "uuid":
            raise ShapeError("arrays of uuid are not supported")
        line = self.source.line
        code = FIXED_WIDTH_FORMATS[element]
        size = struct.calcsize(">" + code)
        stop = self.source.local("stop", _OFFSET)
        line(f"{stop} = pos + {count}" if size == 1 else f"{stop} = pos + {size} * {count}")
        line(f"if {count} < 0 or {stop} > {self.end}: raise _count_error(pos, {count}, {self.end}, {size})")
        unpackers = self.source.constant(fixed_array_unpackers(code), "arrays", key=code)
        line(
            f"{target} = {unpackers}[{count}](buf, pos) if {count} < {PRECOMPILED_ARRAY_LENGTHS} "
            f"else _unpack_from(f'>{{{count}}}{code}', buf, pos)"
        )
        line(f"pos = {stop}")

    def _struct_element(
        self, element: Struct, name: str, items: str, shape: RecordShape | None, scope: dict[str, str]
    ) -> None:
        element_shape = shape.nested.get(name) if shape is not None else None
        if isinstance(element_shape, TopicPartitionsShape):
            _check_topic_partitions(element)
            values = self.fields(element, None, dict(scope))
            partition = self.source.local("partition")
            with self.source.block(f"for {partition} in {values['partitions']}:"):
                self.source.line(f"{items}.append(_new(_TopicPartition, ({values['topic']}, {partition})))")
        elif isinstance(element_shape, RecordShape):
            values = self.fields(element, element_shape, dict(scope))
            self.source.line(f"{items}.append({self.build(element_shape, values, None, None)})")
        else:
            raise ShapeError(f"no shape for the {element.name} structs of {name!r}")

    def _tagged_fields(
        self, layout: Struct, shape: RecordShape | None, scope: dict[str, str], values: dict[str, str]
    ) -> None:
        """Emit the tagged-field section: known tags decoded (each must fill
        exactly its declared size), unknown ones skipped, tags ascending."""
        line = self.source.line
        tagged = sorted((field for field in layout.fields if field.tag is not None), key=lambda f: f.tag or 0)
        for field in tagged:
            name = snake_case(field.name)
            target = self.source.local(name)
            line(f"{target} = {field.default!r}")
            values[name] = scope[name] = target
        count = self.source.local("tags", _OFFSET)
        line(f"{count} = buf[pos]")
        with self.source.block(f"if {count}:"):
            line(f"{count}, pos = _uvarint(buf, pos)")
            line(f"if {count} > {self.end} - pos: raise _Malformed(pos, f'{{{count}}} tagged fields cannot fit')")
            last, tag, size, stop = (self.source.local(hint, _OFFSET) for hint in ("last_tag", "tag", "size", "stop"))
            line(f"{last} = -1")
            with self.source.block(f"for _ in range({count}):"):
                line(f"{tag}, pos = _uvarint(buf, pos)")
                line(f"{size}, pos = _uvarint(buf, pos)")
                line(f"if {tag} <= {last}: raise _Malformed(pos, 'tagged fields out of order')")
                line(f"{last} = {tag}")
                line(f"{stop} = pos + {size}")
                line(f"if {stop} > {self.end}: raise _Malformed(pos, f'tagged field of {{{size}}} bytes overruns')")
                keyword = "if"
                for field in tagged:
                    with self.source.block(f"{keyword} {tag} == {field.tag}:"):
                        name = snake_case(field.name)
                        self._tagged_value(field, name, values[name], shape, scope)
                        mismatch = f"f'tagged field {field.tag} is not {{{size}}} bytes'"
                        line(f"if pos != {stop}: raise _Malformed(pos, {mismatch})")
                    keyword = "elif"
                with self.source.block("else:") if tagged else nullcontext():
                    line(f"pos = {stop}")
        with self.source.block("else:"):
            line("pos += 1")

    def _tagged_value(
        self, field: Field, name: str, target: str, shape: RecordShape | None, scope: dict[str, str]
    ) -> None:
        """A tagged field's value: its flexible encoding; a nullable struct
        is preceded by a presence varint (0 null, 1 present)."""
        if isinstance(field.type, str) and field.type in FIXED_WIDTH_FORMATS:
            self._flush([(field.type, target)])
        elif isinstance(field.type, Struct):
            nested = shape.nested.get(name) if shape is not None else None
            if not isinstance(nested, RecordShape):
                raise ShapeError(f"no record shape for tagged struct {field.name}")
            presence: AbstractContextManager[None] = nullcontext()
            if field.nullable:
                marker = self.source.local("present")
                self.source.line(f"{marker} = buf[pos]")
                self.source.line("pos += 1")
                with self.source.block(f"if {marker} == 0:"):
                    self.source.line(f"{target} = None")
                with self.source.block(f"elif {marker} != 1:"):
                    self.source.line(f"raise _Malformed(pos - 1, f'presence marker {{{marker}}}')")
                presence = self.source.block("else:")
            with presence:
                values = self.fields(field.type, nested, dict(scope))
                self.source.line(f"{target} = {self.build(nested, values, None, None)}")
        else:
            length = self._compact_length()
            self._variable(field, name, target, length, True, shape, scope)


def _native_reads(run: list[tuple[str, str]], text: str) -> str:
    """The Cython twin of `text`, which reads the fixed-width fields of
    `run` at `pos`: one bounds check as `struct` makes it (failing with
    IndexError, as reading `buf` would), then each field read in place.
    `text` itself where a field's type has no reader."""
    codes = [FIXED_WIDTH_FORMATS[type_name] for type_name, _ in run]
    if not all(code in _READERS for code in codes):
        return text
    lines = [f"if pos + {struct.calcsize(_format(t for t, _ in run))} > len(buf): raise IndexError"]
    offset = 0
    for code, (_, target) in zip(codes, run, strict=True):
        at = "pos" if offset == 0 else f"pos + {offset}"
        lines.append(f"{target} = {_READERS[code]}(buf, {at})")
        offset += struct.calcsize(">" + code)
    return "\n".join(lines)


def _blob_versions(message: Message) -> list[int]:
    """The versions of a blob, newest first; they must be 0..n."""
    versions = sorted(message.versions, reverse=True)
    if versions != list(range(versions[0], -1, -1)):
        raise ShapeError(f"{message.name} versions are not 0..n: {versions}")
    return versions


def _format(type_names: Iterable[str]) -> str:
    """The struct format of consecutive fixed-width values."""
    return ">" + "".join(FIXED_WIDTH_FORMATS[type_name] for type_name in type_names)


def _length_type(field_type: FieldType) -> str:
    """The type of a classic length (or count) prefix."""
    return "int16" if field_type == "string" else "int32"


def _first_format(layout: Struct, before: str) -> str:
    """The format of the first struct `_Emitter.fields` reads for `layout`
    preceded by a value of type `before`: that value, the leading
    fixed-width fields and, in a classic layout, the next length prefix."""
    types = [before]
    for field in layout.fields:
        if field.tag is not None:
            continue
        if isinstance(field.type, str) and field.type in FIXED_WIDTH_FORMATS:
            types.append(field.type)
        else:
            if not layout.flexible:
                types.append(_length_type(field.type))
            break
    return _format(types)


def _required(expression: str | None, shape: RecordShape, record_field: str) -> str:
    if expression is None:
        raise ShapeError(f"{shape.cls.__name__}.{record_field} cannot be set here")
    return expression


def _in_scope(scope: dict[str, str], name: str) -> str:
    if name not in scope:
        raise ShapeError(f"embedding condition field {name!r} is not decoded before the blob")
    return scope[name]


def _check_topic_partitions(element: Struct) -> None:
    fields = [(field.name, field.type) for field in element.fields]
    if fields != [("Topic", "string"), ("Partitions", Array("int32"))]:
        raise ShapeError(f"{element.name} is not a {{Topic, Partitions}} struct: {fields}")
