"""KIP-848 consumer group records -> derived events (kagent.core.events.derive)
-> folded state (kagent.core.consumer_group_state)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from uuid import UUID

import pytest

from kagent.core.consumer_group_state import (
    ConsumerGroupMemberState,
    ConsumerGroupState,
    assignment,
    fold,
)
from kagent.core.consumer_offsets import (
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
    PartitionMetadata,
    Record,
    TopicMetadata,
    TopicPartitions,
    decode,
    encode,
)
from kagent.core.events import (
    ConsumerGroupEpoch,
    ConsumerGroupMember,
    ConsumerGroupMemberAssignment,
    ConsumerGroupMemberLeft,
    ConsumerGroupRegex,
    ConsumerGroupRegexDeleted,
    ConsumerGroupTargetAssignment,
    ConsumerGroupTopics,
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    MemberAssignment,
    OffsetCommitted,
    PartitionRef,
    TopicIdPartition,
    TopicName,
    by_group,
    decode_record,
    derive,
    encode_events,
)

GROUP = "billing"
ORDERS = UUID("0f9d2c1e-6a4b-4f3e-9d1c-2b3a4c5d6e7f")
PAYMENTS = UUID("7e6d5c4b-3a2b-4c1d-8e9f-0a1b2c3d4e5f")


def member_metadata(
    member_id: str, topics: tuple[str, ...] = ("orders", "payments"), server_assignor: str | None = "uniform"
) -> ConsumerGroupMemberMetadata:
    """A member's metadata (type 5) as Kafka 4.x writes it for a consumer-protocol member."""
    return ConsumerGroupMemberMetadata(
        group=GROUP,
        member_id=member_id,
        instance_id=None,
        rack_id=None,
        client_id=f"client-{member_id}",
        client_host=f"/10.0.0.{len(member_id)}",
        subscribed_topic_names=topics,
        subscribed_topic_regex=None,
        rebalance_timeout_ms=300_000,
        server_assignor=server_assignor,
    )


def current_assignment(
    member_id: str,
    epoch: int,
    assigned: dict[UUID, tuple[int, ...]],
    pending_revocation: dict[UUID, tuple[int, ...]] | None = None,
) -> ConsumerGroupCurrentMemberAssignment:
    """A member's current assignment (type 8)."""
    return ConsumerGroupCurrentMemberAssignment(
        group=GROUP,
        member_id=member_id,
        member_epoch=epoch,
        previous_member_epoch=epoch - 1,
        state=0,
        assigned_partitions=tuple(TopicPartitions(t, p) for t, p in assigned.items()),
        partitions_pending_revocation=tuple(TopicPartitions(t, p) for t, p in (pending_revocation or {}).items()),
    )


def partition_metadata(*topics: tuple[UUID, str, int]) -> ConsumerGroupPartitionMetadata:
    """The group's subscribed topics' metadata (type 4)."""
    return ConsumerGroupPartitionMetadata(
        group=GROUP,
        topics=tuple(
            TopicMetadata(topic_id, name, count, tuple(PartitionMetadata(p, ()) for p in range(count)))
            for topic_id, name, count in topics
        ),
    )


def through_bytes(record: Record) -> list[DerivedEvent]:
    """``derive`` of ``record`` after Kafka's binary format and back."""
    key, value = encode(record)
    return derive(decode(key, value))


def folded(events: Iterable[DerivedEvent], state: ConsumerGroupState | None = None) -> ConsumerGroupState | None:
    return reduce(fold, events, state)


def events_of(*records: Record) -> list[DerivedEvent]:
    return [event for record in records for event in through_bytes(record)]


# -- derive ------------------------------------------------------------------


def test_derive_every_kip848_value_through_kafkas_bytes() -> None:
    assert through_bytes(ConsumerGroupMetadata(GROUP, 12, metadata_hash=99, value_version=0)) == [
        ConsumerGroupEpoch(group=GROUP, epoch=12)
    ]
    assert through_bytes(partition_metadata((ORDERS, "orders", 6), (PAYMENTS, "payments", 2))) == [
        ConsumerGroupTopics(
            group=GROUP,
            topics=(
                TopicName(topic_id=str(ORDERS), topic="orders", partitions=6),
                TopicName(topic_id=str(PAYMENTS), topic="payments", partitions=2),
            ),
        )
    ]
    regex_member = member_metadata("m1", topics=())._replace(
        instance_id="pod-1", subscribed_topic_regex="pay.*", server_assignor=None
    )
    assert through_bytes(regex_member) == [
        ConsumerGroupMember(
            group=GROUP,
            member_id="m1",
            group_instance_id="pod-1",
            client_id="client-m1",
            client_host="/10.0.0.2",
            topics=(),
            topic_regex="pay.*",
            server_assignor=None,
        )
    ]
    assert through_bytes(current_assignment("m1", 7, {PAYMENTS: (1, 0)}, {ORDERS: (4,), PAYMENTS: (3,)})) == [
        ConsumerGroupMemberAssignment(
            group=GROUP,
            member_id="m1",
            member_epoch=7,
            partitions=tuple(
                sorted(
                    (
                        TopicIdPartition(topic_id=str(PAYMENTS), partition=0),
                        TopicIdPartition(topic_id=str(PAYMENTS), partition=1),
                        TopicIdPartition(topic_id=str(PAYMENTS), partition=3),
                        TopicIdPartition(topic_id=str(ORDERS), partition=4),
                    ),
                    key=lambda p: (p.topic_id, p.partition),
                )
            ),
        )
    ]


def test_derive_kip848_tombstones_through_kafkas_bytes() -> None:
    assert through_bytes(ConsumerGroupMetadataTombstone(GROUP)) == [GroupDeleted(group=GROUP)]
    assert through_bytes(ConsumerGroupMemberMetadataTombstone(GROUP, "m1")) == [
        ConsumerGroupMemberLeft(group=GROUP, member_id="m1")
    ]
    assert through_bytes(ConsumerGroupRegularExpressionTombstone(GROUP, "pay.*")) == [
        ConsumerGroupRegexDeleted(group=GROUP, regex="pay.*")
    ]
    for record in (
        ConsumerGroupCurrentMemberAssignmentTombstone(GROUP, "m1"),
        ConsumerGroupPartitionMetadataTombstone(GROUP),
        ConsumerGroupTargetAssignmentMetadataTombstone(GROUP),
        ConsumerGroupTargetAssignmentMemberTombstone(GROUP, "m1"),
    ):
        assert through_bytes(record) == [], record


def test_target_assignments_derive_nothing() -> None:
    for record in (
        ConsumerGroupTargetAssignmentMetadata(GROUP, 8),
        ConsumerGroupTargetAssignmentMember(GROUP, "m1", (TopicPartitions(ORDERS, (0, 1)),)),
    ):
        assert through_bytes(record) == [], record


def test_a_resolved_regular_expression_derives_its_topics() -> None:
    record = ConsumerGroupRegularExpression(GROUP, "pay.*", ("payments", "payouts"), 3, 1_700_000_000_000)

    assert through_bytes(record) == [ConsumerGroupRegex(group=GROUP, regex="pay.*", topics=("payments", "payouts"))]


def test_a_member_assignment_holds_each_partition_once_and_an_empty_one_holds_none() -> None:
    overlap = current_assignment("m1", 3, {ORDERS: (2, 1)}, {ORDERS: (1,)})
    (event,) = derive(overlap)
    assert isinstance(event, ConsumerGroupMemberAssignment)
    assert [p.partition for p in event.partitions] == [1, 2]
    (empty,) = derive(current_assignment("m2", 3, {}))
    assert isinstance(empty, ConsumerGroupMemberAssignment) and empty.partitions == ()


# -- fold ----------------------------------------------------------------------


def test_fold_a_join_metadata_before_assignment() -> None:
    state = folded(
        events_of(
            member_metadata("m1"),
            ConsumerGroupMetadata(GROUP, 1),
            current_assignment("m1", 1, {ORDERS: (0, 1), PAYMENTS: (0,)}),
        )
    )

    assert state == ConsumerGroupState(
        group=GROUP,
        epoch=1,
        members={
            "m1": ConsumerGroupMemberState(
                client_id="client-m1",
                client_host="/10.0.0.2",
                topics=("orders", "payments"),
                server_assignor="uniform",
                member_epoch=1,
                partitions={str(ORDERS): (0, 1), str(PAYMENTS): (0,)},
            )
        },
    )


def test_fold_assignment_before_metadata_gives_the_same_member() -> None:
    metadata_first = folded(events_of(member_metadata("m1"), current_assignment("m1", 4, {ORDERS: (3,)})))
    assignment_first = folded(events_of(current_assignment("m1", 4, {ORDERS: (3,)}), member_metadata("m1")))

    assert assignment_first == metadata_first
    assert assignment_first is not None and assignment_first.members["m1"].partitions == {str(ORDERS): (3,)}


def test_a_member_without_metadata_is_kept_but_left_out_of_the_assignment() -> None:
    state = folded(events_of(ConsumerGroupMetadata(GROUP, 2), current_assignment("m2", 2, {ORDERS: (0,)})))

    assert state is not None
    assert state.members["m2"].client_id is None and state.members["m2"].member_epoch == 2
    assert assignment(state, {str(ORDERS): "orders"}) == GroupAssigned(
        group=GROUP, generation=2, protocol=None, leader=None, members=(), group_protocol="consumer"
    )


def test_new_metadata_keeps_the_assignment_and_a_new_assignment_keeps_the_metadata() -> None:
    state = folded(
        events_of(
            member_metadata("m1"),
            current_assignment("m1", 1, {ORDERS: (0, 1)}),
            member_metadata("m1", topics=("orders",), server_assignor="range"),
            current_assignment("m1", 2, {ORDERS: (1,)}, {ORDERS: (0,)}),
            current_assignment("m1", 3, {ORDERS: (1,)}),
        )
    )

    assert state is not None
    member = state.members["m1"]
    assert (member.topics, member.server_assignor) == (("orders",), "range")
    assert (member.member_epoch, member.partitions) == (3, {str(ORDERS): (1,)})


def test_epoch_updates_and_topics_are_replaced() -> None:
    state = folded(
        events_of(
            ConsumerGroupMetadata(GROUP, 1),
            partition_metadata((ORDERS, "orders", 6), (PAYMENTS, "payments", 2)),
            ConsumerGroupMetadata(GROUP, 2),
            partition_metadata((ORDERS, "orders", 12)),
        )
    )

    assert state is not None and state.epoch == 2
    assert state.topics == {str(ORDERS): TopicName(topic_id=str(ORDERS), topic="orders", partitions=12)}


def test_a_member_leaving_drops_it_with_its_partitions() -> None:
    joined = folded(
        events_of(
            member_metadata("m1"),
            current_assignment("m1", 1, {ORDERS: (0,)}),
            member_metadata("m2"),
            current_assignment("m2", 1, {ORDERS: (1,)}),
        )
    )
    # How Kafka writes a leave: current and target assignment tombstones, the member tombstone, a new epoch.
    left = folded(
        events_of(
            ConsumerGroupCurrentMemberAssignmentTombstone(GROUP, "m1"),
            ConsumerGroupTargetAssignmentMemberTombstone(GROUP, "m1"),
            ConsumerGroupMemberMetadataTombstone(GROUP, "m1"),
            ConsumerGroupMetadata(GROUP, 2),
        ),
        joined,
    )

    assert left is not None and list(left.members) == ["m2"] and left.epoch == 2
    assert fold(left, ConsumerGroupMemberLeft(group=GROUP, member_id="gone")) is left
    assert fold(None, ConsumerGroupMemberLeft(group=GROUP, member_id="m1")) is None


def test_group_deleted_ends_the_state_and_other_events_leave_it_alone() -> None:
    state = folded(events_of(ConsumerGroupMetadata(GROUP, 5), member_metadata("m1")))
    commit = OffsetCommitted(group=GROUP, topic="orders", partition=0, offset=9, commit_timestamp=1)

    assert fold(state, commit) is state
    assert fold(None, commit) is None
    deletion = events_of(ConsumerGroupMemberMetadataTombstone(GROUP, "m1"), ConsumerGroupMetadataTombstone(GROUP))
    assert folded(deletion, state) is None
    assert fold(state, GroupDeleted(group=GROUP)) is None


def test_an_event_of_another_group_is_refused() -> None:
    state = fold(None, ConsumerGroupEpoch(group=GROUP, epoch=1))

    with pytest.raises(ValueError, match="'audit'"):
        fold(state, ConsumerGroupEpoch(group="audit", epoch=1))


def test_state_round_trips_through_json() -> None:
    state = folded(
        events_of(
            ConsumerGroupMetadata(GROUP, 3),
            partition_metadata((ORDERS, "orders", 6)),
            current_assignment("m2", 3, {PAYMENTS: (0,)}),
            member_metadata("m1")._replace(instance_id="pod-1", subscribed_topic_regex="pay.*"),
            current_assignment("m1", 3, {ORDERS: (5, 0)}, {PAYMENTS: (1,)}),
        )
    )

    assert state is not None
    assert ConsumerGroupState.model_validate_json(state.model_dump_json()) == state
    assert ConsumerGroupState.model_validate_json(ConsumerGroupState(group=GROUP).model_dump_json()).members == {}


# -- assignment ------------------------------------------------------------------


def two_members(assignor_of_m2: str | None = "uniform") -> ConsumerGroupState:
    state = folded(
        events_of(
            member_metadata("m2", server_assignor=assignor_of_m2),
            member_metadata("m1"),
            ConsumerGroupMetadata(GROUP, 9),
            current_assignment("m2", 9, {PAYMENTS: (1,), ORDERS: (2,)}),
            current_assignment("m1", 9, {ORDERS: (1, 0)}, {PAYMENTS: (0,)}),
        )
    )
    assert state is not None
    return state


def test_assignment_names_topics_from_the_groups_topics_then_the_resolver() -> None:
    state = folded(events_of(partition_metadata((ORDERS, "orders", 3))), two_members())
    assert state is not None

    assert assignment(state, {str(PAYMENTS): "payments", str(ORDERS): "not-this-name"}) == GroupAssigned(
        group=GROUP,
        generation=9,
        protocol="uniform",
        leader=None,
        members=(
            MemberAssignment(
                member_id="m1",
                client_id="client-m1",
                client_host="/10.0.0.2",
                topics=("orders", "payments"),
                partitions=(
                    PartitionRef(topic="orders", partition=0),
                    PartitionRef(topic="orders", partition=1),
                    PartitionRef(topic="payments", partition=0),
                ),
            ),
            MemberAssignment(
                member_id="m2",
                client_id="client-m2",
                client_host="/10.0.0.2",
                topics=("orders", "payments"),
                partitions=(PartitionRef(topic="orders", partition=2), PartitionRef(topic="payments", partition=1)),
            ),
        ),
        group_protocol="consumer",
    )


def test_assignment_is_none_while_a_topic_id_has_no_name() -> None:
    state = two_members()

    assert assignment(state) is None
    assert assignment(state, {str(ORDERS): "orders"}) is None
    resolved = assignment(state, {str(ORDERS): "orders", str(PAYMENTS): "payments"})
    assert resolved is not None and [len(m.partitions) for m in resolved.members] == [3, 2]


def test_protocol_is_the_assignor_members_agree_on_else_none() -> None:
    names = {str(ORDERS): "orders", str(PAYMENTS): "payments"}

    def protocol(state: ConsumerGroupState) -> str | None:
        assigned = assignment(state, names)
        assert assigned is not None
        return assigned.protocol

    assert protocol(two_members("uniform")) == "uniform"
    assert protocol(two_members("range")) is None
    assert protocol(two_members(None)) is None


def test_the_assignor_the_broker_selected_is_the_protocol_whatever_members_asked() -> None:
    """ConsumerGroupDescribe (the admin-api source) says which assignor the broker selected: it is the
    group's protocol even where members asked for different ones, or for the broker's default."""
    names = {str(ORDERS): "orders", str(PAYMENTS): "payments"}
    selected = ConsumerGroupTargetAssignment(group=GROUP, assignment_epoch=8, assignor="uniform")

    for asked in ("range", None):
        state = fold(two_members(asked), selected)
        assert state is not None and (state.assignment_epoch, state.assignor) == (8, "uniform")
        assigned = assignment(state, names)
        assert assigned is not None and assigned.protocol == "uniform"
    unnamed = fold(two_members("range"), selected.model_copy(update={"assignor": None}))
    assert unnamed is not None and (assigned := assignment(unnamed, names)) is not None and assigned.protocol is None
    # It starts a state, as any event that sets something does.
    assert folded([selected]) == ConsumerGroupState(group=GROUP, assignment_epoch=8, assignor="uniform")


def test_a_target_assignment_naming_its_members_drops_the_others() -> None:
    state = fold(two_members(), ConsumerGroupTargetAssignment(group=GROUP, assignment_epoch=9, members=("m2",)))
    assert state is not None and list(state.members) == ["m2"]
    unnamed = fold(two_members(), ConsumerGroupTargetAssignment(group=GROUP, assignment_epoch=9))
    assert unnamed is not None and sorted(unnamed.members) == ["m1", "m2"]


def test_a_members_rack_is_derived_and_kept() -> None:
    racked = member_metadata("m1")._replace(rack_id="eu-west-1c")
    (event,) = through_bytes(racked)
    assert isinstance(event, ConsumerGroupMember) and event.rack == "eu-west-1c"
    state = folded([event])
    assert state is not None and state.members["m1"].rack == "eu-west-1c"
    # A record of the event before it had a rack reads as None.
    older = {k: v for k, v in event.model_dump(mode="json").items() if k != "rack"}
    assert ConsumerGroupMember.model_validate(older).rack is None


def regex_member(member_id: str, topics: tuple[str, ...], regex: str) -> ConsumerGroupMemberMetadata:
    return member_metadata(member_id, topics=topics)._replace(subscribed_topic_regex=regex)


def test_a_member_subscribed_by_regex_subscribes_to_the_topics_it_matched() -> None:
    names = {str(ORDERS): "orders", str(PAYMENTS): "payments"}
    state = folded(
        events_of(
            regex_member("m1", (), "pay.*"),
            regex_member("m2", ("orders",), "pay.*|orders"),
            current_assignment("m1", 2, {PAYMENTS: (0,)}),
            current_assignment("m2", 2, {ORDERS: (0,)}),
        )
    )
    assert state is not None

    def topics(state: ConsumerGroupState | None) -> list[tuple[str, ...]]:
        assert state is not None
        assigned = assignment(state, names)
        assert assigned is not None
        return [member.topics for member in assigned.members]

    assert topics(state) == [(), ("orders",)]  # not resolved yet: only the names each member gave
    resolved = folded(
        events_of(
            ConsumerGroupRegularExpression(GROUP, "pay.*", ("payments", "payouts"), 3, 1),
            ConsumerGroupRegularExpression(GROUP, "pay.*|orders", ("orders", "payments", "payouts"), 3, 1),
        ),
        state,
    )
    assert topics(resolved) == [("payments", "payouts"), ("orders", "payments", "payouts")]
    rematched = folded(events_of(ConsumerGroupRegularExpression(GROUP, "pay.*", ("payments",), 4, 2)), resolved)
    assert topics(rematched)[0] == ("payments",)
    forgotten = folded(events_of(ConsumerGroupRegularExpressionTombstone(GROUP, "pay.*")), rematched)
    assert forgotten is not None and list(forgotten.regexes) == ["pay.*|orders"]
    assert topics(forgotten)[0] == ()
    assert ConsumerGroupState.model_validate_json(resolved.model_dump_json()) == resolved  # type: ignore[union-attr]


def test_a_regex_resolved_before_any_member_starts_the_state_and_a_deletion_never_does() -> None:
    state = fold(None, ConsumerGroupRegex(group=GROUP, regex="pay.*", topics=("payments",)))

    assert state == ConsumerGroupState(group=GROUP, regexes={"pay.*": ("payments",)})
    assert fold(None, ConsumerGroupRegexDeleted(group=GROUP, regex="pay.*")) is None
    assert fold(state, ConsumerGroupRegexDeleted(group=GROUP, regex="other")) is state


def test_assignment_of_a_group_without_members_or_epoch() -> None:
    assert assignment(ConsumerGroupState(group=GROUP)) == GroupAssigned(
        group=GROUP, generation=-1, protocol=None, leader=None, members=(), group_protocol="consumer"
    )


def test_kip848_events_travel_on_the_derived_events_topic() -> None:
    events = events_of(
        ConsumerGroupMetadata(GROUP, 1),
        partition_metadata((ORDERS, "orders", 1)),
        member_metadata("m1"),
        current_assignment("m1", 1, {ORDERS: (0,)}),
        ConsumerGroupMemberMetadataTombstone(GROUP, "m1"),
        ConsumerGroupMetadataTombstone(GROUP),
    )

    (record,) = by_group(events)
    assert decode_record(encode_events(record)) == [record]
    assert [event.kind for event in record.events] == [
        "consumer-group-epoch",
        "consumer-group-topics",
        "consumer-group-member",
        "consumer-group-member-assignment",
        "consumer-group-member-left",
        "group-deleted",
    ]
