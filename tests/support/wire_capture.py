"""A relay before the embedded broker that keeps the group requests clients send and their answers.

Tansu 0.6 keeps no ``__consumer_offsets``, and its DescribeGroups (v0-v5)
gives a member's id but no protocol, client id, host, metadata or assignment,
so what a client writes in its subscription, and its group's leader in the
assignments, is seen nowhere but on the wire. This relay passes every byte
between the clients and the broker as it is, and keeps each JoinGroup and
SyncGroup request (versions 0-9 and 0-5) with the broker's answer: who sent
it (the client id of its header, the address it came from) and the fields of
both, decoded with aiokafka's protocol types (the flexible versions, which
aiokafka does not speak, declared here from Kafka's JoinGroup and SyncGroup
JSON message definitions). From them :func:`generation` pieces together what
a group coordinator stores for a completed generation (:func:`generations`,
every one of a group): each member's subscription as it sent it in the
JoinGroup that made it a member, its assignment as the leader sent it in
SyncGroup, and what its own SyncGroup answer gave it.

A generation becomes the ``__consumer_offsets`` record a coordinator writes of
it in two ways, for two kinds of test:

- :meth:`CapturedGeneration.record` is kagent's :class:`GroupMetadata`, each
  member's blobs decoded by kagent's codec: for tests that check the codec on
  a client's bytes (its encoder must write them back byte for byte).
- :meth:`CapturedGeneration.message` is the message's bytes, encoded here from
  Kafka's ``GroupMetadataKey`` and ``GroupMetadataValue`` v3 with aiokafka's
  protocol types and never through kagent's codec, the blobs in it exactly as
  the clients sent them: for tests whose worker must read what a coordinator
  would write, so that a fault of kagent's encoder cannot hide one of its
  decoder.

The broker advertises the relay's address, so every connection a client makes
after bootstrap goes through it too. The relay runs on a thread and event loop
of its own, so a fixture of any scope, sync or async, can hold it, and clients
in other processes (Java, librdkafka) are recorded alike.

Use::

    with recorded_broker(tmp_path) as (broker, relay):
        ...  # clients on relay.bootstrap_servers
        captured = generation(relay.exchanges(group="my-group"), "my-group")
        captured.members[0].subscription  # the bytes the client sent
        every = generations(relay.exchanges(group="my-group"), "my-group")  # oldest first
        print("\n".join(map(str, relay.exchanges())))  # what was said, one line an exchange
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from io import BytesIO
from pathlib import Path
from typing import Any

from aiokafka.protocol.group import (
    JoinGroupRequest_v0,
    JoinGroupRequest_v1,
    JoinGroupRequest_v5,
    JoinGroupResponse_v0,
    JoinGroupResponse_v2,
    JoinGroupResponse_v5,
    SyncGroupRequest_v0,
    SyncGroupRequest_v3,
    SyncGroupResponse_v0,
    SyncGroupResponse_v1,
)
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

from kagent.core.consumer_offsets import GroupMember, GroupMetadata, decode_assignment, decode_subscription
from kagent.tools.embedded import EmbeddedBroker, free_port
from kagent.tools.simulator.coordinator_records import OffsetsTopicMessage
from kagent.tools.simulator.partitioners import OFFSETS_TOPIC_PARTITIONS, offsets_partition_for

__all__ = [
    "JOIN_GROUP",
    "SYNC_GROUP",
    "CapturedGeneration",
    "CapturedMember",
    "GroupExchange",
    "WireRecorder",
    "decode_request",
    "decode_response",
    "generation",
    "generations",
    "recorded_broker",
]

HOST = "127.0.0.1"
JOIN_GROUP, SYNC_GROUP = 11, 14
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
_STRING = CompactString("utf-8")


def _flexible_join_group_request(version: int) -> Schema:
    """JoinGroupRequest v6+ (Kafka's JoinGroupRequest.json: flexible from 6, ``Reason`` from 8)."""
    return Schema(
        ("group", _STRING),
        ("session_timeout", Int32),
        ("rebalance_timeout", Int32),
        ("member_id", _STRING),
        ("group_instance_id", _STRING),
        ("protocol_type", _STRING),
        (
            "group_protocols",
            CompactArray(("protocol_name", _STRING), ("protocol_metadata", CompactBytes), ("tags", TaggedFields)),
        ),
        *((("reason", _STRING),) if version >= 8 else ()),
        ("tags", TaggedFields),
    )


def _flexible_join_group_response(version: int) -> Schema:
    """JoinGroupResponse v6+ (flexible from 6, ``ProtocolType`` from 7, ``SkipAssignment`` from 9)."""
    return Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("generation_id", Int32),
        *((("protocol_type", _STRING),) if version >= 7 else ()),
        ("group_protocol", _STRING),
        ("leader_id", _STRING),
        *((("skip_assignment", Boolean),) if version >= 9 else ()),
        ("member_id", _STRING),
        (
            "members",
            CompactArray(
                ("member_id", _STRING),
                ("group_instance_id", _STRING),
                ("member_metadata", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


def _flexible_sync_group_request(version: int) -> Schema:
    """SyncGroupRequest v4+ (flexible from 4, ``ProtocolType`` and ``ProtocolName`` from 5)."""
    return Schema(
        ("group", _STRING),
        ("generation_id", Int32),
        ("member_id", _STRING),
        ("group_instance_id", _STRING),
        *((("protocol_type", _STRING), ("protocol_name", _STRING)) if version >= 5 else ()),
        (
            "group_assignment",
            CompactArray(("member_id", _STRING), ("member_metadata", CompactBytes), ("tags", TaggedFields)),
        ),
        ("tags", TaggedFields),
    )


def _flexible_sync_group_response(version: int) -> Schema:
    """SyncGroupResponse v4+ (flexible from 4, ``ProtocolType`` and ``ProtocolName`` from 5)."""
    return Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        *((("protocol_type", _STRING), ("protocol_name", _STRING)) if version >= 5 else ()),
        ("member_assignment", CompactBytes),
        ("tags", TaggedFields),
    )


_LAYOUTS: dict[tuple[int, int], tuple[Schema, Schema]] = {
    (JOIN_GROUP, 0): (JoinGroupRequest_v0.SCHEMA, JoinGroupResponse_v0.SCHEMA),
    (JOIN_GROUP, 1): (JoinGroupRequest_v1.SCHEMA, JoinGroupResponse_v0.SCHEMA),
    **{(JOIN_GROUP, v): (JoinGroupRequest_v1.SCHEMA, JoinGroupResponse_v2.SCHEMA) for v in (2, 3, 4)},
    (JOIN_GROUP, 5): (JoinGroupRequest_v5.SCHEMA, JoinGroupResponse_v5.SCHEMA),
    **{(JOIN_GROUP, v): (_flexible_join_group_request(v), _flexible_join_group_response(v)) for v in range(6, 10)},
    (SYNC_GROUP, 0): (SyncGroupRequest_v0.SCHEMA, SyncGroupResponse_v0.SCHEMA),
    **{(SYNC_GROUP, v): (SyncGroupRequest_v0.SCHEMA, SyncGroupResponse_v1.SCHEMA) for v in (1, 2)},
    (SYNC_GROUP, 3): (SyncGroupRequest_v3.SCHEMA, SyncGroupResponse_v1.SCHEMA),
    **{(SYNC_GROUP, v): (_flexible_sync_group_request(v), _flexible_sync_group_response(v)) for v in (4, 5)},
}
"""(API key, version) -> the layouts of its request and response bodies, in aiokafka's field names."""
_FLEXIBLE = {JOIN_GROUP: 6, SYNC_GROUP: 4}
"""The first flexible version of each API: its request header (v2) and response header (v1) end in tagged fields."""


def _fields(schema: Schema, data: BytesIO) -> dict[str, Any]:
    """The fields of ``schema`` read from ``data``, by name; arrays of structs as lists of dicts."""
    out: dict[str, Any] = {}
    for name, kind in zip(schema.names, schema.fields, strict=True):
        value = kind.decode(data)
        if isinstance(kind, Array) and isinstance(kind.array_of, Schema):
            value = [dict(zip(kind.array_of.names, item, strict=True)) for item in value or ()]
        out[name] = value
    return out


@dataclass(frozen=True)
class GroupExchange:
    """One JoinGroup or SyncGroup request as a client sent it, and the broker's answer to it."""

    api_key: int
    """:data:`JOIN_GROUP` or :data:`SYNC_GROUP`."""
    api_version: int
    client_id: str | None
    """The client id of the request header."""
    client_host: str
    """The address the connection came from, as Kafka's coordinator writes it (``/127.0.0.1``)."""
    request: dict[str, Any]
    """The request's fields by aiokafka's names (``group``, ``member_id``, ``group_protocols`` of
    ``protocol_name`` and ``protocol_metadata``, ``generation_id``, ``group_assignment`` of ``member_id`` and
    ``member_metadata``...); a field its version lacks is missing."""
    response: dict[str, Any] | None = None
    """The answer's fields (``error_code``, ``generation_id``, ``group_protocol``, ``leader_id``, ``member_id``,
    ``members``; ``member_assignment``); None until it is answered."""

    def __str__(self) -> str:
        """One line: the client, the API, what it asked and what it was answered (the blobs as hex)."""
        request, response = self.request, self.response or {}
        if self.api_key == JOIN_GROUP:
            protocols = " ".join(
                f"{p['protocol_name']}={(p['protocol_metadata'] or b'').hex()}" for p in request["group_protocols"]
            )
            asked = f"JoinGroup v{self.api_version} member {request['member_id']!r} {protocols}"
            answer = (
                f"error {response.get('error_code')} generation {response.get('generation_id')} "
                f"member {response.get('member_id')!r}"
            )
        else:
            assignments = "".join(
                f" {a['member_id']}={(a['member_metadata'] or b'').hex()}" for a in request["group_assignment"] or ()
            )
            asked = (
                f"SyncGroup v{self.api_version} generation {request['generation_id']} "
                f"member {request['member_id']!r}{assignments}"
            )
            answer = f"error {response.get('error_code')} {(response.get('member_assignment') or b'').hex()}"
        return f"{self.client_id}: {asked} -> {answer if self.response is not None else 'unanswered'}"


def decode_request(frame: bytes) -> tuple[int, int, int, str | None, dict[str, Any]] | None:
    """(API key, version, correlation id, client id, fields) of a JoinGroup or SyncGroup request ``frame``
    (without its size); None for any other request. ``ValueError`` for a version not known here."""
    api_key, version, correlation_id = _HEADER.unpack_from(frame)
    if api_key not in _FLEXIBLE:
        return None
    if (api_key, version) not in _LAYOUTS:
        raise ValueError(f"API {api_key} version {version} is not known to the capture")
    body = BytesIO(frame[_HEADER.size :])
    client_id = String("utf-8").decode(body)  # a classic string in every header version
    if version >= _FLEXIBLE[api_key]:
        TaggedFields.decode(body)
    return api_key, version, correlation_id, client_id, _fields(_LAYOUTS[api_key, version][0], body)


def decode_response(api_key: int, version: int, frame: bytes) -> dict[str, Any]:
    """The fields of the answer ``frame`` (without its size) to a JoinGroup or SyncGroup request of ``version``."""
    body = BytesIO(frame[_SIZE.size :])  # after the correlation id
    if version >= _FLEXIBLE[api_key]:
        TaggedFields.decode(body)
    return _fields(_LAYOUTS[api_key, version][1], body)


@dataclass
class WireRecorder:
    """Relays ``port`` to the broker on ``upstream`` and keeps every JoinGroup and SyncGroup exchange.

    ``start()`` runs it on a thread of its own; ``stop()`` ends it. :meth:`exchanges` is what it kept so far."""

    port: int
    upstream: int

    def __post_init__(self) -> None:
        self._kept: list[GroupExchange] = []
        self._failures: list[str] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"wire-recorder-{self.port}", daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    def exchanges(self, group: str | None = None, api_key: int | None = None) -> list[GroupExchange]:
        """The exchanges kept so far (of ``group``, of ``api_key``), in the order their requests reached the
        relay. Raises ``AssertionError`` if any group request or answer could not be decoded."""
        with self._lock:
            failures, kept = list(self._failures), list(self._kept)
        if failures:
            raise AssertionError(f"the relay could not decode some group requests or answers: {failures}")
        return [
            e
            for e in kept
            if (api_key is None or e.api_key == api_key) and (group is None or e.request["group"] == group)
        ]

    def start(self) -> WireRecorder:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connected, HOST, self.port), self._loop
        ).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    async def _connected(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        peer = client_writer.get_extra_info("peername")
        client_host = peer[0] if peer else ""
        try:
            broker_reader, broker_writer = await asyncio.open_connection(HOST, self.upstream)
        except OSError:
            client_writer.close()
            return
        asked: dict[int, int] = {}
        """Correlation id -> the index in ``_kept`` of the exchange its answer completes."""
        pumps = [
            asyncio.create_task(self._pump(client_reader, broker_writer, lambda f: self._asked(f, client_host, asked))),
            asyncio.create_task(self._pump(broker_reader, client_writer, lambda f: self._answered(f, asked))),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_writer, broker_writer):
                writer.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keep: Callable[[bytes], None]) -> None:
        """Copy length-prefixed frames from ``reader`` to ``writer`` as they are, showing each to ``keep``."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                keep(frame)
                writer.write(_SIZE.pack(size) + frame)
                await writer.drain()

    def _asked(self, frame: bytes, client_host: str, asked: dict[int, int]) -> None:
        try:
            decoded = decode_request(frame)
        except (ValueError, struct.error) as exc:
            self._failed(f"request {frame[:4].hex()}: {exc!r}")
            return
        if decoded is None:
            return
        api_key, version, correlation_id, client_id, fields = decoded
        with self._lock:
            asked[correlation_id] = len(self._kept)
            self._kept.append(GroupExchange(api_key, version, client_id, f"/{client_host}", fields))

    def _answered(self, frame: bytes, asked: dict[int, int]) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame)
        at = asked.pop(correlation_id, None)
        if at is None:
            return
        with self._lock:
            exchange = self._kept[at]
        try:
            response = decode_response(exchange.api_key, exchange.api_version, frame)
        except (ValueError, struct.error) as exc:
            self._failed(f"answer to API {exchange.api_key} v{exchange.api_version}: {exc!r}")
            return
        with self._lock:
            self._kept[at] = replace(exchange, response=response)

    def _failed(self, what: str) -> None:
        with self._lock:
            self._failures.append(what)


@dataclass(frozen=True)
class CapturedMember:
    """One member of a generation as its exchanges show it."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int | None
    subscription: bytes
    """Its metadata for the group's protocol, as it sent it in the JoinGroup that made it a member."""
    assignment: bytes
    """What the leader assigned it, as the leader sent it in SyncGroup."""
    received: bytes | None
    """What the answer to its own SyncGroup of the generation gave it (None if no answer without error was
    captured, as for a member that left before it synced)."""


_GROUP_METADATA_KEY = Schema(("version", Int16), ("group", String("utf-8")))
"""Kafka's ``GroupMetadataKey``, behind its version (2: a group's metadata, the record's type)."""
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
"""Kafka's ``GroupMetadataValue`` v3 (with static membership), behind its version, as coordinators write it."""


@dataclass(frozen=True)
class CapturedGeneration:
    """A completed generation of a group as its coordinator would store it (a GroupMetadataValue's fields)."""

    group: str
    generation: int
    protocol_type: str
    protocol: str
    leader: str
    members: tuple[CapturedMember, ...]
    """In the order of the leader's SyncGroup assignments."""

    def record(self, state_timestamp_ms: int) -> GroupMetadata:
        """The GroupMetadata record (value version 3) a coordinator writes to ``__consumer_offsets`` for this
        generation, each member's blobs decoded by kagent's codec (``DecodeError`` if one does not decode; its
        encoder writes them back byte for byte, which the tests check)."""
        return GroupMetadata(
            group=self.group,
            protocol_type=self.protocol_type,
            generation=self.generation,
            protocol=self.protocol,
            leader=self.leader,
            state_timestamp=state_timestamp_ms,
            members=tuple(
                GroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=decode_subscription(m.subscription),
                    assignment=decode_assignment(m.assignment),
                )
                for m in self.members
            ),
            value_version=3,
        )

    def message(self, state_timestamp_ms: int) -> OffsetsTopicMessage:
        """The ``__consumer_offsets`` message a coordinator appends for this generation (``GroupMetadataKey``
        and ``GroupMetadataValue`` v3), on the group's partition of a topic of Kafka's default partition
        count: encoded with aiokafka's protocol types, not kagent's codec, each member's blobs exactly as its
        client sent them (a rebalance timeout the JoinGroup version lacked is written as the session timeout,
        as Kafka's coordinator does)."""
        key = _GROUP_METADATA_KEY.encode((2, self.group))
        value = _GROUP_METADATA_VALUE_V3.encode(
            (
                3,
                self.protocol_type,
                self.generation,
                self.protocol,
                self.leader,
                state_timestamp_ms,
                [
                    (
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        m.session_timeout_ms if m.rebalance_timeout_ms is None else m.rebalance_timeout_ms,
                        m.session_timeout_ms,
                        m.subscription,
                        m.assignment,
                    )
                    for m in self.members
                ],
            )
        )
        return OffsetsTopicMessage(offsets_partition_for(self.group, OFFSETS_TOPIC_PARTITIONS), key, value)


def _answered_well(exchange: GroupExchange) -> bool:
    return exchange.response is not None and not exchange.response["error_code"]


def _leader_syncs(exchanges: Sequence[GroupExchange], group: str) -> list[GroupExchange]:
    """The SyncGroups of ``group`` that carry assignments (a leader's), but for those answered with an error."""
    return [
        e
        for e in exchanges
        if e.api_key == SYNC_GROUP
        and e.request["group"] == group
        and e.request["group_assignment"]
        and (e.response is None or not e.response["error_code"])
    ]


def generation(exchanges: Sequence[GroupExchange], group: str, generation_id: int | None = None) -> CapturedGeneration:
    """Generation ``generation_id`` of ``group`` (the last one a leader assigned, when None) as its coordinator
    stores it, from ``exchanges`` (:meth:`WireRecorder.exchanges`): the leader's SyncGroup of that generation
    (not one answered with an error: the coordinator stored nothing of it) gives the members and their
    assignments; each member's JoinGroup answered with that generation (its member id in the answer) gives its
    subscription for the protocol the answer names, its client id and host, and its timeouts; its own
    SyncGroup's answer what it was given. Raises ``LookupError`` when the exchanges do not hold that
    generation whole."""
    ours = [e for e in exchanges if e.request["group"] == group]
    syncs = [
        e for e in _leader_syncs(ours, group) if generation_id is None or e.request["generation_id"] == generation_id
    ]
    if not syncs:
        raise LookupError(f"no leader's SyncGroup of group {group!r} (generation {generation_id}) was captured")
    leader = syncs[-1]
    number = leader.request["generation_id"]
    joined = {
        e.response["member_id"]: e
        for e in ours
        if e.api_key == JOIN_GROUP
        and e.response is not None
        and _answered_well(e)
        and e.response["generation_id"] == number
    }
    received = {
        e.request["member_id"]: e.response.get("member_assignment")
        for e in ours
        if e.api_key == SYNC_GROUP
        and e.response is not None
        and _answered_well(e)
        and e.request["generation_id"] == number
    }
    members = []
    for assigned in leader.request["group_assignment"]:
        join = joined.get(assigned["member_id"])
        if join is None or join.response is None:
            raise LookupError(f"no JoinGroup of member {assigned['member_id']!r} in generation {number} was captured")
        protocol = join.response["group_protocol"]
        subscriptions = {p["protocol_name"]: p["protocol_metadata"] for p in join.request["group_protocols"]}
        members.append(
            CapturedMember(
                member_id=assigned["member_id"],
                client_id=join.client_id or "",
                client_host=join.client_host,
                group_instance_id=join.request.get("group_instance_id"),
                session_timeout_ms=join.request["session_timeout"],
                rebalance_timeout_ms=join.request.get("rebalance_timeout"),
                subscription=subscriptions[protocol],
                assignment=assigned["member_metadata"],
                received=received.get(assigned["member_id"]),
            )
        )
    first = joined[leader.request["member_id"]]
    assert first.response is not None
    return CapturedGeneration(
        group=group,
        generation=number,
        protocol_type=first.request["protocol_type"],
        protocol=first.response["group_protocol"],
        leader=leader.request["member_id"],
        members=tuple(members),
    )


def generations(exchanges: Sequence[GroupExchange], group: str) -> list[CapturedGeneration]:
    """Every generation of ``group`` a coordinator completed (its leader's SyncGroup answered without error),
    oldest first, each as :func:`generation` pieces it together (``LookupError`` likewise)."""
    numbers = {e.request["generation_id"] for e in _leader_syncs(exchanges, group) if e.response is not None}
    return [generation(exchanges, group, number) for number in sorted(numbers)]


@contextlib.contextmanager
def recorded_broker(log_dir: Path) -> Iterator[tuple[EmbeddedBroker, WireRecorder]]:
    """A broker of its own behind a :class:`WireRecorder` (which it advertises, so that every client goes
    through it)."""
    port = free_port()
    with EmbeddedBroker(advertised=f"{HOST}:{port}", log_dir=log_dir) as broker:
        relay = WireRecorder(port, broker.port).start()
        try:
            yield broker, relay
        finally:
            relay.stop()
