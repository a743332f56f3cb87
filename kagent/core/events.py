"""Derived events: what kagent keeps of ``__consumer_offsets``, as typed records of groups.

The ``offsets-topic`` source turns each decoded coordinator record into zero or
more of these (:func:`derive`); the ``admin-api`` source builds the same events
from group APIs. They travel on the derived-events topic as JSON, each group's
on its partition (murmur2 of the group id, as Kafka's default partitioner
places a record keyed by it), so every event of a group reaches the worker
that holds that group.
Classic groups (record type 2) become one :class:`GroupAssigned` per
rebalance. Consumer groups of the KIP-848 protocol (``group.protocol=consumer``,
Kafka 3.7+/4.x) have no such record: the coordinator writes their epoch,
each member's metadata and each member's current assignment as separate
records, so they become the ``consumer-group-*`` events, which
:mod:`kagent.core.consumer_group_state` folds into one group's state.
A :class:`DerivedEvents` is one group's events in the order they happened.
One record of that topic (:data:`DerivedEventsRecord`) packs many groups'
(:func:`packed_records`), as both sources write them, or is one group's,
keyed by it, as kagent before packing wrote them: a Faust stream costs about
80 µs per record it delivers, whatever the record holds, and one record per
group and batch paid that for the few commits a real cluster's member makes
at a time.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias

import orjson
from aiokafka.structs import TopicPartition
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from kagent.core.assigned_json import AssignedJson, assigned_json, plain_assigned
from kagent.core.consumer_offsets import (
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupRegularExpression,
    ConsumerGroupRegularExpressionTombstone,
    GroupMetadata,
    GroupTombstone,
    OffsetCommit,
    OffsetTombstone,
    Record,
    TopicPartitions,
)
from kagent.core.lag_twins import twin_of
from kagent.core.table_keys import partition_of_group

__all__ = [
    "PACKED_BYTES",
    "CommitRun",
    "ConsumerGroupEpoch",
    "ConsumerGroupMember",
    "ConsumerGroupMemberAssignment",
    "ConsumerGroupMemberLeft",
    "ConsumerGroupRegex",
    "ConsumerGroupRegexDeleted",
    "ConsumerGroupTargetAssignment",
    "ConsumerGroupTopics",
    "DerivedEvent",
    "DerivedEvents",
    "DerivedEventsRecord",
    "GroupAssigned",
    "GroupDeleted",
    "MemberAssignment",
    "OffsetCommitted",
    "OffsetDeleted",
    "PackedRecords",
    "PartitionRef",
    "TopicIdPartition",
    "TopicName",
    "by_group",
    "decode_record",
    "derive",
    "encode_events",
    "grouped_events",
    "packed_records",
    "run_commits",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PartitionRef(_Frozen):
    """One partition of one topic, as JSON subscribers see it."""

    topic: str
    partition: int = Field(ge=0)

    @property
    def topic_partition(self) -> TopicPartition:
        """The same partition as aiokafka's ``TopicPartition``."""
        return TopicPartition(self.topic, self.partition)


class OffsetCommitted(_Frozen):
    """A group committed ``offset`` (the next record it will read) on a partition."""

    kind: Literal["offset-committed"] = "offset-committed"
    group: str
    topic: str
    partition: int = Field(ge=0)
    offset: int
    commit_timestamp: int
    """Milliseconds since the epoch, as the coordinator stamped the commit."""
    leader_epoch: int | None = None


_new_tuple = tuple.__new__
"""A NamedTuple of its fields without its Python ``__new__`` (half the cost: storage makes a
``TopicPartition`` per group-partition a batch commits to)."""

CommitRun: TypeAlias = list[Any]
"""Offset commits of a record's group on one partition, oldest first, in their compact form: one JSON
array, ``[topic, partition, offset, commit_timestamp, leader_epoch, offset, commit_timestamp,
leader_epoch, ...]``, three fields per commit (:class:`OffsetCommitted`'s; the timestamp in milliseconds
since the epoch, the leader epoch an integer or null).

What the ``offsets-topic`` source writes for the commits it reads. Nearly every record of
``__consumer_offsets`` is a commit, and a consumer commits its partitions again and again: a run
holds a partition's consecutive commits in one array (and so, once read, in one list), not an
object or an array per commit that repeats the topic. A run of one commit is the five-element
array kagent wrote per commit before runs. A Python list, as the JSON parser makes it."""


def run_commits(run: CommitRun) -> list[tuple[int, int, int | None]]:
    """The commits of ``run``, each ``(offset, commit_timestamp, leader_epoch)``, oldest first."""
    return [(run[index], run[index + 1], run[index + 2]) for index in range(2, len(run), 3)]


def _checked_run(run: list[Any]) -> list[Any]:
    """``run`` if it is a :data:`CommitRun`, each element of exactly its JSON type; raises ``ValueError``
    naming the first element out of place."""
    layout = "[topic, partition, then offset, commit_timestamp, leader_epoch for each commit]"
    if len(run) < 5 or len(run) % 3 != 2:
        raise ValueError(f"a commit run is {layout}: {len(run)} elements, not 2 + 3 per commit")
    fields = ("offset", "commit_timestamp", "leader_epoch")
    for index, value in enumerate(run):
        if index == 0:
            ok, what = type(value) is str, "the topic, a string"
        elif index == 1:
            ok, what = type(value) is int and value >= 0, "the partition, an integer >= 0"
        else:
            field = fields[(index - 2) % 3]
            nullable = field == "leader_epoch"
            ok = type(value) is int or (nullable and value is None)
            what = f"commit {(index - 2) // 3}'s {field}, an integer{' or null' if nullable else ''}"
        if not ok:
            raise ValueError(f"a commit run is {layout}: element {index} is {value!r}, not {what}")
    return run


_RUN_SCHEMA = {
    "type": "array",
    "title": "CommitRun",
    "description": (
        "Offset commits of the record's group on one partition, oldest first: [topic, partition, offset, "
        "commit_timestamp, leader_epoch, offset, commit_timestamp, leader_epoch, ...], three elements per "
        "commit (2 + 3n elements, n >= 1); the timestamp in milliseconds since the epoch."
    ),
    "prefixItems": [{"title": "Topic", "type": "string"}, {"title": "Partition", "type": "integer", "minimum": 0}],
    "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    "minItems": 5,
}

_CommitRunField = Annotated[CommitRun, AfterValidator(_checked_run), WithJsonSchema(_RUN_SCHEMA)]
"""A :data:`CommitRun` as pydantic validates it (records not plainly valid, and the schema)."""


def _checked_assigned(item: AssignedJson) -> AssignedJson:
    """``item`` if :func:`~kagent.core.assigned_json.plain_assigned` takes it; raises ``ValueError``."""
    if not plain_assigned(item):
        raise ValueError("not a group-assigned object with every field of exactly its type, in order")
    return item


_AssignedJsonField = SkipJsonSchema[Annotated[AssignedJson, AfterValidator(_checked_assigned)]]
"""An :data:`~kagent.core.assigned_json.AssignedJson` among a group's events, as the hot path keeps it
(pydantic takes one only from Python data; the schema has :class:`GroupAssigned`)."""


class OffsetDeleted(_Frozen):
    """The committed offset of a group on a partition was deleted or expired (a tombstone)."""

    kind: Literal["offset-deleted"] = "offset-deleted"
    group: str
    topic: str
    partition: int = Field(ge=0)


class MemberAssignment(_Frozen):
    """One member of a classic consumer group and the partitions it was assigned."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str
    client_host: str
    topics: tuple[str, ...] = ()
    """The topics it subscribed to."""
    partitions: tuple[PartitionRef, ...] | None = ()
    """The partitions it was assigned; None when the cluster did not say (a DescribeGroups answer without
    the member's assignment, as Tansu's, or with one that does not decode): unknown, not none."""


class GroupAssigned(_Frozen):
    """A consumer group completed a rebalance: its generation, assignor and members' assignments."""

    kind: Literal["group-assigned"] = "group-assigned"
    group: str
    generation: int
    protocol: str | None
    """The assignor the group chose (``range``, ``roundrobin``, ``cooperative-sticky``, ...); for a group
    on the consumer protocol, the server assignor its members asked for (``uniform``, ``range``)."""
    leader: str | None
    state_timestamp: int | None = None
    """Milliseconds since the epoch of the group's last state change, when the record has it."""
    members: tuple[MemberAssignment, ...] = ()
    group_protocol: Literal["classic", "consumer"] = "classic"
    """The group's rebalance protocol: ``classic`` (its leader assigns, with a client-side assignor) or
    ``consumer`` (KIP-848, ``group.protocol=consumer``: the broker assigns with its ``protocol``). Added
    later than the other fields: a record without it is of a classic group."""


class GroupDeleted(_Frozen):
    """The group's metadata was deleted (a tombstone): it is gone."""

    kind: Literal["group-deleted"] = "group-deleted"
    group: str


class TopicName(_Frozen):
    """A topic a KIP-848 consumer group subscribes to: its id, its name and its partition count."""

    topic_id: str
    """The topic's UUID in canonical form (``8-4-4-4-12`` lowercase hex)."""
    topic: str
    partitions: int = Field(ge=0)
    """How many partitions the topic had when the coordinator wrote the record."""


class TopicIdPartition(_Frozen):
    """One partition of one topic named by topic id, as KIP-848 assignments name it."""

    topic_id: str
    """The topic's UUID in canonical form."""
    partition: int = Field(ge=0)


class ConsumerGroupEpoch(_Frozen):
    """A KIP-848 consumer group's epoch (record type 3): bumped whenever its members or subscriptions change."""

    kind: Literal["consumer-group-epoch"] = "consumer-group-epoch"
    group: str
    epoch: int


class ConsumerGroupTopics(_Frozen):
    """The topics a KIP-848 consumer group subscribes to, by id (record type 4).

    Each record lists them all. Kafka stopped writing this record after 4.0,
    so on 4.1+ the worker asks the cluster's metadata for the names
    (:mod:`kagent.core.topic_ids`).
    """

    kind: Literal["consumer-group-topics"] = "consumer-group-topics"
    group: str
    topics: tuple[TopicName, ...] = ()


class ConsumerGroupMember(_Frozen):
    """A member of a KIP-848 consumer group joined or changed its subscription (record type 5)."""

    kind: Literal["consumer-group-member"] = "consumer-group-member"
    group: str
    member_id: str
    group_instance_id: str | None = None
    client_id: str
    client_host: str
    topics: tuple[str, ...] = ()
    """The topic names it subscribed to by name (empty when it subscribed by regular expression only)."""
    topic_regex: str | None = None
    """The regular expression it subscribed with, if any: :class:`ConsumerGroupRegex` says which topics it matches."""
    server_assignor: str | None = None
    """The server-side assignor it asked for (``uniform``, ``range``); None for the broker's default, and
    from ConsumerGroupDescribe, which does not say it."""
    rack: str | None = None
    """The rack it is in (its ``client.rack``); None when it gave none. Added later than the other fields:
    a record without it reads as None."""


class ConsumerGroupMemberLeft(_Frozen):
    """A member left a KIP-848 consumer group, or was fenced (record type 5 tombstone)."""

    kind: Literal["consumer-group-member-left"] = "consumer-group-member-left"
    group: str
    member_id: str


class ConsumerGroupRegex(_Frozen):
    """The topics a regular expression that members of a KIP-848 consumer group subscribed with
    matches now, as the coordinator resolved it (record type 16, Kafka 4.0+)."""

    kind: Literal["consumer-group-regex"] = "consumer-group-regex"
    group: str
    regex: str
    topics: tuple[str, ...] = ()


class ConsumerGroupRegexDeleted(_Frozen):
    """No member of a KIP-848 consumer group subscribes with this regular expression any more
    (record type 16 tombstone)."""

    kind: Literal["consumer-group-regex-deleted"] = "consumer-group-regex-deleted"
    group: str
    regex: str


class ConsumerGroupMemberAssignment(_Frozen):
    """The partitions a member of a KIP-848 consumer group holds now (record type 8).

    ``partitions`` are the partitions assigned to the member and those
    pending revocation: the member still owns and consumes a partition
    pending revocation until it acknowledges the revocation, and the
    coordinator gives it to no other member before that. Sorted by topic id,
    then partition, each once.
    """

    kind: Literal["consumer-group-member-assignment"] = "consumer-group-member-assignment"
    group: str
    member_id: str
    member_epoch: int
    partitions: tuple[TopicIdPartition, ...] = ()


class ConsumerGroupTargetAssignment(_Frozen):
    """A KIP-848 consumer group's target assignment, in brief: its epoch, and the server assignor the
    broker selected to compute it.

    What ConsumerGroupDescribe says (the ``admin-api`` source). The offsets
    topic keeps the epoch in record type 6, from which kagent derives nothing,
    and names the assignor nowhere.
    """

    kind: Literal["consumer-group-target-assignment"] = "consumer-group-target-assignment"
    group: str
    assignment_epoch: int
    assignor: str | None = None
    """``uniform``, ``range``, or a plugin's name (``group.consumer.assignors``); None when not said."""
    members: tuple[str, ...] | None = None
    """The ids of every member it assigns to, the group's members when it was described: folding it
    drops any other member, one that left while no event said so (the ``admin-api`` source describes a
    group afresh after a restart or a change of leader, and cannot name members it never saw leave).
    None when not said."""


DerivedEvent = Annotated[
    OffsetCommitted
    | OffsetDeleted
    | GroupAssigned
    | GroupDeleted
    | ConsumerGroupEpoch
    | ConsumerGroupTopics
    | ConsumerGroupMember
    | ConsumerGroupMemberLeft
    | ConsumerGroupMemberAssignment
    | ConsumerGroupTargetAssignment
    | ConsumerGroupRegex
    | ConsumerGroupRegexDeleted,
    Field(discriminator="kind"),
]
"""Any derived event; ``kind`` tells which."""


class DerivedEvents(_Frozen):
    """Events of one group, oldest first: a record of the derived-events topic, or one element of a
    packed record.

    Offset commits are either :data:`CommitRun` arrays, as the
    ``offsets-topic`` source writes them, or :class:`OffsetCommitted`
    objects, as the ``admin-api`` source and kagent before the compact form
    write them; readers take both. Built by the source or read on the hot
    path (:func:`grouped_events`, :func:`decode_record`), a
    :class:`GroupAssigned` may be its plainly checked JSON object
    (:data:`~kagent.core.assigned_json.AssignedJson`) instead of a model;
    :meth:`expanded` gives models of everything."""

    group: str
    events: tuple[DerivedEvent | _CommitRunField | _AssignedJsonField, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_group(self) -> DerivedEvents:
        strays = sorted(
            {
                event["group"] if isinstance(event, dict) else event.group
                for event in self.events
                if not isinstance(event, list)
            }
            - {self.group}
        )
        if strays:
            raise ValueError(f"events of groups {strays} in a record of group {self.group!r}")
        return self

    def expanded(self) -> list[DerivedEvent]:
        """The events as models: each :data:`CommitRun` as the :class:`OffsetCommitted` s it stands for,
        each :data:`~kagent.core.assigned_json.AssignedJson` as its :class:`GroupAssigned`."""
        expanded: list[DerivedEvent] = []
        for event in self.events:
            if isinstance(event, dict):
                expanded.append(GroupAssigned.model_validate(event))
                continue
            if not isinstance(event, list):
                expanded.append(event)
                continue
            topic, partition = event[0], event[1]
            for offset, commit_timestamp, leader_epoch in run_commits(event):
                expanded.append(
                    OffsetCommitted(
                        group=self.group,
                        topic=topic,
                        partition=partition,
                        offset=offset,
                        commit_timestamp=commit_timestamp,
                        leader_epoch=leader_epoch,
                    )
                )
        return expanded

    def gather(self, commits: dict[TopicPartition, list[int | None]]) -> Iterator[DerivedEvent | AssignedJson]:
        """Add the record's offset commits (of either form) to ``commits`` (partition -> its commits,
        oldest first, three fields each as in a :data:`CommitRun`: offset, commit_timestamp,
        leader_epoch; appended after those already there) and yield every other event, in order (a
        :class:`GroupAssigned` in the form it has here, a model or its
        :data:`~kagent.core.assigned_json.AssignedJson`).

        When an event is yielded, ``commits`` holds every commit before it (and none after): a caller
        that keeps order applies and empties ``commits`` before applying the event. Applying the
        partitions of ``commits`` in any order, each one's commits in order, is applying them in the
        record's order: a commit touches its own partition's state only. Storage passes one dict per
        group across a whole batch of records, so a group-partition's commits of the batch are
        applied together."""
        events = self.events
        index = 0
        while (index := gathered_runs(events, index, commits)) < len(events):
            event = events[index]
            index += 1
            if type(event) is OffsetCommitted:
                fields = [event.offset, event.commit_timestamp, event.leader_epoch]
                _gather(commits, (event.topic, event.partition), fields)
            else:
                yield event  # type: ignore[misc]  # not a commit of either form


def _gather(commits: dict[TopicPartition, list[int | None]], key: tuple[str, int], fields: list[int | None]) -> None:
    """Append ``fields`` to the commits of partition ``key`` in ``commits`` (a tuple finds the
    ``TopicPartition`` key equal to it: a NamedTuple is its tuple)."""
    waiting = commits.get(key)  # type: ignore[call-overload]
    if waiting is None:
        commits[_new_tuple(TopicPartition, key)] = fields
    else:
        waiting += fields


def _gathered_runs(
    events: tuple[DerivedEvent | CommitRun | AssignedJson, ...],
    start: int,
    commits: dict[TopicPartition, list[int | None]],
) -> int:
    """Add each commit run of ``events`` from index ``start`` to ``commits`` (its partition's three fields
    each, appended after those there: :meth:`DerivedEvents.gather`'s rule), up to the first event that is
    not a run; return that event's index, or ``len(events)`` when every one from ``start`` is a run."""
    for index in range(start, len(events)):
        run = events[index]
        if type(run) is not list:
            return index
        _gather(commits, (run[0], run[1]), run[2:])
    return len(events)


gathered_runs = twin_of(_gathered_runs, "kagent.core._events_twins")
"""Compiled where built (``_events_twins.pyx``): storage gathers every commit of every record it applies."""


def by_group(events: Iterable[DerivedEvent]) -> list[DerivedEvents]:
    """``events`` as one :class:`DerivedEvents` per group, groups in order of first
    appearance, each group's events in their order."""
    grouped: dict[str, list[DerivedEvent | CommitRun]] = {}
    for event in events:
        grouped.setdefault(event.group, []).append(event)
    return grouped_events(grouped)


def grouped_events(
    grouped: Mapping[str, Sequence[DerivedEvent | CommitRun | AssignedJson]],
) -> list[DerivedEvents]:
    """One :class:`DerivedEvents` per group of ``grouped`` (group -> its events, each validated, each a
    :data:`CommitRun`, a plainly checked :data:`~kagent.core.assigned_json.AssignedJson` or an event
    of that group), in its order, built without validating again."""
    return [DerivedEvents.model_construct(group=group, events=tuple(events)) for group, events in grouped.items()]


def encode_events(events: DerivedEvents) -> bytes:
    """The JSON bytes of one group's ``events``: a derived-events record of one group, and an element
    of a packed one (orjson: commit runs and :data:`~kagent.core.assigned_json.AssignedJson` are JSON
    data already, written as they are; pydantic's serializer costs about 1.2 µs per commit, and a loop
    over the events in Python to find the models a few tenths of a µs a commit run)."""
    return orjson.dumps({"group": events.group, "events": events.events}, default=_event_json)


def _event_json(event: object) -> dict[str, Any]:
    """What orjson writes of an event it cannot write itself: a model's JSON data."""
    if isinstance(event, BaseModel):
        return event.model_dump(mode="json")
    raise TypeError(f"{type(event).__name__} is not a derived event")


PACKED_BYTES = 64 * 1024
"""Bytes of groups' events past which :func:`packed_records` starts another record of the partition:
well under Kafka's default ``max.message.bytes`` (1 MiB), and few enough that a batch of them is a
short stop of a worker's event loop."""


def packed_records(
    batch: Iterable[DerivedEvents], partitions: int, limit: int = PACKED_BYTES
) -> list[tuple[int, bytes]]:
    """The derived-events records of ``batch`` (one :class:`DerivedEvents` per group, as
    :func:`grouped_events` makes them) on a topic of ``partitions``: (partition, value) each, as
    :class:`PackedRecords` packs them."""
    packer = PackedRecords(partitions, limit)
    for events in batch:
        packer.add(events)
    return packer.records()


class PackedRecords:
    """Derived-events records packed a group at a time, so that a caller may encode a large batch in
    slices of its work (the source, a chunk of its fetch at a time) and send the records once.

    Each group's events go to its partition (:func:`~kagent.core.table_keys.partition_of_group`,
    where the worker holding the group reads) and the groups of one partition are packed, in
    order, into JSON arrays of :func:`encode_events`' objects, a new array begun once one holds
    ``limit`` bytes; a group is never split (a group larger than ``limit`` is a record of its
    own). Records of one partition come in order; nothing is said of the order across partitions.
    """

    def __init__(self, partitions: int, limit: int = PACKED_BYTES) -> None:
        self._partitions = partitions
        self._limit = limit
        self._open: dict[int, tuple[list[bytes], int]] = {}
        """Partition -> (the groups of its open record, the record's bytes so far)."""
        self._closed: list[tuple[int, bytes]] = []

    def add(self, events: DerivedEvents) -> None:
        """Encode one group's ``events`` into its partition's open record (closing that record first
        if they would take it past the limit)."""
        encoded = encode_events(events)
        partition = partition_of_group(events.group, self._partitions)
        groups, size = self._open.get(partition) or ([], 1)  # "["
        if groups and size + len(encoded) + 1 > self._limit:  # it and "," or "]"
            self._closed.append((partition, _packed(groups)))
            groups, size = [], 1
        groups.append(encoded)
        self._open[partition] = (groups, size + len(encoded) + 1)

    def records(self) -> list[tuple[int, bytes]]:
        """Every record of the groups added, (partition, value) each; the packer is empty afterwards."""
        records = self._closed
        records.extend((partition, _packed(groups)) for partition, (groups, _size) in self._open.items())
        self._open, self._closed = {}, []
        return records


def _packed(groups: list[bytes]) -> bytes:
    """A packed record of the groups' encoded events: their JSON array."""
    return b"[" + b",".join(groups) + b"]"


def decode_record(data: bytes) -> list[DerivedEvents]:
    """The groups' events of a record of the derived-events topic, in order: a packed record (a JSON
    array of groups' events, as both sources write them) or one group's (an object, as kagent
    before packing wrote them). Raises ``pydantic.ValidationError``.

    Read with orjson: each commit run and each ``group-assigned`` object
    checked field by field (:func:`~kagent.core.assigned_json.plain_assigned`)
    and kept as the parser made it, each other event validated by pydantic on
    its own. A record in which anything is not plainly valid is validated whole
    by pydantic, for the same verdict and errors that name what is wrong and
    where (``3.events.2.offset``: the fourth group's third event).
    """
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        parsed = None
    if type(parsed) is list and parsed:
        groups = []
        for item in parsed:
            events = _plain_events(item)
            if events is None:
                break
            groups.append(events)
        else:
            return groups
    elif (events := _plain_events(parsed)) is not None:
        return [events]
    if type(parsed) is list:  # the errors of a packed record's reading, not of a union's
        return _PACKED.validate_json(data)
    return [DerivedEvents.model_validate_json(data)]


def _plain_events(parsed: Any) -> DerivedEvents | None:
    """The group's events of ``parsed`` (orjson's reading of one group's object) if every part of it is
    plainly valid; None if anything is not (:func:`decode_record` then asks pydantic why)."""
    if type(parsed) is not dict or len(parsed) != 2 or type(group := parsed.get("group")) is not str:
        return None
    items = parsed.get("events")
    if type(items) is not list or not items:
        return None
    for index, item in enumerate(items):
        if type(item) is list:  # nearly every item: kept as the parser made it
            if not plain_run(item):
                return None
            continue
        if type(item) is not dict:
            return None
        if plain_assigned(item):  # a group-assigned object: kept as the parser made it too
            if item["group"] != group:
                return None
            continue
        try:
            event = _EVENT.validate_python(item)
        except ValidationError:
            return None
        if event.group != group:
            return None
        items[index] = event
    return DerivedEvents.model_construct(group=group, events=tuple(items))


_Packed: TypeAlias = Annotated[list[DerivedEvents], Field(min_length=1)]
DerivedEventsRecord: TypeAlias = _Packed | DerivedEvents
"""A record of the derived-events topic: groups' events packed (a non-empty array), or one group's."""

_PACKED: TypeAdapter[list[DerivedEvents]] = TypeAdapter(_Packed)
_EVENT: TypeAdapter[DerivedEvent] = TypeAdapter(DerivedEvent)


def _plain_run(item: list[Any]) -> bool:
    """Whether ``item`` is a :data:`CommitRun` whose fields have exactly their JSON types and bounds
    (:func:`_checked_run`'s verdict, without naming what is wrong). Storage asks it of every run it reads:
    compiled where built (``_events_twins.pyx``; ``tests/unit/test_events_twins.py`` holds the twin to
    the same verdicts)."""
    size = len(item)
    if size < 5 or size % 3 != 2 or type(item[0]) is not str or type(item[1]) is not int or item[1] < 0:
        return False
    for field in range(2, size, 3):
        epoch = item[field + 2]
        if type(item[field]) is not int or type(item[field + 1]) is not int:
            return False
        if epoch is not None and type(epoch) is not int:
            return False
    return True


plain_run = twin_of(_plain_run, "kagent.core._events_twins")


def derive(record: Record) -> list[DerivedEvent]:
    """The derived events of one decoded ``__consumer_offsets`` record.

    Offset commits and their tombstones map one to one (KIP-848 groups commit
    offsets with the same records as classic groups). Group metadata of a
    group whose protocol type is ``consumer`` becomes one :class:`GroupAssigned`
    with each member's subscribed topics and assigned partitions; groups of
    other protocol types (Connect, Streams' own) derive nothing. A classic
    group's tombstone becomes :class:`GroupDeleted`.

    KIP-848 consumer group records map one to one:

    - type 3 -> :class:`ConsumerGroupEpoch`; its tombstone -> :class:`GroupDeleted`
      (the coordinator writes it last when it deletes the group);
    - type 4 -> :class:`ConsumerGroupTopics`;
    - type 5 -> :class:`ConsumerGroupMember`; its tombstone -> :class:`ConsumerGroupMemberLeft`;
    - type 8 -> :class:`ConsumerGroupMemberAssignment`;
    - type 16 -> :class:`ConsumerGroupRegex`; its tombstone -> :class:`ConsumerGroupRegexDeleted`
      (a member subscribed by regular expression only names no topic itself).

    These derive nothing: the target assignment (types 6 and 7), which is
    what the coordinator wants members to converge to, not what they hold
    (lag is measured against what they hold, type 8); a type 8 tombstone, which the
    coordinator writes together with its member's type 5 tombstone (a member
    leaves, is fenced or replaced, or the group is deleted), which drops the
    member with its partitions; a type 4 tombstone, which Kafka
    4.1+ writes when it stops keeping the record, while the names it gave
    stay right (a topic id names one topic for ever). Share and streams
    group records and unknown types derive nothing either.
    """
    match record:
        case OffsetCommit():
            return [
                OffsetCommitted(
                    group=record.group,
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                    commit_timestamp=record.commit_timestamp,
                    leader_epoch=record.leader_epoch,
                )
            ]
        case OffsetTombstone():
            return [OffsetDeleted(group=record.group, topic=record.topic, partition=record.partition)]
        case GroupMetadata() if record.protocol_type == "consumer":
            return [GroupAssigned.model_validate(assigned_json(record))]
        case GroupTombstone() | ConsumerGroupMetadataTombstone():
            return [GroupDeleted(group=record.group)]
        case ConsumerGroupMetadata():
            return [ConsumerGroupEpoch(group=record.group, epoch=record.epoch)]
        case ConsumerGroupPartitionMetadata():
            return [
                ConsumerGroupTopics(
                    group=record.group,
                    topics=tuple(
                        TopicName(topic_id=str(topic.topic_id), topic=topic.topic_name, partitions=topic.num_partitions)
                        for topic in record.topics
                    ),
                )
            ]
        case ConsumerGroupMemberMetadata():
            return [
                ConsumerGroupMember(
                    group=record.group,
                    member_id=record.member_id,
                    group_instance_id=record.instance_id,
                    client_id=record.client_id,
                    client_host=record.client_host,
                    topics=record.subscribed_topic_names,
                    topic_regex=record.subscribed_topic_regex,
                    server_assignor=record.server_assignor,
                    rack=record.rack_id,
                )
            ]
        case ConsumerGroupMemberMetadataTombstone():
            return [ConsumerGroupMemberLeft(group=record.group, member_id=record.member_id)]
        case ConsumerGroupCurrentMemberAssignment():
            return [
                ConsumerGroupMemberAssignment(
                    group=record.group,
                    member_id=record.member_id,
                    member_epoch=record.member_epoch,
                    partitions=_held_partitions(record.assigned_partitions, record.partitions_pending_revocation),
                )
            ]
        case ConsumerGroupRegularExpression():
            return [ConsumerGroupRegex(group=record.group, regex=record.regular_expression, topics=record.topics)]
        case ConsumerGroupRegularExpressionTombstone():
            return [ConsumerGroupRegexDeleted(group=record.group, regex=record.regular_expression)]
        case _:
            return []


def _held_partitions(*held: tuple[TopicPartitions, ...]) -> tuple[TopicIdPartition, ...]:
    return tuple(
        TopicIdPartition(topic_id=topic_id, partition=partition)
        for topic_id, partition in sorted(
            {(str(topics.topic_id), partition) for group in held for topics in group for partition in topics.partitions}
        )
    )
