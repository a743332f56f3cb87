"""Metadata v12 as kagent declares it: the bytes of its topic ids, and what names it yields."""

from __future__ import annotations

from io import BytesIO
from uuid import UUID

import pytest

from kagent.core.topic_ids import NULL_TOPIC_ID, MetadataRequest_v12, MetadataResponse_v12, Uuid, topic_names

ORDERS = UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
BILLING = UUID("01a1fd50-bc3f-7622-9433-09474e412be5")


def topic(error_code: int, name: str | None, topic_id: UUID) -> tuple[object, ...]:
    partition = (0, 0, 1, 5, [1], [1], [], {})
    return (error_code, name, topic_id, False, [partition], -2147483648, {})


def test_a_uuid_is_its_16_bytes_and_a_short_one_is_an_error() -> None:
    assert Uuid.encode(ORDERS) == ORDERS.bytes
    assert Uuid.decode(BytesIO(ORDERS.bytes + b"rest")) == ORDERS
    with pytest.raises(ValueError, match="underrun"):
        Uuid.decode(BytesIO(ORDERS.bytes[:15]))


def test_named_topics_with_ids_and_no_error_are_returned_by_id() -> None:
    response = MetadataResponse_v12(
        0,
        [(1, "127.0.0.1", 9092, None, {})],
        "cluster",
        1,
        [
            topic(0, "orders", ORDERS),
            topic(0, "billing", BILLING),
            topic(3, "gone", UUID(int=7)),  # UNKNOWN_TOPIC_OR_PARTITION
            topic(0, "legacy", NULL_TOPIC_ID),
        ],
        {},
    )
    decoded = MetadataResponse_v12.decode(BytesIO(response.encode()))  # through the wire format

    assert topic_names(decoded) == {str(ORDERS): "orders", str(BILLING): "billing"}


def test_the_request_asks_for_every_topic_and_creates_none() -> None:
    request = MetadataRequest_v12(None, False, False, {})
    # null compact array (0), auto-create false, authorized operations false, no tagged fields
    assert request.encode() == b"\x00\x00\x00\x00"
    assert MetadataRequest_v12.FLEXIBLE_VERSION


def test_one_bad_topic_hides_only_itself() -> None:
    """Issue 17: a topic the cluster answers with an error (unauthorized, named by an unknown id, so
    no name) or with a leaderless partition does not hide the other topics' names."""
    leaderless = (5, 0, -1, -1, [], [], [1], {})  # LEADER_NOT_AVAILABLE
    response = MetadataResponse_v12(
        0,
        [(1, "127.0.0.1", 9092, None, {})],
        "cluster",
        1,
        [
            topic(29, None, UUID(int=9)),  # TOPIC_AUTHORIZATION_FAILED, no name
            topic(0, None, UUID(int=10)),  # no error, yet no name
            (0, "billing", BILLING, False, [leaderless], -2147483648, {}),
            topic(0, "orders", ORDERS),
        ],
        {},
    )
    decoded = MetadataResponse_v12.decode(BytesIO(response.encode()))

    assert topic_names(decoded) == {str(ORDERS): "orders", str(BILLING): "billing"}
