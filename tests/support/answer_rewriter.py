"""A relay before the embedded broker that rewrites one field of chosen answers: what Tansu cannot answer.

What Tansu 0.6 (as the tests run it) never answers, measured:

- an OffsetFetch answer with an error code on one partition: it answers every
  partition asked for with error 0, even one of a topic that does not exist
  (offset -1), and nothing kagent's tests can do (no ACLs, no transactions,
  no coordinator moving) makes it answer otherwise;
- an OffsetFetch answer whose offset breaks a rule (below -1): the broker
  keeps what clients commit, and a client cannot commit one;
- a group on the consumer protocol (KIP-848): it has no
  ConsumerGroupHeartbeat (API 68), so no client can join one (librdkafka on
  ``group.protocol=consumer`` logs "ConsumerGroupHeartbeatRequest not
  supported by broker" and never joins), its ListGroups v5 gives every group
  the type ``classic``, and its ConsumerGroupDescribe (v0, the one version
  it advertises) answers any group id with no error, state ``Stable`` or
  ``Empty``, epochs -1, no members, and a classic member's id as the
  assignor: a fake of what a broker with the consumer protocol answers is
  the only way to show kagent such a group;
- a Produce answer refusing a topic's batches (an ACL that forgot the topic,
  say): it takes every write.

So this relay stands between a real worker process and the real broker, and
is the narrowest seam such an answer can be made at: it passes every byte as
it is, except, in the answers to the requests named here, the one field that
says the fault (a partition's error code and offset, a group's type), decoded
and encoded again with the same protocol types kagent reads them with. The
one answer it makes whole is ConsumerGroupDescribe's for the groups a test
describes (:attr:`AnswerRewriter.consumer_groups`): the request still goes to
the broker (as v0, the same bytes as v1), so answers keep their order on the
connection, and the broker's answer is replaced by one laid out by hand from
Kafka's message definitions (``tests/support/consumer_group_describe_bytes.py``),
not with kagent's declaration: a fake of a broker capability Tansu lacks, whose
groups, offsets, topics and coordinator stay the real broker's. What
ApiVersions v0 (what aiokafka asks) advertises can be changed too
(:attr:`AnswerRewriter.api_versions`): ConsumerGroupDescribe up to v1, so
clients ask for v1 and are answered in it, or not at all, as a broker
without the API. The
broker advertises the relay's address, so every connection a client makes
after bootstrap goes through it too. What it rewrites can be changed while it
runs (:attr:`AnswerRewriter.offset_fetch_errors` and the others are plain
dicts and sets), so a test can turn a fault on after the worker has seen the
group whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from aiokafka.protocol import produce
from aiokafka.protocol.admin import ApiVersionResponse_v0
from aiokafka.protocol.api import Response
from aiokafka.protocol.commit import OffsetFetchResponse_v1, OffsetFetchResponse_v2, OffsetFetchResponse_v3
from aiokafka.protocol.types import String, TaggedFields

from kagent.core.list_groups import ListGroupsResponse_v5
from kagent.tools.embedded import EmbeddedBroker, free_port
from tests.support.consumer_group_describe_bytes import (
    GROUP_ID_NOT_FOUND,
    Group,
    request_groups,
    response_body,
    response_frame,
)

__all__ = ["CONSUMER_GROUP_DESCRIBE", "AnswerRewriter", "rewritten_broker"]

HOST = "127.0.0.1"
PRODUCE, OFFSET_FETCH, LIST_GROUPS, API_VERSIONS, CONSUMER_GROUP_DESCRIBE = 0, 9, 16, 18, 69
_PRODUCE_RESPONSES: dict[int, type[Response]] = {
    version: getattr(produce, f"ProduceResponse_v{version}") for version in range(2, 9)
}
_OFFSET_FETCH_RESPONSES: dict[int, type[Response]] = {
    1: OffsetFetchResponse_v1,
    2: OffsetFetchResponse_v2,
    3: OffsetFetchResponse_v3,
}
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")


@dataclass
class AnswerRewriter:
    """Relays ``port`` to the broker on ``upstream``, rewriting what its fields say."""

    port: int
    upstream: int
    offset_fetch_errors: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """(group, topic, partition) -> the error code OffsetFetch answers for it (with offset -1, as Kafka)."""
    offset_fetch_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """(group, topic, partition) -> the offset OffsetFetch answers for it instead of the broker's."""
    consumer_protocol_groups: set[str] = field(default_factory=set)
    """Groups ListGroups v5 types ``consumer`` (KIP-848) instead of ``classic``."""
    produce_errors: dict[str, int] = field(default_factory=dict)
    """Topic -> the error code Produce answers (v2-v8) for each of its partitions: the batch refused. The
    broker has written it; its client is told it did not."""
    consumer_groups: dict[str, Group] = field(default_factory=dict)
    """Group -> what ConsumerGroupDescribe answers for it (a described group, or an error such as
    ``Group.failed(group, UNSUPPORTED_VERSION)``). A request asking for any of these groups is answered
    whole by the relay: the groups it asks for that are not here get ``GROUP_ID_NOT_FOUND``."""
    api_versions: dict[int, int | None] = field(default_factory=dict)
    """API key -> the highest version ApiVersions v0 answers advertise for it (None: not at all), for the
    connections made from then on."""
    rewritten: dict[str, int] = field(default_factory=dict)
    """How many answers of each API were rewritten (``OffsetFetch``, ``ListGroups``)."""
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> AnswerRewriter:
        self._server = await asyncio.start_server(self._connected, HOST, self.port)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connected(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection(HOST, self.upstream)
        except OSError:
            client_writer.close()
            return
        asked: dict[int, tuple[int, int, Any]] = {}
        """Correlation id -> the request's API key, version and (OffsetFetch) group or (ConsumerGroupDescribe)
        groups, for its answer."""
        pumps = [
            asyncio.create_task(self._pump(client_reader, broker_writer, lambda frame: self._asked(frame, asked))),
            asyncio.create_task(self._pump(broker_reader, client_writer, lambda frame: self._answer(frame, asked))),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
                self._tasks.discard(pump)
            for writer in (client_writer, broker_writer):
                writer.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, each: Callable[[bytes], bytes]) -> None:
        """Copy length-prefixed frames from ``reader`` to ``writer``, each as ``each`` makes it."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = each(await reader.readexactly(size))
                writer.write(_SIZE.pack(len(frame)) + frame)
                await writer.drain()

    @staticmethod
    def _asked(frame: bytes, asked: dict[int, tuple[int, int, Any]]) -> bytes:
        """Note a request's API, version and (OffsetFetch v1-v3) group or (ConsumerGroupDescribe) groups; the
        request goes on as it is, but a ConsumerGroupDescribe of a later version goes as v0 (the same body)."""
        api_key, version, correlation_id = _HEADER.unpack_from(frame)
        group: Any = None
        if api_key == OFFSET_FETCH and version in _OFFSET_FETCH_RESPONSES:
            body = BytesIO(frame[_HEADER.size :])
            String("utf-8").decode(body)  # the client id
            group = String("utf-8").decode(body)
        if api_key == CONSUMER_GROUP_DESCRIBE:
            group = request_groups(frame)
            frame = _HEADER.pack(api_key, 0, correlation_id) + frame[_HEADER.size :]
        asked[correlation_id] = (api_key, version, group)
        return frame

    def _answer(self, frame: bytes, asked: dict[int, tuple[int, int, Any]]) -> bytes:
        """An answer, rewritten if it answers a request named here; as it is otherwise, and whenever it does
        not decode (Tansu cuts some short: the client must see them as they are)."""
        (correlation_id,) = _SIZE.unpack_from(frame)
        api_key, version, group = asked.pop(correlation_id, (-1, -1, None))
        if api_key == CONSUMER_GROUP_DESCRIBE and self.consumer_groups.keys() & set(group):
            self._count("ConsumerGroupDescribe")
            answered = [self.consumer_groups.get(g) or Group.failed(g, GROUP_ID_NOT_FOUND) for g in group]
            return response_frame(correlation_id, response_body(answered, version))
        try:
            if api_key == API_VERSIONS and version == 0 and self.api_versions:
                return self._api_versions(frame)
            if api_key == LIST_GROUPS and version == 5:
                return self._list_groups(frame)
            if api_key == OFFSET_FETCH and group is not None:
                return self._offset_fetch(frame, _OFFSET_FETCH_RESPONSES[version], group)
            if api_key == PRODUCE and version in _PRODUCE_RESPONSES and self.produce_errors:
                return self._produce(frame, _PRODUCE_RESPONSES[version])
        except (ValueError, struct.error):
            pass
        return frame

    def _api_versions(self, frame: bytes) -> bytes:
        response = ApiVersionResponse_v0.decode(BytesIO(frame[4:]))
        versions = [
            (key, low, self.api_versions.get(key, high))
            for key, low, high in response.api_versions  # type: ignore[attr-defined]
            if self.api_versions.get(key, high) is not None
        ]
        self._count("ApiVersions")
        return frame[:4] + ApiVersionResponse_v0(response.error_code, versions).encode()  # type: ignore[attr-defined]

    def _list_groups(self, frame: bytes) -> bytes:
        body = BytesIO(frame[4:])
        tags = TaggedFields.decode(body)  # the flexible response header's
        response = ListGroupsResponse_v5.decode(body)
        groups = [
            (group, protocol_type, state, "consumer" if group in self.consumer_protocol_groups else kind, tagged)
            for group, protocol_type, state, kind, tagged in response.groups
        ]
        if groups == response.groups:
            return frame
        self._count("ListGroups")
        fields = {**_fields(response), "groups": groups}
        return frame[:4] + TaggedFields.encode(tags) + ListGroupsResponse_v5(**fields).encode()

    def _offset_fetch(self, frame: bytes, response_type: type[Response], group: str) -> bytes:
        response = response_type.decode(BytesIO(frame[4:]))
        topics = []
        for topic, partitions in response.topics:  # type: ignore[attr-defined]
            rows = []
            for partition, offset, metadata, error_code in partitions:
                where = (group, topic, partition)
                if where in self.offset_fetch_errors:
                    offset, error_code = -1, self.offset_fetch_errors[where]
                offset = self.offset_fetch_offsets.get(where, offset)
                rows.append((partition, offset, metadata, error_code))
            topics.append((topic, rows))
        if topics == [(t, list(p)) for t, p in response.topics]:  # type: ignore[attr-defined]
            return frame
        self._count("OffsetFetch")
        return frame[:4] + response_type(**{**_fields(response), "topics": topics}).encode()

    def _produce(self, frame: bytes, response_type: type[Response]) -> bytes:
        response = response_type.decode(BytesIO(frame[4:]))
        topics = []
        for topic, partitions in response.topics:  # type: ignore[attr-defined]
            code = self.produce_errors.get(topic)
            refused = list(partitions) if code is None else [(p[0], code, -1, *p[3:]) for p in partitions]
            topics.append((topic, refused))
        if topics == [(t, list(p)) for t, p in response.topics]:  # type: ignore[attr-defined]
            return frame
        self._count("Produce")
        return frame[:4] + response_type(**{**_fields(response), "topics": topics}).encode()

    def _count(self, api: str) -> None:
        self.rewritten[api] = self.rewritten.get(api, 0) + 1


def _fields(response: Response) -> dict[str, Any]:
    """A decoded response's fields by name, as its constructor takes them."""
    return {name: getattr(response, name) for name in response.SCHEMA.names}


@contextlib.asynccontextmanager
async def rewritten_broker(log_dir: Path) -> AsyncIterator[tuple[EmbeddedBroker, AnswerRewriter]]:
    """A broker of its own behind an :class:`AnswerRewriter` (which it advertises, so that every client goes
    through it), with nothing rewritten yet."""
    port = free_port()
    with EmbeddedBroker(advertised=f"{HOST}:{port}", log_dir=log_dir) as broker:
        relay = await AnswerRewriter(port, broker.port).start()
        try:
            yield broker, relay
        finally:
            await relay.stop()
