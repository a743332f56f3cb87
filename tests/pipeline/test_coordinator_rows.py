"""The backfill's decoding kernel on Arrow batches, without Spark."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import pyarrow as pa
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupTargetAssignmentMetadata,
    GroupTombstone,
    OffsetTombstone,
    Subscription,
    TopicMetadata,
    TopicPartitions,
    encode,
)
from kagent.core.events import (
    ConsumerGroupEpoch,
    ConsumerGroupMember,
    ConsumerGroupTargetAssignment,
    DerivedEvents,
    GroupDeleted,
    OffsetCommitted,
    by_group,
    encode_events,
    packed_records,
)
from kagent.tools.pipeline.coordinator_rows import (
    DECODED_SCHEMA,
    decode_batch,
    decode_batches,
)
from tests.support.commit_runs import commit_run
from tests.support.coordinator import group_metadata, offset_commit

LOG_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _batch(records: list[tuple[bytes | None, bytes | None]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": [key for key, _ in records],
            "value": [value for _, value in records],
            "partition": [7] * len(records),
            "offset": list(range(100, 100 + len(records))),
            "timestamp": [LOG_TIME] * len(records),
        },
        schema=pa.schema(
            [
                ("key", pa.binary()),
                ("value", pa.binary()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
                ("timestamp", pa.timestamp("us", tz="UTC")),
            ]
        ),
    )


def test_every_kind_of_offsets_topic_record() -> None:
    commit = offset_commit("g", "t", 3, 42)
    assigned = group_metadata("g", 5, {"m1-x": [TopicPartition("t", 0), TopicPartition("t", 3)], "m2-y": []})
    connect = assigned._replace(protocol_type="connect", members=())
    batch = _batch(
        [
            encode(commit),
            encode(OffsetTombstone("g", "t", 3)),
            encode(assigned),
            encode(GroupTombstone("g")),
            encode(connect),
            (b"\x00\x01\x00", b"\x00\x03"),  # an offset commit key cut short
            (None, b"x"),
            encode(commit._replace(partition=-1)),
        ]
    )

    rows = decode_batch(batch, "offsets-topic")

    assert rows.schema == DECODED_SCHEMA
    got = rows.to_pylist()
    assert [r["kind"] for r in got] == [
        "offset-committed",
        "offset-deleted",
        "group-assigned",
        "group-deleted",
        "skipped",
        "undecodable",
        "undecodable",
        "rejected",
    ]
    assert [(r["source_partition"], r["source_offset"], r["log_timestamp"]) for r in got] == [
        (7, 100 + i, LOG_TIME) for i in range(8)
    ]
    first = got[0]
    assert (first["group"], first["topic"], first["partition"], first["committed_offset"]) == ("g", "t", 3, 42)
    assert first["commit_timestamp"] == datetime.fromtimestamp(commit.commit_timestamp / 1000, UTC)
    assert (got[1]["group"], got[1]["partition"], got[1]["committed_offset"]) == ("g", 3, None)
    generation = got[2]
    assert (generation["generation"], generation["protocol"], generation["leader"]) == (5, "range", "m1-x")
    assert [(m["member_id"], m["topics"], m["partitions"]) for m in generation["members"]] == [
        ("m1-x", ["t"], [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 3}]),
        ("m2-y", ["t"], []),
    ]
    assert got[5]["error"]
    assert got[6]["error"] == "key, byte 0: the record has no key"  # the worker's dead letter says the same
    assert (got[7]["error"], got[7]["key"], got[7]["value"]) == (
        "OffsetCommit breaks partition-negative: partition = -1 (a partition number is >= 0)",
        *encode(commit._replace(partition=-1)),
    )
    assert all(r["key"] is None and r["value"] is None for r in got[:5])


def test_a_members_partition_outside_its_subscription_is_dropped_as_the_worker_drops_it() -> None:
    """record_checks' dropping rule: the generation is kept, the stray partition is not."""
    both = group_metadata("g", 5, {"m1-x": [TopicPartition("t", 0), TopicPartition("elsewhere", 1)]})
    assigned = both._replace(members=tuple(m._replace(subscription=Subscription(0, ("t",))) for m in both.members))

    (row,) = decode_batch(_batch([encode(assigned)]), "offsets-topic").to_pylist()

    assert row["kind"] == "group-assigned"
    assert [(m["member_id"], m["partitions"]) for m in row["members"]] == [("m1-x", [{"topic": "t", "partition": 0}])]


def test_derived_events_source_and_many_batches() -> None:
    events = [
        OffsetCommitted(group="g", topic="t", partition=1, offset=9, commit_timestamp=1_714_564_800_000),
        GroupDeleted(group="g"),
    ]
    batches = [_batch([(b"g", encode_events(batch))]) for batch in by_group(events)] + [_batch([(b"g", b"{not json")])]

    compact = [
        DerivedEvents.model_construct(group=group, events=(commit_run("t", 2, (11, 1_714_564_801_000, 4)),))
        for group in ("g", "h")
    ]
    for _, value in packed_records(compact, 1):  # as the worker's source writes them: commit runs, packed
        batches.append(_batch([(None, value)]))

    rows = [row for out in decode_batches(iter(batches), "derived-events") for row in out.to_pylist()]

    assert [row["kind"] for row in rows] == [
        "offset-committed",
        "group-deleted",
        "undecodable",
        "offset-committed",
        "offset-committed",
    ]
    assert [(row["group"], row["partition"], row["committed_offset"], row["leader_epoch"]) for row in rows[3:]] == [
        ("g", 2, 11, 4),
        ("h", 2, 11, 4),
    ]


def test_the_admin_sources_kip848_events_are_rows_of_kind_and_group() -> None:
    """What the admin-api source sends of a group ConsumerGroupDescribe described, read back as the
    derived-events topic holds it."""
    events = [
        ConsumerGroupEpoch(group="g", epoch=4),
        ConsumerGroupMember(group="g", member_id="m1", client_id="c", client_host="/h", topics=("t",), rack="r1"),
        ConsumerGroupTargetAssignment(group="g", assignment_epoch=4, assignor="uniform", members=("m1",)),
    ]
    (_, value), *_ = packed_records(by_group(events), 1)

    got = decode_batch(_batch([(None, value)]), "derived-events").to_pylist()

    assert [(r["kind"], r["group"]) for r in got] == [
        ("consumer-group-epoch", "g"),
        ("consumer-group-member", "g"),
        ("consumer-group-target-assignment", "g"),
    ]


def test_kip848_records_are_rows_of_kind_and_group() -> None:
    orders = UUID("0f9d2c1e-6a4b-4f3e-9d1c-2b3a4c5d6e7f")
    member = ConsumerGroupMemberMetadata("g", "m1", None, None, "c", "/h", ("t",), None, 300_000, None)
    batch = _batch(
        [
            encode(ConsumerGroupMetadata("g", 3)),
            encode(ConsumerGroupPartitionMetadata("g", (TopicMetadata(orders, "t", 1, ()),))),
            encode(member),
            encode(ConsumerGroupCurrentMemberAssignment("g", "m1", 3, 2, 0, (TopicPartitions(orders, (0,)),), ())),
            encode(ConsumerGroupTargetAssignmentMetadata("g", 3)),
            encode(ConsumerGroupMemberMetadataTombstone("g", "m1")),
            encode(ConsumerGroupMetadataTombstone("g")),
        ]
    )

    got = decode_batch(batch, "offsets-topic").to_pylist()

    assert [(r["kind"], r["group"]) for r in got] == [
        ("consumer-group-epoch", "g"),
        ("consumer-group-topics", "g"),
        ("consumer-group-member", "g"),
        ("consumer-group-member-assignment", "g"),
        ("skipped", None),
        ("consumer-group-member-left", "g"),
        ("group-deleted", "g"),
    ]
    assert all(r["generation"] is None and r["members"] is None and r["topic"] is None for r in got)
