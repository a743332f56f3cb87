"""Hand-checked byte vectors for every record type and version.

Each expected byte string is built here field by field with struct.pack,
from the JSON specs in shared/kafka-schemas, independently of the codec's
layouts and machine. Each vector must decode to the given record and that
record must encode back to exactly the same bytes.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from aiokafka.structs import TopicPartition as TP

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
    Record,
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

# -- the wire, written out by hand ------------------------------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(v: str | None) -> bytes:
    """Classic (nullable) string: int16 length, -1 for null."""
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def b32(v: bytes | None) -> bytes:
    """Classic (nullable) bytes: int32 length, -1 for null."""
    if v is None:
        return i32(-1)
    return i32(len(v)) + v


def arr(*items: bytes) -> bytes:
    """Classic array: int32 count."""
    return i32(len(items)) + b"".join(items)


def uv(v: int) -> bytes:
    """Unsigned varint, 7 bits per byte, low group first."""
    out = bytearray()
    while True:
        if v < 0x80:
            out.append(v)
            return bytes(out)
        out.append((v & 0x7F) | 0x80)
        v >>= 7


def cs(v: str | None) -> bytes:
    """Compact (nullable) string: uvarint length+1, 0 for null."""
    if v is None:
        return b"\x00"
    raw = v.encode()
    return uv(len(raw) + 1) + raw


def cb(v: bytes | None) -> bytes:
    """Compact (nullable) bytes."""
    if v is None:
        return b"\x00"
    return uv(len(v) + 1) + v


def carr(*items: bytes) -> bytes:
    """Compact array: uvarint count+1."""
    return uv(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def tags(*fields: tuple[int, bytes]) -> bytes:
    """Tagged-field section: count, then tag, size, data for each."""
    return uv(len(fields)) + b"".join(uv(tag) + uv(len(data)) + data for tag, data in fields)


TOPIC_A = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TOPIC_B = uuid.UUID("00000000-0000-0000-0000-000000000001")

# -- vectors ----------------------------------------------------------------

OFFSET_KEY = i16(1) + s16("orders-app") + s16("orders") + i32(7)
LEGACY_OFFSET_KEY = i16(0) + s16("orders-app") + s16("orders") + i32(7)

VECTORS: list[tuple[str, bytes, bytes | None, Record]] = [
    (
        "offset commit v0",
        OFFSET_KEY,
        i16(0) + i64(1234) + s16("m") + i64(1_700_000_000_000),
        OffsetCommit("orders-app", "orders", 7, 1234, "m", 1_700_000_000_000, None, None, 0),
    ),
    (
        "offset commit v1 (expire timestamp)",
        OFFSET_KEY,
        i16(1) + i64(1234) + s16("") + i64(1_700_000_000_000) + i64(1_700_086_400_000),
        OffsetCommit("orders-app", "orders", 7, 1234, "", 1_700_000_000_000, 1_700_086_400_000, None, 1),
    ),
    (
        "offset commit v2",
        OFFSET_KEY,
        i16(2) + i64(-1) + s16("meta") + i64(5),
        OffsetCommit("orders-app", "orders", 7, -1, "meta", 5, None, None, 2),
    ),
    (
        "offset commit v3 (leader epoch)",
        OFFSET_KEY,
        i16(3) + i64(1234) + i32(12) + s16("m") + i64(99),
        OffsetCommit("orders-app", "orders", 7, 1234, "m", 99, None, 12, 3),
    ),
    (
        "offset commit v3, leader epoch -1 reads as None",
        OFFSET_KEY,
        i16(3) + i64(1234) + i32(-1) + s16("m") + i64(99),
        OffsetCommit("orders-app", "orders", 7, 1234, "m", 99, None, None, 3),
    ),
    (
        "offset commit v4 (flexible)",
        OFFSET_KEY,
        i16(4) + i64(1234) + i32(3) + cs("m") + i64(99) + NO_TAGS,
        OffsetCommit("orders-app", "orders", 7, 1234, "m", 99, None, 3, 4),
    ),
    (
        "offset commit v4, 200-byte metadata: two-byte varint length",
        OFFSET_KEY,
        i16(4) + i64(1) + i32(0) + b"\xc9\x01" + b"x" * 200 + i64(2) + NO_TAGS,
        OffsetCommit("orders-app", "orders", 7, 1, "x" * 200, 2, None, 0, 4),
    ),
    (
        "offset commit v4, metadata of exactly 127 bytes: length+1 = 128 needs two bytes",
        OFFSET_KEY,
        i16(4) + i64(1) + i32(0) + b"\x80\x01" + b"y" * 127 + i64(2) + NO_TAGS,
        OffsetCommit("orders-app", "orders", 7, 1, "y" * 127, 2, None, 0, 4),
    ),
    (
        "legacy offset commit (type 0) v0",
        LEGACY_OFFSET_KEY,
        i16(0) + i64(42) + s16("") + i64(7),
        OffsetCommit("orders-app", "orders", 7, 42, "", 7, None, None, 0, record_type=0),
    ),
    (
        "legacy key (type 0) with value v1, as brokers before 4.0 read it",
        LEGACY_OFFSET_KEY,
        i16(1) + i64(42) + s16("") + i64(7) + i64(8),
        OffsetCommit("orders-app", "orders", 7, 42, "", 7, 8, None, 1, record_type=0),
    ),
    ("offset tombstone", OFFSET_KEY, None, OffsetTombstone("orders-app", "orders", 7)),
    ("legacy offset tombstone", LEGACY_OFFSET_KEY, None, OffsetTombstone("orders-app", "orders", 7, 0)),
    ("group tombstone", i16(2) + s16("g"), None, GroupTombstone("g")),
]

# Classic group metadata, one vector per value version. The consumer-protocol
# blobs embedded in the members are built here too.
SUBSCRIPTION_V0 = i16(0) + arr(s16("orders"), s16("payments")) + b32(None)
SUBSCRIPTION_V3 = (
    i16(3) + arr(s16("orders")) + b32(b"\x01\x02") + arr(s16("orders") + arr(i32(0), i32(1))) + i32(5) + s16("rack-a")
)
ASSIGNMENT_V0 = i16(0) + arr(s16("orders") + arr(i32(0), i32(2)), s16("payments") + arr(i32(1))) + b32(None)
ASSIGNMENT_V3 = i16(3) + arr(s16("orders") + arr(i32(1))) + b32(b"ud")

SUB0 = Subscription(0, ("orders", "payments"), None)
SUB3 = Subscription(3, ("orders",), b"\x01\x02", (TP("orders", 0), TP("orders", 1)), 5, "rack-a")
ASG0 = Assignment(0, (TP("orders", 0), TP("orders", 2), TP("payments", 1)), None)
ASG3 = Assignment(3, (TP("orders", 1),), b"ud")

GROUP_KEY = i16(2) + s16("orders-app")

VECTORS += [
    (
        "group metadata v0",
        GROUP_KEY,
        i16(0)
        + s16("consumer")
        + i32(3)
        + s16("range")
        + s16("m-1")
        + arr(s16("m-1") + s16("client") + s16("/10.0.0.1") + i32(10_000) + b32(SUBSCRIPTION_V0) + b32(ASSIGNMENT_V0)),
        GroupMetadata(
            "orders-app",
            "consumer",
            3,
            "range",
            "m-1",
            None,
            (GroupMember("m-1", None, "client", "/10.0.0.1", None, 10_000, SUB0, ASG0),),
            0,
        ),
    ),
    (
        "group metadata v1 (rebalance timeout); empty assignment reads as None",
        GROUP_KEY,
        i16(1)
        + s16("consumer")
        + i32(3)
        + s16("range")
        + s16("m-1")
        + arr(s16("m-1") + s16("c") + s16("h") + i32(300_000) + i32(10_000) + b32(SUBSCRIPTION_V0) + b32(b"")),
        GroupMetadata(
            "orders-app",
            "consumer",
            3,
            "range",
            "m-1",
            None,
            (GroupMember("m-1", None, "c", "h", 300_000, 10_000, SUB0, None),),
            1,
        ),
    ),
    (
        "group metadata v2 (state timestamp), empty group with null protocol and leader",
        GROUP_KEY,
        i16(2) + s16("consumer") + i32(4) + s16(None) + s16(None) + i64(1_700_000_000_000) + arr(),
        GroupMetadata("orders-app", "consumer", 4, None, None, 1_700_000_000_000, (), 2),
    ),
    (
        "group metadata v3 (group instance id); state timestamp -1 reads as None",
        GROUP_KEY,
        i16(3)
        + s16("consumer")
        + i32(5)
        + s16("cooperative-sticky")
        + s16("m-1")
        + i64(-1)
        + arr(
            s16("m-1")
            + s16("static-1")
            + s16("c")
            + s16("h")
            + i32(1)
            + i32(2)
            + b32(SUBSCRIPTION_V3)
            + b32(ASSIGNMENT_V3),
            s16("m-2") + s16(None) + s16("c") + s16("h") + i32(1) + i32(2) + b32(SUBSCRIPTION_V3) + b32(ASSIGNMENT_V0),
        ),
        GroupMetadata(
            "orders-app",
            "consumer",
            5,
            "cooperative-sticky",
            "m-1",
            None,
            (
                GroupMember("m-1", "static-1", "c", "h", 1, 2, SUB3, ASG3),
                GroupMember("m-2", None, "c", "h", 1, 2, SUB3, ASG0),
            ),
            3,
        ),
    ),
    (
        "group metadata v3, not the consumer protocol: blobs stay bytes",
        GROUP_KEY,
        i16(3)
        + s16("connect")
        + i32(5)
        + s16("sessioned")
        + s16("w-1")
        + i64(9)
        + arr(s16("w-1") + s16(None) + s16("c") + s16("h") + i32(1) + i32(2) + b32(b"\x00\x01abc") + b32(b"")),
        GroupMetadata(
            "orders-app",
            "connect",
            5,
            "sessioned",
            "w-1",
            9,
            (GroupMember("w-1", None, "c", "h", 1, 2, b"\x00\x01abc", b""),),
            3,
        ),
    ),
    (
        "group metadata v4 (flexible: compact lengths, tagged sections)",
        GROUP_KEY,
        i16(4)
        + cs("consumer")
        + i32(5)
        + cs("range")
        + cs(None)
        + i64(7)
        + carr(
            cs("m-1")
            + cs(None)
            + cs("c")
            + cs("h")
            + i32(1)
            + i32(2)
            + cb(SUBSCRIPTION_V0)
            + cb(ASSIGNMENT_V3)
            + NO_TAGS
        )
        + NO_TAGS,
        GroupMetadata(
            "orders-app",
            "consumer",
            5,
            "range",
            None,
            7,
            (GroupMember("m-1", None, "c", "h", 1, 2, SUB0, ASG3),),
            4,
        ),
    ),
]

# KIP-848 records (types 3-8 and 16): all values are flexible v0.
VECTORS += [
    (
        "consumer group metadata, no tagged fields",
        i16(3) + s16("g"),
        i16(0) + i32(11) + NO_TAGS,
        ConsumerGroupMetadata("g", 11),
    ),
    (
        "consumer group metadata, tagged MetadataHash and CreationTimeMs",
        i16(3) + s16("g"),
        i16(0) + i32(11) + tags((0, i64(0x1234)), (1, i64(1_700_000_000_000))),
        ConsumerGroupMetadata("g", 11, 0x1234, 1_700_000_000_000),
    ),
    ("consumer group metadata tombstone", i16(3) + s16("g"), None, ConsumerGroupMetadataTombstone("g")),
    (
        "consumer group partition metadata",
        i16(4) + s16("g"),
        i16(0)
        + carr(
            TOPIC_A.bytes
            + cs("orders")
            + i32(2)
            + carr(i32(0) + carr(cs("r1"), cs("r2")) + NO_TAGS, i32(1) + carr() + NO_TAGS)
            + NO_TAGS
        )
        + NO_TAGS,
        ConsumerGroupPartitionMetadata(
            "g",
            (TopicMetadata(TOPIC_A, "orders", 2, (PartitionMetadata(0, ("r1", "r2")), PartitionMetadata(1, ()))),),
        ),
    ),
    (
        "consumer group partition metadata tombstone",
        i16(4) + s16("g"),
        None,
        ConsumerGroupPartitionMetadataTombstone("g"),
    ),
    (
        "consumer group member metadata",
        i16(5) + s16("g") + s16("m"),
        i16(0)
        + cs(None)
        + cs("rack-1")
        + cs("client")
        + cs("/10.0.0.2")
        + carr(cs("orders"))
        + cs(None)
        + i32(300_000)
        + cs("uniform")
        + NO_TAGS,
        ConsumerGroupMemberMetadata(
            "g", "m", None, "rack-1", "client", "/10.0.0.2", ("orders",), None, 300_000, "uniform"
        ),
    ),
    (
        "consumer group member metadata with tagged ClassicMemberMetadata",
        i16(5) + s16("g") + s16("m"),
        i16(0)
        + cs("static")
        + cs(None)
        + cs("c")
        + cs("h")
        + carr()
        + cs("orders.*")
        + i32(-1)
        + cs(None)
        + tags((0, uv(1) + i32(45_000) + carr(cs("range") + cb(b"\x00\x03") + NO_TAGS) + NO_TAGS)),
        ConsumerGroupMemberMetadata(
            "g",
            "m",
            "static",
            None,
            "c",
            "h",
            (),
            "orders.*",
            -1,
            None,
            ClassicMemberMetadata(45_000, (ClassicProtocol("range", b"\x00\x03"),)),
        ),
    ),
    (
        "consumer group member metadata tombstone",
        i16(5) + s16("g") + s16("m"),
        None,
        ConsumerGroupMemberMetadataTombstone("g", "m"),
    ),
    (
        "target assignment metadata",
        i16(6) + s16("g"),
        i16(0) + i32(12) + NO_TAGS,
        ConsumerGroupTargetAssignmentMetadata("g", 12),
    ),
    (
        "target assignment metadata with tagged AssignmentTimestamp",
        i16(6) + s16("g"),
        i16(0) + i32(12) + tags((0, i64(1_700_000_000_123))),
        ConsumerGroupTargetAssignmentMetadata("g", 12, 1_700_000_000_123),
    ),
    (
        "target assignment metadata tombstone",
        i16(6) + s16("g"),
        None,
        ConsumerGroupTargetAssignmentMetadataTombstone("g"),
    ),
    (
        "target assignment member",
        i16(7) + s16("g") + s16("m"),
        i16(0) + carr(TOPIC_A.bytes + carr(i32(0), i32(3)) + NO_TAGS, TOPIC_B.bytes + carr() + NO_TAGS) + NO_TAGS,
        ConsumerGroupTargetAssignmentMember("g", "m", (TopicPartitions(TOPIC_A, (0, 3)), TopicPartitions(TOPIC_B, ()))),
    ),
    (
        "target assignment member tombstone",
        i16(7) + s16("g") + s16("m"),
        None,
        ConsumerGroupTargetAssignmentMemberTombstone("g", "m"),
    ),
    (
        "current member assignment, tagged AssignmentEpochs on one topic",
        i16(8) + s16("g") + s16("m"),
        i16(0)
        + i32(10)
        + i32(9)
        + i8(0)
        + carr(
            TOPIC_A.bytes + carr(i32(0), i32(1)) + tags((0, carr(i32(8), i32(10)))),
            TOPIC_B.bytes + carr(i32(4)) + NO_TAGS,
        )
        + carr(TOPIC_B.bytes + carr(i32(5)) + NO_TAGS)
        + NO_TAGS,
        ConsumerGroupCurrentMemberAssignment(
            "g",
            "m",
            10,
            9,
            0,
            (TopicPartitions(TOPIC_A, (0, 1), (8, 10)), TopicPartitions(TOPIC_B, (4,))),
            (TopicPartitions(TOPIC_B, (5,)),),
        ),
    ),
    (
        "current member assignment tombstone",
        i16(8) + s16("g") + s16("m"),
        None,
        ConsumerGroupCurrentMemberAssignmentTombstone("g", "m"),
    ),
    (
        "regular expression",
        i16(16) + s16("g") + s16("orders.*"),
        i16(0) + carr(cs("orders"), cs("orders-dlq")) + i64(77) + i64(1_700_000_000_000) + NO_TAGS,
        ConsumerGroupRegularExpression("g", "orders.*", ("orders", "orders-dlq"), 77, 1_700_000_000_000),
    ),
    (
        "regular expression tombstone",
        i16(16) + s16("g") + s16("orders.*"),
        None,
        ConsumerGroupRegularExpressionTombstone("g", "orders.*"),
    ),
]

# Types this codec does not decode come back whole.
VECTORS += [
    (
        "share group metadata (type 11) is unknown",
        i16(11) + s16("g"),
        b"\x00\x00\x01",
        UnknownRecord(11, i16(11) + s16("g"), b"\x00\x00\x01"),
    ),
    (
        "streams group tombstone (type 17) is unknown",
        i16(17) + s16("g"),
        None,
        UnknownRecord(17, i16(17) + s16("g"), None),
    ),
    ("a future type is unknown", i16(4242) + b"\xff", b"", UnknownRecord(4242, i16(4242) + b"\xff", b"")),
]


@pytest.mark.parametrize(("key", "value", "record"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS])
def test_vector_decodes_and_encodes_back(key: bytes, value: bytes | None, record: Record) -> None:
    assert decode(key, value) == record
    assert encode(record) == (key, value)


BLOB_VECTORS = [
    ("subscription v0", SUBSCRIPTION_V0, SUB0),
    (
        "subscription v1 (owned partitions)",
        i16(1) + arr(s16("a")) + b32(b"") + arr(s16("a") + arr(i32(2)), s16("b") + arr(i32(0))),
        Subscription(1, ("a",), b"", (TP("a", 2), TP("b", 0))),
    ),
    (
        "subscription v2 (generation id)",
        i16(2) + arr() + b32(None) + arr() + i32(-1),
        Subscription(2, (), None, (), -1),
    ),
    ("subscription v3 (rack id)", SUBSCRIPTION_V3, SUB3),
    ("assignment v0", ASSIGNMENT_V0, ASG0),
    ("assignment v1", i16(1) + arr() + b32(b""), Assignment(1, (), b"")),
    ("assignment v2", i16(2) + arr(s16("t") + arr(i32(9))) + b32(None), Assignment(2, (TP("t", 9),), None)),
    ("assignment v3", ASSIGNMENT_V3, ASG3),
]


@pytest.mark.parametrize(("data", "record"), [v[1:] for v in BLOB_VECTORS], ids=[v[0] for v in BLOB_VECTORS])
def test_consumer_protocol_vector(data: bytes, record: Subscription | Assignment) -> None:
    if isinstance(record, Subscription):
        assert decode_subscription(data) == record
        assert encode_subscription(record) == data
    else:
        assert decode_assignment(data) == record
        assert encode_assignment(record) == data


def test_newer_subscription_version_reads_with_the_newest_layout() -> None:
    v4 = i16(4) + SUBSCRIPTION_V3[2:] + b"future field"
    assert decode_subscription(v4) == SUB3._replace(version=4)


def test_newer_assignment_version_reads_with_the_newest_layout() -> None:
    v7 = i16(7) + ASSIGNMENT_V3[2:] + i32(1)
    assert decode_assignment(v7) == ASG3._replace(version=7)


def test_unknown_tagged_fields_are_skipped() -> None:
    # A newer Kafka may tag a topic id onto OffsetCommitValue v4.
    value = i16(4) + i64(5) + i32(1) + cs("") + i64(6) + tags((0, TOPIC_A.bytes), (7, b"zz"))
    assert decode(OFFSET_KEY, value) == OffsetCommit("orders-app", "orders", 7, 5, "", 6, None, 1, 4)


def test_partitions_of_one_topic_are_written_as_one_entry_when_adjacent() -> None:
    grouped = Assignment(0, (TP("a", 0), TP("a", 1), TP("b", 0), TP("a", 2)))
    expected = i16(0) + arr(s16("a") + arr(i32(0), i32(1)), s16("b") + arr(i32(0)), s16("a") + arr(i32(2))) + b32(None)
    assert encode_assignment(grouped) == expected
    assert decode_assignment(expected) == grouped
