"""`kagent.core.contracts`: tables/ matches the code, and what kagent writes validates against it."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from jsonschema import Draft202012Validator, ValidationError

from kagent.core import committed_offset
from kagent.core.contracts import DeadLetter, schema_text, schemas, write_schemas
from kagent.core.evaluation import evaluate
from kagent.core.events import (
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    MemberAssignment,
    OffsetCommitted,
    OffsetDeleted,
    PartitionRef,
    by_group,
    encode_events,
    packed_records,
)
from kagent.core.json_bytes import kept
from kagent.core.snapshot import GroupSnapshot, PartitionLag
from kagent.core.time_lag import EndOffsetHistory, partition_lag_values
from kagent.settings import Settings

TABLES = Path(__file__).resolve().parents[2] / "tables"
REGENERATE = (
    'regenerate them with `kagent schemas` (or `python -c "from pathlib import Path; '
    "from kagent.core.contracts import write_schemas; write_schemas(Path('tables'))\"`) and commit the result"
)


def test_tables_hold_exactly_the_schemas_the_code_generates() -> None:
    generated = schemas()
    on_disk = {path.name for path in TABLES.glob("*.json")}
    problems = [f"tables/{name} is missing" for name in sorted(set(generated) - on_disk)]
    problems += [
        f"tables/{name} is no contract of the code: delete it, or add its contract to kagent.core.contracts.CONTRACTS"
        for name in sorted(on_disk - set(generated))
    ]
    problems += [
        f"tables/{name} differs from what the code generates"
        for name, schema in sorted(generated.items())
        if name in on_disk and (TABLES / name).read_text(encoding="utf-8") != schema_text(schema)
    ]
    assert not problems, "\n".join(problems) + "\n" + REGENERATE


def test_every_schema_is_a_valid_draft_2020_12_schema() -> None:
    for name, schema in schemas().items():
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        Draft202012Validator.check_schema(schema)


def test_write_schemas_writes_sorted_indented_files_and_removes_stale_ones(tmp_path: Path) -> None:
    (tmp_path / "retired.schema.json").write_text("{}\n")
    (tmp_path / "README.md").write_text("kept\n")
    written = write_schemas(tmp_path / ".")
    assert [path.name for path in written] == sorted(schemas())
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([*schemas(), "README.md"])
    text = (tmp_path / "dead-letter.schema.json").read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "$comment"')
    assert json.loads(text) == schemas()["dead-letter.schema.json"]


def skewed_snapshot() -> GroupSnapshot:
    lags = [3000, 3000, 3000, 100, 100, 100]
    history = EndOffsetHistory().add(0, 0.0).add(3000, 30.0)
    members = tuple(
        MemberAssignment(
            member_id=f"m{i}",
            client_id=f"client-{i}",
            client_host="/10.0.0.1",
            topics=("orders",),
            partitions=(
                PartitionRef(topic="orders", partition=2 * i),
                PartitionRef(topic="orders", partition=2 * i + 1),
            ),
        )
        for i in range(3)
    )
    return GroupSnapshot(
        assignment=GroupAssigned(group="billing", generation=7, protocol="range", leader="m0", members=members),
        partition_counts={"orders": 6},
        lag={
            TopicPartition("orders", p): PartitionLag(
                **partition_lag_values("billing", "orders", p, 3000 - lag, 0, 3000, history, 31.0, 30.0, "latest", 15.0)
            )
            for p, lag in enumerate(lags)
        },
        taken_at=31.0,
    )


def written_samples() -> list[tuple[str, Any]]:
    """(schema file, JSON value) for samples of every record kagent writes, as it writes them."""
    snapshot = skewed_snapshot()
    policy = Settings(hold_evaluations=1).evaluation_policy
    armed, *_ = evaluate(dataclasses.replace(snapshot, lag={}), None, policy, 31.0)
    state, recommendation, *_ = evaluate(snapshot, armed, policy, 36.0)
    assert recommendation is not None
    commit = OffsetCommitted(
        group="billing", topic="orders", partition=0, offset=42, commit_timestamp=1_700_000_000_000
    )
    first = committed_offset.applied(None, [42, 1_700_000_000_000, None], None, capacity=10, min_distance=0.0).value
    second = committed_offset.applied(first, [50, 1_700_000_005_000, 3], 60, capacity=10, min_distance=0.0).value
    assert first is not None and second is not None
    history = EndOffsetHistory().add(100, 0.0)
    events: list[DerivedEvent] = [
        commit,
        OffsetDeleted(group="billing", topic="orders", partition=0),
        snapshot.assignment,
        GroupDeleted(group="billing"),
    ]
    return [
        *(("derived-events.schema.json", json.loads(encode_events(batch))) for batch in by_group(events)),
        *(("derived-events.schema.json", json.loads(value)) for _, value in packed_records(by_group(events), 8)),
        ("committed-offset.schema.json", json.loads(first)),
        ("committed-offset.schema.json", json.loads(second)),
        ("assignment.schema.json", snapshot.assignment.model_dump(mode="json")),
        *(("partition-lag.schema.json", lag.model_dump(mode="json")) for lag in snapshot.lag.values()),
        (
            "partition-lag.schema.json",
            json.loads(
                kept(partition_lag_values("billing", "orders", 0, None, 0, 100, history, 99.0, 0.0, "earliest", 15.0))
            ),
        ),
        ("evaluation-state.schema.json", json.loads(armed.model_dump_json())),
        ("evaluation-state.schema.json", json.loads(state.model_dump_json())),
        ("recommendation.schema.json", json.loads(recommendation.model_dump_json())),
        ("dead-letter.schema.json", json.loads(dead_letter().model_dump_json())),
        (
            "dead-letter.schema.json",
            json.loads(DeadLetter.from_record("__consumer_offsets", 0, 0, None, None, None, "empty").model_dump_json()),
        ),
    ]


def dead_letter() -> DeadLetter:
    return DeadLetter.from_record(
        "__consumer_offsets", 12, 3456, 1_700_000_000_000, b"\x00\x09bad", b"\xff\xfe\x00", "unknown key version 9"
    )


@pytest.mark.parametrize(("name", "value"), written_samples(), ids=lambda item: item if isinstance(item, str) else "")
def test_what_kagent_writes_validates_against_its_schema(name: str, value: Any) -> None:
    Draft202012Validator(schemas()[name], format_checker=Draft202012Validator.FORMAT_CHECKER).validate(value)


def test_the_schemas_reject_what_kagent_never_writes() -> None:
    recommendation = dict(next(value for name, value in written_samples() if name == "recommendation.schema.json"))
    validator = Draft202012Validator(schemas()["recommendation.schema.json"])
    with pytest.raises(ValidationError):
        validator.validate({key: value for key, value in recommendation.items() if key != "id"})
    with pytest.raises(ValidationError):
        validator.validate({**recommendation, "lag_unit": "bytes"})
    with pytest.raises(ValidationError):
        Draft202012Validator(schemas()["derived-events.schema.json"]).validate(
            {"group": "g", "events": [{"kind": "offset-committed"}]}
        )
    with pytest.raises(ValidationError):
        Draft202012Validator(schemas()["derived-events.schema.json"]).validate({"group": "g", "events": []})


def test_a_dead_letter_carries_the_raw_bytes_in_base64() -> None:
    letter = dead_letter()
    assert (letter.topic, letter.partition, letter.offset, letter.timestamp) == (
        "__consumer_offsets",
        12,
        3456,
        1_700_000_000_000,
    )
    assert letter.key is not None and base64.b64decode(letter.key, validate=True) == b"\x00\x09bad"
    assert letter.value is not None and base64.b64decode(letter.value, validate=True) == b"\xff\xfe\x00"
    assert DeadLetter.model_validate_json(letter.model_dump_json()) == letter
