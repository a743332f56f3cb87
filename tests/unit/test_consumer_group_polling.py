"""`kagent.core.group_polling` for groups on the consumer protocol (KIP-848): what ConsumerGroupDescribe
answered -> the same derived events, group state, assignment and API records as the offsets-topic source's.

Answers are ConsumerGroupDescribe responses as bytes laid out by hand from
Kafka's message definitions (``tests/support/consumer_group_describe_bytes.py``),
decoded with kagent's declaration, so the whole path from the wire to what
the API shows is checked here without a broker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from io import BytesIO
from uuid import UUID

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core.api_records import ConsumerGroupMemberView, ConsumerGroupView, consumer_group_view, summarize
from kagent.core.consumer_group_describe import (
    ConsumerGroupDescribeResponse_v0,
    ConsumerGroupDescribeResponse_v1,
    DescribedConsumerGroup,
    described_consumer_groups,
)
from kagent.core.consumer_group_state import ConsumerGroupState, assignment, fold
from kagent.core.events import (
    ConsumerGroupEpoch,
    ConsumerGroupMember,
    ConsumerGroupMemberAssignment,
    ConsumerGroupMemberLeft,
    ConsumerGroupTargetAssignment,
    ConsumerGroupTopics,
    DerivedEvent,
    GroupAssigned,
    GroupDeleted,
    MemberAssignment,
    OffsetCommitted,
    OffsetDeleted,
    PartitionRef,
    TopicIdPartition,
    TopicName,
    by_group,
    decode_record,
    encode_events,
)
from kagent.core.group_health import GroupStatus
from kagent.core.group_polling import (
    DescribedGroup,
    FetchedOffsets,
    GroupAnswers,
    GroupView,
    consumer_group_events,
    poll,
)
from kagent.core.list_groups import ListedGroup
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import propose
from kagent.core.snapshot import GroupSnapshot, PartitionLag
from kagent.settings import Settings
from tests.support.consumer_group_describe_bytes import Group, Member, Topic, response_body

T0 = 1_700_000_000_000
GROUP = "checkout"
ORDERS = UUID("6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7")
PAYMENTS = UUID("0a9b8c7d-6e5f-4a3b-9c2d-1e0f2a3b4c5d")
COUNTS = {"orders": 6, "payments": 2}
KIP848 = ListedGroup("consumer", "consumer")


def member(
    member_id: str,
    epoch: int,
    orders: Sequence[int],
    payments: Sequence[int] = (),
    rack: str | None = None,
    instance_id: str | None = None,
) -> Member:
    held = [Topic(ORDERS, "orders", tuple(orders))]
    if payments:
        held.append(Topic(PAYMENTS, "payments", tuple(payments)))
    return Member(
        member_id,
        member_epoch=epoch,
        client_id=f"client-{member_id}",
        client_host=f"/10.0.0.{len(member_id)}",
        subscribed_topic_names=("orders", "payments"),
        assignment=tuple(held),
        target_assignment=tuple(held),
        rack_id=rack,
        instance_id=instance_id,
    )


def wire(group: Group, version: int = 1) -> DescribedConsumerGroup:
    """``group`` as kagent reads it from the bytes of a ConsumerGroupDescribe answer of ``version``."""
    response_type = (ConsumerGroupDescribeResponse_v0, ConsumerGroupDescribeResponse_v1)[version]
    described, errors = described_consumer_groups([response_type.decode(BytesIO(response_body([group], version)))])
    assert not errors
    return described[group.group_id]


FIRST = Group(
    GROUP,
    state="Stable",
    group_epoch=5,
    assignment_epoch=5,
    assignor="range",
    members=(
        member("m-b", 5, [3, 4, 5], [1], rack="eu-west-1b"),
        member("m-a", 5, [0, 1, 2], [0], rack="eu-west-1a", instance_id="checkout-pod-0"),
    ),
)


def answers(
    described: Mapping[str, DescribedConsumerGroup] | None = None,
    committed: Mapping[int, int] | None = None,
    polled_at: int = T0,
    listed: ListedGroup = KIP848,
    classic: Mapping[str, DescribedGroup] | None = None,
) -> GroupAnswers:
    return GroupAnswers(
        polled_at=polled_at,
        listed={GROUP: listed},
        described=dict(classic or {}),
        consumer_described=dict(described or {}),
        committed={}
        if committed is None
        else {GROUP: FetchedOffsets({TopicPartition("orders", p): o for p, o in committed.items()})},
        partition_counts=COUNTS,
    )


def folded(events: Iterable[DerivedEvent], state: ConsumerGroupState | None = None) -> ConsumerGroupState | None:
    return reduce(fold, events, state)


def test_a_described_group_becomes_the_events_the_offsets_topic_source_derives() -> None:
    view, events, malformed, rejected = poll({}, answers({GROUP: wire(FIRST)}, {0: 10, 3: 20}))

    assert not malformed and not rejected
    assert events == [
        ConsumerGroupEpoch(group=GROUP, epoch=5),
        ConsumerGroupTopics(
            group=GROUP,
            topics=(
                TopicName(topic_id=str(PAYMENTS), topic="payments", partitions=2),  # by topic id
                TopicName(topic_id=str(ORDERS), topic="orders", partitions=6),
            ),
        ),
        ConsumerGroupMember(
            group=GROUP,
            member_id="m-a",
            group_instance_id="checkout-pod-0",
            client_id="client-m-a",
            client_host="/10.0.0.3",
            topics=("orders", "payments"),
            rack="eu-west-1a",
        ),
        ConsumerGroupMemberAssignment(
            group=GROUP,
            member_id="m-a",
            member_epoch=5,
            partitions=(
                TopicIdPartition(topic_id=str(PAYMENTS), partition=0),
                *(TopicIdPartition(topic_id=str(ORDERS), partition=p) for p in (0, 1, 2)),
            ),
        ),
        ConsumerGroupMember(
            group=GROUP,
            member_id="m-b",
            client_id="client-m-b",
            client_host="/10.0.0.3",
            topics=("orders", "payments"),
            rack="eu-west-1b",
        ),
        ConsumerGroupMemberAssignment(
            group=GROUP,
            member_id="m-b",
            member_epoch=5,
            partitions=(
                TopicIdPartition(topic_id=str(PAYMENTS), partition=1),
                *(TopicIdPartition(topic_id=str(ORDERS), partition=p) for p in (3, 4, 5)),
            ),
        ),
        ConsumerGroupTargetAssignment(group=GROUP, assignment_epoch=5, assignor="range", members=("m-a", "m-b")),
        OffsetCommitted(group=GROUP, topic="orders", partition=0, offset=10, commit_timestamp=T0),
        OffsetCommitted(group=GROUP, topic="orders", partition=3, offset=20, commit_timestamp=T0),
    ]
    # The view holds the state those events fold to, and they travel the derived-events topic unchanged.
    assert view[GROUP].consumer_group == folded(events)
    (record,) = decode_record(b"[" + b",".join(encode_events(group) for group in by_group(events)) + b"]")
    assert record.expanded() == events
    # An unchanged group polled again: no events, the same view.
    assert poll(view, answers({GROUP: wire(FIRST)}, {0: 10, 3: 20}, polled_at=T0 + 5000)) == (view, [], [], [])


def test_storage_folds_them_into_the_assignment_the_api_shows_with_epochs_racks_and_the_assignor() -> None:
    _, events, *_ = poll({}, answers({GROUP: wire(FIRST)}))
    state = folded(events)
    assert state is not None

    assigned = assignment(state)  # every topic id named by the answer: no metadata needed
    assert assigned == GroupAssigned(
        group=GROUP,
        generation=5,  # the group epoch
        protocol="range",  # the server assignor the broker selected
        leader=None,
        members=(
            MemberAssignment(
                member_id="m-a",
                group_instance_id="checkout-pod-0",
                client_id="client-m-a",
                client_host="/10.0.0.3",
                topics=("orders", "payments"),
                partitions=(
                    *(PartitionRef(topic="orders", partition=p) for p in (0, 1, 2)),
                    PartitionRef(topic="payments", partition=0),
                ),
            ),
            MemberAssignment(
                member_id="m-b",
                client_id="client-m-b",
                client_host="/10.0.0.3",
                topics=("orders", "payments"),
                partitions=(
                    *(PartitionRef(topic="orders", partition=p) for p in (3, 4, 5)),
                    PartitionRef(topic="payments", partition=1),
                ),
            ),
        ),
        group_protocol="consumer",
    )
    assert consumer_group_view(state) == ConsumerGroupView(
        group_epoch=5,
        assignment_epoch=5,
        assignor="range",
        members=(
            ConsumerGroupMemberView(
                member_id="m-a",
                member_epoch=5,
                group_instance_id="checkout-pod-0",
                client_id="client-m-a",
                client_host="/10.0.0.3",
                rack="eu-west-1a",
                subscribed_topics=("orders", "payments"),
                subscribed_topic_regex=None,
                server_assignor=None,
            ),
            ConsumerGroupMemberView(
                member_id="m-b",
                member_epoch=5,
                group_instance_id=None,
                client_id="client-m-b",
                client_host="/10.0.0.3",
                rack="eu-west-1b",
                subscribed_topics=("orders", "payments"),
                subscribed_topic_regex=None,
                server_assignor=None,
            ),
        ),
    )


def lag_of(assigned: GroupAssigned, lags: Mapping[tuple[str, int], int]) -> GroupSnapshot:
    lag = {
        TopicPartition(topic, p): PartitionLag(
            group=GROUP,
            topic=topic,
            partition=p,
            committed=0,
            log_start=0,
            log_end=n,
            offset_lag=n,
            time_lag=None,
            polled_at=0.0,
        )
        for (topic, p), n in lags.items()
    }
    return GroupSnapshot(assignment=assigned, partition_counts=COUNTS, lag=lag, taken_at=0.0)


def test_the_server_assignor_advice_names_the_assignor_the_broker_uses_and_the_one_that_fits() -> None:
    """Members hold interleaved partitions (uniform keeps them so): ``m-a`` orders 0 and 2, ``m-b`` 1 and 3,
    ``m-c`` 4 and 5, and 0 and 1 lag. Range's consecutive split gives the two hot ones to one member."""
    group = dataclasses.replace(
        FIRST,
        assignor="uniform",
        members=(member("m-a", 5, [0, 2]), member("m-b", 5, [1, 3]), member("m-c", 5, [4, 5])),
    )
    _, events, *_ = poll({}, answers({GROUP: wire(group)}))
    state = folded(events)
    assert state is not None
    assigned = assignment(state)
    assert assigned is not None
    hot = {("orders", 0): 1000, ("orders", 2): 1000} | {("orders", p): 10 for p in (1, 3, 4, 5)}

    proposal = propose(lag_of(assigned, hot), Settings(min_total_lag=0).evaluation_policy)

    advice = proposal.server_assignor_advice()
    assert (advice.current, advice.recommended) == ("uniform", "range")
    assert advice.largest_lag == {"uniform": 2000.0, "range": 1010.0}
    recommendation = proposal.recommendation(1.5, 3, 0.0)
    assert recommendation.client_side is False and recommendation.server_assignor == advice


def test_a_change_sends_only_what_changed_and_a_member_gone_leaves_first() -> None:
    view, first, *_ = poll({}, answers({GROUP: wire(FIRST)}))
    later = dataclasses.replace(
        FIRST,
        group_epoch=6,
        assignment_epoch=6,
        members=(member("m-a", 6, [0, 1, 2, 3, 4, 5], [0, 1], rack="eu-west-1a", instance_id="checkout-pod-0"),),
    )

    next_view, events, _, rejected = poll(view, answers({GROUP: wire(later)}))

    assert not rejected
    assert events == [
        ConsumerGroupMemberLeft(group=GROUP, member_id="m-b"),
        ConsumerGroupEpoch(group=GROUP, epoch=6),
        ConsumerGroupMemberAssignment(
            group=GROUP,
            member_id="m-a",
            member_epoch=6,
            partitions=(
                *(TopicIdPartition(topic_id=str(PAYMENTS), partition=p) for p in (0, 1)),
                *(TopicIdPartition(topic_id=str(ORDERS), partition=p) for p in range(6)),
            ),
        ),
        ConsumerGroupTargetAssignment(group=GROUP, assignment_epoch=6, assignor="range", members=("m-a",)),
    ]
    assert (
        folded(events, folded(first))
        == next_view[GROUP].consumer_group
        == folded(poll({}, answers({GROUP: wire(later)}))[1])
    )


_MEMBER_IDS = st.sampled_from(["m-a", "m-b", "m-c", "m-d"])
_DESCRIBED = st.builds(
    lambda epoch, target, assignor, members: Group(
        GROUP, group_epoch=epoch, assignment_epoch=target, assignor=assignor, members=tuple(members.values())
    ),
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from(["uniform", "range", ""]),
    st.dictionaries(
        _MEMBER_IDS,
        st.builds(
            lambda epoch, orders, payments, rack: (epoch, sorted(orders), sorted(payments), rack),
            st.integers(-2, 3),
            st.sets(st.integers(0, 5), max_size=3),
            st.sets(st.integers(0, 1), max_size=2),
            st.sampled_from([None, "r1", "r2"]),
        ),
        max_size=3,
    ).map(lambda held: {m: member(m, e, o, p, rack=r) for m, (e, o, p, r) in held.items()}),
)


@settings(max_examples=150)
@given(st.lists(_DESCRIBED, min_size=1, max_size=4))
def test_folding_the_events_of_each_poll_over_the_last_state_gives_the_state_described(answers_: list[Group]) -> None:
    """Whatever the answers in turn, the events sent make storage's state what the last answer says, and
    an answer seen again sends nothing."""
    stored: ConsumerGroupState | None = None
    for group in answers_:
        state, events = consumer_group_events(stored, wire(group), COUNTS)
        stored = folded(events, stored)
        assert stored == state == consumer_group_events(None, wire(group), COUNTS)[0]
        assert consumer_group_events(stored, wire(group), COUNTS)[1] == []


@settings(max_examples=150)
@given(_DESCRIBED, _DESCRIBED)
def test_a_group_described_afresh_replaces_whatever_storage_kept(earlier: Group, now: Group) -> None:
    """A restarted source (or a new leader) has no view: it sends a group's events as if new, and storage
    holds the state of an earlier answer, with members that left unseen. Folded over it, they still give
    the state the answer says: the target assignment's member ids drop the others."""
    stored = consumer_group_events(None, wire(earlier), COUNTS)[0]
    state, events = consumer_group_events(None, wire(now), COUNTS)
    assert folded(events, stored) == state


def test_a_v0_answer_maps_as_a_v1_answer() -> None:
    assert consumer_group_events(None, wire(FIRST, 0), COUNTS) == consumer_group_events(None, wire(FIRST, 1), COUNTS)


def test_a_topic_the_metadata_lacks_is_left_unnamed_for_storage_to_name() -> None:
    state, _ = consumer_group_events(None, wire(FIRST), {"orders": 6})
    assert [t.topic for t in state.topics.values()] == ["orders"]
    assert assignment(state) is None  # storage asks the cluster's Metadata v12 for the payments id
    assert assignment(state, {str(PAYMENTS): "payments"}) is not None


def test_tansus_answer_breaks_the_epoch_rule_and_leaves_the_members_unknown() -> None:
    """What Tansu 0.6 answers ConsumerGroupDescribe v0 for a group (measured): no error, ``Stable``, group
    and assignment epochs -1, no members, and a member id of a classic member in AssignorName. Kafka never
    writes a negative group epoch: the answer is rejected, nothing of it is sent, and the group, never
    described, has no assignment (its members unknown), while its commits are reported."""
    tansu = Group(
        GROUP, state="Stable", group_epoch=-1, assignment_epoch=-1, assignor="aiokafka-0.14.0-c4d5fcbc", members=()
    )
    view, events, _, rejected = poll({}, answers({GROUP: wire(tansu, 0)}, {0: 4}))

    assert [(r.api, r.group, str(r.error)) for r in rejected] == [
        (
            "ConsumerGroupDescribe",
            GROUP,
            "ConsumerGroupMetadata breaks epoch-negative: epoch = -1 (a group epoch is >= 0)",
        )
    ]
    assert events == [OffsetCommitted(group=GROUP, topic="orders", partition=0, offset=4, commit_timestamp=T0)]
    assert view[GROUP] == GroupView(committed={TopicPartition("orders", 0): 4})


@pytest.mark.parametrize(
    ("broken", "rule"),
    [
        (dataclasses.replace(FIRST, assignment_epoch=-1), "epoch-negative"),
        (dataclasses.replace(FIRST, members=(member("m-a", -3, [0]),)), "epoch-negative"),
        (dataclasses.replace(FIRST, members=(member("m-a", 5, [-1]),)), "partition-negative"),
        (dataclasses.replace(FIRST, members=(member("", 5, [0]),)), "id-empty"),
        (dataclasses.replace(FIRST, members=(member("m-a", 5, [0]), member("m-a", 5, [1]))), "duplicate-member"),
        (dataclasses.replace(FIRST, assignor="x" * 40_000), "string-too-long"),
        (
            dataclasses.replace(FIRST, members=(dataclasses.replace(member("m-a", 5, [0]), rack_id="r" * 40_000),)),
            "string-too-long",
        ),
    ],
    ids=["assignment-epoch", "member-epoch", "partition", "member-id", "duplicate", "assignor", "rack"],
)
def test_an_answer_that_breaks_a_rule_is_skipped_whole_and_what_was_seen_stands(broken: Group, rule: str) -> None:
    view, *_ = poll({}, answers({GROUP: wire(FIRST)}))

    next_view, events, _, rejected = poll(view, answers({GROUP: wire(broken)}, {0: 7}))

    assert [(r.api, r.error.rule) for r in rejected] == [("ConsumerGroupDescribe", rule)]
    assert events == [OffsetCommitted(group=GROUP, topic="orders", partition=0, offset=7, commit_timestamp=T0)]
    assert next_view[GROUP].consumer_group == view[GROUP].consumer_group


def test_a_group_of_the_empty_id_is_not_described_but_its_commits_are_reported() -> None:
    """KIP-848 requires a group id (``GroupId can't be empty.``); Kafka allows commits of the empty one."""
    nameless = GroupAnswers(
        polled_at=T0,
        listed={"": KIP848},
        consumer_described={"": wire(dataclasses.replace(FIRST, group_id=""))},
        committed={"": FetchedOffsets({TopicPartition("orders", 0): 1})},
        partition_counts=COUNTS,
    )
    _, events, _, rejected = poll({}, nameless)

    assert [(r.api, r.error.rule) for r in rejected] == [("ConsumerGroupDescribe", "id-empty")]
    assert events == [OffsetCommitted(group="", topic="orders", partition=0, offset=1, commit_timestamp=T0)]


def test_not_answered_changes_nothing_and_a_group_never_described_has_no_assignment() -> None:
    """ConsumerGroupDescribe failed (UNSUPPORTED_VERSION, a broker without the API...): the group's
    DescribeGroups answer (Kafka's ``Dead`` for such a group) is not its end, nothing is sent but its
    commits, and a group described before keeps its state."""
    dead = DescribedGroup(group=GROUP, state="Dead", protocol_type="", protocol="")
    view, events, _, rejected = poll({}, answers(committed={0: 4, 1: 9}, classic={GROUP: dead}))

    assert not rejected
    assert events == [
        OffsetCommitted(group=GROUP, topic="orders", partition=0, offset=4, commit_timestamp=T0),
        OffsetCommitted(group=GROUP, topic="orders", partition=1, offset=9, commit_timestamp=T0),
    ]
    assert view[GROUP].consumer_group is None and view[GROUP].assignment is None

    described, *_ = poll({}, answers({GROUP: wire(FIRST)}))
    assert poll(described, answers(classic={GROUP: dead})) == (described, [], [], [])


def test_a_group_described_dead_or_no_longer_listed_is_deleted() -> None:
    view, *_ = poll({}, answers({GROUP: wire(FIRST)}, {0: 10}))
    dead = wire(dataclasses.replace(FIRST, state="Dead", members=()))

    for gone in (answers({GROUP: dead}), GroupAnswers(polled_at=T0, listed={})):
        next_view, events, *_ = poll(view, gone)
        assert events == [
            OffsetDeleted(group=GROUP, topic="orders", partition=0),
            GroupDeleted(group=GROUP),
        ]
        assert next_view == {}


def test_a_classic_group_moving_to_the_consumer_protocol_is_described_by_the_new_api() -> None:
    classic = DescribedGroup(group=GROUP, state="Stable", protocol_type="consumer", protocol="range")
    view, events, *_ = poll({}, answers(listed=ListedGroup("consumer", "classic"), classic={GROUP: classic}))
    assert [e.kind for e in events] == ["group-assigned"]

    _, events, *_ = poll(view, answers({GROUP: wire(FIRST)}, classic={GROUP: classic}))

    assert events[0] == ConsumerGroupEpoch(group=GROUP, epoch=5)
    assert not [e for e in events if isinstance(e, GroupAssigned)]


def test_an_undescribed_group_is_summarized_with_its_members_unknown_not_none() -> None:
    empty = GroupAssigned(group=GROUP, generation=-1, protocol=None, leader=None)
    snapshot = GroupSnapshot(assignment=empty, partition_counts={}, lag={}, taken_at=0.0, described=False)

    summary = summarize(
        snapshot,
        status=GroupStatus.UNKNOWN,
        skew=None,
        skew_metric=SkewMetric.PEAK_TO_MEAN,
        lag_unit=LagUnit.MESSAGES,
        min_total_lag=0,
        state=None,
        incidents=(),
        worker="w",
    )

    assert (summary.state, summary.members, summary.generation) == ("Unknown", None, None)
    described = summarize(
        dataclasses.replace(snapshot, described=True),
        status=GroupStatus.OK,
        skew=None,
        skew_metric=SkewMetric.PEAK_TO_MEAN,
        lag_unit=LagUnit.MESSAGES,
        min_total_lag=0,
        state=None,
        incidents=(),
        worker="w",
    )
    assert (described.state, described.members) == ("Empty", 0)
