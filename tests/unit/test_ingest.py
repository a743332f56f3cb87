"""A fetched batch of ``__consumer_offsets`` records -> derived-events records per group (kagent.core.ingest)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import pytest
from pydantic import ValidationError

from kagent.core.consumer_offsets import (
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMetadata,
    GroupTombstone,
    OffsetCommit,
    OffsetTombstone,
    TopicPartitions,
    encode,
)
from kagent.core.events import (
    ConsumerGroupMemberAssignment,
    DerivedEvents,
    GroupDeleted,
    OffsetCommitted,
    OffsetDeleted,
    by_group,
    decode_events,
    encode_events,
)
from kagent.core.ingest import ingest


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

    assert [(r.group, [e.kind for e in r.events]) for r in result.events] == [
        ("billing", ["offset-committed", "offset-deleted", "offset-committed"]),
        ("audit", ["offset-committed"]),
    ]
    billing = result.events[0].events
    assert isinstance(billing[0], OffsetCommitted) and billing[0].offset == 5
    assert isinstance(billing[2], OffsetCommitted) and billing[2].offset == 6
    assert result.malformed == []


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

    assert [(record.offset, error.part, error.version, error.offset) for record, error in result.malformed] == [
        (7, "key", None, 0),
        (8, "value", 3, 2),
    ]
    assert result.malformed[0][1].reason == "the record has no key"
    assert [e.offset for r in result.events for e in r.events if isinstance(e, OffsetCommitted)] == [2, 3]


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

    assert [(r.group, [e.kind for e in r.events]) for r in result.events] == [
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


def test_a_derived_events_record_round_trips_and_holds_one_group() -> None:
    events = [
        OffsetCommitted(group="g", topic="t", partition=0, offset=1, commit_timestamp=2),
        GroupDeleted(group="h"),
        OffsetDeleted(group="g", topic="t", partition=1),
    ]
    records = by_group(events)

    assert [decode_events(encode_events(r)) for r in records] == records
    with pytest.raises(ValidationError, match="events of groups \\['g', 'h'\\] in a record of group 'x'"):
        DerivedEvents(group="x", events=tuple(events))
    with pytest.raises(ValidationError):
        decode_events(b'{"group": "g", "events": []}')
