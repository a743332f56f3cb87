"""Decoding speed of kagent.core.consumer_offsets on one core.

    python benchmarks/bench_consumer_offsets.py

Mixes, each of distinct records:
- offset commits: value v3, short metadata (empty or a few characters);
- group metadata: value v3, 20 members, each subscribed to 3 topics and
  assigned 5 partitions (consumer protocol v3 blobs). "eager" is what the
  default range assignor stores (no owned partitions, so the members'
  subscriptions are identical); "cooperative" adds each member's 5 owned
  partitions to its subscription.

Beside each rate it prints the floor: a bare loop calling one precompiled
`struct.Struct.unpack_from` per key and per value, whose format (built with
the bytes, so every field's offset is known in advance) reads every field,
including those inside the embedded blobs, and builds no record. The ratio
says how far the codec is from it. For group metadata it also prints the
rate of building the same records from values already parsed (no byte
read): the share of the time the output objects (about 100
TopicPartitions, 20 members and assignments per record) take.

It measures the decoders in use, normally the compiled twins built at
install, then runs itself again with KAGENT_CODEC=python to measure the
generated pure-Python decoders on the same machine, and prints the ratio.
"""

from __future__ import annotations

import json
import os
import platform
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    Assignment,
    GroupMember,
    GroupMetadata,
    OffsetCommit,
    Subscription,
    _native,
    decode,
)

OFFSET_COMMITS = 200_000
GROUPS = 3_000
MEMBERS = 20
REPEATS = 5
TARGETS = {"offset commits": 300_000, "group metadata": 20_000}
#: The argument of the run this one starts with the pure-Python decoders:
#: it ends its output with its rates as JSON.
CHILD = "--child"


class Wire:
    """Bytes built field by field, with the struct format that reads them back."""

    def __init__(self) -> None:
        self.codes: list[str] = []
        self.values: list[object] = []

    def add(self, code: str, value: object) -> Wire:
        self.codes.append(code)
        self.values.append(value)
        return self

    def int16(self, value: int) -> Wire:
        return self.add("h", value)

    def int32(self, value: int) -> Wire:
        return self.add("i", value)

    def int64(self, value: int) -> Wire:
        return self.add("q", value)

    def string(self, value: str | None) -> Wire:
        if value is None:
            return self.int16(-1)
        raw = value.encode()
        return self.int16(len(raw)).add(f"{len(raw)}s", raw)

    def blob(self, inner: Wire) -> Wire:
        """Bytes holding `inner`; the format reads inside them too."""
        self.int32(len(inner.bytes()))
        self.codes += inner.codes
        self.values += inner.values
        return self

    def fmt(self) -> str:
        return ">" + "".join(self.codes)

    def bytes(self) -> bytes:
        return struct.pack(self.fmt(), *self.values)


def offset_commit(i: int) -> tuple[Wire, Wire]:
    group = f"payments-consumer-{i % 500}"
    key = Wire().int16(1).string(group).string(f"payments.events.v{i % 40}").int32(i % 64)
    value = (
        Wire()
        .int16(3)
        .int64(10_000_000 + i)
        .int32(i % 30)
        .string(("", "", "host-3", "batch=17", "")[i % 5])
        .int64(1_700_000_000_000 + i)
    )
    return key, value


def topic_partitions(wire: Wire, partitions: Sequence[tuple[str, Sequence[int]]]) -> Wire:
    wire.int32(len(partitions))
    for topic, numbers in partitions:
        wire.string(topic).int32(len(numbers))
        for number in numbers:
            wire.int32(number)
    return wire


def group_metadata(i: int, cooperative: bool) -> tuple[Wire, Wire]:
    group = f"orders-service-{i}"
    topics = [f"{group}.orders", f"{group}.payments", f"{group}.shipments"]
    generation = 40 + i % 100
    value = Wire().int16(3).string("consumer").int32(generation)
    value.string("cooperative-sticky" if cooperative else "range")
    members = [f"consumer-{group}-{m}-{i:08x}-4f1c-9a7e-{m:012x}" for m in range(MEMBERS)]
    value.string(members[0]).int64(1_700_000_000_000 + i).int32(MEMBERS)
    for m, member in enumerate(members):
        assigned = [(topics[0], [2 * m, 2 * m + 1]), (topics[1], [2 * m, 2 * m + 1]), (topics[2], [m])]
        subscription = Wire().int16(3).int32(len(topics))
        for topic in topics:
            subscription.string(topic)
        subscription.int32(-1)
        topic_partitions(subscription, assigned if cooperative else [])
        subscription.int32(generation - 1).string(None)
        assignment = topic_partitions(Wire().int16(3), assigned).int32(-1)
        value.string(member).string(None).string(f"consumer-{group}-{m}").string(f"/10.20.{m}.{i % 250}")
        value.int32(300_000).int32(45_000).blob(subscription).blob(assignment)
    return Wire().int16(2).string(group), value


def rate(loop: Callable[[], None], count: int) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        loop()
        best = min(best, time.perf_counter() - started)
    return count / best


def measure(pairs: list[tuple[Wire, Wire]]) -> tuple[float, float]:
    """(codec records/s, floor records/s) over the same bytes."""
    records = [(key.bytes(), value.bytes()) for key, value in pairs]
    unpackers: dict[str, Callable[[bytes], tuple[object, ...]]] = {}
    floor = [
        (
            unpackers.setdefault(key.fmt(), struct.Struct(key.fmt()).unpack_from),
            unpackers.setdefault(value.fmt(), struct.Struct(value.fmt()).unpack_from),
            raw_key,
            raw_value,
        )
        for (key, value), (raw_key, raw_value) in zip(pairs, records, strict=True)
    ]

    def decode_all() -> None:
        for key, value in records:
            decode(key, value)

    def unpack_all() -> None:
        for unpack_key, unpack_value, key, value in floor:
            unpack_key(key)
            unpack_value(value)

    return rate(decode_all, len(records)), rate(unpack_all, len(records))


def objects_only_rate(pairs: list[tuple[Wire, Wire]]) -> float:
    """Records/s of building the same group-metadata records from values already parsed
    (strings decoded, numbers read): what the objects alone cost, with no byte read.
    Subscriptions are shared between members as the decoder shares identical ones."""
    new = tuple.__new__
    parsed = []
    for key, value in pairs:
        group = decode(key.bytes(), value.bytes())
        members = [
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout,
                m.session_timeout,
                tuple(m.subscription),
                m.assignment.version,
                [(tp.topic, tp.partition) for tp in m.assignment.partitions],
                m.assignment.user_data,
            )
            for m in group.members
        ]
        parsed.append((group[:6], members, group.value_version))

    def build_all() -> None:
        for head, members, version in parsed:
            built = []
            subscriptions: dict[tuple[object, ...], Subscription] = {}
            for member_id, instance, client, host, rebalance, session, sub, a_version, tps, data in members:
                subscription = subscriptions.get(sub)
                if subscription is None:
                    subscription = subscriptions[sub] = new(Subscription, sub)
                assignment = new(Assignment, (a_version, tuple([new(TopicPartition, tp) for tp in tps]), data))
                built.append(
                    new(GroupMember, (member_id, instance, client, host, rebalance, session, subscription, assignment))
                )
            new(GroupMetadata, (*head, tuple(built), version))

    return rate(build_all, len(parsed))


def main() -> int:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    commits = [offset_commit(i) for i in range(OFFSET_COMMITS)]
    eager = [group_metadata(i, cooperative=False) for i in range(GROUPS)]
    cooperative = [group_metadata(i, cooperative=True) for i in range(GROUPS)]

    sample = decode(commits[1][0].bytes(), commits[1][1].bytes())
    if not isinstance(sample, OffsetCommit) or sample.leader_epoch != 1:
        raise SystemExit(f"offset commit decoded wrongly: {sample!r}")
    for mix in (eager, cooperative):
        group = decode(mix[0][0].bytes(), mix[0][1].bytes())
        if not isinstance(group, GroupMetadata) or len(group.members) != MEMBERS:
            raise SystemExit(f"group metadata decoded wrongly: {group!r}")
        if any(len(member.assignment.partitions) != 5 for member in group.members):  # type: ignore[union-attr]
            raise SystemExit(f"assignments decoded wrongly: {group!r}")

    pure = not _native.IN_USE
    decoders = "generated pure Python" if pure else f"compiled twins ({len(_native.IN_USE)} of {len(_native.TWINS)})"
    print(
        f"kagent.core.consumer_offsets decode with {decoders}, one core, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}, best of {REPEATS}"
    )
    print(f"{'mix':<52}{'records':>9}{'records/s':>12}{'floor/s':>12}{'floor÷codec':>13}")
    results = {}
    for name, target, pairs in (
        ("offset commits (value v3, short metadata)", "offset commits", commits),
        ("group metadata (value v3, 20 members), eager", "group metadata", eager),
        ("group metadata (value v3, 20 members), cooperative", None, cooperative),
    ):
        codec, floor = measure(pairs)
        if target is not None:
            results[target] = codec
        print(f"{name:<52}{len(pairs):>9,}{codec:>12,.0f}{floor:>12,.0f}{floor / codec:>12.1f}x")
    for name, pairs in (("eager", eager), ("cooperative", cooperative)):
        built = objects_only_rate(pairs)
        print(f"building the {name} group-metadata records from parsed values alone: {built:,.0f}/s")
    for target, wanted in TARGETS.items():
        verdict = "met" if results[target] >= wanted else "NOT met"
        print(f"target {target} >= {wanted:,}/s: {verdict} ({results[target]:,.0f}/s)")
    if CHILD in sys.argv:
        print(json.dumps(results))
    elif not pure:
        print(f"\nThe same with {_native.CODEC_VARIABLE}=python:", flush=True)
        child = subprocess.run(
            [sys.executable, __file__, CHILD],
            env={**os.environ, _native.CODEC_VARIABLE: "python"},
            capture_output=True,
            text=True,
            check=True,
        )
        *table, last = child.stdout.splitlines(True)
        print("".join(table), end="")
        python_rates = json.loads(last)
        for target, rate_ in results.items():
            print(f"compiled twins ÷ pure Python, {target}: {rate_ / python_rates[target]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
