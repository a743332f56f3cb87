"""The layout data: generated from the specs, complete, and consistent with
the record classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kagent.core.consumer_offsets import _layouts, _specgen
from kagent.core.consumer_offsets._bindings import BINDINGS
from kagent.core.consumer_offsets.layout import Field, Message
from kagent.core.consumer_offsets.shape import snake_case

SCHEMA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-schemas"


@pytest.mark.skipif(not SCHEMA_DIR.is_dir(), reason=f"{SCHEMA_DIR} is not beside the repository")
def test_checked_in_layouts_are_what_the_specs_generate() -> None:
    # Compared as data, so that reformatting the checked-in module is harmless.
    generated: dict[str, object] = {}
    exec(_specgen.render(_specgen.load_messages(SCHEMA_DIR)), generated)
    checked_in = vars(_layouts)
    stale = "regenerate: python -m kagent.core.consumer_offsets._specgen"
    assert generated["RECORD_TYPES"] == checked_in["RECORD_TYPES"], stale
    assert _messages(generated) == _messages(checked_in), stale


def _messages(namespace: dict[str, object]) -> dict[str, object]:
    return {name: value for name, value in namespace.items() if isinstance(value, Message)}


def test_subscription_v3_appends_a_nullable_rack_id() -> None:
    v2 = _layouts.CONSUMER_PROTOCOL_SUBSCRIPTION.versions[2]
    v3 = _layouts.CONSUMER_PROTOCOL_SUBSCRIPTION.versions[3]
    assert v3.fields == (*v2.fields, Field("RackId", "string", nullable=True))


def test_legacy_offset_commit_value_is_offset_commit_value_v0() -> None:
    # Why type 0 can be read with OffsetCommitValue (see _bindings).
    legacy = _layouts.LEGACY_OFFSET_COMMIT_VALUE.versions[0]
    assert legacy.fields == _layouts.OFFSET_COMMIT_VALUE.versions[0].fields
    assert _layouts.LEGACY_OFFSET_COMMIT_KEY.versions[0].fields == _layouts.OFFSET_COMMIT_KEY.versions[0].fields


def test_every_spec_record_type_is_bound() -> None:
    assert sorted(BINDINGS) == sorted(_layouts.RECORD_TYPES) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 16]


def _spec_names(message: Message) -> set[str]:
    return {snake_case(field.name) for layout in message.versions.values() for field in layout.fields}


@pytest.mark.parametrize("record_type", sorted(BINDINGS))
def test_every_record_field_comes_from_some_version(record_type: int) -> None:
    key, value = _layouts.RECORD_TYPES[record_type]
    binding = BINDINGS[record_type]
    value = binding.value or value
    for shape, messages in ((binding.record, (key, value)), (binding.tombstone, (key,))):
        names = set().union(*(_spec_names(message) for message in messages))
        assert {shape.spec_name(field) for field in shape.data_fields()} <= names, shape.cls.__name__


def test_shapes_refer_to_fields_that_exist() -> None:
    for record_type, binding in BINDINGS.items():
        key, value = _layouts.RECORD_TYPES[record_type]
        shape = binding.record
        assert set(shape.nested) <= _spec_names(key) | _spec_names(binding.value or value), shape.cls.__name__
        assert set(shape.none_if) | set(shape.renames) <= set(shape.data_fields()), shape.cls.__name__


def test_generator_refuses_what_the_codec_does_not_implement(tmp_path: Path) -> None:
    spec = {
        "apiKey": 99,
        "type": "coordinator-value",
        "name": "ExampleValue",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [{"name": "Label", "type": "string", "versions": "0+", "flexibleVersions": "none"}],
    }
    path = tmp_path / "ExampleValue.json"
    path.write_text("// a comment line\n" + json.dumps(spec))
    with pytest.raises(_specgen.SpecError, match="flexibleVersions"):
        _specgen.resolve_message(_specgen.load_spec(path))
    spec["fields"] = [
        {
            "name": "Label",
            "type": "string",
            "versions": "0+",
            "taggedVersions": "0+",
            "tag": 0,
            "default": "x",
        }
    ]
    path.write_text(json.dumps(spec))
    with pytest.raises(_specgen.SpecError, match="default"):
        _specgen.resolve_message(_specgen.load_spec(path))


@pytest.mark.parametrize(("text", "versions"), [("none", []), ("3", [3]), ("0-2", [0, 1, 2]), ("4+", [4, 5, 6])])
def test_version_ranges(text: str, versions: list[int]) -> None:
    assert list(_specgen.parse_versions(text))[:3] == versions
