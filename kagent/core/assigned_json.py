"""A classic consumer group's ``group-assigned`` event as plain JSON data, without pydantic models.

A rebalance of a group of 20 members on 70 partitions is one
:class:`~kagent.core.events.GroupAssigned` of about 90 pydantic models
(the group, each member, each partition): building it, dumping it, and on
the worker's other side validating it again and dumping it to store cost
about 150 µs per record of ``__consumer_offsets``, as much as 300 offset
commits. So the source builds the event's JSON object directly
(:func:`assigned_json`) and storage applies it as it reads it, each having
checked it field by field (:func:`plain_assigned`); a model is made only
for what is not plainly valid, and that verdict is pydantic's.

Both functions are bound to the models' layout: :data:`ASSIGNED_KEYS`,
:data:`MEMBER_KEYS` and :data:`PARTITION_KEYS` are their fields in order
(``tests/unit/test_assigned_json.py`` holds them to it), and an object that
passes :func:`plain_assigned` is exactly ``model_dump(mode="json")`` of the
model pydantic makes of it.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from kagent.core.consumer_offsets import Assignment, GroupMetadata, Subscription

__all__ = ["ASSIGNED_KEYS", "MEMBER_KEYS", "PARTITION_KEYS", "AssignedJson", "assigned_json", "plain_assigned"]

AssignedJson: TypeAlias = dict[str, Any]
"""A ``group-assigned`` event as its JSON object, fields in the model's order."""

ASSIGNED_KEYS = ("kind", "group", "generation", "protocol", "leader", "state_timestamp", "members", "group_protocol")
"""``GroupAssigned``'s fields, in order."""
MEMBER_KEYS = ("member_id", "group_instance_id", "client_id", "client_host", "topics", "partitions")
"""``MemberAssignment``'s fields, in order."""
PARTITION_KEYS = ("topic", "partition")
"""``PartitionRef``'s fields, in order."""

_KIND = "group-assigned"
_GROUP_PROTOCOLS = ("classic", "consumer")


def assigned_json(record: GroupMetadata) -> AssignedJson:
    """The ``group-assigned`` event of a classic group's metadata (its protocol type ``consumer``, so
    that each member's subscription and assignment are decoded): the generation, the assignor, the
    leader, and each member's subscribed topics and assigned partitions (none where its blob is
    empty or not the consumer protocol's)."""
    return {
        "kind": _KIND,
        "group": record.group,
        "generation": record.generation,
        "protocol": record.protocol,
        "leader": record.leader,
        "state_timestamp": record.state_timestamp,
        "members": [
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "topics": list(member.subscription.topics) if isinstance(member.subscription, Subscription) else [],
                "partitions": (
                    [{"topic": tp.topic, "partition": tp.partition} for tp in member.assignment.partitions]
                    if isinstance(member.assignment, Assignment)
                    else []
                ),
            }
            for member in record.members
        ],
        "group_protocol": "classic",
    }


def plain_assigned(item: dict[str, Any]) -> bool:
    """Whether ``item`` is a ``group-assigned`` event's JSON object with every field present, in the
    model's order, and of exactly its JSON type and bounds (partitions >= 0): what pydantic would
    accept and dump back unchanged. False says nothing of validity (pydantic decides)."""
    if tuple(item) != ASSIGNED_KEYS or item["kind"] != _KIND or type(item["group"]) is not str:
        return False
    if type(item["generation"]) is not int or item["group_protocol"] not in _GROUP_PROTOCOLS:
        return False
    protocol, leader, stamp = item["protocol"], item["leader"], item["state_timestamp"]
    if (protocol is not None and type(protocol) is not str) or (leader is not None and type(leader) is not str):
        return False
    if stamp is not None and type(stamp) is not int:
        return False
    members = item["members"]
    if type(members) is not list:
        return False
    for member in members:
        if type(member) is not dict or tuple(member) != MEMBER_KEYS:
            return False
        instance = member["group_instance_id"]
        if type(member["member_id"]) is not str or (instance is not None and type(instance) is not str):
            return False
        if type(member["client_id"]) is not str or type(member["client_host"]) is not str:
            return False
        topics, partitions = member["topics"], member["partitions"]
        if type(topics) is not list or type(partitions) is not list:
            return False
        for topic in topics:
            if type(topic) is not str:
                return False
        for ref in partitions:
            if type(ref) is not dict or tuple(ref) != PARTITION_KEYS or type(ref["topic"]) is not str:
                return False
            partition = ref["partition"]
            if type(partition) is not int or partition < 0:
                return False
    return True
