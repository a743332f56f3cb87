"""A fetched batch of ``__consumer_offsets`` records -> derived-events records per group (kagent.core.ingest)."""

from __future__ import annotations

import gc
import json
import weakref
from dataclasses import dataclass
from uuid import UUID

import orjson
import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

import kagent.core.ingest
from kagent.core.consumer_offsets import (
    Assignment,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMetadata,
    DecodeError,
    GroupMember,
    GroupMetadata,
    GroupTombstone,
    OffsetCommit,
    OffsetTombstone,
    Record,
    Subscription,
    TopicPartitions,
    encode,
)
from kagent.core.events import (
    ConsumerGroupMemberAssignment,
    DerivedEvents,
    DerivedEventsRecord,
    GroupDeleted,
    OffsetCommitted,
    OffsetDeleted,
    PackedRecords,
    by_group,
    decode_record,
    encode_events,
    packed_records,
    run_commits,
)
from kagent.core.ingest import ingest
from kagent.core.record_checks import RecordRejected
from kagent.core.table_keys import partition_of_group
from tests.support.commit_runs import commit_run


@dataclass(frozen=True)
class Fetched:
    """The part of aiokafka's ConsumerRecord that ingest reads, and where it came from."""

    key: bytes | None
    value: bytes | None
    offset: int = 0


def commit(group: str, partition: int, offset: int) -> Fetched:
    key, value = encode(OffsetCommit(group, "orders", partition, offset, "", 1_700_000_000_000, None, None, 3))
    return Fetched(key, value, offset)


def test_each_groups_events_become_one_record_in_log_order() -> None:
    key, _ = encode(OffsetTombstone("billing", "orders", 1))
    tombstone = Fetched(key, None)
    records = [commit("billing", 0, 5), commit("audit", 0, 9), tombstone, commit("billing", 0, 6)]

    result = ingest(records, skip_groups=())

    assert [(r.group, [e.kind for e in r.expanded()]) for r in result.events] == [
        ("billing", ["offset-committed", "offset-deleted", "offset-committed"]),
        ("audit", ["offset-committed"]),
    ]
    billing = result.events[0].events
    assert billing[0] == ["orders", 0, 5, 1_700_000_000_000, None]  # commits in their compact form
    assert billing[2] == commit_run("orders", 0, (6, 1_700_000_000_000, None))  # a new run after the tombstone
    assert result.events[0].expanded()[0] == OffsetCommitted(
        group="billing", topic="orders", partition=0, offset=5, commit_timestamp=1_700_000_000_000
    )
    assert result.malformed == []


def test_a_groups_consecutive_commits_on_a_partition_are_one_run_where_its_first_commit_was() -> None:
    key, _ = encode(OffsetTombstone("billing", "orders", 1))
    records = [
        commit("billing", 0, 5),
        commit("billing", 1, 7),
        commit("audit", 0, 9),
        commit("billing", 0, 6),
        Fetched(key, None),
        commit("billing", 0, 8),
    ]

    billing, audit = ingest(records, skip_groups=()).events

    stamp = 1_700_000_000_000
    assert billing.events == (
        commit_run("orders", 0, (5, stamp, None), (6, stamp, None)),
        commit_run("orders", 1, (7, stamp, None)),
        OffsetDeleted(group="billing", topic="orders", partition=1),
        commit_run("orders", 0, (8, stamp, None)),
    )
    assert audit.events == (commit_run("orders", 0, (9, stamp, None)),)
    assert [e.offset for e in billing.expanded() if isinstance(e, OffsetCommitted)] == [5, 6, 7, 8]


def test_kagents_own_groups_are_skipped() -> None:
    key, _ = encode(GroupTombstone("kagent-offsets-topic-source"))
    records = [commit("kagent", 0, 1), Fetched(key, None), commit("billing", 3, 4)]

    result = ingest(records, skip_groups={"kagent", "kagent-offsets-topic-source"})

    assert [r.group for r in result.events] == ["billing"]


def test_malformed_records_are_returned_with_why_and_the_rest_goes_on() -> None:
    no_key = Fetched(None, b"\x00\x03", offset=7)
    truncated = Fetched(commit("billing", 0, 1).key, b"\x00\x03\x00", offset=8)
    records = [no_key, commit("billing", 0, 2), truncated, commit("billing", 1, 3)]

    result = ingest(records, skip_groups=())

    errors = [error for _, error in result.malformed]
    assert all(isinstance(error, DecodeError) for error in errors)
    assert [
        (record.offset, error.part, error.version, error.offset)
        for record, error in result.malformed
        if isinstance(error, DecodeError)
    ] == [(7, "key", None, 0), (8, "value", 3, 2)]
    assert str(errors[0]) == "key, byte 0: the record has no key"
    assert [e.offset for r in result.events for e in r.expanded() if isinstance(e, OffsetCommitted)] == [2, 3]


def test_a_batch_with_a_malformed_record_is_freed_without_the_garbage_collector() -> None:
    """A kept failure's traceback reached back to ingest's frame and so to the whole batch: a worker
    whose collector runs rarely (kagent.worker.garbage_collection) held 569 MB instead of 209 MB in the
    semantic fuzz drill."""
    batch = [Fetched(None, b"\x00\x03", offset=7), commit("billing", 0, 2)]
    fetched = weakref.ref(batch[1])
    gc.disable()
    try:
        result = ingest(batch, skip_groups=())
        assert len(result.malformed) == 1 and str(result.malformed[0][1]) == "key, byte 0: the record has no key"
        del batch, result
        assert fetched() is None
    finally:
        gc.enable()


def test_a_batch_of_kip848_records_yields_one_record_for_the_group() -> None:
    orders = UUID("0f9d2c1e-6a4b-4f3e-9d1c-2b3a4c5d6e7f")
    member = ConsumerGroupMemberMetadata(
        "billing", "m1", None, None, "client-1", "/10.0.0.1", ("orders",), None, 300_000, "uniform"
    )
    held = (TopicPartitions(orders, (0, 1)),)
    join = [  # what Kafka's coordinator writes when the first member joins, in order
        member,
        ConsumerGroupMetadata("billing", 1),
        ConsumerGroupTargetAssignmentMember("billing", "m1", held),
        ConsumerGroupTargetAssignmentMetadata("billing", 1),
        ConsumerGroupCurrentMemberAssignment("billing", "m1", 1, 0, 0, held, ()),
    ]
    records = [Fetched(*encode(record), offset) for offset, record in enumerate(join)] + [commit("billing", 0, 5)]

    result = ingest(records, skip_groups=())

    assert [(r.group, [e.kind for e in r.expanded()]) for r in result.events] == [
        (
            "billing",
            [
                "consumer-group-member",
                "consumer-group-epoch",
                "consumer-group-member-assignment",
                "offset-committed",
            ],
        )
    ]
    assigned = result.events[0].events[2]
    assert isinstance(assigned, ConsumerGroupMemberAssignment)
    assert [(p.topic_id, p.partition) for p in assigned.partitions] == [(str(orders), 0), (str(orders), 1)]
    assert result.malformed == []


def test_records_that_derive_nothing_yield_nothing() -> None:
    unknown = Fetched(b"\x00\x63whatever", b"\x00\x00")  # an unknown record type is not an error

    assert ingest([unknown], skip_groups=()).events == []


def test_a_groups_events_are_written_as_runs_objects_and_each_models_json_dump() -> None:
    """encode_events lets orjson write runs and group-assigned objects as they are, and each model as
    pydantic dumps it: the same bytes as writing every event's JSON data in one list."""
    key, value = VALID[2]  # group metadata: a group-assigned object (AssignedJson)
    assigned = ingest([Fetched(key, value)], skip_groups=()).events[0].events[0]
    assert isinstance(assigned, dict)
    models = [
        OffsetCommitted(group="billing", topic="orders", partition=0, offset=1, commit_timestamp=2, leader_epoch=3),
        OffsetDeleted(group="billing", topic="orders", partition=1),
        *(event for record in ingest([Fetched(*kv) for kv in VALID[3:]], ()).events for event in record.events),
        GroupDeleted(group="billing"),
    ]
    events = DerivedEvents.model_construct(
        group="billing", events=(commit_run("orders", 0, (5, 6, None), (7, 8, 2)), assigned, *models)
    )

    written = encode_events(events)

    each = [event if isinstance(event, list | dict) else event.model_dump(mode="json") for event in events.events]
    assert written == orjson.dumps({"group": "billing", "events": each})
    assert {type(event).__name__ for event in models} >= {"ConsumerGroupMember", "ConsumerGroupMemberAssignment"}
    with pytest.raises(TypeError):  # orjson.JSONEncodeError
        encode_events(DerivedEvents.model_construct(group="billing", events=(object(),)))


def test_a_derived_events_record_round_trips_and_holds_one_group() -> None:
    events = [
        OffsetCommitted(group="g", topic="t", partition=0, offset=1, commit_timestamp=2),
        GroupDeleted(group="h"),
        OffsetDeleted(group="g", topic="t", partition=1),
    ]
    records = by_group(events)

    assert [decode_record(encode_events(r)) for r in records] == [[r] for r in records]
    with pytest.raises(ValidationError, match="events of groups \\['g', 'h'\\] in a record of group 'x'"):
        DerivedEvents(group="x", events=tuple(events))
    with pytest.raises(ValidationError):
        decode_record(b'{"group": "g", "events": []}')


def test_packed_records_hold_each_groups_events_on_its_partition_in_order_within_the_limit() -> None:
    batch = [
        DerivedEvents(group=f"g{n}", events=(commit_run("t", n % 3, *((o, o + 1, None) for o in range(n))),))
        for n in range(1, 40)
    ]
    sizes = {events.group: len(encode_events(events)) for events in batch}
    limit = 400
    assert max(sizes.values()) > limit  # one group alone is larger: a record of its own

    records = packed_records(batch, 4, limit=limit)

    for partition, value in records:
        groups = decode_record(value)
        assert {partition_of_group(events.group, 4) for events in groups} == {partition}
        assert len(groups) == 1 or len(value) <= limit
    read = {(events.group): events for _, value in records for events in decode_record(value)}
    assert read == {events.group: events for events in batch}
    for partition in range(4):  # each partition's groups in the batch's order, whatever the records
        on_it = [events.group for p, value in records if p == partition for events in decode_record(value)]
        assert on_it == [events.group for events in batch if partition_of_group(events.group, 4) == partition]
    assert len(records) < len(batch)


def test_a_packer_fed_in_parts_keeps_each_partitions_groups_in_order_and_starts_afresh_after() -> None:
    batch = [
        DerivedEvents(group=f"g{n % 7}", events=(commit_run("t", n % 3, *((o, o + 1, None) for o in range(n))),))
        for n in range(1, 40)
    ]
    packer = PackedRecords(4, limit=300)
    for part in (batch[:10], batch[10:11], batch[11:]):  # as the source adds a chunk of its fetch at a time
        for events in part:
            packer.add(events)

    records = packer.records()
    for partition in range(4):  # every group's events, each partition's in the order they were added
        on_it = [events for p, value in records if p == partition for events in decode_record(value)]
        assert on_it == [events for events in batch if partition_of_group(events.group, 4) == partition]
    assert packer.records() == []
    packer.add(batch[0])
    assert [decode_record(value) for _, value in packer.records()] == [[batch[0]]]


def test_a_packed_record_is_refused_whole_naming_the_group_and_event() -> None:
    good = encode_events(DerivedEvents(group="g", events=(GroupDeleted(group="g"),)))
    bad = json.dumps({"group": "h", "events": [["t", 0, 1, "2", None]]}).encode()

    with pytest.raises(ValidationError) as refused:
        decode_record(b"[" + good + b"," + bad + b"]")
    assert refused.value.errors()[0]["loc"][:3] == (1, "events", 0)
    with pytest.raises(ValidationError, match="at least 1 item"):
        decode_record(b"[]")


def test_commits_travel_as_runs_and_a_record_of_every_form_reads() -> None:
    compact = DerivedEvents(
        group="g",
        events=(commit_run("t", 0, (1, 2, None), (3, 4, 7)), GroupDeleted(group="g"), commit_run("t", 1, (5, 6, 3))),
    )
    raw = encode_events(compact)
    assert json.loads(raw)["events"][0] == ["t", 0, 1, 2, None, 3, 4, 7]
    assert decode_record(raw) == [compact]
    assert run_commits(compact.events[0]) == [(1, 2, None), (3, 4, 7)]  # type: ignore[arg-type]
    older = (
        b'{"group":"g","events":[{"kind":"offset-committed","group":"g","topic":"t","partition":0,'
        b'"offset":1,"commit_timestamp":2},["t",0,3,4,null]]}'
    )  # an object (before the compact form) and a five-element array (a commit each, before runs)
    assert [event for events in decode_record(older) for event in events.expanded()] == [
        OffsetCommitted(group="g", topic="t", partition=0, offset=1, commit_timestamp=2),
        OffsetCommitted(group="g", topic="t", partition=0, offset=3, commit_timestamp=4),
    ]


@pytest.mark.parametrize(
    ("run", "why"),
    [
        (["t", 0, 1, 2], "4 elements, not 2 \\+ 3 per commit"),
        (["t", -1, 1, 2, None], "element 1 is -1, not the partition, an integer >= 0"),
        (["t", 0, 1, 2, None, 3, "4", None], "element 6 is '4', not commit 1's commit_timestamp, an integer"),
        (["t", 0, 1, 2, True], "element 4 is True, not commit 0's leader_epoch, an integer or null"),
    ],
)
def test_a_broken_run_is_refused_naming_the_element(run: list[object], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        decode_record(json.dumps({"group": "g", "events": [run]}).encode())


def test_gather_adds_each_partitions_commits_and_yields_the_other_events_after_those_before_them() -> None:
    older_form = OffsetCommitted(group="g", topic="t", partition=0, offset=9, commit_timestamp=10)
    deleted = GroupDeleted(group="g")
    events = DerivedEvents(
        group="g",
        events=(commit_run("t", 0, (1, 2, None)), commit_run("t", 1, (5, 6, 3)), older_form, deleted),
    )
    waiting: dict[TopicPartition, list[int | None]] = {TopicPartition("t", 0): [0, 1, None]}  # an earlier record's
    seen = []

    for event in events.gather(waiting):
        seen.append((event, {tp: list(fields) for tp, fields in waiting.items()}))
        waiting.clear()

    assert seen == [
        (deleted, {TopicPartition("t", 0): [0, 1, None, 1, 2, None, 9, 10, None], TopicPartition("t", 1): [5, 6, 3]})
    ]
    later = DerivedEvents(group="g", events=(commit_run("t", 1, (7, 8, 3)),))
    assert list(later.gather(waiting)) == [] and waiting == {TopicPartition("t", 1): [7, 8, 3]}
    assert all(type(tp) is TopicPartition for tp in waiting)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.sampled_from(["t", "g", ""]),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.sampled_from(["kind", "group", "topic"]), inner),
    max_leaves=12,
)
plain_commit = st.tuples(
    st.sampled_from(["t", 3, None]), st.integers(-2, 2), st.integers(), st.integers(), st.none() | st.integers(-1, 1)
).map(list)
run_commit = st.tuples(st.integers(), st.integers() | st.none(), st.none() | st.integers() | st.booleans())
run_like = st.tuples(st.sampled_from(["t", 3]), st.integers(-1, 2), st.lists(run_commit, max_size=3)).map(
    lambda run: [run[0], run[1], *(field for commit in run[2] for field in commit)]
)
commit_like = st.lists(json_values, min_size=4, max_size=9) | plain_commit | run_like
event_like = (
    commit_like
    | st.sampled_from([{"kind": "group-deleted", "group": "g"}, {"kind": "group-deleted", "group": "h"}, {"kind": "x"}])
    | st.fixed_dictionaries(
        {"kind": st.just("offset-deleted"), "group": st.sampled_from(["g", "h"]), "topic": json_values},
        optional={"partition": json_values | st.integers(-1, 2)},
    )
)


group_like = st.fixed_dictionaries({"group": st.sampled_from(["g", 7]), "events": st.lists(event_like, max_size=4)})


@given(group_like | st.lists(group_like, max_size=3))
def test_the_fast_reader_gives_pydantics_verdict(record: object) -> None:
    """Whatever a record holds (one group's object or a packed array of them), :func:`decode_record`
    accepts exactly what pydantic's validation does, and reads it the same (its fast path only takes
    what it can check plainly)."""
    raw = json.dumps(record).encode()
    try:
        validated = TypeAdapter(DerivedEventsRecord).validate_json(raw)
    except ValidationError:
        with pytest.raises(ValidationError):
            decode_record(raw)
    else:
        assert decode_record(raw) == (validated if isinstance(validated, list) else [validated])


def test_a_record_that_breaks_a_rule_is_malformed_with_its_reason_and_the_rest_goes_on() -> None:
    key, value = encode(OffsetCommit("billing", "orders", -1, 5, "", 1_700_000_000_000, None, None, 3))
    records = [commit("billing", 0, 2), Fetched(key, value, offset=9), commit("billing", 1, 3)]

    result = ingest(records, skip_groups=())

    ((record, error),) = result.malformed
    assert record.offset == 9
    assert isinstance(error, RecordRejected) and (error.rule, error.field, error.value) == (
        "partition-negative",
        "partition",
        -1,
    )
    assert str(error) == "OffsetCommit breaks partition-negative: partition = -1 (a partition number is >= 0)"
    assert [e.offset for r in result.events for e in r.expanded() if isinstance(e, OffsetCommitted)] == [2, 3]


def test_a_record_whose_events_cannot_be_built_is_malformed_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backstop behind the rules: derivation is made to fail (no real record makes it, so far).
    Offset commits are not derived through it: their commit runs are built from the checked record's
    own fields, typed by the decoder, with no rule left to miss."""

    def refusing(record: object) -> list[object]:
        OffsetDeleted(group="g", topic="t", partition=-7)
        return []

    def failing(record: object) -> list[object]:
        raise KeyError("orders")

    key, _ = encode(OffsetTombstone("billing", "orders", 1))
    tombstone = Fetched(key, None)
    monkeypatch.setattr(kagent.core.ingest, "derive", refusing)
    result = ingest([tombstone], skip_groups=())
    monkeypatch.setattr(kagent.core.ingest, "derive", failing)
    broken = ingest([tombstone], skip_groups=())

    ((_, invalid),) = result.malformed
    assert isinstance(invalid, RecordRejected)
    assert (invalid.rule, invalid.field, invalid.value) == ("invalid-event", "OffsetDeleted.partition", -7)
    ((_, failed),) = broken.malformed
    assert isinstance(failed, RecordRejected) and failed.rule == "invalid-event"
    assert (
        str(failed) == "OffsetTombstone breaks invalid-event: record = KeyError('orders') (deriving its events failed)"
    )


def _valid_records() -> list[tuple[bytes, bytes | None]]:
    """One encoded record of each kind kagent derives events from."""
    orders = UUID("0f9d2c1e-6a4b-4f3e-9d1c-2b3a4c5d6e7f")
    member = GroupMember(
        "m1",
        None,
        "client",
        "/10.0.0.1",
        30_000,
        10_000,
        Subscription(0, ("orders",)),
        Assignment(0, (TopicPartition("orders", 0), TopicPartition("orders", 1))),
    )
    records: list[Record] = [
        OffsetCommit("billing", "orders", 0, 5, "", 1_700_000_000_000, None, 4, 3),
        OffsetTombstone("billing", "orders", 1),
        GroupMetadata("billing", "consumer", 3, "range", "m1", 1_700_000_000_000, (member,), 3),
        ConsumerGroupMetadata("billing", 2),
        ConsumerGroupMemberMetadata("billing", "m1", None, None, "c", "/h", ("orders",), None, 300_000, "uniform"),
        ConsumerGroupCurrentMemberAssignment("billing", "m1", 2, 1, 0, (TopicPartitions(orders, (0, 1)),), ()),
    ]
    return [encode(record) for record in records]


VALID = _valid_records()
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.one_of(st.text(max_size=12), st.sampled_from(["", ".", "..", "a" * 250, "x" * 40_000]))


@st.composite
def mutated(
    draw: st.DrawFn, records: st.SearchStrategy[tuple[bytes, bytes | None]] | None = None
) -> tuple[bytes | None, bytes | None]:
    """A record of ``records`` (by default, a valid one of each kind) with bytes flipped, cut, inserted
    or deleted in its key or value."""
    key, value = draw(records if records is not None else st.sampled_from(VALID))
    parts = [bytearray(key), bytearray(value or b"")]
    for _ in range(draw(st.integers(1, 4))):
        part = parts[draw(st.integers(0, 1))]
        at = draw(st.integers(0, len(part)))
        match draw(st.sampled_from(["flip", "cut", "insert", "delete"])):
            case "flip" if at < len(part):
                part[at] ^= draw(st.integers(1, 255))
            case "cut":
                del part[at:]
            case "insert":
                part[at:at] = draw(st.binary(min_size=1, max_size=8))
            case "delete" if at < len(part):
                del part[at]
    return bytes(parts[0]), bytes(parts[1]) if value is not None or parts[1] else None


@st.composite
def hostile_commits(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    """Offset commits that encode, with any values Kafka's types hold."""
    record = OffsetCommit(
        draw(NAMES.filter(lambda name: len(name.encode()) <= 0x7FFF)),
        draw(NAMES.filter(lambda name: len(name.encode()) <= 0x7FFF)),
        draw(INT32),
        draw(INT64),
        "",
        draw(INT64),
        None,
        draw(st.one_of(st.none(), INT32.filter(lambda epoch: epoch != -1))),
        3,
    )
    return encode(record)


RECORDS = st.one_of(
    st.tuples(st.one_of(st.none(), st.binary(max_size=64)), st.one_of(st.none(), st.binary(max_size=64))),
    mutated(),
    hostile_commits(),
    st.sampled_from(VALID),
)


@settings(max_examples=400)
@given(st.lists(RECORDS, max_size=8))
def test_ingest_never_raises_and_accounts_for_every_record(batch: list[tuple[bytes | None, bytes | None]]) -> None:
    records = [Fetched(key, value, offset) for offset, (key, value) in enumerate(batch)]

    result = ingest(records, skip_groups=())

    for _record, error in result.malformed:
        assert isinstance(error, DecodeError | RecordRejected) and str(error)
        assert getattr(error, "rule", None) != "invalid-event", error  # a rule is missing
    # A record not returned as malformed derived its events (possibly none): together they are the batch.
    failed = {record.offset for record, _ in result.malformed}
    derived = sum(len(r.expanded()) for r in result.events)
    assert failed <= set(range(len(records)))
    assert derived >= sum(1 for r in records if r.offset not in failed and (r.key, r.value) in VALID)
