"""ConsumerGroupDescribe (API key 69) on the wire, written by hand from Kafka's message definitions.

For the tests of kagent's declaration of the API
(:mod:`kagent.core.consumer_group_describe`) and for the relay that answers it
where Tansu cannot (``tests/support/answer_rewriter.py``): the bytes are laid
out here field by field from ``ConsumerGroupDescribeRequest.json`` and
``ConsumerGroupDescribeResponse.json`` (versions 0 and 1, both flexible),
with struct packing and Kafka's unsigned varints, not with kagent's
declaration or aiokafka's types, so a test that decodes them with kagent
checks kagent against the spec, not against itself.

The layouts, in order (``compact`` lengths are unsigned varints of length + 1,
0 for null; every struct ends in its tagged fields, a count then
tag/size/bytes each):

- request: GroupIds ``[]string``, IncludeAuthorizedOperations ``bool``;
- response: ThrottleTimeMs ``int32``, Groups ``[]DescribedGroup``;
- DescribedGroup: ErrorCode ``int16``, ErrorMessage ``string?``, GroupId,
  GroupState ``string``, GroupEpoch, AssignmentEpoch ``int32``, AssignorName
  ``string``, Members ``[]Member``, AuthorizedOperations ``int32``;
- Member: MemberId ``string``, InstanceId, RackId ``string?``, MemberEpoch
  ``int32``, ClientId, ClientHost ``string``, SubscribedTopicNames
  ``[]string``, SubscribedTopicRegex ``string?``, Assignment,
  TargetAssignment (each a struct ``Assignment``: TopicPartitions
  ``[]TopicPartitions``, each TopicId ``uuid``, TopicName ``string``,
  Partitions ``[]int32``), and from v1 MemberType ``int8``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

__all__ = [
    "GROUP_ID_NOT_FOUND",
    "UNSUPPORTED_VERSION",
    "Group",
    "Member",
    "Topic",
    "request_body",
    "request_groups",
    "response_body",
    "response_frame",
    "uvarint",
]

UNSUPPORTED_VERSION = 35
GROUP_ID_NOT_FOUND = 69
NO_AUTHORIZED_OPERATIONS = -(2**31)
"""What Kafka answers in AuthorizedOperations when they were not asked for."""


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint: 7 bits a byte, least significant first, the high bit set on all but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def _array(items: Sequence[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _tags(tags: Mapping[int, bytes]) -> bytes:
    return uvarint(len(tags)) + b"".join(uvarint(tag) + uvarint(len(raw)) + raw for tag, raw in sorted(tags.items()))


@dataclass(frozen=True)
class Topic:
    """Partitions of one topic, as an ``Assignment`` names them: by id and by name."""

    topic_id: UUID
    name: str
    partitions: tuple[int, ...]

    def encode(self) -> bytes:
        numbers = [struct.pack(">i", partition) for partition in self.partitions]
        return self.topic_id.bytes + _string(self.name) + _array(numbers) + _tags({})


def _assignment(topics: Iterable[Topic]) -> bytes:
    return _array([topic.encode() for topic in topics]) + _tags({})


@dataclass(frozen=True)
class Member:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[Topic, ...] = ()
    target_assignment: tuple[Topic, ...] = ()
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_regex: str | None = None
    member_type: int = -1
    """v1 only: -1 unknown, 0 classic, 1 consumer."""
    tags: Mapping[int, bytes] = field(default_factory=dict)
    """Tagged fields at the end of the member (a later version's, which readers skip)."""

    def encode(self, version: int) -> bytes:
        return b"".join(
            (
                _string(self.member_id),
                _string(self.instance_id),
                _string(self.rack_id),
                struct.pack(">i", self.member_epoch),
                _string(self.client_id),
                _string(self.client_host),
                _array([_string(name) for name in self.subscribed_topic_names]),
                _string(self.subscribed_topic_regex),
                _assignment(self.assignment),
                _assignment(self.target_assignment),
                struct.pack(">b", self.member_type) if version >= 1 else b"",
                _tags(self.tags),
            )
        )


@dataclass(frozen=True)
class Group:
    group_id: str
    state: str = "Stable"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = "uniform"
    members: tuple[Member, ...] = ()
    error_code: int = 0
    error_message: str | None = None
    authorized_operations: int = NO_AUTHORIZED_OPERATIONS

    def encode(self, version: int) -> bytes:
        return b"".join(
            (
                struct.pack(">h", self.error_code),
                _string(self.error_message),
                _string(self.group_id),
                _string(self.state),
                struct.pack(">ii", self.group_epoch, self.assignment_epoch),
                _string(self.assignor),
                _array([member.encode(version) for member in self.members]),
                struct.pack(">i", self.authorized_operations),
                _tags({}),
            )
        )

    @classmethod
    def failed(cls, group_id: str, error_code: int, message: str | None = None) -> Group:
        """The entry Kafka answers for a group it cannot describe: the error, the id, and defaults."""
        return cls(
            group_id,
            state="",
            group_epoch=-1,
            assignment_epoch=-1,
            assignor="",
            error_code=error_code,
            error_message=message,
        )


def response_body(groups: Sequence[Group], version: int, throttle_time_ms: int = 0) -> bytes:
    """A ConsumerGroupDescribe response of ``version`` (0 or 1), without the response header."""
    return struct.pack(">i", throttle_time_ms) + _array([group.encode(version) for group in groups]) + _tags({})


def response_frame(correlation_id: int, body: bytes) -> bytes:
    """A response as it travels after its size: the flexible response header (correlation id, no tagged
    fields), then ``body``."""
    return struct.pack(">i", correlation_id) + _tags({}) + body


def request_body(groups: Sequence[str], include_authorized_operations: bool = False) -> bytes:
    """A ConsumerGroupDescribe request (v0 and v1 alike), without the request header."""
    return _array([_string(group) for group in groups]) + struct.pack(">?", include_authorized_operations) + _tags({})


def request_groups(frame: bytes) -> list[str]:
    """The group ids a ConsumerGroupDescribe request ``frame`` (after its size) asks for: past the flexible
    request header (api key, version, correlation id, the client id as an int16-length string, tagged
    fields), the compact array of compact strings."""
    (client_id_length,) = struct.unpack_from(">h", frame, 8)
    at = 10 + max(client_id_length, 0)
    tagged, at = _read_uvarint(frame, at)
    for _ in range(tagged):
        _, at = _read_uvarint(frame, at)
        size, at = _read_uvarint(frame, at)
        at += size
    count, at = _read_uvarint(frame, at)
    groups = []
    for _ in range(count - 1):
        length, at = _read_uvarint(frame, at)
        groups.append(frame[at : at + length - 1].decode())
        at += length - 1
    return groups
