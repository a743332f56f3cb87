"""The consumer protocol's blobs: a member's subscription and assignment.

Classic groups whose protocol type is "consumer" store these in each
member's `subscription` and `assignment` bytes. A blob is an int16 version
and a classic-encoded struct. As the consumer protocol's JSON says, a reader
meeting a version newer than it knows parses it with its newest layout
(later versions only append fields), so such a blob decodes with its real
version number and the v3 fields; it cannot be encoded back.
"""

from __future__ import annotations

import struct
from typing import Any

from kagent.core.consumer_offsets._decoder import compile_blob_decoder
from kagent.core.consumer_offsets._encoder import compile_blob_encoder
from kagent.core.consumer_offsets._layouts import CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION
from kagent.core.consumer_offsets.errors import DecodeError, Malformed
from kagent.core.consumer_offsets.layout import Message
from kagent.core.consumer_offsets.records import Assignment, Subscription
from kagent.core.consumer_offsets.shape import FLAT_TOPIC_PARTITIONS, RecordShape

_INT16 = struct.Struct(">h").unpack_from
_ENCODING_FAILURES = (struct.error, TypeError, AttributeError, OverflowError)


class BlobCodec:
    """Decoder and encoder of every known version of one blob (a `Blob`
    for the machine's embedding)."""

    def __init__(self, part: str, message: Message, shape: RecordShape, *, repeats: bool) -> None:
        self.part = part
        self.message = message
        self.shape = shape
        self.repeats = repeats
        self._cls: type[Any] = shape.cls
        self.decode_at = compile_blob_decoder(message, shape, part)
        self._encoders = {v: compile_blob_encoder(layout, v, shape) for v, layout in message.versions.items()}

    def decode(self, data: bytes) -> Any:
        """Decode one whole blob; DecodeError if malformed."""
        try:
            return self.decode_at(data, 0, len(data))
        except Malformed as exc:
            version = _INT16(data, 0)[0] if len(data) >= 2 else None
            raise DecodeError(None, self.part, version, exc.offset, exc.reason) from None

    def encode(self, record: Any) -> bytes:
        """The blob of `record`; ValueError if it cannot be written."""
        if type(record) is not self._cls:
            raise ValueError(f"{self.part} must be a {self._cls.__name__}, not {type(record).__name__}")
        encoder = self._encoders.get(record.version)
        if encoder is None:
            raise ValueError(f"cannot write {self.part} version {record.version}")
        try:
            return encoder(record)
        except _ENCODING_FAILURES as exc:
            raise ValueError(f"cannot write {record!r}: {exc}") from exc


SUBSCRIPTION = BlobCodec(
    "subscription",
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    RecordShape(Subscription, nested={"owned_partitions": FLAT_TOPIC_PARTITIONS}, version_field="version"),
    repeats=True,  # eager members subscribe alike
)
ASSIGNMENT = BlobCodec(
    "assignment",
    CONSUMER_PROTOCOL_ASSIGNMENT,
    RecordShape(
        Assignment,
        renames={"partitions": "assigned_partitions"},
        nested={"assigned_partitions": FLAT_TOPIC_PARTITIONS},
        version_field="version",
    ),
    repeats=False,  # each member is assigned its own partitions
)


def decode_subscription(data: bytes) -> Subscription:
    """A member's subscription blob (ConsumerProtocolSubscription v0-3;
    newer versions read as v3). DecodeError if malformed."""
    subscription: Subscription = SUBSCRIPTION.decode(data)
    return subscription


def decode_assignment(data: bytes) -> Assignment:
    """A member's assignment blob (ConsumerProtocolAssignment v0-3; newer
    versions read as v3). DecodeError if malformed."""
    assignment: Assignment = ASSIGNMENT.decode(data)
    return assignment


def encode_subscription(subscription: Subscription) -> bytes:
    """The blob Kafka's consumer writes for `subscription` (versions 0-3).
    ValueError if a field does not fit that version."""
    return SUBSCRIPTION.encode(subscription)


def encode_assignment(assignment: Assignment) -> bytes:
    """The blob Kafka's consumer writes for `assignment` (versions 0-3).
    ValueError if a field does not fit that version."""
    return ASSIGNMENT.encode(assignment)
