"""ListGroups up to v5 (KIP-848), whose answer says each group's type, and what it lists.

A group on the consumer rebalance protocol (KIP-848, ``group.protocol=consumer``)
lists with the protocol type ``consumer``, as a classic consumer group does;
only ListGroups v5+ tells them apart, by its ``GroupType`` (``classic``,
``consumer``; also ``share`` and ``streams``). The distinction matters: Kafka
answers DescribeGroups for such a group as ``Dead`` (v0-v5) or with
``GROUP_ID_NOT_FOUND`` (v6), since only ConsumerGroupDescribe describes it.
aiokafka speaks ListGroups up to v2 only, so v5 is declared here with
aiokafka's own protocol types (its request machinery sends it, with the
flexible request header), from the fields of Kafka's ListGroupsRequest.json
and ListGroupsResponse.json; a broker without v5 is asked v0-v2, which say
no type.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, TypeAlias

from aiokafka.protocol.admin import ListGroupsRequest_v0, ListGroupsRequest_v1, ListGroupsRequest_v2
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import CompactArray, CompactString, Int16, Int32, Schema, TaggedFields

__all__ = ["ListGroupsWithTypes", "ListedGroup", "listed_groups"]


class ListGroupsResponse_v5(Response):
    # Set by Struct.__init__ from SCHEMA; declared for the type checker, as aiokafka's own responses do.
    error_code: int
    groups: list[tuple[str, str, str, str, dict[int, bytes]]]

    API_KEY = 16
    API_VERSION = 5
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        (
            "groups",
            CompactArray(
                ("group", CompactString("utf-8")),
                ("protocol_type", CompactString("utf-8")),
                ("group_state", CompactString("utf-8")),
                ("group_type", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class ListGroupsRequest_v5(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 16
    API_VERSION = 5
    RESPONSE_TYPE = ListGroupsResponse_v5
    SCHEMA = Schema(
        ("states_filter", CompactArray(CompactString("utf-8"))),
        ("types_filter", CompactArray(CompactString("utf-8"))),
        ("tags", TaggedFields),
    )


_Struct: TypeAlias = ListGroupsRequest_v0 | ListGroupsRequest_v1 | ListGroupsRequest_v2 | ListGroupsRequest_v5


class ListGroupsWithTypes(Request[_Struct]):
    """ListGroups of every group the broker coordinates, with their types where the broker has v5
    (aiokafka's ``client.send`` picks the highest version both know: v5, else v2, v1 or v0)."""

    API_KEY = 16

    def build(self, request_struct_class: type[_Struct]) -> _Struct:
        if request_struct_class is ListGroupsRequest_v5:
            return ListGroupsRequest_v5([], [], {})  # no filters: every group, every state and type
        return request_struct_class()


class ListedGroup(NamedTuple):
    """One group as ListGroups answered it."""

    protocol_type: str
    """``consumer`` for consumer groups of either protocol; ``connect``, ``share``... for others."""
    group_type: str | None = None
    """``classic``, ``consumer`` (KIP-848), ``share`` or ``streams``; None from a broker below v5."""


def listed_groups(responses: Iterable[Response]) -> dict[str, ListedGroup]:
    """The groups in ListGroups responses of any version (one per broker asked), by group id.

    Fields are read by their names in the response schemas, so every version reads alike. A
    response's error code is not looked at here (the caller raises it).
    """
    listed: dict[str, ListedGroup] = {}
    for response in responses:
        for group in response.to_object()["groups"]:
            listed[group["group"]] = _listed(group)
    return listed


def _listed(group: dict[str, Any]) -> ListedGroup:
    return ListedGroup(group["protocol_type"] or "", group.get("group_type") or None)
