"""Topic ids -> topic names, from Kafka's Metadata API v12 (KIP-516).

KIP-848 consumer groups name the partitions their members hold by topic id
(record type 8). Kafka 3.7-4.0 also wrote each group's topic names (type 4);
4.1+ does not, so the names must come from the cluster: Metadata v10+
answers each topic with its id. aiokafka speaks Metadata up to v5 only, so
v12 is declared here with aiokafka's own protocol types (its request
machinery sends it, with the flexible request header), from the fields of
Kafka's MetadataRequest.json and MetadataResponse.json.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any, TypeAlias
from uuid import UUID

from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

__all__ = ["MetadataWithTopicIds", "topic_names"]

NULL_TOPIC_ID = UUID(int=0)
"""What Kafka answers for a topic that has no id."""


class Uuid(AbstractType[UUID]):
    """Kafka's ``uuid``: 16 bytes, most significant first."""

    @classmethod
    def encode(cls, value: UUID) -> bytes:
        return value.bytes

    @classmethod
    def decode(cls, data: BytesIO) -> UUID:
        raw = data.read(16)
        if len(raw) != 16:
            raise ValueError("Buffer underrun decoding a uuid")
        return UUID(bytes=raw)


class MetadataResponse_v12(Response):
    # Set by Struct.__init__ from SCHEMA; declared for the type checker, as aiokafka's own responses do.
    topics: list[tuple[int, str | None, UUID, bool, list[tuple[Any, ...]], int, dict[int, bytes]]]

    API_KEY = 3
    API_VERSION = 12
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            CompactArray(
                ("node_id", Int32),
                ("host", CompactString("utf-8")),
                ("port", Int32),
                ("rack", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            CompactArray(
                ("error_code", Int16),
                ("name", CompactString("utf-8")),
                ("topic_id", Uuid),
                ("is_internal", Boolean),
                (
                    "partitions",
                    CompactArray(
                        ("error_code", Int16),
                        ("partition_index", Int32),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("replica_nodes", CompactArray(Int32)),
                        ("isr_nodes", CompactArray(Int32)),
                        ("offline_replicas", CompactArray(Int32)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("topic_authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class MetadataRequest_v12(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 12
    RESPONSE_TYPE = MetadataResponse_v12
    SCHEMA = Schema(
        ("topics", CompactArray(("topic_id", Uuid), ("name", CompactString("utf-8")), ("tags", TaggedFields))),
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


_Struct: TypeAlias = MetadataRequest_v12


class MetadataWithTopicIds(Request[_Struct]):
    """A Metadata request for every topic of the cluster, answered with topic ids
    (aiokafka's ``client.send`` picks v12; a broker without it raises
    ``NotImplementedError`` there)."""

    API_KEY = 3

    def build(self, request_struct_class: type[_Struct]) -> _Struct:
        return request_struct_class(None, False, False, {})  # null topics: all of them


def topic_names(response: MetadataResponse_v12) -> Mapping[str, str]:
    """Topic id (canonical string) -> name for every topic the response names
    without error and with an id."""
    names = {}
    for error_code, name, topic_id, *_ in response.topics:
        if not error_code and name is not None and topic_id != NULL_TOPIC_ID:
            names[str(topic_id)] = name
    return names
