"""Restoring a table's changelog partitions in bulk, before Faust's recovery reads the rest.

Faust's recovery applies a changelog record at a time through its consumer,
its conductor and its changelog queue: about 150 µs of the event loop's time
a record on this machine, 36 s for the 211,000 records of 5,000 groups and
minutes at 50,000 (``benchmarks/bench_hold.py``). A plain aiokafka consumer
reads the same records at several hundred thousand a second.

When changelog partitions become active on a worker (assigned at start or
after a rebalance), kagent's table manager
(:mod:`kagent.worker.table_recovery`) reads them from their beginning to
their end with one consumer of its own (:func:`read_partitions`), before
Faust's recovery starts, and each table's :class:`BulkRestoredStore` applies
its records as Faust's recovery would (the last value of each key; a
tombstone deletes it). The store then tells Faust's recovery, once, that it
holds the partition up to the last offset read (``persisted_offset``, the
hook Faust's RocksDB store uses for the same purpose), so Faust reads only
the records written since. Anything the bulk read does not finish (the
cluster unreachable, :data:`RESTORE_TIMEOUT` passed) is left to Faust's
recovery, from the last record applied: nothing is lost, only slower.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka.structs import TopicPartition
from faust.stores.memory import Store as MemoryStore
from faust.types import TP

from kagent.connections import KafkaConnection

__all__ = ["FETCH_MAX_BYTES", "RESTORE_TIMEOUT", "BulkRestoredStore", "read_partitions"]

log = logging.getLogger(__name__)

RESTORE_TIMEOUT = 300.0
"""Seconds one bulk restore may take; what it has not read by then is left to Faust's recovery."""

FETCH_MAX_BYTES = 64 * 1024 * 1024
"""Bytes one fetch of the bulk read may return (aiokafka's default is 50 MB; partitions 8 MB each)."""


async def read_partitions(
    kafka: KafkaConnection,
    partitions: Iterable[TopicPartition],
    apply: Callable[[TopicPartition, bytes | None, bytes | None], None],
    *,
    timeout: float = RESTORE_TIMEOUT,
) -> dict[TopicPartition, int]:
    """Read ``partitions`` from their log start to their log end (as ListOffsets says when the read
    begins), handing each record to ``apply(partition, key, value)`` in offset order per partition;
    for each partition that had records, the last offset applied, or the offset before ListOffsets'
    end if that is lower (records after it may be applied again, to the same effect). On a Kafka
    error or once ``timeout`` seconds pass, what was applied so far (logged with the reason)."""
    wanted = sorted(set(partitions))
    done: dict[TopicPartition, int] = {}
    if not wanted:
        return done
    consumer = kafka.consumer(
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=FETCH_MAX_BYTES,
        max_partition_fetch_bytes=FETCH_MAX_BYTES // 8,
    )
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            await consumer.start()
            consumer.assign(wanted)
            ends = await consumer.end_offsets(wanted)
            starts = await consumer.beginning_offsets(wanted)
            left = {tp for tp in wanted if ends[tp] > starts[tp]}
            for tp in left:
                consumer.seek(tp, starts[tp])
            while left:
                fetched = await consumer.getmany(*left, timeout_ms=1000, max_records=50_000)
                for tp, records in fetched.items():
                    for record in records:
                        apply(tp, record.key, record.value)
                    if records:
                        # Never past the end ListOffsets gave: Faust's recovery takes its highwater from
                        # ListOffsets too and fails on a persisted offset above it (its consistency check).
                        # Tansu answers the last batch's base offset + 1, so there the last batch is read
                        # again by Faust, which applies it the same way.
                        done[tp] = min(records[-1].offset, ends[tp] - 1)
                        if records[-1].offset + 1 >= ends[tp]:
                            left.discard(tp)
                await asyncio.sleep(0)  # the rest of the worker runs between fetches
    except Exception as exc:  # noqa: BLE001 -- whatever stops the bulk read, Faust's recovery reads the rest
        log.warning(
            "bulk restore of %d changelog partitions stopped after %.1f s (%r); Faust's recovery reads the rest",
            len(wanted),
            time.monotonic() - started,
            exc,
        )
    finally:
        await consumer.stop()
    return done


class BulkRestoredStore(MemoryStore):  # type: ignore[misc]
    """Faust's in-memory store, which takes changelog records restored in bulk and hands Faust's
    recovery, once per partition, the last offset restored."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if (self.key_serializer, self.value_serializer) != ("json", "raw"):
            raise TypeError(
                f"table {self.table_name!r}: a bulk-restored store takes JSON keys and raw values, "
                f"not {self.key_serializer!r} keys and {self.value_serializer!r} values"
            )
        self._restored: dict[TP, int] = {}
        """Partitions restored in bulk whose last offset Faust's recovery has not asked for yet."""

    def apply(self, tp: TopicPartition, key: bytes | None, value: bytes | None) -> None:
        """One changelog record, as Faust's recovery applies it (keys are JSON, values raw)."""
        decoded = json.loads(key) if key is not None else None
        if value is None:
            self.data.pop(decoded, None)
            self._key_partition.pop(decoded, None)
        else:
            self.data[decoded] = value
            self._key_partition[decoded] = tp.partition

    def restored(self, tp: TopicPartition, offset: int) -> None:
        """Records of ``tp`` up to ``offset`` were applied in bulk."""
        self._restored[TP(tp.topic, tp.partition)] = offset

    def forget_restored(self, keep: set[TP]) -> None:
        """Drop the bulk-restored offsets of partitions not in ``keep`` (no longer active here)."""
        self._restored = {tp: offset for tp, offset in self._restored.items() if tp in keep}

    def persisted_offset(self, tp: TP) -> int | None:
        """The last offset of ``tp`` a bulk restore applied, once (Faust's recovery reads on from
        there); None otherwise, as Faust's in-memory store says."""
        return self._restored.pop(tp, None)
