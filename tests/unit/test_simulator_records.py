"""`kagent.tools.simulator.rebalance` and `coordinator_records`: from what members saw to Kafka's bytes."""

from __future__ import annotations

from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    Assignment,
    GroupMetadata,
    OffsetCommit,
    Subscription,
    decode,
    encode_assignment,
    encode_subscription,
)
from kagent.tools.simulator.coordinator_records import (
    assignment_of,
    empty_group_metadata,
    group_metadata,
    offset_commit,
    offsets_topic_message,
    subscription_of,
)
from kagent.tools.simulator.partitioners import offsets_partition_for
from kagent.tools.simulator.rebalance import GenerationTracker, LeaderPlan, MemberIdentity

A, B = "c0-1111", "c1-2222"
IDENTITIES = {m: MemberIdentity(m, m.split("-")[0], "/127.0.0.1", 6000, 10000) for m in (A, B)}
SUBSCRIPTION = Subscription(version=0, topics=("t",), user_data=b"")


def _plan(generation: int) -> LeaderPlan:
    return LeaderPlan(
        generation=generation,
        leader=A,
        protocol="range",
        subscriptions={A: SUBSCRIPTION, B: SUBSCRIPTION},
        assignments={
            A: Assignment(0, (TopicPartition("t", 0), TopicPartition("t", 1)), b""),
            B: Assignment(0, (TopicPartition("t", 2),), b""),
        },
    )


def test_a_generation_completes_once_the_plan_and_every_adoption_are_in() -> None:
    tracker = GenerationTracker("g")
    assert tracker.member_assigned(1, IDENTITIES[B]) is None  # before the plan
    assert tracker.leader_assigned(_plan(1)) is None
    rebalance = tracker.member_assigned(1, IDENTITIES[A])
    assert rebalance is not None
    assert (rebalance.group, rebalance.generation, rebalance.leader, rebalance.protocol) == ("g", 1, A, "range")
    assert [m.identity.member_id for m in rebalance.members] == [A, B]
    assert rebalance.members[1].assignment.partitions == (TopicPartition("t", 2),)
    # completed once; late or older reports do nothing
    assert tracker.member_assigned(1, IDENTITIES[B]) is None
    assert tracker.leader_assigned(_plan(0)) is None


def test_the_plan_may_complete_a_generation() -> None:
    tracker = GenerationTracker("g")
    tracker.member_assigned(3, IDENTITIES[A])
    tracker.member_assigned(3, IDENTITIES[B])
    rebalance = tracker.leader_assigned(_plan(3))
    assert rebalance is not None and rebalance.generation == 3


def test_an_abandoned_generation_is_superseded() -> None:
    tracker = GenerationTracker("g")
    tracker.leader_assigned(_plan(1))
    tracker.member_assigned(1, IDENTITIES[A])  # B never adopts generation 1
    tracker.leader_assigned(_plan(2))
    tracker.member_assigned(2, IDENTITIES[A])
    assert tracker.member_assigned(2, IDENTITIES[B]) is not None
    assert tracker.member_assigned(1, IDENTITIES[B]) is None


def test_protocol_blobs_are_the_bytes_aiokafka_sends() -> None:
    metadata = RangePartitionAssignor.metadata(["t", "u"])
    assert encode_subscription(subscription_of(metadata)) == metadata.encode()
    sent = ConsumerProtocolMemberAssignment(0, [("t", [0, 1]), ("u", [3])], b"")
    assert encode_assignment(assignment_of(sent)) == sent.encode()
    assert assignment_of(sent).partitions == (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 3))


def test_offset_commit_record_round_trips_on_the_groups_partition() -> None:
    record = offset_commit("g", TopicPartition("t", 4), 42, "", 1_700_000_000_000)
    assert (record.value_version, record.leader_epoch, record.expire_timestamp) == (3, None, None)
    message = offsets_topic_message(record, 50)
    assert message.partition == offsets_partition_for("g", 50)
    decoded = decode(message.key, message.value)
    assert isinstance(decoded, OffsetCommit) and decoded == record


def test_group_metadata_record_lists_members_and_round_trips() -> None:
    tracker = GenerationTracker("g")
    tracker.leader_assigned(_plan(5))
    tracker.member_assigned(5, IDENTITIES[A])
    rebalance = tracker.member_assigned(5, IDENTITIES[B])
    assert rebalance is not None
    record = group_metadata(rebalance, 1_700_000_000_000)
    assert (record.protocol_type, record.protocol, record.generation, record.leader) == ("consumer", "range", 5, A)
    assert record.value_version == 3
    member = record.members[0]
    assert (member.member_id, member.client_id, member.client_host) == (A, "c0", "/127.0.0.1")
    assert (member.session_timeout, member.rebalance_timeout, member.group_instance_id) == (6000, 10000, None)
    message = offsets_topic_message(record, 50)
    assert message.partition == offsets_partition_for("g", 50)
    assert decode(message.key, message.value) == record


def test_empty_group_record() -> None:
    record = empty_group_metadata("g", 6, 1_700_000_000_000)
    message = offsets_topic_message(record, 50)
    decoded = decode(message.key, message.value)
    assert isinstance(decoded, GroupMetadata)
    assert (decoded.generation, decoded.protocol, decoded.leader, decoded.members) == (6, None, None, ())
