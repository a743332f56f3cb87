"""`kagent.core.assigned_json`: a classic group's assignment event as plain JSON, held to pydantic's models.

What the source writes and storage stores without a model must be exactly what the
model would have made: the same verdict on every object, and the same bytes.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kagent.core.assigned_json import (
    ASSIGNED_KEYS,
    MEMBER_KEYS,
    PARTITION_KEYS,
    assigned_json,
    plain_assigned,
)
from kagent.core.consumer_offsets import GroupMetadata
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef, derive
from kagent.core.json_bytes import kept
from tests.unit.test_consumer_offsets_roundtrip import group_metadata


def test_the_keys_are_the_models_fields_in_order() -> None:
    assert tuple(GroupAssigned.model_fields) == ASSIGNED_KEYS
    assert tuple(MemberAssignment.model_fields) == MEMBER_KEYS
    assert tuple(PartitionRef.model_fields) == PARTITION_KEYS


@given(st.integers(0, 4).flatmap(group_metadata).filter(lambda record: record.protocol_type == "consumer"))
def test_a_records_json_is_the_models_dump_and_plain_exactly_when_pydantic_takes_it(record: GroupMetadata) -> None:
    event = assigned_json(record)

    if plain_assigned(event):
        (model,) = derive(record)
        assert model.model_dump(mode="json") == event
        assert kept(event) == model.model_dump_json().encode()  # what storage stores, byte for byte
    else:
        with pytest.raises(ValidationError):
            derive(record)


VALID: dict[str, Any] = {
    "kind": "group-assigned",
    "group": "billing",
    "generation": 4,
    "protocol": "range",
    "leader": "m-1",
    "state_timestamp": 1_700_000_000_000,
    "members": [
        {
            "member_id": "m-1",
            "group_instance_id": None,
            "client_id": "c",
            "client_host": "/10.0.0.1",
            "topics": ["orders"],
            "partitions": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}],
        }
    ],
    "group_protocol": "classic",
}

WHERE = st.sampled_from(
    [
        (),
        ("members", 0),
        ("members", 0, "partitions", 0),
    ]
)
ODD_VALUES = st.sampled_from([None, True, 0, -1, 1.5, "", "x", "classic", "consumer", "group-assigned", [], {}, ["t"]])


@given(
    WHERE,
    st.sampled_from(["set", "drop", "move", "add"]),
    st.text(max_size=3) | st.sampled_from(ASSIGNED_KEYS + MEMBER_KEYS + PARTITION_KEYS),
    ODD_VALUES,
)
def test_a_plain_object_is_one_pydantic_takes_and_dumps_back_unchanged(
    where: tuple[str | int, ...], how: str, key: str, value: object
) -> None:
    """Whatever is changed in an object (a field's value, a field dropped, moved to the end or added),
    :func:`plain_assigned` takes it only if pydantic does, and dumps it back to the same object."""
    item = copy.deepcopy(VALID)
    target: Any = item
    for step in where:
        target = target[step]
    if how == "set" and key in target:
        target[key] = value
    elif how == "drop":
        target.pop(key, None)
    elif how == "move" and key in target:
        target[key] = target.pop(key)
    elif how == "add":
        target[key] = value

    if plain_assigned(item):
        model = GroupAssigned.model_validate(item)
        assert model.model_dump(mode="json") == item
        assert orjson.dumps(item) == model.model_dump_json().encode()


def test_the_valid_object_is_plain_and_a_negative_partition_is_not() -> None:
    assert plain_assigned(VALID)
    negative = copy.deepcopy(VALID)
    negative["members"][0]["partitions"][0]["partition"] = -1
    assert not plain_assigned(negative)
    with pytest.raises(ValidationError):
        GroupAssigned.model_validate(negative)
