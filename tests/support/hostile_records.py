"""A stream of ``__consumer_offsets`` messages for the semantic fuzz drill: valid records mixed with
valid encodings of hostile values, and with random and truncated bytes.

Pure and deterministic (one seed, one stream). Every message carries what the drill expects of it:

- ``valid``: applied, never dead-lettered. The well-behaved groups' records, and records whose
  values are odd but legal (huge partitions and offsets, 20,000-character member ids, a protocol
  type other than ``consumer``, a generation going backwards, a member assigned partitions of a
  topic it did not subscribe to: those are dropped from it, the rest applied).
- ``rejected:<words>``: a valid encoding that breaks a rule of :mod:`kagent.core.record_checks`
  (or a bound of the codec), so dead-lettered with ``<words>`` (the rule's name) in its reason.
- ``garbage``: random bytes, or a valid record cut short; dead-lettered unless the bytes happen
  to decode into a record that passes the rules (the drill asks :func:`kagent.core.ingest.ingest`).

The well-behaved groups (:attr:`HostileStream.final`) end in a known generation and member set,
which a worker that applied everything shows.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    Assignment,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    OffsetTombstone,
    Record,
    Subscription,
    encode,
)
from kagent.core.consumer_offsets._wire import uvarint
from kagent.tools.simulator.coordinator_records import OffsetsTopicMessage
from kagent.tools.simulator.partitioners import OFFSETS_TOPIC_PARTITIONS, offsets_partition_for

__all__ = ["HostileMessage", "HostileStream"]

TOPIC = "fuzz-orders"
"""The topic the well-behaved groups read."""
TOPIC_PARTITIONS = 12
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
NOW_MS = 1_700_000_000_000


@dataclass(frozen=True)
class HostileMessage:
    """One message and what the drill expects of it (``valid``, ``rejected:<rule>`` or ``garbage``)."""

    message: OffsetsTopicMessage
    expect: str


@dataclass
class HostileStream:
    """``count`` messages from ``seed``; iterate once. :attr:`final` fills as it is iterated.
    ``expect`` is ``valid``, ``garbage`` or ``rejected:<words its dead letter's reason has>``."""

    count: int
    seed: int = 17
    groups: int = 300
    final: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)
    """Well-behaved group -> (its last generation, its members' ids) once the stream is read."""

    def __iter__(self) -> Iterator[HostileMessage]:
        rng = random.Random(self.seed)
        generations = dict.fromkeys((f"fuzz-good-{g}" for g in range(self.groups)), 0)
        kinds = [
            (self._commit, 55),
            (self._new_generation, 3),
            (self._stale_generation, 1),
            (self._odd_but_legal, 3),
            (self._rejected, 20),
            (self._random_bytes, 9),
            (self._truncated, 9),
        ]
        makers = [make for make, _ in kinds]
        weights = [weight for _, weight in kinds]
        for i in range(self.count):
            # Every well-behaved group gets its first generation before anything else.
            make = self._new_generation if i < self.groups else rng.choices(makers, weights)[0]
            yield make(rng, generations, i)

    # -- valid -------------------------------------------------------------------------------------

    def _commit(self, rng: random.Random, generations: dict[str, int], i: int) -> HostileMessage:
        group = rng.choice(list(generations))
        partition = rng.randrange(TOPIC_PARTITIONS)
        if rng.random() < 0.02:
            return _message(OffsetTombstone(group, TOPIC, partition), "valid")
        version = rng.choice((3, 3, 3, 4))
        epoch = rng.choice((None, 0, 7))
        return _message(OffsetCommit(group, TOPIC, partition, i, "", NOW_MS + i, None, epoch, version), "valid")

    def _new_generation(self, rng: random.Random, generations: dict[str, int], i: int) -> HostileMessage:
        group = f"fuzz-good-{i}" if i < self.groups else rng.choice(list(generations))
        generations[group] += 1
        record = _group(group, generations[group], rng.randint(1, 20), rng)
        self.final[group] = (record.generation, frozenset(m.member_id for m in record.members))
        return _message(record, "valid")

    def _stale_generation(self, rng: random.Random, generations: dict[str, int], i: int) -> HostileMessage:
        """A generation older than the group's last one, with other members: read as stale, skipped."""
        group = rng.choice([g for g, generation in generations.items() if generation > 1] or list(generations))
        record = _group(group, max(0, generations[group] - 1), 3, rng, prefix="stale")
        return _message(record, "valid")

    def _odd_but_legal(self, rng: random.Random, generations: dict[str, int], i: int) -> HostileMessage:
        group = f"fuzz-odd-{rng.randrange(50)}"
        # 20,000-character member ids are rare, for the same reason.
        match rng.choices(range(5), weights=(10, 0.2, 10, 10, 10))[0]:
            case 0:
                record: Record = OffsetCommit(group, TOPIC, INT32_MAX, INT64_MAX, "", NOW_MS, None, None, 3)
            case 1:
                record = _group(group, rng.randrange(1, 1000), 2, rng, member_id_length=20_000)
            case 2:
                # Kafka Connect's group: its members' metadata is Connect's, opaque bytes to kagent.
                connect = _group(group, rng.randrange(1, 1000), 2, rng)
                members = tuple(m._replace(subscription=b"\x00\x01", assignment=b"\x00\x02") for m in connect.members)
                record = connect._replace(protocol_type="connect", protocol="sessioned", members=members)
            case 3:
                # Members assigned a topic they did not subscribe to: those partitions are dropped.
                members = tuple(
                    member._replace(
                        assignment=Assignment(0, (TopicPartition("not-subscribed", 0), TopicPartition(TOPIC, 0)))
                    )
                    for member in _group(group, 1, 2, rng).members
                )
                record = _group(group, rng.randrange(1, 1000), 2, rng)._replace(members=members)
            case _:
                record = OffsetCommit("", TOPIC, 0, 5, "", NOW_MS, None, None, 3)  # Kafka allows the empty group here
        return _message(record, "valid")

    # -- rejected ------------------------------------------------------------------------------------

    def _rejected(self, rng: random.Random, generations: dict[str, int], i: int) -> HostileMessage:
        group = f"fuzz-bad-{rng.randrange(50)}"
        commit = OffsetCommit(group, TOPIC, 0, 5, "", NOW_MS, None, None, 3)
        fine = _group(group, 1, 2, rng)
        first = fine.members[0]
        # 64 KiB strings are rare: 1,000,000 records must not make gigabytes of dead letters.
        match rng.choices(range(10), weights=(10, 10, 10, 10, 10, 10, 10, 0.05, 10, 10))[0]:
            case 0:
                return _message(
                    commit._replace(partition=rng.choice((-1, -(2**31)))), "rejected:breaks partition-negative"
                )
            case 1:
                return _message(
                    commit._replace(offset=rng.choice((-2, -(2**63)))), "rejected:breaks offset-below-minus-one"
                )
            case 2:
                return _message(commit._replace(leader_epoch=-5), "rejected:breaks offset-below-minus-one")
            case 3:
                name = rng.choice(("..", "bad topic!", "t" * 300, ""))
                return _message(commit._replace(topic=name), "rejected:breaks topic-name")
            case 4:
                return _message(fine._replace(generation=-3), "rejected:breaks epoch-negative")
            case 5:
                members = (first._replace(member_id=""), *fine.members[1:])
                return _message(fine._replace(members=members), "rejected:breaks id-empty")
            case 6:
                return _message(fine._replace(members=(first, first)), "rejected:breaks duplicate-member")
            case 7:
                return _with_64_kib_client_id(fine, first)
            case 8:
                members = (first._replace(group_instance_id=""), *fine.members[1:])
                return _message(fine._replace(members=members), "rejected:breaks id-empty")
            case _:
                return _message(fine._replace(group=""), "rejected:breaks id-empty")

    # -- garbage ------------------------------------------------------------------------------------

    def _random_bytes(self, rng: random.Random, generations: dict[str, int], i: int) -> HostileMessage:
        key = rng.randbytes(rng.randrange(0, 64))
        if rng.random() < 0.5:
            key = rng.choice((b"\x00\x01", b"\x00\x02", b"\x00\x05", b"\x00\x63")) + key  # a known type's key
        value = rng.randbytes(rng.randrange(0, 512)) if rng.random() < 0.9 else None
        return HostileMessage(OffsetsTopicMessage(rng.randrange(OFFSETS_TOPIC_PARTITIONS), key, value), "garbage")

    def _truncated(self, rng: random.Random, generations: dict[str, int], i: int) -> HostileMessage:
        record = _group("fuzz-cut", 1, 3, rng) if rng.random() < 0.5 else self._commit(rng, generations, i)
        message = record.message if isinstance(record, HostileMessage) else _message(record, "garbage").message
        key, value = message.key, message.value
        if value and rng.random() < 0.8:
            value = value[: rng.randrange(len(value))]
        else:
            key = key[: rng.randrange(len(key))]
        return HostileMessage(message._replace(key=key, value=value), "garbage")


def _group(
    group: str, generation: int, members: int, rng: random.Random, *, prefix: str = "m", member_id_length: int = 0
) -> GroupMetadata:
    """Consumer group metadata (value v3): ``members`` members sharing :data:`TOPIC`'s partitions."""
    ids = [f"{prefix}{m}-{generation}".ljust(member_id_length, "x") for m in range(members)]
    owned: dict[str, list[TopicPartition]] = {member: [] for member in ids}
    for partition in range(TOPIC_PARTITIONS):
        owned[ids[partition % members]].append(TopicPartition(TOPIC, partition))
    return GroupMetadata(
        group=group,
        protocol_type="consumer",
        generation=generation,
        protocol=rng.choice(("range", "roundrobin", "cooperative-sticky")),
        leader=ids[0],
        state_timestamp=NOW_MS,
        members=tuple(
            GroupMember(
                member,
                None,
                f"client-{member[:20]}",
                "/127.0.0.1",
                300_000,
                45_000,
                Subscription(0, (TOPIC,)),
                Assignment(0, tuple(owned[member])),
            )
            for member in ids
        ),
        value_version=3,
    )


def _with_64_kib_client_id(group: GroupMetadata, first: GroupMember) -> HostileMessage:
    """``group`` (value v4, flexible) whose first member's client id is 65,536 bytes: Kafka's encoder
    (and kagent's) refuses to write one, but a compact string's varint length can say it, so the
    bytes are forged from a record with a marker in its place. The codec refuses to read it, as
    Kafka's generated readers do (before ``string-too-long`` of the rules could)."""
    marker = "Q" * 300
    members = (first._replace(client_id=marker), *group.members[1:])
    message = _message(group._replace(members=members, value_version=4), "").message
    assert message.value is not None
    forged = uvarint(len(marker) + 1) + marker.encode()
    assert message.value.count(forged) == 1
    value = message.value.replace(forged, uvarint(65_536 + 1) + b"c" * 65_536)
    return HostileMessage(message._replace(value=value), "rejected:exceeds 32767")


def _message(record: Record, expect: str) -> HostileMessage:
    key, value = encode(record)
    return HostileMessage(
        OffsetsTopicMessage(offsets_partition_for(record.group, OFFSETS_TOPIC_PARTITIONS), key, value), expect
    )
