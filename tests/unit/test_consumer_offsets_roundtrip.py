"""Round trips for every record type and version (hypothesis).

For any record a version can carry, decode(encode(r)) == r, and the bytes
encode wrote decode and encode back to themselves.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.structs import TopicPartition as TP
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core.consumer_offsets import (
    Assignment,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupPartitionMetadataTombstone,
    ConsumerGroupRegularExpression,
    ConsumerGroupRegularExpressionTombstone,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMemberTombstone,
    ConsumerGroupTargetAssignmentMetadata,
    ConsumerGroupTargetAssignmentMetadataTombstone,
    GroupMember,
    GroupMetadata,
    GroupTombstone,
    OffsetCommit,
    OffsetTombstone,
    PartitionMetadata,
    Subscription,
    TopicMetadata,
    TopicPartitions,
    UnknownRecord,
    decode,
    decode_assignment,
    decode_subscription,
    encode,
    encode_assignment,
    encode_subscription,
)

EXAMPLES = settings(max_examples=100)

int8 = st.integers(-(2**7), 2**7 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
blobs = st.binary(max_size=40)
# Short strings mostly, and some long enough (>= 128 UTF-8 bytes) to need a
# multi-byte compact length.
text = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=12),
    st.text(st.characters(codec="utf-8"), min_size=130, max_size=160),
)
names = st.text("abcdefgh-._", min_size=1, max_size=8)


def maybe(strategy: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.none() | strategy


def tuples(strategy: st.SearchStrategy[object], max_size: int = 4) -> st.SearchStrategy[tuple[object, ...]]:
    return st.lists(strategy, max_size=max_size).map(tuple)


def only_in(versions: range, version: int, strategy: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """The field exists in `versions`; elsewhere it must be None."""
    return strategy if version in versions else st.none()


topic_partitions = tuples(st.builds(TP, names, int32), max_size=6)


def subscriptions(version: int) -> st.SearchStrategy[Subscription]:
    return st.builds(
        Subscription,
        st.just(version),
        tuples(names),
        maybe(blobs),
        only_in(range(1, 4), version, topic_partitions),
        only_in(range(2, 4), version, int32),
        only_in(range(3, 4), version, maybe(names)),
    )


def assignments(version: int) -> st.SearchStrategy[Assignment]:
    return st.builds(Assignment, st.just(version), topic_partitions, maybe(blobs))


any_subscription = st.integers(0, 3).flatmap(subscriptions)
any_assignment = st.integers(0, 3).flatmap(assignments)


def offset_commits(record_type: int, version: int) -> st.SearchStrategy[OffsetCommit]:
    return st.builds(
        OffsetCommit,
        text,
        text,
        int32,
        int64,
        text,
        int64,
        only_in(range(1, 2), version, int64),
        only_in(range(3, 5), version, maybe(int32.filter(lambda epoch: epoch != -1))),
        st.just(version),
        st.just(record_type),
    )


def group_metadata(version: int) -> st.SearchStrategy[GroupMetadata]:
    def members(consumer: bool) -> st.SearchStrategy[tuple[object, ...]]:
        blob = maybe(any_subscription), maybe(any_assignment)
        if not consumer:
            blob = blobs, blobs
        member = st.builds(
            GroupMember,
            text,
            only_in(range(3, 5), version, maybe(text)),
            text,
            text,
            only_in(range(1, 5), version, int32),
            int32,
            *blob,
        )
        return tuples(member, max_size=3)

    protocol_type = st.just("consumer") | text.filter(lambda t: t != "consumer")
    return protocol_type.flatmap(
        lambda kind: st.builds(
            GroupMetadata,
            text,
            st.just(kind),
            int32,
            maybe(text),
            maybe(text),
            only_in(range(2, 5), version, int64),
            members(kind == "consumer"),
            st.just(version),
        )
    )


topic_id_partitions = st.builds(TopicPartitions, uuids, tuples(int32, 5), st.none())
V0 = {"value_version": st.just(0)}

KIP_848: dict[str, st.SearchStrategy[object]] = {
    "consumer group metadata": st.builds(ConsumerGroupMetadata, text, int32, int64, int64, **V0),
    "consumer group partition metadata": st.builds(
        ConsumerGroupPartitionMetadata,
        text,
        tuples(st.builds(TopicMetadata, uuids, text, int32, tuples(st.builds(PartitionMetadata, int32, tuples(text))))),
        **V0,
    ),
    "consumer group member metadata": st.builds(
        ConsumerGroupMemberMetadata,
        text,
        text,
        maybe(text),
        maybe(text),
        text,
        text,
        tuples(text),
        maybe(text),
        int32,
        maybe(text),
        maybe(st.builds(ClassicMemberMetadata, int32, tuples(st.builds(ClassicProtocol, text, blobs)))),
        **V0,
    ),
    "target assignment metadata": st.builds(ConsumerGroupTargetAssignmentMetadata, text, int32, int64, **V0),
    "target assignment member": st.builds(
        ConsumerGroupTargetAssignmentMember, text, text, tuples(topic_id_partitions), **V0
    ),
    "current member assignment": st.builds(
        ConsumerGroupCurrentMemberAssignment,
        text,
        text,
        int32,
        int32,
        int8,
        tuples(st.builds(TopicPartitions, uuids, tuples(int32, 5), maybe(tuples(int32, 5)))),
        tuples(st.builds(TopicPartitions, uuids, tuples(int32, 5), maybe(tuples(int32, 5)))),
        **V0,
    ),
    "regular expression": st.builds(ConsumerGroupRegularExpression, text, text, tuples(text), int64, int64, **V0),
}

TOMBSTONES: dict[str, st.SearchStrategy[object]] = {
    "offset": st.builds(OffsetTombstone, text, text, int32, st.sampled_from([0, 1])),
    "group": st.builds(GroupTombstone, text),
    "consumer group metadata": st.builds(ConsumerGroupMetadataTombstone, text),
    "partition metadata": st.builds(ConsumerGroupPartitionMetadataTombstone, text),
    "member metadata": st.builds(ConsumerGroupMemberMetadataTombstone, text, text),
    "target assignment metadata": st.builds(ConsumerGroupTargetAssignmentMetadataTombstone, text),
    "target assignment member": st.builds(ConsumerGroupTargetAssignmentMemberTombstone, text, text),
    "current member assignment": st.builds(ConsumerGroupCurrentMemberAssignmentTombstone, text, text),
    "regular expression": st.builds(ConsumerGroupRegularExpressionTombstone, text, text),
}

RECORDS: dict[str, st.SearchStrategy[object]] = {
    **{f"offset commit type {t} v{v}": offset_commits(t, v) for t in (0, 1) for v in range(5)},
    **{f"group metadata v{v}": group_metadata(v) for v in range(5)},
    **KIP_848,
    **{f"{name} tombstone": strategy for name, strategy in TOMBSTONES.items()},
    "unknown record type": st.builds(
        lambda t, rest, value: UnknownRecord(t, t.to_bytes(2, "big") + rest, value),
        st.sampled_from([9, 10, 11, 12, 13, 14, 15, 17, 20, 24, 999]),
        st.binary(max_size=20),
        maybe(st.binary(max_size=20)),
    ),
}


def _check_round_trip(record: object) -> None:
    key, value = encode(record)  # type: ignore[arg-type]
    decoded = decode(key, value)
    assert decoded == record
    assert type(decoded) is type(record)
    assert encode(decoded) == (key, value)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_record_round_trip(name: str) -> None:
    @EXAMPLES
    @given(RECORDS[name])
    def check(record: object) -> None:
        _check_round_trip(record)

    check()


BLOBS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], bytes], Callable[[bytes], object]]] = {
    **{f"subscription v{v}": (subscriptions(v), encode_subscription, decode_subscription) for v in range(4)},
    **{f"assignment v{v}": (assignments(v), encode_assignment, decode_assignment) for v in range(4)},
}


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_consumer_protocol_round_trip(name: str) -> None:
    strategy, encode_blob, decode_blob = BLOBS[name]

    @EXAMPLES
    @given(strategy)
    def check(record: object) -> None:
        data = encode_blob(record)
        assert decode_blob(data) == record
        assert encode_blob(decode_blob(data)) == data

    check()
