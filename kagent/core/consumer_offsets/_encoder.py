"""Encoders compiled from layout data: the writing half of the machine.

The mirror of `_decoder`: for one version of a layout and a shape, one
generated function unpacks the record, checks that fields the version lacks
are None, and writes the bytes Kafka's own serializer writes: fixed-width
runs packed at once, classic or compact lengths, tagged fields in ascending
tag order and only when they differ from their default.

Generated encoders raise ValueError for a value the version cannot carry; a
value of the wrong type may surface as TypeError, AttributeError or
struct.error, which the codec's entry points turn into ValueError.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from kagent.core.consumer_offsets._source import Source
from kagent.core.consumer_offsets._wire import MAX_STRING_LENGTH, group_topic_partitions, uvarint
from kagent.core.consumer_offsets.layout import FIXED_WIDTH_FORMATS, Array, Field, Struct
from kagent.core.consumer_offsets.shape import RecordShape, ShapeError, TopicPartitionsShape, snake_case

#: A record encoder: record -> (key, value).
RecordEncoder = Callable[[tuple[Any, ...]], tuple[bytes, bytes]]
#: A tombstone or blob encoder: record -> bytes (the key, or the blob).
BytesEncoder = Callable[[tuple[Any, ...]], bytes]

_INT16 = struct.Struct(">h")


def compile_record_encoder(
    record_type: int, key: Struct, value: Struct, version: int, shape: RecordShape
) -> RecordEncoder:
    """An encoder of `shape.cls` records into the (key, value) of
    `record_type` with value `version`."""
    source = Source()
    emitter = _Emitter(source)
    name = f"encode_record_type_{record_type}_value_v{version}"
    with source.block(f"def {name}(record):"):
        values = emitter.bind(shape, (key, value), "record", f"value version {version}")
        key_bytes = emitter.part(_INT16.pack(record_type), key, shape, values)
        value_bytes = emitter.part(_INT16.pack(version), value, shape, values)
        source.line(f"return {key_bytes}, {value_bytes}")
    return source.compile(name)


def compile_tombstone_encoder(record_type: int, key: Struct, shape: RecordShape) -> BytesEncoder:
    """An encoder of `shape.cls` tombstones into the key of `record_type`."""
    source = Source()
    emitter = _Emitter(source)
    name = f"encode_tombstone_type_{record_type}"
    with source.block(f"def {name}(record):"):
        values = emitter.bind(shape, (key,), "record", "tombstone")
        source.line(f"return {emitter.part(_INT16.pack(record_type), key, shape, values)}")
    return source.compile(name)


def compile_blob_encoder(layout: Struct, version: int, shape: RecordShape) -> BytesEncoder:
    """An encoder of `shape.cls` records into a version-prefixed blob."""
    source = Source()
    emitter = _Emitter(source)
    name = f"encode_{snake_case(layout.name)}_v{version}"
    with source.block(f"def {name}(record):"):
        values = emitter.bind(shape, (layout,), "record", f"version {version}")
        source.line(f"return {emitter.part(_INT16.pack(version), layout, shape, values)}")
    return source.compile(name)


class _Emitter:
    """Writes encoding code into one `Source`."""

    def __init__(self, source: Source) -> None:
        self.source = source
        source.namespace.update(_uvarint=uvarint, _group=group_topic_partitions, _pack=struct.pack)

    def part(self, prefix: bytes, layout: Struct, shape: RecordShape, values: dict[str, str]) -> str:
        """Emit the bytes of one part (`prefix` then `layout`'s fields);
        return the local that holds them."""
        out, write, result = (self.source.local(hint) for hint in ("out", "write", "encoded"))
        self.source.line(f"{out} = []")
        self.source.line(f"{write} = {out}.append")
        self.source.line(f"{write}({self.source.constant(prefix, 'prefix')})")
        self.fields(layout, shape, values, write)
        self.source.line(f"{result} = b''.join({out})")
        return result

    def bind(self, shape: RecordShape, layouts: Sequence[Struct], record: str, context: str) -> dict[str, str]:
        """Unpack the record in local `record` into locals; return spec field
        (snake_case) -> local. A record field the layouts lack must be None."""
        cls = self.source.constant(shape.cls, "cls")
        self.source.line(
            f"if type({record}) is not {cls}: "
            f"raise ValueError(f'expected {shape.cls.__name__}, got {{type({record}).__name__}}')"
        )
        names = [self.source.local(name) for name in shape.cls._fields]  # type: ignore[attr-defined]
        self.source.line(f"{', '.join(names)}, = {record}")
        present = {snake_case(field.name) for layout in layouts for field in layout.fields}
        values: dict[str, str] = {}
        for record_field, local in zip(shape.cls._fields, names, strict=True):  # type: ignore[attr-defined]
            if record_field not in shape.data_fields():
                continue
            spec_name = shape.spec_name(record_field)
            if spec_name not in present:
                message = f"{shape.cls.__name__}.{record_field} must be None in {context}"
                self.source.line(f"if {local} is not None: raise ValueError({message!r})")
                continue
            sentinel = shape.none_if.get(record_field)
            if sentinel is not None:
                self.source.line(f"if {local} is None: {local} = {sentinel!r}")
            values[spec_name] = local
        unmapped = present - values.keys()
        if unmapped:
            raise ShapeError(f"{shape.cls.__name__} has no field for {sorted(unmapped)}")
        return values

    def fields(self, layout: Struct, shape: RecordShape | None, scope: dict[str, str], write: str) -> None:
        """Emit code that writes `layout`'s fields, whose values are in the
        locals `scope` names (enclosing structs' fields included)."""
        run: list[tuple[str, str]] = []
        for field in layout.fields:
            if field.tag is not None:
                continue
            name = snake_case(field.name)
            if isinstance(field.type, str) and field.type in FIXED_WIDTH_FORMATS:
                run.append((field.type, scope[name]))
            elif isinstance(field.type, Struct):
                raise ShapeError(f"{layout.name}.{field.name}: untagged struct fields are not supported")
            else:
                self._flush(run, write)
                self._variable(field, name, scope[name], layout.flexible, shape, scope, write)
        self._flush(run, write)
        if layout.flexible:
            self._tagged_fields(layout, shape, scope, write)

    def _flush(self, run: list[tuple[str, str]], write: str) -> None:
        if not run:
            return
        fmt = ">" + "".join(FIXED_WIDTH_FORMATS[type_name] for type_name, _ in run)
        pack = self.source.constant(struct.Struct(fmt).pack, "pack", key=fmt)
        args = [f"{local}.bytes" if type_name == "uuid" else local for type_name, local in run]
        self.source.line(f"{write}({pack}({', '.join(args)}))")
        run.clear()

    def _null_or(self, field: Field, local: str, null: bytes, write: str) -> AbstractContextManager[None]:
        """Emit the null branch of a nullable field (or reject None) and
        return the context of the non-null branch."""
        if not field.nullable:
            self.source.line(f"if {local} is None: raise ValueError({f'{field.name} is not nullable'!r})")
            return nullcontext()
        with self.source.block(f"if {local} is None:"):
            self.source.line(f"{write}({null!r})")
        return self.source.block("else:")

    def _length(self, length: str, flexible: bool, classic_format: str, write: str) -> None:
        if flexible:
            self.source.line(f"{write}(_uvarint({length} + 1))")
        else:
            pack = self.source.constant(struct.Struct(classic_format).pack, "pack", key=classic_format)
            self.source.line(f"{write}({pack}({length}))")

    def _variable(
        self,
        field: Field,
        name: str,
        local: str,
        flexible: bool,
        shape: RecordShape | None,
        scope: dict[str, str],
        write: str,
    ) -> None:
        if isinstance(field.type, Array):
            self._array(field, field.type.element, name, local, flexible, shape, scope, write)
            return
        embedding = shape.embedding if shape is not None else None
        if embedding is not None and name in embedding.blobs:
            condition = f"{scope[embedding.when_field]} == {embedding.when_value!r}"
            blob = self.source.constant(embedding.blobs[name].encode, "blob", key=name)
            with self.source.block(f"if {condition}:"):
                self.source.line(f"{local} = b'' if {local} is None else {blob}({local})")
            with self.source.block(f"elif type({local}) is not bytes:"):
                message = f"{name} must be bytes unless {embedding.when_field} is {embedding.when_value!r}"
                self.source.line(f"raise ValueError({message!r})")
        is_string = field.type == "string"
        null = b"\x00" if flexible else (b"\xff\xff" if is_string else b"\xff\xff\xff\xff")
        with self._null_or(field, local, null, write):
            data = local
            if is_string:
                data = self.source.local("utf8")
                self.source.line(f"{data} = {local}.encode()")
                if flexible:
                    message = f"{field.name} is longer than {MAX_STRING_LENGTH} bytes"
                    self.source.line(f"if len({data}) > {MAX_STRING_LENGTH}: raise ValueError({message!r})")
            self._length(f"len({data})", flexible, ">h" if is_string else ">i", write)
            self.source.line(f"{write}({data})")

    def _array(
        self,
        field: Field,
        element: Any,
        name: str,
        local: str,
        flexible: bool,
        shape: RecordShape | None,
        scope: dict[str, str],
        write: str,
    ) -> None:
        line = self.source.line
        element_shape = shape.nested.get(name) if shape is not None else None
        with self._null_or(field, local, b"\x00" if flexible else b"\xff\xff\xff\xff", write):
            if isinstance(element_shape, TopicPartitionsShape):
                groups, topic, partitions = (self.source.local(h) for h in ("groups", "topic", "partitions"))
                line(f"{groups} = _group({local})")
                self._length(f"len({groups})", flexible, ">i", write)
                with self.source.block(f"for {topic}, {partitions} in {groups}:"):
                    self.fields(element, None, {**scope, "topic": topic, "partitions": partitions}, write)
                return
            self._length(f"len({local})", flexible, ">i", write)
            item = self.source.local("item")
            if isinstance(element, str) and element in FIXED_WIDTH_FORMATS:
                code = FIXED_WIDTH_FORMATS[element]
                line(f"{write}(_pack(f'>{{len({local})}}{code}', *{local}))")
            elif isinstance(element, Struct):
                if not isinstance(element_shape, RecordShape):
                    raise ShapeError(f"no shape for the {element.name} structs of {name!r}")
                with self.source.block(f"for {item} in {local}:"):
                    values = self.bind(element_shape, (element,), item, element.name)
                    self.fields(element, element_shape, {**scope, **values}, write)
            else:
                with self.source.block(f"for {item} in {local}:"):
                    self._variable(Field(field.name, element), name, item, flexible, None, scope, write)

    def _tagged_fields(self, layout: Struct, shape: RecordShape | None, scope: dict[str, str], write: str) -> None:
        """Emit the tagged-field section: fields differing from their
        default, in ascending tag order, each as tag, size, data."""
        line = self.source.line
        tagged = sorted((field for field in layout.fields if field.tag is not None), key=lambda f: f.tag or 0)
        if not tagged:
            line(f"{write}(b'\\x00')")
            return
        entries = self.source.local("tagged")
        line(f"{entries} = []")
        for field in tagged:
            name = snake_case(field.name)
            local = scope[name]
            condition = f"{local} is not None" if field.default is None else f"{local} != {field.default!r}"
            with self.source.block(f"if {condition}:"):
                chunks, chunk_write = self.source.local("chunks"), self.source.local("write")
                line(f"{chunks} = []")
                line(f"{chunk_write} = {chunks}.append")
                self._tagged_value(field, name, local, shape, scope, chunk_write)
                line(f"{entries}.append(({field.tag}, b''.join({chunks})))")
        tag, data = self.source.local("tag"), self.source.local("data")
        line(f"{write}(_uvarint(len({entries})))")
        with self.source.block(f"for {tag}, {data} in {entries}:"):
            line(f"{write}(_uvarint({tag}))")
            line(f"{write}(_uvarint(len({data})))")
            line(f"{write}({data})")

    def _tagged_value(
        self,
        field: Field,
        name: str,
        local: str,
        shape: RecordShape | None,
        scope: dict[str, str],
        write: str,
    ) -> None:
        if isinstance(field.type, str) and field.type in FIXED_WIDTH_FORMATS:
            self._flush([(field.type, local)], write)
        elif isinstance(field.type, Struct):
            nested = shape.nested.get(name) if shape is not None else None
            if not isinstance(nested, RecordShape):
                raise ShapeError(f"no record shape for tagged struct {field.name}")
            if field.nullable:
                self.source.line(f"{write}(b'\\x01')")
            values = self.bind(nested, (field.type,), local, field.type.name)
            self.fields(field.type, nested, {**scope, **values}, write)
        else:
            self._variable(field, name, local, True, shape, scope, write)
