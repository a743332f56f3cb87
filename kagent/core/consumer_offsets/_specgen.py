"""Generate `_layouts.py` from Kafka's JSON message definitions.

    python -m kagent.core.consumer_offsets._specgen [SCHEMA_DIR [OUTPUT]]

SCHEMA_DIR defaults to `shared/kafka-schemas` beside the repository, OUTPUT
to `_layouts.py` in this package. The JSON dialect allows `//` comment lines;
they are dropped before parsing. Each message is resolved version by version
into the `layout` vocabulary (fields present in that version, nullability,
tags, compact encoding for flexible versions) and written out as Python data,
so the layouts the codec runs on are reviewable and diffable.

The generator refuses spec features the codec does not implement (unknown
field attributes, per-field flexible versions, implicit non-integer tagged
defaults) instead of silently mis-describing them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kagent.core.consumer_offsets.layout import (
    FIXED_WIDTH_FORMATS,
    VARIABLE_LENGTH_TYPES,
    Array,
    Field,
    FieldType,
    Message,
    Struct,
)

DEFAULT_SCHEMA_DIR = Path(__file__).resolve().parents[3] / "shared" / "kafka-schemas"
DEFAULT_OUTPUT = Path(__file__).with_name("_layouts.py")

#: Field attributes that only document or steer Kafka's Java classes.
_DESCRIPTIVE_ATTRIBUTES = frozenset({"about", "ignorable", "mapKey", "entityType", "zeroCopy"})
_CODEC_ATTRIBUTES = frozenset(
    {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default", "fields"}
)

#: The saved ConsumerProtocolSubscription.json stops at v2; upstream v3
#: appends RackId, a nullable string defaulting to null (rack-aware
#: assignment). Appended here when the loaded copy lacks it.
_SUBSCRIPTION_RACK_ID: dict[str, Any] = {
    "name": "RackId",
    "type": "string",
    "versions": "3+",
    "nullableVersions": "3+",
    "default": "null",
}
_SUBSCRIPTION_SUPPLEMENT_COMMENT = (
    "# v3 is not in the saved ConsumerProtocolSubscription.json (v0-2): upstream\n"
    "# v3 appends RackId, a nullable string with default null, added by _specgen."
)

_CONSUMER_PROTOCOL = ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment")


class SpecError(ValueError):
    """A spec file uses something the generator or the codec does not support."""


def load_spec(path: Path) -> dict[str, Any]:
    """Parse one Kafka JSON spec, dropping its `//` comment lines."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")]
    spec: dict[str, Any] = json.loads("\n".join(lines))
    if spec["name"] == "ConsumerProtocolSubscription":
        _append_subscription_rack_id(spec)
    return spec


def _append_subscription_rack_id(spec: dict[str, Any]) -> None:
    if any(field["name"] == "RackId" for field in spec["fields"]):
        return
    spec["validVersions"] = "0-3"
    spec["fields"].append(dict(_SUBSCRIPTION_RACK_ID))


def parse_versions(text: str) -> range:
    """Kafka's version-range syntax: "none", "3", "3+", "0-4"."""
    if text == "none":
        return range(0)
    if match := re.fullmatch(r"(\d+)\+", text):
        return range(int(match[1]), 2**15)
    if match := re.fullmatch(r"(\d+)-(\d+)", text):
        return range(int(match[1]), int(match[2]) + 1)
    if re.fullmatch(r"\d+", text):
        return range(int(text), int(text) + 1)
    raise SpecError(f"bad version range {text!r}")


def resolve_message(spec: Mapping[str, Any]) -> Message:
    """Every valid version of one spec, resolved into layout data."""
    flexible = parse_versions(spec["flexibleVersions"])
    common = {struct["name"]: struct for struct in spec.get("commonStructs", ())}
    versions = {
        version: _resolve_struct(spec["name"], spec["fields"], version, version in flexible, common)
        for version in parse_versions(spec["validVersions"])
    }
    return Message(spec["name"], _record_type(spec), versions)


def _record_type(spec: Mapping[str, Any]) -> int | None:
    if "apiKey" in spec:
        return int(spec["apiKey"])
    if spec["name"].endswith("Key"):
        # The older "data" form of a key: its single version is the record type.
        return parse_versions(spec["validVersions"]).start
    return None


def _resolve_struct(
    name: str,
    fields: Sequence[Mapping[str, Any]],
    version: int,
    flexible: bool,
    common: Mapping[str, Mapping[str, Any]],
) -> Struct:
    resolved = tuple(
        _resolve_field(field, version, flexible, common)
        for field in fields
        if version in parse_versions(field["versions"])
    )
    return Struct(name, resolved, flexible)


def _resolve_field(
    field: Mapping[str, Any], version: int, flexible: bool, common: Mapping[str, Mapping[str, Any]]
) -> Field:
    unknown = set(field) - _DESCRIPTIVE_ATTRIBUTES - _CODEC_ATTRIBUTES
    if unknown:
        raise SpecError(f"field {field['name']}: unsupported attributes {sorted(unknown)}")
    nullable = version in parse_versions(field.get("nullableVersions", "none"))
    tagged = version in parse_versions(field.get("taggedVersions", "none"))
    if tagged and not flexible:
        raise SpecError(f"field {field['name']}: tagged in non-flexible version {version}")
    field_type = _resolve_type(field, version, flexible, common)
    if not tagged:
        return Field(field["name"], field_type, nullable)
    return Field(field["name"], field_type, nullable, int(field["tag"]), _tag_default(field, field_type, nullable))


def _resolve_type(
    field: Mapping[str, Any], version: int, flexible: bool, common: Mapping[str, Mapping[str, Any]]
) -> FieldType:
    type_name: str = field["type"]
    is_array = type_name.startswith("[]")
    element_name = type_name.removeprefix("[]")
    element: FieldType
    if element_name in FIXED_WIDTH_FORMATS or element_name in VARIABLE_LENGTH_TYPES:
        element = element_name
    else:
        struct_spec = field if "fields" in field else common.get(element_name)
        if struct_spec is None:
            raise SpecError(f"field {field['name']}: unknown type {type_name!r}")
        element = _resolve_struct(element_name, struct_spec["fields"], version, flexible, common)
    return Array(element) if is_array else element


def _tag_default(field: Mapping[str, Any], field_type: FieldType, nullable: bool) -> int | None:
    default = field.get("default")
    if default in (None, "null") and nullable:
        return None
    if isinstance(field_type, str) and field_type in FIXED_WIDTH_FORMATS and field_type != "uuid":
        return int(default) if default is not None else 0
    raise SpecError(f"tagged field {field['name']}: default {default!r} is not supported")


def load_messages(schema_dir: Path) -> list[Message]:
    """All messages of `schema_dir`: record keys and values ordered by record
    type (key first), then the consumer-protocol blobs."""
    messages = [resolve_message(load_spec(path)) for path in sorted(schema_dir.glob("*.json"))]
    key_types = {m.name.removesuffix("Key"): m.record_type for m in messages if m.name.endswith("Key")}
    messages = [
        # A value stored in the older "data" form has no apiKey: its key's type applies.
        Message(m.name, key_types[m.name.removesuffix("Value")], m.versions)
        if m.record_type is None and m.name.removesuffix("Value") in key_types
        else m
        for m in messages
    ]

    def order(message: Message) -> tuple[int, int, str]:
        if message.record_type is None:
            return (1, _CONSUMER_PROTOCOL.index(message.name), message.name)
        return (0, message.record_type, "0" if message.name.endswith("Key") else "1")

    return sorted(messages, key=order)


def render(messages: Sequence[Message]) -> str:
    """The source of `_layouts.py` for `messages`."""
    out = [
        '"""Layouts of every `__consumer_offsets` record and consumer-protocol blob.',
        "",
        "GENERATED by `python -m kagent.core.consumer_offsets._specgen` from Kafka's JSON",
        "message definitions (shared/kafka-schemas). Do not edit: regenerate.",
        '"""',
        "",
        "from kagent.core.consumer_offsets.layout import Array, Field, Message, Struct",
    ]
    for message in messages:
        out.append("")
        if message.name == "ConsumerProtocolSubscription":
            out.append(_SUBSCRIPTION_SUPPLEMENT_COMMENT)
        out.append(f"{_constant(message.name)} = Message(")
        out.append(f"    name={_quote(message.name)},")
        out.append(f"    record_type={message.record_type!r},")
        out.append("    versions={")
        for version, struct in message.versions.items():
            out.append(f"        {version}: {_render_struct(struct, 8)},")
        out.append("    },")
        out.append(")")
    keys = {m.record_type: m.name for m in messages if m.record_type is not None and m.name.endswith("Key")}
    values = {m.record_type: m.name for m in messages if m.record_type is not None and m.name.endswith("Value")}
    out.append("")
    out.append("#: Record type -> (key, value), as Kafka's specs pair them.")
    out.append("RECORD_TYPES: dict[int, tuple[Message, Message]] = {")
    for record_type in sorted(keys):
        out.append(f"    {record_type}: ({_constant(keys[record_type])}, {_constant(values[record_type])}),")
    out.append("}")
    return "\n".join(out) + "\n"


def _render_struct(struct: Struct, indent: int) -> str:
    pad = " " * indent
    lines = [f"Struct({_quote(struct.name)}, flexible={struct.flexible!r}, fields=("]
    for field in struct.fields:
        lines.append(f"{pad}    {_render_field(field, indent + 4)},")
    lines.append(f"{pad}))")
    return "\n".join(lines)


def _render_field(field: Field, indent: int) -> str:
    args = [_quote(field.name), _render_type(field.type, indent)]
    if field.nullable:
        args.append("nullable=True")
    if field.tag is not None:
        args.append(f"tag={field.tag}")
        args.append(f"default={field.default!r}")
    return f"Field({', '.join(args)})"


def _render_type(field_type: FieldType, indent: int) -> str:
    if isinstance(field_type, Array):
        return f"Array({_render_type(field_type.element, indent)})"
    if isinstance(field_type, Struct):
        return _render_struct(field_type, indent)
    return _quote(field_type)


def _quote(text: str) -> str:
    return json.dumps(text)


def _constant(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def main(argv: Sequence[str]) -> int:
    """Write the layouts generated from argv[0] (schema dir) to argv[1]."""
    schema_dir = Path(argv[0]) if argv else DEFAULT_SCHEMA_DIR
    output = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUTPUT
    output.write_text(render(load_messages(schema_dir)))
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
