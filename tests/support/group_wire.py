"""The group protocol on the wire: a relay that records what real clients send to join a group.

Tansu 0.6 keeps each member's subscription and assignment (it relays them
between the members as JoinGroup and SyncGroup require) but its DescribeGroups
answers every member with an empty client id, host, metadata and assignment,
whatever the client and the request version (its storage layer builds that
answer with those fields empty), and it writes no ``__consumer_offsets``. So
the bytes a real client writes never reach kagent through that broker; this
module takes them from the wire instead:

- :class:`RecordingRelay` stands between the clients and the broker (which
  advertises the relay, so every connection after bootstrap goes through it
  too), passes every byte as it is, and keeps each JoinGroup and SyncGroup
  request with its answer, the client id of its header and the client's host.
- :func:`generations` reads them back, with the message layouts of Kafka's
  ``JoinGroup*.json`` and ``SyncGroup*.json`` declared here with aiokafka's
  protocol types (aiokafka speaks JoinGroup up to v5 and SyncGroup up to v3;
  kafka-python joins with the flexible v7 and v5), into each generation a
  coordinator completed: its assignor, leader, and every member with what it
  sent and what it was given.
- :func:`group_metadata_message` writes the ``__consumer_offsets`` message a
  coordinator stores for such a generation (``GroupMetadataKey`` and
  ``GroupMetadataValue`` v3 of ``shared/kafka-schemas``, again with aiokafka's
  types, not kagent's encoder), the members' blobs in it exactly as the
  clients sent them.

The relay runs its own event loop in a thread, so tests that drive blocking
clients (librdkafka, kafka-python) from threads of their own need no loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from aiokafka.protocol.types import (
    Array,
    Boolean,
    Bytes,
    CompactArray,
    CompactBytes,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    TaggedFields,
)

from kagent.tools.simulator.coordinator_records import OffsetsTopicMessage
from kagent.tools.simulator.partitioners import OFFSETS_TOPIC_PARTITIONS, offsets_partition_for

__all__ = [
    "JOIN_GROUP",
    "SYNC_GROUP",
    "Exchange",
    "Generation",
    "JoinedMember",
    "RecordingRelay",
    "generations",
    "group_metadata_message",
]

HOST = "127.0.0.1"
JOIN_GROUP, SYNC_GROUP = 11, 14
_FLEXIBLE_FROM = {JOIN_GROUP: 6, SYNC_GROUP: 4}
"""The first flexible version of each API (compact strings and tagged fields; request header v2)."""
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")

# Each message as Kafka's JSON declares it: (field, type, first version), a nested array as a list of fields.
_JOIN_REQUEST: list[Any] = [
    ("group_id", "string", 0),
    ("session_timeout_ms", "int32", 0),
    ("rebalance_timeout_ms", "int32", 1),
    ("member_id", "string", 0),
    ("group_instance_id", "string", 5),
    ("protocol_type", "string", 0),
    ("protocols", [("name", "string", 0), ("metadata", "bytes", 0)], 0),
    ("reason", "string", 8),
]
_JOIN_RESPONSE: list[Any] = [
    ("throttle_time_ms", "int32", 2),
    ("error_code", "int16", 0),
    ("generation_id", "int32", 0),
    ("protocol_type", "string", 7),
    ("protocol_name", "string", 0),
    ("leader", "string", 0),
    ("skip_assignment", "bool", 9),
    ("member_id", "string", 0),
    ("members", [("member_id", "string", 0), ("group_instance_id", "string", 5), ("metadata", "bytes", 0)], 0),
]
_SYNC_REQUEST: list[Any] = [
    ("group_id", "string", 0),
    ("generation_id", "int32", 0),
    ("member_id", "string", 0),
    ("group_instance_id", "string", 3),
    ("protocol_type", "string", 5),
    ("protocol_name", "string", 5),
    ("assignments", [("member_id", "string", 0), ("assignment", "bytes", 0)], 0),
]
_SYNC_RESPONSE: list[Any] = [
    ("throttle_time_ms", "int32", 1),
    ("error_code", "int16", 0),
    ("protocol_type", "string", 5),
    ("protocol_name", "string", 5),
    ("assignment", "bytes", 0),
]
_MESSAGES = {JOIN_GROUP: (_JOIN_REQUEST, _JOIN_RESPONSE), SYNC_GROUP: (_SYNC_REQUEST, _SYNC_RESPONSE)}
_LAST_VERSION = {JOIN_GROUP: 9, SYNC_GROUP: 5}


def _schema(fields: Sequence[Any], version: int, flexible: bool) -> Schema:
    """The layout of ``fields`` in ``version``: those present in it, compact and tagged when ``flexible``."""
    scalars = {"int16": Int16, "int32": Int32, "bool": Boolean}
    entries: list[tuple[str, Any]] = []
    for name, kind, since in fields:
        if version < since:
            continue
        if isinstance(kind, list):
            nested = tuple(zip(*(lambda n: (n.names, n.fields))(_schema(kind, version, flexible)), strict=True))
            entries.append((name, CompactArray(*nested) if flexible else Array(*nested)))
        elif kind == "string":
            entries.append((name, CompactString("utf-8") if flexible else String("utf-8")))
        elif kind == "bytes":
            entries.append((name, CompactBytes if flexible else Bytes))
        else:
            entries.append((name, scalars[kind]))
    if flexible:
        entries.append(("tags", TaggedFields))
    return Schema(*entries)


def _named(schema: Schema, values: Sequence[Any]) -> dict[str, Any]:
    """A decoded struct's values by field name (nested arrays as lists of dicts; tagged fields left out)."""
    named: dict[str, Any] = {}
    for name, kind, value in zip(schema.names, schema.fields, values, strict=True):
        if name == "tags":
            continue
        if isinstance(kind, Array):
            assert isinstance(kind.array_of, Schema)  # every array here is of structs
            named[name] = [_named(kind.array_of, item) for item in value or ()]
        else:
            named[name] = value
    return named


@dataclass(frozen=True)
class Exchange:
    """One JoinGroup or SyncGroup request a client sent, and the broker's answer (None if none came)."""

    api_key: int
    api_version: int
    client_id: str | None
    """The client id of the request's header: what a coordinator stores as the member's client id."""
    client_host: str
    """The client's address as the broker saw it, written as Kafka's coordinator writes it (``/127.0.0.1``)."""
    request: dict[str, Any]
    response: dict[str, Any] | None


def _decode(api_key: int, version: int, body: bytes, response: bool) -> dict[str, Any]:
    if not 0 <= version <= _LAST_VERSION[api_key]:
        raise ValueError(f"API {api_key} v{version} is not declared here (0-{_LAST_VERSION[api_key]})")
    flexible = version >= _FLEXIBLE_FROM[api_key]
    schema = _schema(_MESSAGES[api_key][1 if response else 0], version, flexible)
    data = BytesIO(body)
    if flexible and response:
        TaggedFields.decode(data)  # the response header v1's
    decoded = _named(schema, schema.decode(data))
    if data.read():
        raise ValueError(f"API {api_key} v{version}: bytes left after the {'response' if response else 'request'}")
    return decoded


@dataclass
class RecordingRelay:
    """Relays ``port`` to the broker on ``upstream`` and records every JoinGroup and SyncGroup exchange.

    Start it with :meth:`start` (it serves from a thread of its own) and stop it with :meth:`stop`.
    """

    port: int
    upstream: int
    _exchanges: list[Exchange] = field(default_factory=list)
    _unread: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None

    def start(self) -> RecordingRelay:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=f"relay-{self.port}", daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connected, HOST, self.port), loop
        ).result(10)
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        loop.close()
        self._loop = None

    def exchanges(self) -> list[Exchange]:
        """Every exchange recorded so far, in the order the answers came."""
        with self._lock:
            return list(self._exchanges)

    def unread(self) -> list[str]:
        """Why each exchange that could not be read was not (it was relayed all the same)."""
        with self._lock:
            return list(self._unread)

    async def _connected(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection(HOST, self.upstream)
        except OSError:
            client_writer.close()
            return
        peer = client_writer.get_extra_info("peername")
        host = f"/{peer[0]}" if peer else ""
        asked: dict[int, tuple[int, int, str | None, bytes]] = {}
        """Correlation id -> a recorded request's API key, version, client id and body, for its answer."""

        def request(frame: bytes) -> None:
            api_key, version, correlation_id = _HEADER.unpack_from(frame)
            if api_key not in _MESSAGES:
                return
            at = _HEADER.size
            (size,) = struct.unpack_from(">h", frame, at)
            client_id = frame[at + 2 : at + 2 + size].decode() if size >= 0 else None
            at += 2 + max(size, 0)
            body = BytesIO(frame[at:])
            if version >= _FLEXIBLE_FROM[api_key]:
                TaggedFields.decode(body)  # the request header v2's
            asked[correlation_id] = (api_key, version, client_id, body.read())

        def response(frame: bytes) -> None:
            (correlation_id,) = _SIZE.unpack_from(frame)
            if correlation_id not in asked:
                return
            api_key, version, client_id, body = asked.pop(correlation_id)
            try:
                request = _decode(api_key, version, body, response=False)
                answer = _decode(api_key, version, frame[_SIZE.size :], response=True)
            except (ValueError, TypeError, struct.error) as exc:
                with self._lock:
                    self._unread.append(f"API {api_key} v{version} of {client_id!r}: {exc!r}")
                return
            with self._lock:
                self._exchanges.append(Exchange(api_key, version, client_id, host, request, answer))

        pumps = [
            asyncio.ensure_future(_pump(client_reader, broker_writer, request)),
            asyncio.ensure_future(_pump(broker_reader, client_writer, response)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass  # the relay stops: the connection ends here, not as an error asyncio would log
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_writer, broker_writer):
                writer.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, note: Any) -> None:
    """Copy length-prefixed frames from ``reader`` to ``writer`` as they are, showing each to ``note`` first."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        while True:
            size = await reader.readexactly(4)
            frame = await reader.readexactly(_SIZE.unpack(size)[0])
            note(frame)
            writer.write(size + frame)
            await writer.drain()


@dataclass(frozen=True)
class JoinedMember:
    """One member of a completed generation: what it sent to join, and what it was given."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: bytes
    """Its JoinGroup metadata for the generation's protocol: a ConsumerProtocolSubscription blob."""
    assignment: bytes
    """What the leader's SyncGroup gave it: a ConsumerProtocolAssignment blob."""
    received: bytes | None
    """What its own SyncGroup answer carried (None if it did not sync in this generation)."""


@dataclass(frozen=True)
class Generation:
    """A generation a coordinator completed (the leader synced), as the members' exchanges show it."""

    group: str
    generation_id: int
    protocol_type: str
    protocol: str
    leader: str
    members: tuple[JoinedMember, ...]
    """By member id."""


def generations(exchanges: Iterable[Exchange], group: str) -> list[Generation]:
    """Every generation of ``group`` whose leader's SyncGroup was answered without error, oldest first.

    A member's part comes from its last JoinGroup answered without error in that generation (its
    client id, host, timeouts and the metadata it sent for the chosen protocol) and its SyncGroup.
    """
    joins: dict[tuple[int, str], Exchange] = {}
    syncs: dict[tuple[int, str], Exchange] = {}
    for exchange in exchanges:
        if exchange.request["group_id"] != group or exchange.response is None or exchange.response["error_code"]:
            continue
        if exchange.api_key == JOIN_GROUP:
            joins[(exchange.response["generation_id"], exchange.response["member_id"])] = exchange
        else:
            syncs[(exchange.request["generation_id"], exchange.request["member_id"])] = exchange
    completed = []
    for (generation_id, member_id), sync in sorted(syncs.items()):
        join = joins.get((generation_id, member_id))
        if join is None or join.response is None or join.response["leader"] != member_id:
            continue  # not the leader's sync
        answer = join.response
        protocol = answer["protocol_name"]
        given = {a["member_id"]: a["assignment"] for a in sync.request["assignments"]}
        members = []
        for joined in sorted(answer["members"], key=lambda m: m["member_id"]):
            own = joins.get((generation_id, joined["member_id"]))
            if own is None:
                raise ValueError(f"generation {generation_id} of {group!r}: no JoinGroup of {joined['member_id']!r}")
            received = syncs.get((generation_id, joined["member_id"]))
            (metadata,) = [p["metadata"] for p in own.request["protocols"] if p["name"] == protocol]
            members.append(
                JoinedMember(
                    member_id=joined["member_id"],
                    group_instance_id=joined.get("group_instance_id"),
                    client_id=own.client_id or "",
                    client_host=own.client_host,
                    session_timeout_ms=own.request["session_timeout_ms"],
                    rebalance_timeout_ms=own.request["rebalance_timeout_ms"],
                    subscription=metadata,
                    assignment=given.get(joined["member_id"], b""),
                    received=received.response["assignment"] if received and received.response else None,
                )
            )
        completed.append(
            Generation(
                group=group,
                generation_id=generation_id,
                protocol_type=join.request["protocol_type"],
                protocol=protocol,
                leader=member_id,
                members=tuple(members),
            )
        )
    return completed


_GROUP_METADATA_KEY = Schema(("version", Int16), ("group", String("utf-8")))
_GROUP_METADATA_VALUE_V3 = Schema(
    ("version", Int16),
    ("protocol_type", String("utf-8")),
    ("generation", Int32),
    ("protocol", String("utf-8")),
    ("leader", String("utf-8")),
    ("current_state_timestamp", Int64),
    (
        "members",
        Array(
            ("member_id", String("utf-8")),
            ("group_instance_id", String("utf-8")),
            ("client_id", String("utf-8")),
            ("client_host", String("utf-8")),
            ("rebalance_timeout", Int32),
            ("session_timeout", Int32),
            ("subscription", Bytes),
            ("assignment", Bytes),
        ),
    ),
)
_GROUP_METADATA_RECORD = 2
"""The key version of a group's metadata (its record type)."""


def group_metadata_message(generation: Generation, state_timestamp_ms: int) -> OffsetsTopicMessage:
    """The ``__consumer_offsets`` message Kafka's coordinator appends when ``generation`` completes
    (``GroupMetadataValue`` v3, with static membership), on the group's partition of a topic of
    Kafka's default partition count; each member's blobs exactly as its client sent and was given them."""
    key = _GROUP_METADATA_KEY.encode((_GROUP_METADATA_RECORD, generation.group))
    value = _GROUP_METADATA_VALUE_V3.encode(
        (
            3,
            generation.protocol_type,
            generation.generation_id,
            generation.protocol,
            generation.leader,
            state_timestamp_ms,
            [
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.subscription,
                    m.assignment,
                )
                for m in generation.members
            ],
        )
    )
    return OffsetsTopicMessage(offsets_partition_for(generation.group, OFFSETS_TOPIC_PARTITIONS), key, value)
