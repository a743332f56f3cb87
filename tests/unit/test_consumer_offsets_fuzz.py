"""Malformed bytes: only DecodeError, bounded time, bounded memory.

Random bytes behind every known record type, systematic mutations of valid
records (flips, truncations, insertions, deletions), and hand-forged
lengths and counts far larger than the input.
"""

from __future__ import annotations

import contextlib
import pickle
import random
import struct
import time
import tracemalloc
import uuid

import pytest
from aiokafka.structs import TopicPartition as TP
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core.consumer_offsets import (
    Assignment,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupRegularExpression,
    ConsumerGroupTargetAssignmentMember,
    DecodeError,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    PartitionMetadata,
    Record,
    Subscription,
    TopicMetadata,
    TopicPartitions,
    decode,
    decode_assignment,
    decode_subscription,
    encode,
    encode_subscription,
)

KNOWN_TYPES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 16]
#: Inputs here are under 1 KB; decoding one takes microseconds of CPU. A hang or a
#: quadratic blow-up would take far longer than this. Counted in the thread's own
#: CPU time, not wall time: a busy machine delays a decode without making it slower.
SLOWEST_DECODE_SECONDS = 0.5

SUB = Subscription(3, ("orders", "payments"), b"\x00\x01", (TP("orders", 0), TP("payments", 3)), 4, "rack-a")
ASG = Assignment(1, (TP("orders", 0), TP("orders", 1), TP("payments", 3)), None)


def _member(version: int, index: int) -> GroupMember:
    return GroupMember(
        f"member-{index}",
        "static" if version >= 3 else None,
        "client",
        "/10.0.0.1",
        300_000 if version >= 1 else None,
        10_000,
        SUB,
        ASG if index else None,
    )


SEEDS: list[Record] = [
    *(
        OffsetCommit(
            "group",
            "topic",
            3,
            42,
            "metadata",
            1_700_000_000_000,
            123 if v == 1 else None,
            7 if v >= 3 else None,
            v,
        )
        for v in range(5)
    ),
    *(
        GroupMetadata(
            "group",
            "consumer",
            9,
            "range",
            "member-0",
            5 if v >= 2 else None,
            tuple(_member(v, i) for i in range(2)),
            v,
        )
        for v in range(5)
    ),
    ConsumerGroupMetadata("group", 4, 99, 1_700_000_000_000),
    ConsumerGroupPartitionMetadata(
        "group", (TopicMetadata(uuid.UUID(int=7), "orders", 2, (PartitionMetadata(0, ("r1",)),)),)
    ),
    ConsumerGroupMemberMetadata(
        "group",
        "m",
        "i",
        "r",
        "c",
        "h",
        ("orders",),
        "o.*",
        5,
        "uniform",
        ClassicMemberMetadata(10, (ClassicProtocol("range", encode_subscription(SUB)),)),
    ),
    ConsumerGroupTargetAssignmentMember("group", "m", (TopicPartitions(uuid.UUID(int=1), (1, 2)),)),
    ConsumerGroupCurrentMemberAssignment(
        "group", "m", 3, 2, 1, (TopicPartitions(uuid.UUID(int=1), (1, 2), (3, 3)),), ()
    ),
    ConsumerGroupRegularExpression("group", "o.*", ("orders",), 1, 2),
]
ENCODED = [encode(record) for record in SEEDS]


def decode_safely(key: bytes, value: bytes | None) -> None:
    """Decode; anything but a record or a DecodeError, or a decode that costs
    more CPU than any decode of such input can, fails the test. A record decoded
    from mangled bytes must round-trip."""
    started = time.thread_time()
    try:
        record = decode(key, value)
    except DecodeError:
        record = None
    assert time.thread_time() - started < SLOWEST_DECODE_SECONDS
    if record is not None and not _has_future_blob(record):
        assert decode(*encode(record)) == record


def _has_future_blob(record: object) -> bool:
    """A blob newer than v3 decodes (with the v3 layout) but cannot be written."""
    if not isinstance(record, GroupMetadata):
        return False
    blobs = [blob for member in record.members for blob in (member.subscription, member.assignment)]
    return any(isinstance(blob, Subscription | Assignment) and blob.version > 3 for blob in blobs)


def _mutations(data: bytes, rng: random.Random) -> list[bytes]:
    out = []
    for _ in range(12):
        at = rng.randrange(len(data)) if data else 0
        choice = rng.randrange(7)
        if choice == 0 and data:
            out.append(data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :])
        elif choice == 1 and data:
            out.append(data[:at] + bytes([rng.choice([0x00, 0x7F, 0x80, 0xFF])]) + data[at + 1 :])
        elif choice == 2:
            out.append(data[:at])
        elif choice == 3:
            out.append(data[:at] + rng.randbytes(rng.randrange(1, 6)) + data[at:])
        elif choice == 4:
            out.append(data[:at] + data[at + rng.randrange(1, 8) :])
        elif choice == 5:
            out.append(data + rng.randbytes(rng.randrange(1, 4)))
        else:
            stop = min(len(data), at + rng.randrange(1, 12))
            out.append(data[:at] + data[at:stop] * 2 + data[stop:])
    return out


@pytest.mark.parametrize("index", range(len(ENCODED)), ids=[type(r).__name__ + str(i) for i, r in enumerate(SEEDS)])
def test_mutated_records_raise_only_decode_error(index: int) -> None:
    key, value = ENCODED[index]
    assert value is not None
    rng = random.Random(index)
    for _ in range(60):
        for mutated in _mutations(value, rng):
            decode_safely(key, mutated)
        for mutated in _mutations(key, rng):
            decode_safely(mutated, value)
            decode_safely(mutated, None)


@settings(max_examples=1500)
@given(st.sampled_from(KNOWN_TYPES), st.binary(max_size=24), st.integers(0, 5), st.binary(max_size=120))
def test_random_bytes_raise_only_decode_error(
    record_type: int, key_rest: bytes, version: int, value_rest: bytes
) -> None:
    key = struct.pack(">h", record_type) + key_rest
    decode_safely(key, struct.pack(">h", version) + value_rest)
    decode_safely(key, value_rest)
    decode_safely(key, None)


@settings(max_examples=500)
@given(st.binary(max_size=80))
def test_random_blobs_raise_only_decode_error(data: bytes) -> None:
    for decode_blob in (decode_subscription, decode_assignment):
        with contextlib.suppress(DecodeError):
            decode_blob(data)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(v: str) -> bytes:
    return i16(len(v)) + v.encode()


def b32(v: bytes) -> bytes:
    return i32(len(v)) + v


OFFSET_KEY = i16(1) + s16("g") + s16("t") + i32(0)
GROUP_KEY = i16(2) + s16("g")
HUGE_VARINT = b"\xff\xff\xff\xff\x0f"  # 2**32 - 1, the largest a 5-byte varint holds
GROUP_V0 = i16(0) + s16("consumer") + i32(1) + s16("r") + s16("l")
MEMBER_V0 = s16("m") + s16("c") + s16("h") + i32(1)
EMPTY_SUBSCRIPTION = i16(0) + i32(0) + i32(-1)


def one_member(subscription: bytes, assignment: bytes) -> bytes:
    return GROUP_V0 + i32(1) + MEMBER_V0 + b32(subscription) + b32(assignment)


# name -> (key, value, what the DecodeError must say)
FORGED = {
    "string length 0x7fff, 3 bytes present": (OFFSET_KEY, i16(0) + i64(1) + i16(0x7FFF) + b"abc", "overruns"),
    "array count 2**31-1 of members": (GROUP_KEY, GROUP_V0 + i32(2**31 - 1), "array of 2147483647"),
    "bytes length 2**31-1 for a subscription": (
        GROUP_KEY,
        GROUP_V0 + i32(1) + MEMBER_V0 + i32(2**31 - 1),
        "overruns",
    ),
    "subscription topic count 2**31-1": (
        GROUP_KEY,
        one_member(i16(0) + i32(2**31 - 1) + i32(-1), b""),
        "subscription v0: array of 2147483647",
    ),
    "assignment partition count 2**31-1": (
        GROUP_KEY,
        one_member(EMPTY_SUBSCRIPTION, i16(0) + i32(1) + s16("t") + i32(2**31 - 1) + i32(0)),
        "assignment v0: array of 2147483647",
    ),
    "compact string length 2**32-2": (
        OFFSET_KEY,
        i16(4) + i64(1) + i32(0) + HUGE_VARINT + b"abc",
        "overruns",
    ),
    "compact array count 2**32-2": (
        i16(7) + s16("g") + s16("m"),
        i16(0) + HUGE_VARINT + b"\x00",
        "array of 4294967294",
    ),
    "varint of 6 bytes": (
        OFFSET_KEY,
        i16(4) + i64(1) + i32(0) + b"\x80\x80\x80\x80\x80\x01",
        "longer than 5 bytes",
    ),
    "tagged field count 2**32-1": (
        i16(3) + s16("g"),
        i16(0) + i32(1) + HUGE_VARINT,
        "tagged fields cannot fit",
    ),
    "tagged field size 2**32-1": (
        i16(3) + s16("g"),
        i16(0) + i32(1) + b"\x01\x00" + HUGE_VARINT + i64(5),
        "overruns",
    ),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_forged_length_allocates_at_most_the_input(name: str) -> None:
    key, value, reason = FORGED[name]
    # As forged, and padded so that some lengths can be believed.
    for candidate, expected in ((value, reason), (value + bytes(100_000), None)):
        tracemalloc.start()
        try:
            with pytest.raises(DecodeError, match=expected):
                decode(key, candidate)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < len(candidate) + 64 * 1024, f"{name}: peak {peak} bytes for {len(candidate)} input bytes"


def test_decode_error_names_record_type_version_and_offset() -> None:
    value = i16(3) + i64(1) + i32(0) + s16("meta") + i64(2)
    with pytest.raises(DecodeError) as truncated:
        decode(OFFSET_KEY, value[:-3])
    assert (truncated.value.record_type, truncated.value.part, truncated.value.version) == (1, "value", 3)
    assert truncated.value.offset == len(value) - 8
    assert str(truncated.value).startswith("record type 1, value version 3, byte")

    bad_utf8 = i16(3) + i64(1) + i32(0) + i16(3) + b"a\xffb" + i64(2)
    with pytest.raises(DecodeError) as invalid:
        decode(OFFSET_KEY, bad_utf8)
    assert invalid.value.offset == 2 + 8 + 4 + 2 + 1
    assert "UTF-8" in invalid.value.reason

    with pytest.raises(DecodeError) as newer:
        decode(OFFSET_KEY, i16(5) + bytes(30))
    assert (newer.value.version, newer.value.offset) == (5, 0)

    with pytest.raises(DecodeError) as trailing:
        decode(OFFSET_KEY, value + b"\x00")
    assert trailing.value.offset == len(value)

    with pytest.raises(DecodeError) as short_key:
        decode(b"\x01", value)
    assert (short_key.value.record_type, short_key.value.part) == (None, "key")

    copy = pickle.loads(pickle.dumps(invalid.value))
    assert str(copy) == str(invalid.value)
    assert (copy.record_type, copy.offset, copy.reason) == (1, invalid.value.offset, invalid.value.reason)

    with pytest.raises(DecodeError) as bad_key:
        decode(OFFSET_KEY[:-1], value)
    assert (bad_key.value.record_type, bad_key.value.part, bad_key.value.offset) == (
        1,
        "key",
        len(OFFSET_KEY) - 4,
    )


def test_errors_inside_an_embedded_blob_point_into_the_value() -> None:
    broken = i16(0) + i32(1) + s16("t") + i32(5) + i32(0) + i32(-1)  # 5 partitions claimed, 1 present
    value = one_member(EMPTY_SUBSCRIPTION, broken)
    start = len(value) - len(broken)
    with pytest.raises(DecodeError) as error:
        decode(GROUP_KEY, value)
    assert error.value.reason.startswith("assignment v0:")
    assert error.value.offset == start + 2 + 4 + 3 + 4  # where the partitions begin


def test_encode_refuses_what_the_version_cannot_carry() -> None:
    commit = OffsetCommit("g", "t", 0, 1, "", 2, None, None, 3)
    with pytest.raises(ValueError, match="expire_timestamp"):
        encode(commit._replace(expire_timestamp=5))
    with pytest.raises(ValueError, match="leader_epoch"):
        encode(commit._replace(value_version=1, leader_epoch=4))
    with pytest.raises(ValueError, match="no value version 9"):
        encode(commit._replace(value_version=9))
    with pytest.raises(ValueError, match="cannot encode"):
        encode(commit._replace(offset=2**63))
    with pytest.raises(ValueError, match="not nullable"):
        encode(commit._replace(metadata=None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="longer than 32767"):
        encode(commit._replace(value_version=4, metadata="x" * 40_000))
    member = GroupMember("m", None, "c", "h", 1, 2, b"raw", b"")
    group = GroupMetadata("g", "consumer", 1, None, None, 3, (member,), 3)
    with pytest.raises(ValueError, match="subscription"):
        encode(group)
    with pytest.raises(ValueError, match="subscription"):
        encode(group._replace(protocol_type="connect", members=(member._replace(subscription=SUB),)))
    with pytest.raises(ValueError, match="version 4"):
        encode_subscription(SUB._replace(version=4))
    with pytest.raises(TypeError):
        encode(("g", "t"))  # type: ignore[arg-type]
