"""Table writes whose changelog records go out together, one per key.

A Faust table sends one changelog record per assignment through its
producer buffer, at about 125 µs of CPU each (measured: a no-op agent took
79 µs per event, the same agent writing one table key per event 205 µs).
kagent writes its tables through a :class:`ChangelogWriter` instead: a write
updates the table's store at once, so every reader sees it, and stages its
changelog record; :meth:`ChangelogWriter.flush` sends what is staged, the
last value of each key only (what the compacted changelog keeps anyway), as
whole record batches (:mod:`kagent.worker.record_batches`), and waits until
the broker has it. The records are the ones Faust would
write (same topic, partition, key and value serialization), so Faust's
recovery reads them as its own.

A flush is bounded from the moment it starts: it fails
(:class:`ChangelogWriteError`, its records staged again for the next flush)
once :data:`~kagent.worker.record_batches.SEND_TIMEOUT` seconds pass without
progress, whether it waits for the producer's metadata, for room in its
accumulator, or for the broker's acknowledgement. The caller tries again
when it sees fit (storage before it acknowledges a batch, the evaluator at
its next round).

A :class:`PublishedTable` is written the same way but kept nowhere else: its
records go to its topic only, and no worker restores it or holds it in memory.

Each stage that writes tables has a writer of its own. Storage's two tasks
share one: the derived-events agent flushes after each batch (before those
events are acknowledged), the end-offsets task after each poll it applies;
their flushes go one at a time, in the order they were called.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import faust
import orjson
from aiokafka.errors import KafkaError
from faust.exceptions import ProducerSendError
from faust.types import TopicT

from kagent.core.table_keys import partition_of_group
from kagent.worker.record_batches import SEND_TIMEOUT, OutgoingRecord, acknowledged, send_batches

__all__ = ["PRODUCER_ERRORS", "ChangelogWriteError", "ChangelogWriter", "PublishedTable"]

PRODUCER_ERRORS = (KafkaError, ProducerSendError)
"""What a send through Faust's producer raises when the broker or the producer fails
(Faust wraps aiokafka's errors raised at once, such as ``ProducerClosed`` at shutdown)."""


class PublishedTable:
    """A table that lives in its topic only: records keyed and partitioned as a group table's
    changelog is (JSON keys, raw values, on the group's partition), written and never read back.

    For figures the worker recomputes from its other tables whenever it needs them and publishes
    for others (the partition-lag history): restoring them at start, holding them in memory and
    restoring them on another worker would buy nothing.
    """

    def __init__(self, topic: TopicT, partitions: int, group_of: Callable[[str], str]) -> None:
        self.topic = topic
        self.name = topic.get_topic_name()
        self._partitions = partitions
        self._group_of = group_of

    def partition_for_key(self, key: str) -> int:
        """The partition of the group ``key`` belongs to."""
        return partition_of_group(self._group_of(key), self._partitions)


class ChangelogWriteError(Exception):
    """The producer could not send a flush's changelog records (they are staged again)."""


class ChangelogWriter:
    """Writes to kagent's tables, their changelog records batched per flush."""

    def __init__(self, app: faust.App, timeout: float = SEND_TIMEOUT) -> None:
        """``timeout``: seconds a flush may go without progress before it fails."""
        self._app = app
        self._timeout = timeout
        self._staged: dict[str, _Staged] = {}
        """Table name -> the table and its keys' staged values (None: a tombstone), newest only."""
        self._sending = asyncio.Lock()
        self._flushing: tuple[float, int] | None = None
        """(since when, how many records) of the flush sending now."""

    @property
    def flushing(self) -> str | None:
        """The flush under way, said in words (records and seconds); None if none is."""
        if self._flushing is None:
            return None
        since, records = self._flushing
        return f"a flush of {records} changelog records waiting {time.monotonic() - since:.0f} s for the broker"

    @property
    def staged(self) -> int:
        """Changelog records waiting for the next flush."""
        return sum(len(values) for _, values in self._staged.values())

    def set(self, table: faust.Table, key: Any, value: bytes) -> None:
        """``table[key] = value`` now; its changelog record at the next flush."""
        table.data[key] = value
        self._stage(table, key, value)

    def delete(self, table: faust.Table, key: Any) -> None:
        """Remove ``key`` from ``table`` now (if there); its tombstone at the next flush."""
        if key in table.data:
            del table.data[key]
            self._stage(table, key, None)

    def publish(self, table: PublishedTable, key: str, value: bytes | None) -> None:
        """Stage ``key``'s record in ``table``'s topic (None: a tombstone) for the next flush."""
        self._stage(table, key, value)

    def _stage(self, table: faust.Table | PublishedTable, key: Any, value: bytes | None) -> None:
        staged = self._staged.get(table.name)  # by table, then by key: no (name, key) tuple per write
        if staged is None:
            staged = self._staged[table.name] = (table, {})
        staged[1][key] = value

    async def flush(self) -> None:
        """Send every staged changelog record and wait until the broker has each.

        Flushes go one at a time: a flush called while another is sending
        waits for it, then sends what is staged by then. So when a flush
        returns, everything staged before it was called is in the changelog,
        and records staged later are sent after (in time, on every
        partition) those staged earlier.

        If the producer fails, or the flush goes the writer's ``timeout``
        (:data:`~kagent.worker.record_batches.SEND_TIMEOUT`) without
        progress (waiting for metadata, for room in the producer's
        accumulator or for the broker's acknowledgement), what this flush
        took is staged again (unless a newer write of the same key was
        staged meanwhile), so the next flush sends it, and
        :class:`ChangelogWriteError` is raised.
        """
        async with self._sending:
            await self._send_staged()

    async def _send_staged(self) -> None:
        if not self._staged:
            return
        staged, self._staged = self._staged, {}
        records = sum(len(values) for _, values in staged.values())
        self._flushing = (time.monotonic(), records)
        try:
            await acknowledged(await send_batches(self._app, _changelog_records(staged), self._timeout), self._timeout)
        except BaseException as exc:
            for name, (table, values) in staged.items():  # staged again, under any newer write of a key
                newer = self._staged.get(name)
                self._staged[name] = (table, {**values, **newer[1]} if newer is not None else values)
            if isinstance(exc, PRODUCER_ERRORS):
                raise ChangelogWriteError(f"{records} changelog records not sent: {exc!r}") from exc
            raise
        finally:
            self._flushing = None


_Staged = tuple[faust.Table | PublishedTable, dict[Any, bytes | None]]
"""A table and its keys' staged values (None: a tombstone)."""


def _changelog_records(staged: dict[str, _Staged]) -> Iterator[OutgoingRecord]:
    """The changelog record Faust would write for each staged ``table[key] = value`` (None: a tombstone).

    kagent's tables (:mod:`kagent.worker.topology`) have JSON keys and raw values; those are
    encoded here directly (Faust's codec registry costs 3 µs a record), any other through Faust.
    Each table's topic name and serializers are looked up once per flush, not once per record.
    """
    for table, values in staged.values():
        route = _Route.of(table)
        for key, value in values.items():
            yield route.record(table, key, value)


class _Route:
    """Where and how one table's changelog records are written."""

    def __init__(self, topic: TopicT | None, name: str, json_keys: bool, raw_values: bool) -> None:
        self.topic = topic
        self.name = name
        self.json_keys = json_keys
        self.raw_values = raw_values

    @classmethod
    def of(cls, table: faust.Table | PublishedTable) -> _Route:
        if isinstance(table, PublishedTable):
            return cls(None, table.name, True, True)
        topic = table.changelog_topic
        return cls(topic, topic.get_topic_name(), table.key_serializer == "json", table.value_serializer == "raw")

    def record(self, table: faust.Table | PublishedTable, key: Any, value: bytes | None) -> OutgoingRecord:
        if self.json_keys and type(key) is str:
            key_bytes: bytes | None = json_key(key)
        else:
            assert self.topic is not None
            key_bytes, _ = self.topic.prepare_key(key, table.key_serializer)  # type: ignore[union-attr]
        if value is not None and not self.raw_values:
            assert self.topic is not None
            value, _ = self.topic.prepare_value(value, table.value_serializer)  # type: ignore[union-attr]
        return self.name, table.partition_for_key(key), key_bytes, value


def json_key(key: str) -> bytes:
    """``key`` as a JSON string, byte for byte what ``json.dumps`` writes (kagent's changelogs
    have always held these bytes, and a compacted topic keeps one record per key's bytes): orjson's
    for ASCII without DEL, where the two agree and orjson costs a fifth."""
    if key.isascii() and "\x7f" not in key:
        return orjson.dumps(key)
    return json.dumps(key).encode()
