"""ConsumerGroupDescribe v0-v1 (KIP-848), and what it answers of consumer-protocol groups.

A group on the consumer rebalance protocol (``group.protocol=consumer``) is
described only by ConsumerGroupDescribe (API key 69): Kafka answers
DescribeGroups for it as ``Dead`` (v0-v5) or with ``GROUP_ID_NOT_FOUND`` (v6),
which is why lag tools that call DescribeGroups show such groups with no
members, or as dead. aiokafka does not speak the API, so it is declared here
with aiokafka's own protocol types (its request machinery sends it, with the
flexible request header, picking v1 where the broker has it, else v0), from
the fields of Kafka's ConsumerGroupDescribeRequest.json and
ConsumerGroupDescribeResponse.json:

- both versions are flexible (compact strings and arrays, tagged fields at
  the end of every struct);
- the request is the same in v0 and v1: the group ids and whether to include
  the authorized operations;
- the answer gives each group's error code and message, state, group epoch,
  assignment epoch (of its target assignment), the server assignor the
  broker selected, and each member's id, instance id, rack, member epoch,
  client id and host, subscribed topic names and regular expression, and its
  current and target assignments, each partition named by topic id *and*
  topic name; v1 adds each member's type (-1 unknown, 0 a classic member of
  a group upgraded to the consumer protocol, 1 a consumer member; KIP-1099).

:func:`described_consumer_groups` reads answers of either version into plain
data (:class:`DescribedConsumerGroup`), and the groups answered with an
error (:class:`ConsumerGroupError`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from kagent.core.topic_ids import Uuid

__all__ = [
    "UNKNOWN_MEMBER_TYPE",
    "AssignedTopic",
    "ConsumerGroupDescribe",
    "ConsumerGroupDescribeRequest_v0",
    "ConsumerGroupDescribeRequest_v1",
    "ConsumerGroupDescribeResponse_v0",
    "ConsumerGroupDescribeResponse_v1",
    "ConsumerGroupError",
    "DescribedConsumerGroup",
    "DescribedConsumerMember",
    "described_consumer_groups",
]

API_KEY = 69

UNKNOWN_MEMBER_TYPE = -1
"""A member's type as v1 answers it when the broker does not know it; v0 says no type (None here)."""

_TOPIC_PARTITIONS = CompactArray(
    ("topic_id", Uuid),
    ("topic_name", CompactString("utf-8")),
    ("partitions", CompactArray(Int32)),
    ("tags", TaggedFields),
)
"""Kafka's common struct ``TopicPartitions``: a topic by id and name, and its partitions."""

_ASSIGNMENT = Schema(("topic_partitions", _TOPIC_PARTITIONS), ("tags", TaggedFields))
"""Kafka's common struct ``Assignment`` (a struct, not an array: no length before it)."""

_MEMBER_V0 = (
    ("member_id", CompactString("utf-8")),
    ("instance_id", CompactString("utf-8")),
    ("rack_id", CompactString("utf-8")),
    ("member_epoch", Int32),
    ("client_id", CompactString("utf-8")),
    ("client_host", CompactString("utf-8")),
    ("subscribed_topic_names", CompactArray(CompactString("utf-8"))),
    ("subscribed_topic_regex", CompactString("utf-8")),
    ("assignment", _ASSIGNMENT),
    ("target_assignment", _ASSIGNMENT),
)


def _response_schema(*member_extra: tuple[str, Any]) -> Schema:
    return Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("group_id", CompactString("utf-8")),
                ("group_state", CompactString("utf-8")),
                ("group_epoch", Int32),
                ("assignment_epoch", Int32),
                ("assignor_name", CompactString("utf-8")),
                ("members", CompactArray(*_MEMBER_V0, *member_extra, ("tags", TaggedFields))),
                ("authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class ConsumerGroupDescribeResponse_v0(Response):
    # Set by Struct.__init__ from SCHEMA; declared for the type checker, as aiokafka's own responses do.
    throttle_time_ms: int
    groups: list[tuple[Any, ...]]

    API_KEY = API_KEY
    API_VERSION = 0
    SCHEMA = _response_schema()


class ConsumerGroupDescribeResponse_v1(Response):
    throttle_time_ms: int
    groups: list[tuple[Any, ...]]

    API_KEY = API_KEY
    API_VERSION = 1
    SCHEMA = _response_schema(("member_type", Int8))


_REQUEST = Schema(
    ("group_ids", CompactArray(CompactString("utf-8"))),
    ("include_authorized_operations", Boolean),
    ("tags", TaggedFields),
)


class ConsumerGroupDescribeRequest_v0(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = API_KEY
    API_VERSION = 0
    RESPONSE_TYPE = ConsumerGroupDescribeResponse_v0
    SCHEMA = _REQUEST


class ConsumerGroupDescribeRequest_v1(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = API_KEY
    API_VERSION = 1
    RESPONSE_TYPE = ConsumerGroupDescribeResponse_v1
    SCHEMA = _REQUEST


_Struct: TypeAlias = ConsumerGroupDescribeRequest_v0 | ConsumerGroupDescribeRequest_v1


class ConsumerGroupDescribe(Request[_Struct]):
    """ConsumerGroupDescribe of ``groups``, without authorized operations (aiokafka's ``client.send``
    picks v1 where the broker has it, else v0; a broker without the API raises
    ``IncompatibleBrokerVersion`` there, one with only later versions ``NotImplementedError``)."""

    API_KEY = API_KEY

    def __init__(self, groups: Sequence[str]) -> None:
        self.groups = list(groups)

    def build(self, request_struct_class: type[_Struct]) -> _Struct:
        return request_struct_class(self.groups, False, {})


@dataclass(frozen=True)
class AssignedTopic:
    """Partitions of one topic in a member's assignment, as the answer names the topic: id and name."""

    topic_id: str
    """The topic's UUID in canonical form (``8-4-4-4-12`` lowercase hex)."""
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class DescribedConsumerMember:
    """One member of a consumer-protocol group, as ConsumerGroupDescribe answered it."""

    member_id: str
    instance_id: str | None
    """Static membership id; None for a dynamic member."""
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[AssignedTopic, ...]
    """What the member holds now."""
    target_assignment: tuple[AssignedTopic, ...]
    """What the broker's assignor wants it to hold (it converges there)."""
    member_type: int | None = None
    """v1: -1 unknown, 0 a classic member (of a group upgraded from the classic protocol), 1 a
    consumer member; None from v0, which does not say."""


@dataclass(frozen=True)
class DescribedConsumerGroup:
    """One consumer-protocol group as ConsumerGroupDescribe answered it without error."""

    group: str
    state: str
    """``Empty``, ``Assigning``, ``Reconciling``, ``Stable`` or ``Dead``."""
    group_epoch: int
    assignment_epoch: int
    """The epoch of the group's target assignment."""
    assignor: str
    """The server assignor the broker selected for the group (``uniform``, ``range``, a plugin's name)."""
    members: tuple[DescribedConsumerMember, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupError:
    """A group ConsumerGroupDescribe answered with an error code (``group`` None when the answer names none)."""

    group: str | None
    error_code: int
    error_message: str | None = None


def described_consumer_groups(
    responses: Iterable[Response],
) -> tuple[dict[str, DescribedConsumerGroup], list[ConsumerGroupError]]:
    """The groups in ConsumerGroupDescribe responses (v0 or v1), and those answered with an error.

    Fields are read by their names in the response schemas, so both versions
    read alike (``member_type`` where the version has it). Nothing is checked
    here beyond the error codes (a group id, even empty, is taken as answered):
    the caller holds the answer to the rules of the coordinator records that
    would say the same.
    """
    described: dict[str, DescribedConsumerGroup] = {}
    errors: list[ConsumerGroupError] = []
    for response in responses:
        for group in response.to_object()["groups"]:
            if group["error_code"]:
                errors.append(ConsumerGroupError(group["group_id"], group["error_code"], group["error_message"]))
                continue
            described[group["group_id"]] = DescribedConsumerGroup(
                group=group["group_id"],
                state=group["group_state"] or "",
                group_epoch=group["group_epoch"],
                assignment_epoch=group["assignment_epoch"],
                assignor=group["assignor_name"] or "",
                members=tuple(_member(member) for member in group["members"]),
            )
    return described, errors


def _member(member: Mapping[str, Any]) -> DescribedConsumerMember:
    return DescribedConsumerMember(
        member_id=member["member_id"] or "",
        instance_id=member["instance_id"],
        rack_id=member["rack_id"],
        member_epoch=member["member_epoch"],
        client_id=member["client_id"] or "",
        client_host=member["client_host"] or "",
        subscribed_topic_names=tuple(member["subscribed_topic_names"] or ()),
        subscribed_topic_regex=member["subscribed_topic_regex"],
        assignment=_topics(member["assignment"]),
        target_assignment=_topics(member["target_assignment"]),
        member_type=member.get("member_type"),
    )


def _topics(assignment: Mapping[str, Any]) -> tuple[AssignedTopic, ...]:
    return tuple(
        AssignedTopic(str(topic["topic_id"]), topic["topic_name"] or "", tuple(topic["partitions"] or ()))
        for topic in assignment["topic_partitions"] or ()
    )
