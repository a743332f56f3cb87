"""`kagent.core.group_polling`: what the group APIs answered -> the derived events of what changed.

Member blobs are real consumer-protocol bytes (kagent's encoder, checked
against Kafka's own definitions elsewhere); DescribeGroups and OffsetFetch
answers are aiokafka's real response structs, encoded to wire bytes and
decoded back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from aiokafka.protocol.admin import (
    DescribeGroupsResponse_v0,
    DescribeGroupsResponse_v1,
    DescribeGroupsResponse_v2,
    DescribeGroupsResponse_v3,
)
from aiokafka.protocol.commit import OffsetFetchResponse_v1, OffsetFetchResponse_v2, OffsetFetchResponse_v3
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    Assignment,
    GroupMember,
    GroupMetadata,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from kagent.core.events import (
    DerivedEvents,
    GroupAssigned,
    GroupDeleted,
    OffsetCommitted,
    OffsetDeleted,
    PartitionRef,
    decode_record,
    derive,
    encode_events,
)
from kagent.core.group_polling import (
    UNKNOWN_GENERATION,
    DescribedGroup,
    DescribedMember,
    FetchedOffsets,
    GroupAnswers,
    GroupError,
    GroupView,
    MalformedMetadata,
    described_groups,
    fetched_offsets,
    group_assigned,
    poll,
    tracked_groups,
)
from kagent.core.list_groups import ListedGroup
from kagent.core.recommendation import propose
from kagent.core.snapshot import GroupSnapshot, PartitionLag
from kagent.settings import Settings

T0 = 1_700_000_000_000
TOPIC = "orders"


def member(
    member_id: str, partitions: Sequence[int], topics: Sequence[str] = (TOPIC,), version: int = 3
) -> DescribedMember:
    """A member whose blobs are what a Java consumer sends (subscription and assignment v``version``)."""
    owned = () if version >= 1 else None
    subscription = Subscription(version, tuple(topics), None, owned, -1 if version >= 2 else None)
    assignment = Assignment(version, tuple(TopicPartition(TOPIC, p) for p in partitions))
    return DescribedMember(
        member_id=member_id,
        client_id=member_id.rsplit("-", 1)[0],
        client_host="/10.0.0.7",
        member_metadata=encode_subscription(subscription),
        member_assignment=encode_assignment(assignment),
    )


def described(
    group: str, members: Sequence[DescribedMember], state: str = "Stable", protocol: str = "range"
) -> DescribedGroup:
    return DescribedGroup(group=group, state=state, protocol_type="consumer", protocol=protocol, members=tuple(members))


def offsets(committed: Mapping[int, int]) -> dict[TopicPartition, int]:
    return {TopicPartition(TOPIC, p): offset for p, offset in committed.items()}


def answers(
    groups: Mapping[str, DescribedGroup],
    committed: Mapping[str, Mapping[int, int]],
    polled_at: int = T0,
    listed: Mapping[str, str | ListedGroup] | None = None,
    failed: Mapping[str, Mapping[int, int]] | None = None,
) -> GroupAnswers:
    """One poll's answers; ``listed`` gives protocol types (or whole ListGroups answers), ``failed`` the
    partitions OffsetFetch answered with an error code."""
    if listed is None:
        listed = dict.fromkeys(groups.keys() | committed.keys(), "consumer")
    failed = failed or {}
    return GroupAnswers(
        polled_at=polled_at,
        listed={g: ListedGroup(a, "classic") if isinstance(a, str) else a for g, a in listed.items()},
        described=dict(groups),
        committed={group: FetchedOffsets(offsets(c), offsets(failed.get(group, {}))) for group, c in committed.items()},
    )


STABLE = answers(
    {"billing": described("billing", [member("billing-1-b", [2, 3]), member("billing-0-a", [0, 1])])},
    {"billing": {0: 10, 1: 20, 2: 30, 3: 40}},
)


def test_a_first_poll_announces_the_group_and_every_committed_offset() -> None:
    view, events, malformed, rejected = poll({}, STABLE)

    assert not malformed and not rejected
    assigned = events[0]
    assert isinstance(assigned, GroupAssigned)
    assert (assigned.group, assigned.generation, assigned.protocol, assigned.leader) == (
        "billing",
        UNKNOWN_GENERATION,
        "range",
        None,
    )
    assert [m.member_id for m in assigned.members] == ["billing-0-a", "billing-1-b"]  # ordered by member id
    first = assigned.members[0]
    assert (first.client_id, first.client_host, first.topics) == ("billing-0", "/10.0.0.7", (TOPIC,))
    assert [(p.topic, p.partition) for p in first.partitions] == [(TOPIC, 0), (TOPIC, 1)]
    assert events[1:] == [
        OffsetCommitted(group="billing", topic=TOPIC, partition=p, offset=o, commit_timestamp=T0)
        for p, o in ((0, 10), (1, 20), (2, 30), (3, 40))
    ]
    assert view == {"billing": GroupView(assignment=assigned, committed=offsets({0: 10, 1: 20, 2: 30, 3: 40}))}


def test_polling_an_unchanged_group_again_yields_nothing_and_the_same_view() -> None:
    view, *_ = poll({}, STABLE)
    again = answers(
        {"billing": described("billing", [member("billing-0-a", [0, 1]), member("billing-1-b", [2, 3])])},
        {"billing": {0: 10, 1: 20, 2: 30, 3: 40}},
        polled_at=T0 + 5000,
    )
    assert poll(view, again) == (view, [], [], [])


def test_an_unchanged_group_keeps_its_recommendation_id_from_poll_to_poll() -> None:
    """The id hashes group, generation and proposal: the constant generation keeps it stable."""
    policy = Settings(min_total_lag=0).evaluation_policy

    def recommendation_id(assigned: GroupAssigned) -> str:
        lags = {0: 9000, 1: 9000, 2: 10, 3: 10}
        lag = {
            TopicPartition(TOPIC, p): PartitionLag(
                group="billing",
                topic=TOPIC,
                partition=p,
                committed=0,
                log_start=0,
                log_end=n,
                offset_lag=n,
                time_lag=None,
                polled_at=0.0,
            )
            for p, n in lags.items()
        }
        snapshot = GroupSnapshot(assignment=assigned, partition_counts={TOPIC: 4}, lag=lag, taken_at=0.0)
        return propose(snapshot, policy).id

    first = poll({}, STABLE).events[0]
    second = poll({}, answers(dict(STABLE.described), {}, polled_at=T0 + 60_000)).events[0]
    assert isinstance(first, GroupAssigned) and isinstance(second, GroupAssigned)
    assert recommendation_id(first) == recommendation_id(second)


def test_only_changed_offsets_are_sent_with_the_time_of_the_poll_that_saw_them() -> None:
    view, *_ = poll({}, STABLE)
    later = answers(dict(STABLE.described), {"billing": {0: 10, 1: 25, 2: 30}}, polled_at=T0 + 5000)
    view, events, *_ = poll(view, later)
    assert events == [
        OffsetDeleted(group="billing", topic=TOPIC, partition=3),
        OffsetCommitted(group="billing", topic=TOPIC, partition=1, offset=25, commit_timestamp=T0 + 5000),
    ]
    assert view["billing"].committed == offsets({0: 10, 1: 25, 2: 30})


def test_a_rebalance_to_other_members_sends_a_new_assignment() -> None:
    view, *_ = poll({}, STABLE)
    rebalanced = answers(
        {"billing": described("billing", [member("billing-0-a", [0, 1, 2, 3])], protocol="roundrobin")},
        {"billing": {0: 10, 1: 20, 2: 30, 3: 40}},
    )
    view, events, *_ = poll(view, rebalanced)
    assert len(events) == 1 and isinstance(events[0], GroupAssigned)
    assert events[0].protocol == "roundrobin"
    assert [(m.member_id, len(m.partitions)) for m in events[0].members] == [("billing-0-a", 4)]
    assert view["billing"].assignment == events[0]


@pytest.mark.parametrize("state", ["PreparingRebalance", "CompletingRebalance"])
def test_a_rebalancing_group_keeps_its_last_settled_assignment(state: str) -> None:
    view, *_ = poll({}, STABLE)
    joining = answers({"billing": described("billing", [member("billing-0-a", [])], state=state)}, {"billing": {0: 11}})
    next_view, events, *_ = poll(view, joining)
    assert next_view["billing"].assignment == view["billing"].assignment
    assert [type(e) for e in events] == [OffsetDeleted, OffsetDeleted, OffsetDeleted, OffsetCommitted]


def test_an_empty_group_is_announced_without_members() -> None:
    view, *_ = poll({}, STABLE)
    _, events, *_ = poll(view, answers({"billing": described("billing", [], state="Empty", protocol="")}, {}))
    assert events == [GroupAssigned(group="billing", generation=UNKNOWN_GENERATION, protocol=None, leader=None)]


@pytest.mark.parametrize(
    "gone",
    [
        answers({}, {}, listed={}),  # no longer listed
        answers({"billing": described("billing", [], state="Dead", protocol="")}, {}),
    ],
    ids=["unlisted", "dead"],
)
def test_a_group_that_is_gone_has_its_offsets_and_itself_deleted(gone: GroupAnswers) -> None:
    view, *_ = poll({}, STABLE)
    next_view, events, *_ = poll(view, gone)
    assert events == [OffsetDeleted(group="billing", topic=TOPIC, partition=p) for p in range(4)] + [
        GroupDeleted(group="billing")
    ]
    assert next_view == {}


def test_what_an_api_did_not_answer_stands() -> None:
    view, *_ = poll({}, STABLE)
    unanswered = GroupAnswers(polled_at=T0 + 5000, listed={"billing": ListedGroup("consumer", "classic")})
    assert poll(view, unanswered) == (view, [], [], [])


def test_groups_of_other_protocol_types_get_offsets_but_no_assignment() -> None:
    connect = DescribedGroup(
        group="connect-sink",
        state="Stable",
        protocol_type="connect",
        protocol="sessioned",
        members=(DescribedMember("worker-1", "connect-1", "/10.0.0.9", b"\x00\x01junk", b"\x00\x01junk"),),
    )
    _, events, malformed, _ = poll(
        {},
        answers(
            {"connect-sink": connect},
            {"connect-sink": {0: 5}, "legacy": {1: 7}},
            listed={"connect-sink": "connect", "legacy": ""},
        ),
    )
    assert not malformed
    assert events == [
        OffsetCommitted(group="connect-sink", topic=TOPIC, partition=0, offset=5, commit_timestamp=T0),
        OffsetCommitted(group="legacy", topic=TOPIC, partition=1, offset=7, commit_timestamp=T0),
    ]


def test_a_malformed_blob_is_reported_once_and_its_member_kept_without_it() -> None:
    broken = DescribedMember("billing-2-c", "billing-2", "/10.0.0.8", b"\x00\x00\x00\x05ab", b"\xff")
    group = described("billing", [member("billing-0-a", [0, 1]), broken])
    view, events, malformed, _ = poll({}, answers({"billing": group}, {}))
    parts = [(m.member_id, m.part) for m in malformed]
    assert parts == [("billing-2-c", "subscription"), ("billing-2-c", "assignment")]
    assert all(isinstance(m, MalformedMetadata) and "byte" in m.error for m in malformed)
    assigned = events[0]
    assert isinstance(assigned, GroupAssigned)
    # Its assignment is unknown (None), not empty: it must not read as a member holding nothing.
    assert [(m.member_id, m.topics, m.partitions) for m in assigned.members] == [
        ("billing-0-a", (TOPIC,), tuple(PartitionRef(topic=TOPIC, partition=p) for p in (0, 1))),
        ("billing-2-c", (), None),
    ]
    assert poll(view, answers({"billing": group}, {})) == (view, [], [], [])


def test_a_member_assigned_an_impossible_partition_loses_only_that_partition() -> None:
    """Issue 17: a group whose member's assignment names partition -1 made every poll raise
    pydantic's ValidationError, so no group's events were sent. The member subscribed to the topic, so
    the dropping rule of record_checks applies, as on the offsets-topic source: the partition is dropped."""
    bad = described("payments", [member("payments-0-a", [-1, 2]), member("payments-1-b", [3])])
    view, events, malformed, rejected = poll(
        {}, answers({"billing": STABLE.described["billing"], "payments": bad}, {"billing": {0: 10}})
    )

    assert not malformed and not rejected
    by_group = {e.group: e for e in events if isinstance(e, GroupAssigned)}
    assert [(m.member_id, m.partitions) for m in by_group["payments"].members] == [
        ("payments-0-a", (PartitionRef(topic=TOPIC, partition=2),)),
        ("payments-1-b", (PartitionRef(topic=TOPIC, partition=3),)),
    ]
    assert by_group["billing"] == poll({}, STABLE).events[0]
    assert view["billing"].committed == offsets({0: 10})


def test_an_impossible_partition_of_a_member_whose_subscription_is_unknown_rejects_the_assignment() -> None:
    """No subscription to judge it by: the event cannot hold partition -1, and the offsets-topic source's
    backstop (``invalid-event``) rejects such a record. The group's previous assignment stands; the other
    group and the group's offsets are reported."""
    unknown = DescribedMember(
        "payments-0-a", "payments-0", "/10.0.0.7", b"", encode_assignment(Assignment(0, (TopicPartition(TOPIC, -1),)))
    )
    previous, *_ = poll({}, answers({"payments": described("payments", [member("payments-0-a", [0])])}, {}))

    view, events, malformed, rejected = poll(
        previous,
        answers(
            {"billing": STABLE.described["billing"], "payments": described("payments", [unknown])},
            {"payments": {0: 3}},
        ),
    )

    assert not malformed
    assert [(r.api, r.group, r.error.rule) for r in rejected] == [("DescribeGroups", "payments", "invalid-event")]
    assert "partition" in str(rejected[0].error) and "-1" in str(rejected[0].error)
    assert view["payments"].assignment == previous["payments"].assignment
    assert [e.group for e in events if isinstance(e, GroupAssigned)] == ["billing"]
    assert OffsetCommitted(group="payments", topic=TOPIC, partition=0, offset=3, commit_timestamp=T0) in events


@pytest.mark.parametrize(
    ("members", "rule"),
    [
        ([member("billing-0-a", [0, 1]), member("billing-0-a", [2, 3])], "duplicate-member"),
        ([member("", [0, 1])], "id-empty"),
        ([DescribedMember("billing-0-a", "c", "h", b"", b"", group_instance_id="")], "id-empty"),
        ([DescribedMember("billing-0-a", "c" * 40_000, "h", b"", b"")], "string-too-long"),
    ],
    ids=["duplicate-member", "empty-member-id", "empty-instance-id", "64-kib-client-id"],
)
def test_a_described_group_that_breaks_a_rule_is_skipped_and_its_last_assignment_stands(
    members: list[DescribedMember], rule: str
) -> None:
    view, *_ = poll({}, STABLE)

    next_view, events, _, rejected = poll(
        view, answers({"billing": described("billing", members)}, {"billing": {0: 10, 1: 20, 2: 30, 3: 41}})
    )

    assert [(r.api, r.group, r.error.rule) for r in rejected] == [("DescribeGroups", "billing", rule)]
    assert next_view["billing"].assignment == view["billing"].assignment
    assert events == [OffsetCommitted(group="billing", topic=TOPIC, partition=3, offset=41, commit_timestamp=T0)]


def test_one_partitions_offset_fetch_error_affects_only_that_partition() -> None:
    """Partition 1 answered with TOPIC_AUTHORIZATION_FAILED (29): its last known commit stands (no
    OffsetDeleted: the coordinator did not say the commit is gone, and deleting it would erase its
    history), the other partitions are reported; a failing partition never answered stays unknown."""
    view, *_ = poll({}, STABLE)

    later = answers(
        dict(STABLE.described),
        {"billing": {0: 11, 2: 30, 3: 40}},
        polled_at=T0 + 5000,
        failed={"billing": {1: 29, 7: 29}},
    )
    next_view, events, _, rejected = poll(view, later)

    assert not rejected
    assert events == [OffsetCommitted(group="billing", topic=TOPIC, partition=0, offset=11, commit_timestamp=T0 + 5000)]
    assert next_view["billing"].committed == offsets({0: 11, 1: 20, 2: 30, 3: 40})
    healed = answers(dict(STABLE.described), {"billing": {0: 11, 1: 26, 2: 30, 3: 40}}, polled_at=T0 + 10_000)
    assert poll(next_view, healed).events == [
        OffsetCommitted(group="billing", topic=TOPIC, partition=1, offset=26, commit_timestamp=T0 + 10_000)
    ]


@pytest.mark.parametrize(
    ("topic", "partition", "offset", "rule"),
    [
        (TOPIC, -1, 7, "partition-negative"),
        (TOPIC, 1, -2, "offset-below-minus-one"),
        ("bad topic!", 0, 7, "topic-name"),
        ("t" * 250, 0, 7, "topic-name"),
    ],
)
def test_a_committed_offset_that_breaks_a_rule_is_skipped_and_the_last_one_stands(
    topic: str, partition: int, offset: int, rule: str
) -> None:
    view, *_ = poll({}, STABLE)
    fetched = {**offsets({0: 10, 1: 20, 2: 30, 3: 40}), TopicPartition(topic, partition): offset}
    later = GroupAnswers(
        polled_at=T0 + 5000,
        listed={"billing": ListedGroup("consumer", "classic")},
        described=dict(STABLE.described),
        committed={"billing": FetchedOffsets(fetched)},
    )

    next_view, events, _, rejected = poll(view, later)

    assert [(r.api, r.group, r.error.rule) for r in rejected] == [("OffsetFetch", "billing", rule)]
    assert events == []
    assert next_view == view


def test_members_without_blobs_are_kept_without_topics_and_with_partitions_unknown() -> None:
    """What Tansu's DescribeGroups answers: member ids, and no client id, host or blobs. The member's
    partitions are unknown (None), not none: it is not shown holding nothing."""
    bare = described("billing", [DescribedMember("billing-0-a", "", "", b"", b"")], protocol="")
    assigned, malformed = group_assigned(bare)
    assert not malformed
    assert assigned.protocol is None
    assert [(m.member_id, m.client_id, m.topics, m.partitions) for m in assigned.members] == [
        ("billing-0-a", "", (), None)
    ]


def test_the_assignment_is_the_one_the_offsets_topic_source_derives_but_for_what_describe_lacks() -> None:
    record = GroupMetadata(
        group="billing",
        protocol_type="consumer",
        generation=12,
        protocol="range",
        leader="billing-0-a",
        state_timestamp=T0,
        value_version=3,
        members=tuple(
            GroupMember(
                member_id=m.member_id,
                group_instance_id=None,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=30000,
                session_timeout=10000,
                subscription=Subscription(3, (TOPIC,), None, (), -1, None),
                assignment=Assignment(3, tuple(TopicPartition(TOPIC, p) for p in parts)),
            )
            for m, parts in ((member("billing-0-a", [0, 1]), [0, 1]), (member("billing-1-b", [2, 3]), [2, 3]))
        ),
    )
    (derived,) = derive(record)
    assert isinstance(derived, GroupAssigned)
    from_describe = poll({}, STABLE).events[0]
    assert from_describe == derived.model_copy(
        update={"generation": UNKNOWN_GENERATION, "leader": None, "state_timestamp": None}
    )
    (read,) = decode_record(encode_events(DerivedEvents(group="billing", events=(from_describe,))))
    assert read.expanded() == [from_describe]


def test_kagents_own_group_is_not_tracked() -> None:
    listed = {"kagent": ListedGroup("consumer"), "billing": ListedGroup("consumer"), "legacy": ListedGroup("")}
    assert tracked_groups(listed, own_group="kagent") == {"billing": ListedGroup("consumer"), "legacy": ListedGroup("")}


@pytest.mark.parametrize("response_type", [OffsetFetchResponse_v1, OffsetFetchResponse_v2, OffsetFetchResponse_v3])
def test_offset_fetch_responses_are_read_partition_by_partition(response_type: type) -> None:
    topics = [(TOPIC, [(0, 42, "", 0), (1, -1, "", 0), (2, -1, "", 29)]), ("payments", [(0, 7, "meta", 0)])]
    fields: dict[str, object] = {"topics": topics}
    if response_type is not OffsetFetchResponse_v1:
        fields["error_code"] = 0
    if response_type is OffsetFetchResponse_v3:
        fields["throttle_time_ms"] = 0
    wire = response_type(**fields).encode()

    fetched = fetched_offsets(response_type.decode(wire))

    assert fetched == FetchedOffsets(
        {TopicPartition(TOPIC, 0): 42, TopicPartition(TOPIC, 1): -1, TopicPartition("payments", 0): 7},
        {TopicPartition(TOPIC, 2): 29},
    )
    view, *_ = poll({}, GroupAnswers(T0, {"billing": ListedGroup("consumer")}, {}, {"billing": fetched}))
    assert view["billing"].committed == {TopicPartition(TOPIC, 0): 42, TopicPartition("payments", 0): 7}  # -1: none


def test_an_offset_fetch_answer_failed_as_a_whole_says_so() -> None:
    """COORDINATOR_LOAD_IN_PROGRESS (14) comes with no partitions: never to be read as "no commits"."""
    wire = OffsetFetchResponse_v3(throttle_time_ms=0, topics=[], error_code=14).encode()
    assert fetched_offsets(OffsetFetchResponse_v3.decode(wire)) == FetchedOffsets({}, {}, 14)


@pytest.mark.parametrize(
    "response_type",
    [DescribeGroupsResponse_v0, DescribeGroupsResponse_v1, DescribeGroupsResponse_v2, DescribeGroupsResponse_v3],
)
def test_describe_groups_responses_of_every_version_aiokafka_speaks_are_read(response_type: type) -> None:
    billing = member("billing-0-a", [0, 1], version=0)
    wire_member = (
        billing.member_id,
        billing.client_id,
        billing.client_host,
        billing.member_metadata,
        billing.member_assignment,
    )
    groups = [
        (0, "billing", "Stable", "consumer", "range", [wire_member]),
        (16, "elsewhere", "", "", "", []),  # NOT_COORDINATOR
        (0, "idle", "Empty", "consumer", "", []),
    ]
    if response_type is DescribeGroupsResponse_v3:
        groups = [(*g, -2147483648) for g in groups]  # authorized operations not asked for
    fields: dict[str, object] = {"groups": groups}
    if response_type is not DescribeGroupsResponse_v0:
        fields["throttle_time_ms"] = 0
    wire = response_type(**fields).encode()

    parsed, errors = described_groups([response_type.decode(wire)])

    assert errors == [GroupError("elsewhere", 16)]
    assert parsed == {
        "billing": DescribedGroup("billing", "Stable", "consumer", "range", (billing,)),
        "idle": DescribedGroup("idle", "Empty", "consumer", ""),
    }
    assigned, malformed = group_assigned(parsed["billing"])
    assert not malformed
    assert [(p.topic, p.partition) for p in assigned.members[0].partitions] == [(TOPIC, 0), (TOPIC, 1)]
