"""The semantic checks of decoded ``__consumer_offsets`` records (kagent.core.record_checks): one test per rule."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from aiokafka.structs import TopicPartition as TP

from kagent.core.consumer_group_state import fold
from kagent.core.consumer_offsets import (
    Assignment,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupRegularExpression,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    OffsetTombstone,
    Record,
    Subscription,
    TopicMetadata,
    TopicPartitions,
)
from kagent.core.events import GroupAssigned, derive
from kagent.core.record_checks import MAX_STRING_BYTES, RecordRejected, check

ORDERS = UUID("0f9d2c1e-6a4b-4f3e-9d1c-2b3a4c5d6e7f")
LONGEST_ID = "\U0001f600" * (MAX_STRING_BYTES // 4)  # 4 bytes a character: 32,764 bytes
TOO_LONG_ID = "x" * (MAX_STRING_BYTES + 1)
HOSTILE_ID = "x" * 65_536
TOO_MANY_BYTES = LONGEST_ID + "\U0001f600"  # 8,192 characters, 32,768 bytes


def commit(**fields: Any) -> OffsetCommit:
    return OffsetCommit("billing", "orders", 0, 5, "", 1_700_000_000_000, None, None, 3)._replace(**fields)


def member(member_id: str = "m1", topics: tuple[str, ...] = ("orders",), *partitions: TP, **fields: Any) -> GroupMember:
    return GroupMember(
        member_id, None, "client", "/10.0.0.1", 30_000, 10_000, Subscription(0, topics), Assignment(0, partitions)
    )._replace(**fields)


def group(*members: GroupMember, **fields: Any) -> GroupMetadata:
    return GroupMetadata("billing", "consumer", 3, "range", "m1", None, members, 3)._replace(**fields)


def kip848_member(**fields: Any) -> ConsumerGroupMemberMetadata:
    return ConsumerGroupMemberMetadata(
        "billing", "m1", None, None, "client", "/10.0.0.1", ("orders",), None, 300_000, "uniform"
    )._replace(**fields)


def held(*partitions: int, **fields: Any) -> ConsumerGroupCurrentMemberAssignment:
    return ConsumerGroupCurrentMemberAssignment(
        "billing", "m1", 4, 3, 0, (TopicPartitions(ORDERS, partitions),), ()
    )._replace(**fields)


def rejected(record: Record) -> RecordRejected:
    with pytest.raises(RecordRejected) as caught:
        check(record)
    return caught.value


VALID: list[Record] = [
    commit(),
    commit(offset=-1, group="", leader_epoch=0),  # Kafka's "no offset"; the empty group id OffsetCommit allows
    commit(topic="a" * 249),
    commit(topic="Orders_v2.eu-1"),
    OffsetTombstone("", "orders", 0),
    group(member("m1", ("orders",), TP("orders", 0)), member("m2", ("orders",), TP("orders", 1))),
    group(group="", generation=0, leader=None),  # an empty classic group may have the empty group id
    group(member(client_id=LONGEST_ID, group_instance_id="static-1")),
    ConsumerGroupMetadata("billing", 0),
    ConsumerGroupPartitionMetadata("billing", (TopicMetadata(ORDERS, "orders", 0, ()),)),
    kip848_member(instance_id="static-1", subscribed_topic_regex="orders.*", server_assignor=None),
    held(0, 1, member_epoch=-2),  # a static member that left for a while
    ConsumerGroupRegularExpression("billing", "orders.*", ("orders", "orders-eu"), 7, 1_700_000_000_000),
]


@pytest.mark.parametrize("record", VALID, ids=lambda record: type(record).__name__)
def test_valid_records_pass_unchanged(record: Record) -> None:
    assert check(record) is record


@pytest.mark.parametrize(
    ("record", "rule", "field"),
    [
        (commit(partition=-1), "partition-negative", "partition"),
        (OffsetTombstone("billing", "orders", -1), "partition-negative", "partition"),
        (held(0, -1), "partition-negative", "partitions[]"),
        (
            ConsumerGroupPartitionMetadata("billing", (TopicMetadata(ORDERS, "orders", -3, ()),)),
            "partition-negative",
            "topics[].num_partitions",
        ),
        (commit(offset=-2), "offset-below-minus-one", "offset"),
        (commit(leader_epoch=-5), "offset-below-minus-one", "leader_epoch"),
        (group(member(), generation=-1), "epoch-negative", "generation"),
        (ConsumerGroupMetadata("billing", -1), "epoch-negative", "epoch"),
        (held(0, member_epoch=-3), "epoch-negative", "member_epoch"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_numbers_outside_what_kafka_writes_reject_the_record(record: Record, rule: str, field: str) -> None:
    error = rejected(record)

    assert (error.record, error.rule, error.field) == (type(record).__name__, rule, field)
    assert f"{field} = {error.value!r}" in str(error)


@pytest.mark.parametrize("topic", ["", ".", "..", "a" * 250, "orders topic", "orders/eu", "ordérs"])
def test_a_topic_that_names_partitions_has_a_legal_kafka_name(topic: str) -> None:
    for record, field in (
        (commit(topic=topic), "topic"),
        (OffsetTombstone("billing", topic, 0), "topic"),
        (ConsumerGroupPartitionMetadata("billing", (TopicMetadata(ORDERS, topic, 3, ()),)), "topics[].topic_name"),
        (ConsumerGroupRegularExpression("billing", "o.*", ("orders", topic), 7, 0), "topics[]"),
    ):
        error = rejected(record)
        assert (error.rule, error.field, error.value) == ("topic-name", field, topic)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (ConsumerGroupMetadata("", 1), "group"),
        (kip848_member(group=""), "group"),
        (held(0, group=""), "group"),
        (ConsumerGroupMemberMetadataTombstone("", "m1"), "group"),
        (group(member(), group=""), "group"),  # a classic group with members joined: JoinGroup needs an id
        (group(member(member_id="")), "members[].member_id"),
        (group(member(group_instance_id="")), "instance_id"),
        (kip848_member(member_id=""), "member_id"),
        (kip848_member(instance_id=""), "instance_id"),
        (held(0, member_id=""), "member_id"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_ids_kafka_requires_are_not_empty(record: Record, field: str) -> None:
    error = rejected(record)

    assert (error.rule, error.field, error.value) == ("id-empty", field, "")


@pytest.mark.parametrize("text", [TOO_LONG_ID, HOSTILE_ID, TOO_MANY_BYTES])
def test_a_string_longer_than_kafka_can_write_rejects_the_record(text: str) -> None:
    for record, field in (
        (commit(group=text), "group"),
        (group(member(member_id=text)), "members[].member_id"),
        (group(member(client_id=text)), "members[].client_id"),
        (group(member(client_host=text)), "members[].client_host"),
        (group(member(), protocol=text), "protocol"),
        (group(member(topics=("orders", text))), "members[].subscription.topics[]"),
        (kip848_member(member_id=text), "member_id"),
        (kip848_member(subscribed_topic_regex=text), "subscribed_topic_regex"),
        (kip848_member(subscribed_topic_names=(text,)), "subscribed_topic_names[]"),
        (ConsumerGroupRegularExpression("billing", text, (), 7, 0), "regular_expression"),
    ):
        error = rejected(record)
        assert (error.rule, error.field) == ("string-too-long", field)
        # The reason shows the start of the value and its length, not all of it.
        assert f"({len(text)} characters)" in str(error) and len(str(error)) < 300


def test_a_classic_group_with_a_member_twice_is_rejected() -> None:
    twice = group(member("m1", ("orders",), TP("orders", 0)), member("m1", ("orders",), TP("orders", 1)))

    error = rejected(twice)

    assert (error.rule, error.field, error.value) == ("duplicate-member", "members[].member_id", "m1")


def test_assigned_partitions_outside_the_subscription_are_dropped_and_the_rest_kept() -> None:
    strays = group(
        member("m1", ("orders",), TP("orders", 0), TP("payments", 0), TP("orders", -1), TP("orders", 1)),
        member("m2", ("orders", "bad topic"), TP("orders", 2), TP("bad topic", 0)),
        member("m3", ("orders",), TP("orders", 3)),
    )

    checked = check(strays)

    assert isinstance(checked, GroupMetadata)
    (assigned,) = derive(checked)
    assert isinstance(assigned, GroupAssigned)
    assert {m.member_id: [(p.topic, p.partition) for p in m.partitions] for m in assigned.members} == {
        "m1": [("orders", 0), ("orders", 1)],
        "m2": [("orders", 2)],
        "m3": [("orders", 3)],
    }
    assert checked.members[2] is strays.members[2]
    assert checked._replace(members=strays.members) == strays  # nothing else changed


def test_an_assignment_is_kept_as_it_is_when_the_subscription_was_not_decoded() -> None:
    unknown_subscription = group(member("m1", (), TP("payments", 0), subscription=None))

    assert check(unknown_subscription) is unknown_subscription


def test_groups_of_other_protocol_types_are_not_checked_and_derive_nothing() -> None:
    connect = group(member(member_id="", client_id=HOSTILE_ID), protocol_type="connect", generation=-1)

    assert check(connect) is connect
    assert derive(connect) == []


def test_a_kip848_epoch_going_backwards_is_applied_the_last_record_winning() -> None:
    state = None
    for epoch in (5, 3):
        record = check(ConsumerGroupMetadata("billing", epoch))
        for event in derive(record):
            state = fold(state, event)

    assert state is not None and state.epoch == 3
