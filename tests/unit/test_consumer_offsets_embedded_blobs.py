"""Blobs embedded in group metadata decode as the blob decoders decode them.

A group record's decoder reads the newest version of a member's
subscription and assignment inline and calls the blob's own decoder for
older ones; either way a member's blob must come out exactly as
`decode_at` reads the same bytes in place: the same record, or the same
error at the same offset.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from aiokafka.structs import TopicPartition as TP

from kagent.core.consumer_offsets import (
    Assignment,
    DecodeError,
    GroupMetadata,
    Subscription,
    decode,
    encode_assignment,
    encode_subscription,
)
from kagent.core.consumer_offsets.consumer_protocol import ASSIGNMENT, SUBSCRIPTION
from kagent.core.consumer_offsets.errors import Malformed


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s16(v: str | None) -> bytes:
    return i16(-1) if v is None else i16(len(v)) + v.encode()


GROUP_KEY = i16(2) + s16("g")
PARTITIONS = (TP("orders", 0), TP("orders", 1), TP("payments", 3))
SUBSCRIPTIONS = [
    encode_subscription(Subscription(0, ("orders", "payments"))),
    encode_subscription(Subscription(1, ("orders",), b"ud", PARTITIONS)),
    encode_subscription(Subscription(2, ("orders",), None, (), 7)),
    encode_subscription(Subscription(3, ("orders", "payments"), None, PARTITIONS, 4, "rack-a")),
    encode_subscription(Subscription(3, (), b"", (), -1, None)),
]
ASSIGNMENTS = [
    *(encode_assignment(Assignment(version, PARTITIONS, b"ud")) for version in range(4)),
    encode_assignment(Assignment(3, (), None)),
]


def _newer(blobs: list[bytes]) -> list[bytes]:
    """v3 blobs relabelled as later versions, some with fields appended."""
    v3 = [blob for blob in blobs if blob[:2] == i16(3)]
    return [i16(version) + blob[2:] + tail for blob in v3 for version in (4, 0x7FFF) for tail in (b"", b"\x01")]


def group_value(members: list[tuple[bytes, bytes]], protocol_type: str = "consumer") -> bytes:
    """A GroupMetadataValue v3 of `members` (subscription, assignment)."""
    value = i16(3) + s16(protocol_type) + i32(1) + s16("range") + s16("m0") + struct.pack(">q", 5)
    value += i32(len(members))
    for index, (subscription, assignment) in enumerate(members):
        value += s16(f"m{index}") + s16(None) + s16("client") + s16("/10.0.0.1") + i32(300) + i32(10)
        value += i32(len(subscription)) + subscription + i32(len(assignment)) + assignment
    return value


def mutations(blob: bytes, rng: random.Random) -> list[bytes]:
    out = [blob[:cut] for cut in range(len(blob))]
    for _ in range(40):
        at = rng.randrange(len(blob))
        out.append(blob[:at] + bytes([blob[at] ^ (1 << rng.randrange(8))]) + blob[at + 1 :])
        out.append(blob[:at] + bytes([rng.choice([0x00, 0x7F, 0x80, 0xFF])]) + blob[at + 1 :])
        out.append(blob[:at] + rng.randbytes(rng.randrange(1, 4)) + blob[at:])
        out.append(blob[:at] + blob[at + rng.randrange(1, 6) :])
        if at + 4 <= len(blob):
            forged = rng.choice([-1, 0, 1, 2, 5, 64, 0x7FFF, 2**31 - 1])
            out.append(blob[:at] + i32(forged) + blob[at + 4 :])
            out.append(blob[:at] + i16(forged & 0x7FFF) + blob[at + 2 :])
    return out


def outcome(decode_blob: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", decode_blob()
    except (Malformed, DecodeError) as exc:
        return "error", (exc.offset, exc.reason)


def embedded_outcome(value: bytes, member: int, field: str) -> tuple[str, Any]:
    def member_blob() -> Any:
        record = decode(GROUP_KEY, value)
        assert isinstance(record, GroupMetadata)
        return getattr(record.members[member], field)

    return outcome(member_blob)


@pytest.mark.parametrize("field", ["subscription", "assignment"])
def test_embedded_blobs_decode_as_the_blob_decoder_reads_them_in_place(field: str) -> None:
    codec, valid = (SUBSCRIPTION, SUBSCRIPTIONS) if field == "subscription" else (ASSIGNMENT, ASSIGNMENTS)
    filler = (SUBSCRIPTIONS[0], ASSIGNMENTS[0])
    # The blob is the second member's, after a first member with another
    # blob or the same. An assignment, last in the value, meets the value's
    # end there; a subscription is followed by more bytes.
    rng = random.Random(field)
    checked = 0
    for base in valid + _newer(valid):
        for blob in [base, *mutations(base, rng)]:
            second = (blob, filler[1]) if field == "subscription" else (filler[0], blob)
            for first in (filler, second):
                value = group_value([first, second])
                if field == "subscription":
                    start = value.index(i32(len(blob)) + blob, value.index(s16("m1") + s16(None))) + 4
                else:
                    start = len(value) - len(blob)
                in_place = partial(codec.decode_at, value, start, start + len(blob))
                expected = outcome(in_place) if blob else ("ok", None)
                if first == filler or expected[0] == "ok":
                    assert embedded_outcome(value, 1, field) == expected, blob
                checked += 1
    assert checked > 2000


def test_a_newer_blob_version_in_a_record_reads_with_the_newest_layout() -> None:
    subscription, assignment = SUBSCRIPTIONS[3], ASSIGNMENTS[3]
    newer = (i16(4) + subscription[2:] + b"later field", i16(9) + assignment[2:] + i32(1))
    record = decode(GROUP_KEY, group_value([newer]))
    assert isinstance(record, GroupMetadata)
    (member,) = record.members
    assert member.subscription == Subscription(4, ("orders", "payments"), None, PARTITIONS, 4, "rack-a")
    assert member.assignment == Assignment(9, PARTITIONS, b"ud")


def test_a_known_blob_version_in_a_record_may_not_have_trailing_bytes() -> None:
    value = group_value([(SUBSCRIPTIONS[3], ASSIGNMENTS[3] + b"\x00")])
    with pytest.raises(DecodeError) as error:
        decode(GROUP_KEY, value)
    assert error.value.reason == "assignment v3: 1 bytes after it"
    assert error.value.offset == len(value) - 1


def test_a_blob_read_past_its_end_is_truncated_there() -> None:
    # Without its null rack id, the subscription's last read takes the two
    # bytes after it, here the start of an assignment length of -1.
    subscription = SUBSCRIPTIONS[4][:-2]
    value = group_value([(subscription, b"")])[:-4] + i32(-1)
    with pytest.raises(DecodeError) as error:
        decode(GROUP_KEY, value)
    assert (error.value.offset, error.value.reason) == (len(value) - 4, "subscription v3: truncated")


def test_identical_and_differing_blobs_of_consecutive_members() -> None:
    a, b = SUBSCRIPTIONS[3], SUBSCRIPTIONS[1]
    members = [(a, b""), (a, ASSIGNMENTS[3]), (b, b""), (a, b""), (b"", b""), (b"", b""), (a, b"")]
    record = decode(GROUP_KEY, group_value(members))
    assert isinstance(record, GroupMetadata)
    assert [member.subscription for member in record.members] == [
        SUBSCRIPTION.decode(s) if s else None for s, _ in members
    ]
    assert [member.assignment for member in record.members] == [ASSIGNMENT.decode(x) if x else None for _, x in members]


def test_blobs_of_other_protocol_types_stay_raw() -> None:
    members = [(SUBSCRIPTIONS[3], ASSIGNMENTS[3]), (b"", b"")]
    record = decode(GROUP_KEY, group_value(members, protocol_type="connect"))
    assert isinstance(record, GroupMetadata)
    assert [(m.subscription, m.assignment) for m in record.members] == members
