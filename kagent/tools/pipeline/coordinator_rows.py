"""The backfill's decoding kernel: Kafka records of coordinator data to Arrow rows of derived events.

Pure, over Arrow batches (no Spark, no I/O), so that Spark runs it once per
batch with ``mapInArrow``. A record of ``__consumer_offsets`` is decoded by
``kagent.core.consumer_offsets``, checked against the rules of
``kagent.core.record_checks`` and turned into derived events, exactly as the
worker's source stage does (``kagent.core.ingest.checked_events``); a record
of the derived-events topic is parsed with ``kagent.core.events.decode_record``.
Either way every input record yields at least one row of
:data:`DECODED_SCHEMA`:

- one per derived event, its ``kind`` the event's (``offset-committed``,
  ``offset-deleted``, ``group-assigned``, ``group-deleted``, and the
  ``consumer-group-*`` kinds of KIP-848 groups, whose rows carry only
  ``kind`` and ``group``: their state is folded by the worker, not here);
  a member's assigned partitions outside its subscription are dropped from
  it, as the worker drops them;
- ``skipped`` for a record that derives nothing (groups of other protocol
  types, KIP-848 target assignments and regular expressions, share groups,
  unknown record types);
- ``undecodable`` for bytes that do not decode (a null key included), and
  ``rejected`` for a record that decodes but breaks a rule: the records the
  worker sends to its dead-letter topic, with the reason in ``error`` (the
  dead letter's) and the record's ``key`` and ``value`` bytes.

Every row carries where its record was: ``source_partition``,
``source_offset``, and the record's ``log_timestamp``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, TypeAlias

import pyarrow as pa
from pydantic import ValidationError

from kagent.core.consumer_offsets import DecodeError, decode
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
    OffsetCommitted,
    OffsetDeleted,
    decode_record,
)
from kagent.core.ingest import checked_events
from kagent.core.record_checks import RecordRejected

__all__ = ["DECODED_SCHEMA", "INPUT_COLUMNS", "REJECTED_KINDS", "Source", "decode_batch", "decode_batches"]

Source: TypeAlias = Literal["offsets-topic", "derived-events"]
"""What the input records are: raw ``__consumer_offsets`` records, or derived events as JSON."""

INPUT_COLUMNS = ("key", "value", "partition", "offset", "timestamp")
"""The columns of the Kafka source the kernel reads."""

REJECTED_KINDS = ("undecodable", "rejected")
"""The kinds of the rows of records kagent does not apply: those the worker dead-letters."""

_TIME = pa.timestamp("us", tz="UTC")
_PARTITION = pa.struct([("topic", pa.string()), ("partition", pa.int32())])
_MEMBER = pa.struct(
    [
        ("member_id", pa.string()),
        ("group_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_host", pa.string()),
        ("topics", pa.list_(pa.string())),
        ("partitions", pa.list_(_PARTITION)),
    ]
)

DECODED_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("committed_offset", pa.int64()),
        ("commit_timestamp", _TIME),
        ("leader_epoch", pa.int32()),
        ("generation", pa.int32()),
        ("protocol", pa.string()),
        ("leader", pa.string()),
        ("state_timestamp", _TIME),
        ("members", pa.list_(_MEMBER)),
        ("error", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("log_timestamp", _TIME),
    ]
)
"""One row per derived event, skipped, undecodable or rejected record; columns a kind lacks are null (``key``
and ``value`` are only an undecodable or rejected record's)."""


def decode_batches(batches: Iterator[pa.RecordBatch], source: Source) -> Iterator[pa.RecordBatch]:
    """:func:`decode_batch` over each batch: the function ``mapInArrow`` runs."""
    for batch in batches:
        yield decode_batch(batch, source)


def decode_batch(batch: pa.RecordBatch, source: Source) -> pa.RecordBatch:
    """The :data:`DECODED_SCHEMA` rows of a batch with :data:`INPUT_COLUMNS` (timestamps as Arrow timestamps)."""
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    partitions = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    times = batch.column("timestamp").cast(_TIME).cast(pa.int64()).to_pylist()
    rows: list[dict[str, Any]] = []
    for key, value, partition, offset, time in zip(keys, values, partitions, offsets, times, strict=True):
        where = {"source_partition": partition, "source_offset": offset, "log_timestamp": time}
        try:
            events = _events(key, value, source)
        except RecordRejected as exc:
            rows.append({"kind": "rejected", "error": str(exc), "key": key, "value": value, **where})
            continue
        except (DecodeError, ValidationError, UnicodeDecodeError) as exc:
            rows.append({"kind": "undecodable", "error": str(exc), "key": key, "value": value, **where})
            continue
        rows.extend({**_row(event), **where} for event in events)
        if not events:
            rows.append({"kind": "skipped", **where})
    return pa.RecordBatch.from_pylist(rows, schema=DECODED_SCHEMA)


def _events(key: bytes | None, value: bytes | None, source: Source) -> list[DerivedEvent]:
    if source == "derived-events":
        return [] if value is None else [event for group in decode_record(value) for event in group.expanded()]
    if key is None:
        raise DecodeError(None, "key", None, 0, "the record has no key")  # as the worker's source says it
    return checked_events(decode(key, value))


def _row(event: DerivedEvent) -> dict[str, Any]:
    """The columns of one derived event (timestamps in microseconds)."""
    match event:
        case OffsetCommitted():
            return {
                "kind": event.kind,
                "group": event.group,
                "topic": event.topic,
                "partition": event.partition,
                "committed_offset": event.offset,
                "commit_timestamp": event.commit_timestamp * 1000,
                "leader_epoch": event.leader_epoch,
            }
        case OffsetDeleted():
            return {"kind": event.kind, "group": event.group, "topic": event.topic, "partition": event.partition}
        case GroupAssigned():
            return {
                "kind": event.kind,
                "group": event.group,
                "generation": event.generation,
                "protocol": event.protocol,
                "leader": event.leader,
                "state_timestamp": None if event.state_timestamp is None else event.state_timestamp * 1000,
                "members": [member.model_dump() for member in event.members],
            }
        case (
            GroupDeleted()
            | ConsumerGroupEpoch()
            | ConsumerGroupTopics()
            | ConsumerGroupMember()
            | ConsumerGroupMemberLeft()
            | ConsumerGroupMemberAssignment()
            | ConsumerGroupTargetAssignment()
            | ConsumerGroupRegex()
            | ConsumerGroupRegexDeleted()
        ):
            return {"kind": event.kind, "group": event.group}
