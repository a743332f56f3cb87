"""The wire capture's decoding of group requests and answers, on frames aiokafka's own protocol types encode.

The flexible versions Java sends (JoinGroup v9, SyncGroup v5) are decoded from a real Java consumer's
bytes in ``tests/integration/test_java_consumers.py``; here, the classic versions older clients speak
(aiokafka and kafka-python, librdkafka up to JoinGroup v5 and SyncGroup v3), how
:func:`~tests.support.wire_capture.generation` pieces a generation together (and
:func:`~tests.support.wire_capture.generations` every completed one), and that the ``__consumer_offsets``
message built of one with aiokafka's types decodes through kagent's codec to the record kagent builds of it.
"""

from __future__ import annotations

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.protocol.api import RequestHeader_v1, ResponseHeader_v0
from aiokafka.protocol.group import (
    JoinGroupRequest_v5,
    JoinGroupResponse_v5,
    SyncGroupRequest_v3,
    SyncGroupResponse_v3,
)
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import decode, decode_assignment, decode_subscription
from kagent.tools.simulator.partitioners import offsets_partition_for
from tests.support.wire_capture import (
    JOIN_GROUP,
    SYNC_GROUP,
    GroupExchange,
    decode_request,
    decode_response,
    generation,
    generations,
)

SUBSCRIPTION = ConsumerProtocolMemberMetadata(0, ["orders"], b"").encode()
ASSIGNMENT_A = ConsumerProtocolMemberAssignment(0, [("orders", [0, 1])], b"").encode()
ASSIGNMENT_B = ConsumerProtocolMemberAssignment(0, [("orders", [2])], b"").encode()


def test_a_classic_join_group_request_and_its_answer_decode_to_their_fields() -> None:
    request = JoinGroupRequest_v5("g", 10_000, 30_000, "m-1", None, "consumer", [("range", SUBSCRIPTION)])
    frame = RequestHeader_v1(request, correlation_id=7, client_id="c-1").encode() + request.encode()
    api_key, version, correlation_id, client_id, fields = decode_request(frame) or (0, 0, 0, None, {})
    assert (api_key, version, correlation_id, client_id) == (JOIN_GROUP, 5, 7, "c-1")
    assert fields == {
        "group": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 30_000,
        "member_id": "m-1",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "group_protocols": [{"protocol_name": "range", "protocol_metadata": SUBSCRIPTION}],
    }
    answer = JoinGroupResponse_v5(0, 0, 3, "range", "m-1", "m-1", [("m-1", None, SUBSCRIPTION)])
    answered = decode_response(JOIN_GROUP, 5, ResponseHeader_v0(correlation_id=7).encode() + answer.encode())
    assert (answered["generation_id"], answered["group_protocol"], answered["leader_id"]) == (3, "range", "m-1")
    assert answered["members"] == [{"member_id": "m-1", "group_instance_id": None, "member_metadata": SUBSCRIPTION}]


def test_a_classic_sync_group_request_and_its_answer_decode_and_other_requests_are_not_decoded() -> None:
    request = SyncGroupRequest_v3("g", 3, "m-1", None, [("m-1", ASSIGNMENT_A)])
    frame = RequestHeader_v1(request, correlation_id=1, client_id="c").encode() + request.encode()
    decoded = decode_request(frame)
    assert decoded is not None and decoded[:2] == (SYNC_GROUP, 3)
    assert decoded[4]["group_assignment"] == [{"member_id": "m-1", "member_metadata": ASSIGNMENT_A}]
    answer = SyncGroupResponse_v3(0, 0, ASSIGNMENT_A)
    assert decode_response(SYNC_GROUP, 3, ResponseHeader_v0(correlation_id=1).encode() + answer.encode()) == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "member_assignment": ASSIGNMENT_A,
    }
    assert decode_request(b"\x00\x03" + frame[2:]) is None  # the same bytes as a Metadata request


def exchange(api_key: int, client_id: str, request: dict[str, object], response: dict[str, object]) -> GroupExchange:
    return GroupExchange(api_key, 5 if api_key == JOIN_GROUP else 3, client_id, "/127.0.0.1", request, response)


def join(client_id: str, member_id: str, generation_id: int, error_code: int = 0) -> GroupExchange:
    protocols = [{"protocol_name": "range", "protocol_metadata": SUBSCRIPTION}]
    request = {"group": "g", "session_timeout": 10_000, "rebalance_timeout": 30_000, "member_id": member_id}
    request |= {"group_instance_id": None, "protocol_type": "consumer", "group_protocols": protocols}
    response = {"error_code": error_code, "generation_id": generation_id, "group_protocol": "range"}
    return exchange(JOIN_GROUP, client_id, request, response | {"leader_id": "a-1", "member_id": member_id})


def sync(
    client_id: str,
    member_id: str,
    generation_id: int,
    assignments: list[tuple[str, bytes]],
    given: bytes | None = None,
    error_code: int = 0,
) -> GroupExchange:
    request = {"group": "g", "generation_id": generation_id, "member_id": member_id, "group_instance_id": None}
    assigned = [{"member_id": m, "member_metadata": blob} for m, blob in assignments]
    answer = {"error_code": error_code, "member_assignment": given or b""}
    return exchange(SYNC_GROUP, client_id, request | {"group_assignment": assigned}, answer)


def test_a_generation_is_the_leaders_assignments_with_each_members_subscription_from_its_join() -> None:
    exchanges = [
        join("a", "a-1", 1),
        join("b", "b-1", 1),
        sync("a", "a-1", 1, [("a-1", ASSIGNMENT_B), ("b-1", ASSIGNMENT_A)]),
        join("b", "b-1", 2),  # a second generation, b alone...
        join("a", "a-1", -1, error_code=27),  # ... a's rejoin failed
        sync("b", "b-1", 2, [("b-1", ASSIGNMENT_A)]),
    ]
    first = generation(exchanges, "g", 1)
    assert (first.generation, first.protocol, first.leader) == (1, "range", "a-1")
    assert [(m.member_id, m.client_id, m.client_host) for m in first.members] == [
        ("a-1", "a", "/127.0.0.1"),
        ("b-1", "b", "/127.0.0.1"),
    ]
    assert [decode_assignment(m.assignment).partitions for m in first.members] == [
        (TopicPartition("orders", 2),),
        (TopicPartition("orders", 0), TopicPartition("orders", 1)),
    ]
    last = generation(exchanges, "g")
    assert (last.generation, last.leader, [m.member_id for m in last.members]) == (2, "b-1", ["b-1"])
    assert decode_subscription(last.members[0].subscription).topics == ("orders",)
    record = last.record(1_000)
    assert (record.generation, record.protocol, record.members[0].client_id) == (2, "range", "b")


def test_every_completed_generation_oldest_first_with_what_each_member_was_given() -> None:
    exchanges = [
        join("a", "a-1", 1),
        join("b", "b-1", 1),
        sync("b", "b-1", 1, [], given=ASSIGNMENT_A),  # the follower's sync, answered before the leader's
        sync("a", "a-1", 1, [("a-1", ASSIGNMENT_B), ("b-1", ASSIGNMENT_A)], given=ASSIGNMENT_B),
        join("a", "a-1", 2),
        sync("a", "a-1", 2, [("a-1", ASSIGNMENT_A)], error_code=27),  # a rebalance began: not completed
        join("a", "a-1", 3),
        sync("a", "a-1", 3, [("a-1", ASSIGNMENT_A)], given=ASSIGNMENT_A),
    ]
    every = generations(exchanges, "g")
    assert [g.generation for g in every] == [1, 3]
    assert [(m.member_id, m.received) for m in every[0].members] == [("a-1", ASSIGNMENT_B), ("b-1", ASSIGNMENT_A)]
    assert generation(exchanges, "g") == every[-1]
    assert generations(exchanges, "other") == []


def test_the_message_built_with_aiokafkas_types_decodes_to_the_record_kagent_builds() -> None:
    exchanges = [
        join("a", "a-1", 1),
        join("b", "b-1", 1),
        sync("a", "a-1", 1, [("a-1", ASSIGNMENT_B), ("b-1", ASSIGNMENT_A)]),
    ]
    captured = generation(exchanges, "g")
    message = captured.message(1_000)
    assert message.partition == offsets_partition_for("g")
    assert SUBSCRIPTION in (message.value or b"") and ASSIGNMENT_A in (message.value or b"")  # the blobs as sent
    assert decode(message.key, message.value) == captured.record(1_000)
