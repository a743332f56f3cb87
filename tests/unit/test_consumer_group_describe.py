"""`kagent.core.consumer_group_describe`: ConsumerGroupDescribe v0-v1 declared on aiokafka's protocol types.

Every expected byte comes from ``tests/support/consumer_group_describe_bytes.py``,
laid out by hand from Kafka's ConsumerGroupDescribeRequest.json and
ConsumerGroupDescribeResponse.json (struct packing and varints, not kagent's
declaration), and one request and one answer are spelled out byte by byte
here, so the declaration is checked against the spec, not against itself.
"""

from __future__ import annotations

import dataclasses
from io import BytesIO
from uuid import UUID

import pytest
from aiokafka.errors import IncompatibleBrokerVersion

from kagent.core.consumer_group_describe import (
    AssignedTopic,
    ConsumerGroupDescribe,
    ConsumerGroupDescribeRequest_v0,
    ConsumerGroupDescribeRequest_v1,
    ConsumerGroupDescribeResponse_v0,
    ConsumerGroupDescribeResponse_v1,
    ConsumerGroupError,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    described_consumer_groups,
)
from tests.support.consumer_group_describe_bytes import (
    GROUP_ID_NOT_FOUND,
    Group,
    Member,
    Topic,
    request_body,
    request_groups,
    response_body,
)

ORDERS = UUID("6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7")
PAYMENTS = UUID("00000000-0000-0000-0000-0000000000ff")

GROUP = Group(
    "checkout",
    state="Reconciling",
    group_epoch=7,
    assignment_epoch=6,
    assignor="range",
    members=(
        Member(
            "m-b",
            member_epoch=6,
            client_id="checkout-1",
            client_host="/10.0.0.8",
            subscribed_topic_names=("orders", "payments"),
            assignment=(Topic(ORDERS, "orders", (2, 3)), Topic(PAYMENTS, "payments", (0,))),
            target_assignment=(Topic(ORDERS, "orders", (3,)),),
            instance_id="checkout-host-1",
            rack_id="eu-west-1b",
            member_type=1,
            tags={7: b"later"},
        ),
        Member(
            "m-a",
            member_epoch=7,
            client_id="checkout-0",
            client_host="/10.0.0.7",
            subscribed_topic_names=(),
            subscribed_topic_regex="orders|payments",
            assignment=(Topic(ORDERS, "orders", (0, 1)),),
            target_assignment=(Topic(ORDERS, "orders", (0, 1, 2)),),
            member_type=0,
        ),
    ),
)


def expected(version: int) -> DescribedConsumerGroup:
    return DescribedConsumerGroup(
        group="checkout",
        state="Reconciling",
        group_epoch=7,
        assignment_epoch=6,
        assignor="range",
        members=(
            DescribedConsumerMember(
                member_id="m-b",
                instance_id="checkout-host-1",
                rack_id="eu-west-1b",
                member_epoch=6,
                client_id="checkout-1",
                client_host="/10.0.0.8",
                subscribed_topic_names=("orders", "payments"),
                subscribed_topic_regex=None,
                assignment=(
                    AssignedTopic(str(ORDERS), "orders", (2, 3)),
                    AssignedTopic(str(PAYMENTS), "payments", (0,)),
                ),
                target_assignment=(AssignedTopic(str(ORDERS), "orders", (3,)),),
                member_type=1 if version >= 1 else None,
            ),
            DescribedConsumerMember(
                member_id="m-a",
                instance_id=None,
                rack_id=None,
                member_epoch=7,
                client_id="checkout-0",
                client_host="/10.0.0.7",
                subscribed_topic_names=(),
                subscribed_topic_regex="orders|payments",
                assignment=(AssignedTopic(str(ORDERS), "orders", (0, 1)),),
                target_assignment=(AssignedTopic(str(ORDERS), "orders", (0, 1, 2)),),
                member_type=0 if version >= 1 else None,
            ),
        ),
    )


@pytest.mark.parametrize("request_type", [ConsumerGroupDescribeRequest_v0, ConsumerGroupDescribeRequest_v1])
def test_the_request_encodes_as_the_spec_lays_it_out(request_type: type[ConsumerGroupDescribeRequest_v0]) -> None:
    encoded = request_type(["checkout", "b"], False, {}).encode()

    # GroupIds: 2 + 1, "checkout" (8 + 1), "b" (1 + 1); IncludeAuthorizedOperations false; no tagged fields.
    assert encoded == b"\x03\x09checkout\x02b\x00\x00"
    assert encoded == request_body(["checkout", "b"])
    assert request_type.FLEXIBLE_VERSION  # the request header v2 (with tagged fields) and response header v1
    assert (request_type.API_KEY, request_type.RESPONSE_TYPE.API_KEY) == (69, 69)


def test_a_request_goes_out_with_the_flexible_header_and_its_groups_read_back() -> None:
    struct_ = ConsumerGroupDescribe(["checkout", "b"]).prepare({69: (0, 1)})
    header = struct_.build_request_header(correlation_id=5, client_id="kagent")
    frame = header.encode() + struct_.encode()

    # api key 69, version 1, correlation id 5, client id "kagent" (int16 length), no header tags.
    assert frame[:17] == b"\x00\x45\x00\x01\x00\x00\x00\x05\x00\x06kagent\x00"
    assert request_groups(frame) == ["checkout", "b"]


def test_the_version_is_the_highest_both_sides_know() -> None:
    request = ConsumerGroupDescribe(["g"])
    assert type(request.prepare({69: (0, 1)})) is ConsumerGroupDescribeRequest_v1
    assert type(request.prepare({69: (0, 5)})) is ConsumerGroupDescribeRequest_v1
    assert type(request.prepare({69: (0, 0)})) is ConsumerGroupDescribeRequest_v0  # Tansu 0.6 has v0 only
    with pytest.raises(IncompatibleBrokerVersion):
        request.prepare({16: (0, 5)})  # a broker without the API
    with pytest.raises(NotImplementedError):
        request.prepare({69: (2, 3)})


def test_an_answer_spelled_out_byte_by_byte_decodes() -> None:
    topic = bytes(range(16))
    answer = b"".join(
        (
            b"\x00\x00\x00\x00",  # ThrottleTimeMs
            b"\x02",  # Groups: 1
            b"\x00\x00",  # ErrorCode
            b"\x00",  # ErrorMessage: null
            b"\x02g",  # GroupId
            b"\x07Stable",  # GroupState
            b"\x00\x00\x00\x03",  # GroupEpoch
            b"\x00\x00\x00\x03",  # AssignmentEpoch
            b"\x08uniform",  # AssignorName
            b"\x02",  # Members: 1
            b"\x02m",  # MemberId
            b"\x00",  # InstanceId: null
            b"\x03r1",  # RackId
            b"\x00\x00\x00\x03",  # MemberEpoch
            b"\x02c",  # ClientId
            b"\x02h",  # ClientHost
            b"\x02\x02t",  # SubscribedTopicNames: ["t"]
            b"\x00",  # SubscribedTopicRegex: null
            b"\x02" + topic + b"\x02t" + b"\x03\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00",  # Assignment's topic
            b"\x00",  # Assignment's tagged fields
            b"\x01\x00",  # TargetAssignment: no topics
            b"\x00",  # the member's tagged fields
            b"\x80\x00\x00\x00",  # AuthorizedOperations: not asked
            b"\x00",  # the group's tagged fields
            b"\x00",  # the response's tagged fields
        )
    )
    response = ConsumerGroupDescribeResponse_v0.decode(BytesIO(answer))

    (group,) = described_consumer_groups([response])[0].values()
    (member,) = group.members
    assert (group.group, group.state, group.group_epoch, group.assignment_epoch, group.assignor) == (
        "g",
        "Stable",
        3,
        3,
        "uniform",
    )
    assert member == DescribedConsumerMember(
        member_id="m",
        instance_id=None,
        rack_id="r1",
        member_epoch=3,
        client_id="c",
        client_host="h",
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        assignment=(AssignedTopic(str(UUID(bytes=topic)), "t", (0, 1)),),
        target_assignment=(),
    )
    assert response.encode() == answer


@pytest.mark.parametrize(
    ("version", "response_type"), [(0, ConsumerGroupDescribeResponse_v0), (1, ConsumerGroupDescribeResponse_v1)]
)
def test_an_answer_decodes_to_each_member_and_encodes_back_to_the_same_bytes(
    version: int, response_type: type[ConsumerGroupDescribeResponse_v0]
) -> None:
    wire = response_body([GROUP], version, throttle_time_ms=12)
    response = response_type.decode(BytesIO(wire))

    described, errors = described_consumer_groups([response])

    assert errors == []
    assert described == {"checkout": expected(version)}
    assert response.throttle_time_ms == 12
    assert response.to_object()["groups"][0]["members"][0]["tags"] == {7: b"later"}  # a later version's, skipped
    buffer = BytesIO(wire + b"rest")
    response_type.decode(buffer)
    assert buffer.read() == b"rest"  # it read exactly the answer's bytes
    # Encoding back gives the same bytes (aiokafka's TaggedFields.encode leaves out a tag's size, so the
    # round trip is of an answer without tags: kagent only decodes answers).
    untagged = dataclasses.replace(GROUP, members=tuple(dataclasses.replace(m, tags={}) for m in GROUP.members))
    plain = response_body([untagged], version)
    assert response_type.decode(BytesIO(plain)).encode() == plain


def test_groups_answered_with_an_error_are_returned_apart() -> None:
    wire = response_body(
        [GROUP, Group.failed("gone", GROUP_ID_NOT_FOUND, "Group gone not found."), Group.failed("", 42)], 0
    )
    described, errors = described_consumer_groups([ConsumerGroupDescribeResponse_v0.decode(BytesIO(wire))])

    assert list(described) == ["checkout"]
    assert errors == [
        ConsumerGroupError("gone", GROUP_ID_NOT_FOUND, "Group gone not found."),
        ConsumerGroupError("", 42, None),
    ]


def test_a_truncated_answer_raises() -> None:
    wire = response_body([GROUP], 0)
    with pytest.raises((ValueError, IndexError)):
        ConsumerGroupDescribeResponse_v0.decode(BytesIO(wire[:-40]))
