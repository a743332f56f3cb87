"""Source ``admin-api`` on the embedded broker: a real worker polls a real aiokafka consumer group.

What Tansu answers the group APIs, as measured with aiokafka 0.14:

- ListGroups: every group and its protocol type (``consumer``), kagent's own included.
- DescribeGroups (v2): the state (``Stable``) and the real member ids, but an
  empty protocol, client id and client host, and empty member metadata and
  assignment blobs (Tansu's storage layer answers every member so, whatever
  the client: librdkafka's and kafka-python's groups alike,
  ``tests/integration/test_client_interop.py``).
- OffsetFetch for explicit partitions: the committed offsets (-1 where none).
  For all of a group's partitions (topics null) its answer stops after the
  error code, without the topics array (v3: ``00 00 00 00 00 00``), so
  aiokafka fails to decode it and drops the connection; the source then asks
  for every partition of every topic.
- ConsumerGroupDescribe (v0, advertised): any group id answered with no
  error, state ``Stable`` (``Empty`` for an unknown id), epochs -1, no
  members, and a classic member's id as the assignor. It has no
  ConsumerGroupHeartbeat, so no group on the consumer protocol (KIP-848) can
  exist on it: a librdkafka consumer (confluent-kafka 2.16) on
  ``group.protocol=consumer`` never joins ("ConsumerGroupHeartbeatRequest not
  supported by broker"). The KIP-848 tests below show kagent such a group
  through the relay of ``tests/support/answer_rewriter.py``.

So this test checks for real: the group's real member ids and their change
on a rebalance, the committed offsets and their change, no repeated events
while nothing changes, kagent's own group skipped, and the tables fed. What
Tansu cannot answer (decoded subscriptions and assignments, client ids and
hosts, the assignor, DescribeGroups errors) is tested on aiokafka's real
DescribeGroups response structs in ``tests/unit/test_group_polling.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from aiokafka import AIOKafkaClient, AIOKafkaConsumer
from aiokafka.protocol.admin import ApiVersionRequest
from confluent_kafka import Consumer

from kagent.core.events import DerivedEvents
from kagent.core.group_polling import UNKNOWN_GENERATION
from kagent.core.topic_ids import MetadataWithTopicIds, topic_names
from kagent.settings import Settings
from kagent.tools.embedded import EmbeddedBroker, free_port
from kagent.worker.admin_api import GroupPoller
from kagent.worker.metrics import Metrics
from tests.support.answer_rewriter import CONSUMER_GROUP_DESCRIBE, AnswerRewriter, rewritten_broker
from tests.support.consumer_group_describe_bytes import UNSUPPORTED_VERSION, Group, Member, Topic
from tests.support.coordinator import produce
from tests.support.topics import TopicReader
from tests.support.waiting import wait_until, wait_until_async
from tests.support.web import get_json, wait_json
from tests.support.worker import Worker, metric_total, running_workers

pytestmark = pytest.mark.integration

TOPIC = "admin-orders"
GROUP = "admin-app"
APP_ID = "admin-source-test"
FAST = {
    "source": "admin-api",
    "end_offset_interval": "0.5",
    "evaluate_interval": "0.5",
    "topic_partitions": "4",
}


class DerivedEventsReader(TopicReader):
    """Everything on a derived-events topic, read from the start as it arrives."""

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every derived event read so far, in the order it arrived."""
        return [e for m in self.records for group in json.loads(m.value) for e in group["events"]]

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The events of ``kind`` about the test's group, in the order they arrived."""
        return [e for e in self.events if e["kind"] == kind and e["group"] == GROUP]


async def consumer(bootstrap: str, name: str) -> AIOKafkaConsumer:
    started = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        client_id=name,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await started.start()
    return started


async def assigned(consumers: list[AIOKafkaConsumer], partitions: int, timeout: float = 30) -> None:
    """Poll ``consumers`` until they hold ``partitions`` partitions between them, each some."""

    async def holding() -> bool:
        if sum(len(c.assignment()) for c in consumers) == partitions and all(c.assignment() for c in consumers):
            return True
        await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
        return False

    await wait_until_async(holding, timeout, f"{len(consumers)} members to hold {partitions} partitions", interval=0)


def member_id(started: AIOKafkaConsumer) -> str:
    """The member id the coordinator gave ``started`` (aiokafka keeps it on its coordinator)."""
    return str(started._coordinator.member_id)


@pytest.fixture
async def group(kafka_broker: EmbeddedBroker) -> AsyncIterator[list[AIOKafkaConsumer]]:
    """Two members of ``admin-app`` on 4 partitions holding 20 records."""
    bootstrap = kafka_broker.bootstrap_servers
    await kafka_broker.create_topics({TOPIC: 4})
    await produce(bootstrap, TOPIC, {p: 5 for p in range(4)})
    members = [await consumer(bootstrap, f"{GROUP}-{m}") for m in range(2)]
    try:
        await assigned(members, 4)
        yield members
    finally:
        for member in members:
            await member.stop()


async def test_the_admin_source_reports_a_real_groups_members_and_commits(
    kafka_broker: EmbeddedBroker, group: list[AIOKafkaConsumer], start_worker: Callable[..., Worker]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    first, second = group
    for offset, member in ((3, first), (5, second)):
        await member.commit({tp: offset for tp in member.assignment()})
    committed = {tp.partition: o for o, m in ((3, first), (5, second)) for tp in m.assignment()}

    worker = start_worker(APP_ID, **FAST)
    async with DerivedEventsReader(bootstrap, f"{APP_ID}-derived-events") as events:
        both = {member_id(first), member_id(second)}

        def explain() -> str:
            return f"events: {events.events}\n{worker.log_tail()}"

        def announced() -> bool:
            offsets = {e["partition"]: e["offset"] for e in events.of("offset-committed")}
            members = [{m["member_id"] for m in e["members"]} for e in events.of("group-assigned")]
            return offsets == committed and both in members

        await events.until(announced, 90, "announcement of the group and its commits", explain)
        (assignment,) = events.of("group-assigned")
        assert assignment["generation"] == UNKNOWN_GENERATION
        assert not [e for e in events.events if e["group"] == APP_ID]  # kagent's own group is skipped

        # A new commit on one partition is sent alone; the unchanged ones are not sent again.
        moved = min(first.assignment())
        await first.commit({moved: 4})

        def recommitted() -> bool:
            return any(e["partition"] == moved.partition and e["offset"] == 4 for e in events.of("offset-committed"))

        await events.until(recommitted, 30, f"the new commit on {moved}", explain)
        partitions = [e["partition"] for e in events.of("offset-committed")]
        assert sorted(partitions) == sorted([*committed, moved.partition])
        assert len(events.of("group-assigned")) == 1

        # The second member leaves: the group rebalances onto the first one alone.
        await second.stop()
        await assigned([first], 4)
        await events.until(
            lambda: [m["member_id"] for m in events.of("group-assigned")[-1]["members"]] == [member_id(first)],
            30,
            "the assignment after the rebalance",
            explain,
        )

        # The storage stage took the events: the worker holds the group with its one member. Tansu describes
        # no member's assignment, so the partitions the group committed on are no member's: the unknown one's.
        body = await wait_json(
            worker.url + "api/local/groups",
            lambda b: list(b["groups"].get(GROUP, {}).get("member_lag", {})) == [member_id(first), "unknown"],
            30,
        )
        assert body["groups"][GROUP]["generation"] is None  # DescribeGroups gave none
        # Nor the member's assignment: its lag is unknown, not the 0 of a member holding nothing.
        assert body["groups"][GROUP]["member_lag"][member_id(first)] is None
        # The scrape exports the group too (a member whose partitions are unknown once left the whole group
        # out of every scrape): its one member, each partition's lag on the unknown member, and no member-lag
        # series for the member whose lag is unknown.
        families = ("kagent_group_members", "kafka_consumergroup_group_lag", "kagent_group_member_lag")
        scraped = await asyncio.to_thread(worker.metrics, *families)
        assert scraped is not None
        ours = {key: value for key, value in scraped.items() if f'group="{GROUP}"' in key}
        assert [value for key, value in ours.items() if key.startswith("kagent_group_members{")] == [1]
        lag_series = [key for key in ours if key.startswith("kafka_consumergroup_group_lag{")]
        assert len(lag_series) == 4, lag_series
        assert all('consumer_id="unknown"' in key and 'member_host="unknown"' in key for key in lag_series)
        assert not [key for key in ours if f'consumer_id="{member_id(first)}"' in key]
        assert "left out of the scrape" not in worker.log()
        metrics = await asyncio.to_thread(worker.metrics)
        assert metrics is not None and metric_total(metrics, "kagent_group_api_errors_total") == 0
        assert "does not answer OffsetFetch for all of a group's partitions" in worker.log()
    assert worker.stop() == 0


async def test_the_embedded_broker_cannot_hold_a_group_on_the_consumer_protocol(kafka_broker: EmbeddedBroker) -> None:
    """Why the KIP-848 tests below fake the broker's side: Tansu 0.6 advertises ConsumerGroupDescribe (v0)
    but not ConsumerGroupHeartbeat (API 68), which a consumer on the consumer protocol joins with, so a
    librdkafka consumer (confluent-kafka) on ``group.protocol=consumer`` finds its coordinator unable to
    take it and never joins. (When this fails, the broker can: test kagent against a real such group.)"""
    await kafka_broker.create_topics({"kip848-probe": 2})
    client = AIOKafkaClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    await client.bootstrap()
    try:
        answer = await client.send(client.get_random_node(), ApiVersionRequest())
    finally:
        await client.close()
    versions = {key: (low, high) for key, low, high in answer.api_versions}
    assert (versions.get(69), versions.get(68)) == ((0, 0), None)

    lines: list[str] = []
    handler = ListHandler(lines)
    librdkafka = logging.getLogger("kip848-librdkafka")
    librdkafka.addHandler(handler)
    librdkafka.setLevel(logging.DEBUG)
    librdkafka.propagate = False
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": "kip848-librdkafka",
            "group.protocol": "consumer",
            "debug": "cgrp",
            "log_level": 7,  # debug: the group's lines
            "logger": librdkafka,
        }
    )
    try:
        consumer.subscribe(["kip848-probe"])

        def refused() -> bool:
            consumer.poll(0.2)  # serves the log callbacks
            return any("ConsumerGroupHeartbeatRequest not supported by broker" in line for line in lines)

        await asyncio.to_thread(
            wait_until,
            refused,
            30,
            "librdkafka to find the broker without the API",
            interval=0,
            detail=lambda: "\n".join(lines[-20:]),
        )
        assert consumer.assignment() == []
    finally:
        await asyncio.to_thread(consumer.close)
        librdkafka.removeHandler(handler)


class ListHandler(logging.Handler):
    """Keeps the messages logged to it."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_an_unreachable_cluster_is_counted_and_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    poller = GroupPoller(Settings(broker=f"127.0.0.1:{free_port()}"), metrics)
    sent: list[DerivedEvents] = []

    async def send(groups: list[DerivedEvents]) -> None:
        sent.extend(groups)

    try:
        await poller.poll(send)
    finally:
        await poller.stop()
    assert sent == []
    assert metrics.registry.get_sample_value("kagent_group_api_errors_total", {"api": "Metadata"}) == 1
    assert "Metadata of the cluster failed" in caplog.text


@pytest.fixture
async def rewriting_broker(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedBroker, AnswerRewriter]]:
    """A broker of its own behind an :class:`AnswerRewriter` (which it advertises), with nothing rewritten yet."""
    async with rewritten_broker(tmp_path) as pair:
        yield pair


def offset_events(events: DerivedEventsReader, group: str) -> list[tuple[str, int, int | None]]:
    """The group's offset events read so far, in order: (kind, partition, offset or None)."""
    return [
        (e["kind"], e["partition"], e.get("offset"))
        for e in events.events
        if e["group"] == group and e["kind"] in ("offset-committed", "offset-deleted")
    ]


async def test_a_partitions_offset_fetch_error_or_broken_offset_leaves_the_groups_other_commits_reported(
    rewriting_broker: tuple[EmbeddedBroker, AnswerRewriter], tmp_path: Path
) -> None:
    """Through a real worker: OffsetFetch answers partition 2 of the group with TOPIC_AUTHORIZATION_FAILED
    and partition 3 with offset -7 (rule ``offset-below-minus-one``). Tansu answers neither (see
    ``tests/support/answer_rewriter.py``), so the relay before it rewrites those two fields of its
    answer. The worker sends the new commits of partitions 0 and 1 to the derived-events topic, sends
    nothing of 2 and 3 (their last known commit stands: no deletion, no stale commit) through several
    polls, counts both in /metrics and logs them, and sends 2 and 3 once they are answered well.

    (The API shows no partition of this group: Tansu's DescribeGroups gives no member blobs, so the
    worker does not know which topics the group reads; the derived events are what the source says.)"""
    broker, relay = rewriting_broker
    bootstrap = f"127.0.0.1:{relay.port}"
    topic, group, app_id = "faulty-orders", "faulty-app", "admin-faults-test"
    await broker.create_topics({topic: 4})
    await produce(bootstrap, topic, {p: 10 for p in range(4)})
    member = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=6000
    )
    await member.start()
    try:
        await assigned([member], 4)
        every = sorted(member.assignment())
        await member.commit(dict.fromkeys(every, 3))
        with running_workers(bootstrap, tmp_path) as start:
            worker = start(app_id, **FAST)
            async with DerivedEventsReader(bootstrap, f"{app_id}-derived-events") as events:

                def explain() -> str:
                    return f"events: {offset_events(events, group)}\n{worker.log_tail()}"

                whole = [("offset-committed", p, 3) for p in range(4)]
                await events.until(lambda: offset_events(events, group) == whole, 120, "the commits", explain)

                relay.offset_fetch_errors[(group, topic, 2)] = 29  # TOPIC_AUTHORIZATION_FAILED
                relay.offset_fetch_offsets[(group, topic, 3)] = -7
                await member.commit(dict.fromkeys(every, 6))
                partition_errors = (
                    'kagent_group_api_partition_errors_total{api="OffsetFetch",error="TOPIC_AUTHORIZATION_FAILED"}'
                )
                rejected = 'kagent_group_api_rejected_total{api="OffsetFetch",rule="offset-below-minus-one"}'
                metrics: dict[str, float] = {}

                async def polled_three_times_with_faults() -> bool:
                    metrics.update(await asyncio.to_thread(worker.metrics) or {})
                    return metrics.get(partition_errors, 0) >= 3 and metrics.get(rejected, 0) >= 3

                await wait_until_async(
                    polled_three_times_with_faults, 30, "three polls with the faults", detail=explain
                )
                await events.until(lambda: len(offset_events(events, group)) >= 6, 10, "the new commits", explain)
                assert offset_events(events, group) == [*whole, ("offset-committed", 0, 6), ("offset-committed", 1, 6)]
                assert metric_total(metrics, "kagent_group_api_errors_total") == 0  # no request failed
                log = worker.log()
                assert (
                    f"OffsetFetch of group {group!r} failed for 1 partitions ({topic}[2]: TOPIC_AUTHORIZATION_FAILED); "
                    "the last known commit of 1 stands"
                ) in log
                assert (
                    f"OffsetFetch answer of group {group!r} skipped: OffsetCommit breaks offset-below-minus-one" in log
                )

                relay.offset_fetch_errors.clear()
                relay.offset_fetch_offsets.clear()
                healed = [("offset-committed", 2, 6), ("offset-committed", 3, 6)]
                await events.until(lambda: len(offset_events(events, group)) >= 8, 30, "2 and 3 again", explain)
                # A group's events are in one partition, in order: nothing of 2 and 3 came between.
                assert offset_events(events, group) == [
                    *whole,
                    ("offset-committed", 0, 6),
                    ("offset-committed", 1, 6),
                    *healed,
                ]
            assert worker.stop() == 0
    finally:
        await member.stop()


async def kip848_group(
    broker: EmbeddedBroker, relay: AnswerRewriter, topic: str, group: str, produced: dict[int, int]
) -> AIOKafkaConsumer:
    """A real aiokafka group ``group`` (one member) on ``topic``, which the relay lists as on the consumer
    protocol, having committed offset 0 on every partition of ``produced`` (records per partition)."""
    bootstrap = f"127.0.0.1:{relay.port}"
    relay.consumer_protocol_groups.add(group)
    await broker.create_topics({topic: len(produced)})
    await produce(bootstrap, topic, produced)
    member = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=6000
    )
    await member.start()
    try:
        await assigned([member], len(produced))
        await member.commit(dict.fromkeys(member.assignment(), 0))
    except BaseException:
        await member.stop()
        raise
    return member


async def test_a_consumer_protocol_group_the_broker_cannot_describe_has_its_members_unknown(
    rewriting_broker: tuple[EmbeddedBroker, AnswerRewriter], tmp_path: Path
) -> None:
    """Through a real worker: ListGroups v5 says the group is on the consumer protocol (KIP-848; the relay
    rewrites that one field, the group itself is a real aiokafka group with commits). The worker asks
    ConsumerGroupDescribe, not DescribeGroups (Kafka would answer ``Dead``):

    1. Tansu's own answer (v0, measured: no error, epochs -1, no members, a classic member's id as the
       assignor) breaks the rule ``epoch-negative``: counted, nothing of it sent;
    2. then the relay answers ``UNSUPPORTED_VERSION`` for the group, as Kafka does when the consumer
       protocol is not enabled: counted in ``kagent_group_api_errors{api="ConsumerGroupDescribe"}``.

    Either way the group's commits are sent, and the API shows it with its members unknown (state
    ``Unknown``, members and generation null, its partitions on no member, their lag measured), never
    as a group of no members, nor as gone."""
    broker, relay = rewriting_broker
    bootstrap = f"127.0.0.1:{relay.port}"
    topic, group, app_id = "kip848-orders", "kip848-app", "admin-kip848-test"
    member = await kip848_group(broker, relay, topic, group, {0: 10, 1: 10})
    try:
        with running_workers(bootstrap, tmp_path) as start:
            worker = start(app_id, **FAST)
            async with DerivedEventsReader(bootstrap, f"{app_id}-derived-events") as events:

                def ours() -> list[dict[str, Any]]:
                    return [e for e in events.events if e["group"] == group]

                await events.until(
                    lambda: len([e for e in ours() if e["kind"] == "offset-committed"]) == 2,
                    120,
                    "the KIP-848 group's commits",
                    worker.log_tail,
                )
                rejected = 'kagent_group_api_rejected_total{api="ConsumerGroupDescribe",rule="epoch-negative"}'
                errors = 'kagent_group_api_errors_total{api="ConsumerGroupDescribe"}'
                metrics: dict[str, float] = {}

                async def counted(name: str) -> bool:
                    metrics.update(await asyncio.to_thread(worker.metrics) or {})
                    return metrics.get(name, 0) >= 2

                await wait_until_async(lambda: counted(rejected), 30, "Tansu's answer rejected twice")
                assert "ConsumerGroupDescribe answer of group 'kip848-app' skipped: ConsumerGroupMetadata breaks" in (
                    worker.log()
                )
                unknown = await wait_json(
                    f"{worker.url}api/groups/{group}",
                    lambda b: b["unassigned"] is not None and all(p["offset_lag"] == 10 for p in b["partitions"]),
                    30,
                )

                relay.consumer_groups[group] = Group.failed(
                    group, UNSUPPORTED_VERSION, "The version of API is not supported."
                )
                await wait_until_async(lambda: counted(errors), 30, "UNSUPPORTED_VERSION counted twice")
                assert relay.rewritten["ConsumerGroupDescribe"] >= 2
                assert f"ConsumerGroupDescribe of group {group!r} failed: UnsupportedVersionError" in worker.log()
                still = await wait_json(f"{worker.url}api/groups/{group}", lambda b: True, 10)

                for body in (unknown, still):
                    summary = body["summary"]
                    assert (summary["state"], summary["members"], summary["generation"], summary["protocol"]) == (
                        "Unknown",
                        None,
                        None,
                        None,
                    )
                    assert (body["members"], body["consumer_group"], body["recommendation"]) == ([], None, None)
                    assert [(p["partition"], p["member_id"], p["committed"]) for p in body["partitions"]] == [
                        (0, None, 0),
                        (1, None, 0),
                    ]
                # Nothing but its commits was ever sent of it: no assignment of no members, no deletion.
                assert {e["kind"] for e in ours()} == {"offset-committed"}
            assert worker.stop() == 0
    finally:
        await member.stop()


async def test_a_broker_without_consumer_group_describe_is_counted_and_the_group_sends_only_its_commits(
    rewriting_broker: tuple[EmbeddedBroker, AnswerRewriter], caplog: pytest.LogCaptureFixture
) -> None:
    """kagent's poller, as the leader runs it, against a broker that does not have ConsumerGroupDescribe
    at all (the relay leaves it out of ApiVersions, as a Kafka before 3.7 would): aiokafka will not send
    the request; the poll counts it in ``kagent_group_api_errors{api="ConsumerGroupDescribe"}``, sends
    the group's commits and nothing else of it, and completes."""
    broker, relay = rewriting_broker
    relay.api_versions[CONSUMER_GROUP_DESCRIBE] = None
    topic, group = "kip848-legacy", "kip848-legacy-app"
    member = await kip848_group(broker, relay, topic, group, {0: 3, 1: 3})
    metrics = Metrics()
    poller = GroupPoller(Settings(broker=f"127.0.0.1:{relay.port}", app_id="admin-kip848-legacy"), metrics)
    sent: list[DerivedEvents] = []

    async def send(groups: list[DerivedEvents]) -> None:
        sent.extend(groups)

    def ours() -> list[Any]:
        return [event for events in sent for event in events.expanded() if event.group == group]

    async def polled_the_group() -> bool:
        assert await poller.poll(send)
        return len(ours()) == 2

    try:
        await wait_until_async(polled_the_group, 60, "a poll that lists the group", interval=0.5)
    finally:
        await poller.stop()
        await member.stop()
    assert [(e.kind, e.partition, e.offset) for e in ours()] == [("offset-committed", 0, 0), ("offset-committed", 1, 0)]
    errors = metrics.registry.get_sample_value("kagent_group_api_errors_total", {"api": "ConsumerGroupDescribe"})
    assert errors is not None and errors >= 1
    assert relay.rewritten["ApiVersions"] >= 1
    assert f"ConsumerGroupDescribe of group {group!r} failed: IncompatibleBrokerVersion" in caplog.text


async def test_a_consumer_protocol_group_is_described_with_its_members_epochs_and_server_assignor(
    rewriting_broker: tuple[EmbeddedBroker, AnswerRewriter], tmp_path: Path
) -> None:
    """Through a real worker, a group on the consumer protocol as a broker with KIP-848 describes it: the
    relay answers ConsumerGroupDescribe v1 for it (advertised in ApiVersions) from bytes laid out per
    Kafka's spec, since Tansu has no such groups (``tests/support/answer_rewriter.py``). Everything else
    is the real broker's: the group (a real aiokafka group, listed as on the consumer protocol) and its
    commits, the topic, its id (from Tansu's Metadata v12) and its end offsets.

    The API shows the members, their epochs, racks, clients and subscriptions, the group and assignment
    epochs, each member's partitions and lag, and the assignor the broker selected (``uniform``); the
    skew (one member holds both hot partitions) gets a rebalance recommendation that is not client-side
    and advises ``range``. A member leaving and the epoch moving on are shown too."""
    broker, relay = rewriting_broker
    bootstrap = f"127.0.0.1:{relay.port}"
    topic, group, app_id = "kip848-payments", "kip848-billing", "admin-kip848-described"
    relay.api_versions[CONSUMER_GROUP_DESCRIBE] = 1
    member = await kip848_group(broker, relay, topic, group, {0: 200, 1: 2, 2: 200, 3: 2, 4: 2, 5: 2})
    try:
        client = AIOKafkaClient(bootstrap_servers=bootstrap)
        await client.bootstrap()
        try:
            names = topic_names(await client.send(client.get_random_node(), MetadataWithTopicIds()))
        finally:
            await client.close()
        (topic_id,) = [UUID(i) for i, name in names.items() if name == topic]

        def held(member_id: str, epoch: int, partitions: tuple[int, ...], rack: str) -> Member:
            return Member(
                member_id,
                member_epoch=epoch,
                client_id=f"billing-{member_id}",
                client_host=f"/10.1.0.{ord(member_id[-1]) - 96}",
                subscribed_topic_names=(topic,),
                assignment=(Topic(topic_id, topic, partitions),),
                target_assignment=(Topic(topic_id, topic, partitions),),
                rack_id=rack,
                member_type=1,
            )

        # Interleaved, as uniform leaves members after a sticky reassignment: m-a holds both hot partitions.
        relay.consumer_groups[group] = Group(
            group,
            state="Stable",
            group_epoch=4,
            assignment_epoch=4,
            assignor="uniform",
            members=(
                held("m-a", 4, (0, 2), "rack-a"),
                held("m-b", 4, (1, 3), "rack-b"),
                held("m-c", 3, (4, 5), "rack-a"),
            ),
        )
        with running_workers(bootstrap, tmp_path) as start:
            worker = start(app_id, **FAST, hold_evaluations="2", min_total_lag="100")
            # The lag is read once known: a busy machine may delay an end-offsets poll past staleness (1.5 s at
            # 0.5 s polls), when the figures are rightly unknown until the next.
            detail = await wait_json(
                f"{worker.url}api/groups/{group}",
                lambda b: (
                    b["summary"]["members"] == 3
                    and b["recommendation"] is not None
                    and all(m["offset_lag"] is not None for m in b["members"])
                ),
                120,
                "the described group, its recommendation and its members' lag",
            )
            summary = detail["summary"]
            assert (summary["state"], summary["generation"], summary["protocol"]) == ("Stable", 4, "uniform")
            assert [(m["member_id"], m["client_id"], m["client_host"], m["offset_lag"]) for m in detail["members"]] == [
                ("m-a", "billing-m-a", "/10.1.0.1", 400),
                ("m-b", "billing-m-b", "/10.1.0.2", 4),
                ("m-c", "billing-m-c", "/10.1.0.3", 4),
            ]
            assert [[(p["topic"], p["partition"]) for p in m["partitions"]] for m in detail["members"]] == [
                [(topic, 0), (topic, 2)],
                [(topic, 1), (topic, 3)],
                [(topic, 4), (topic, 5)],
            ]
            assert detail["unassigned"] is None
            consumer_group = detail["consumer_group"]
            assert (consumer_group["group_epoch"], consumer_group["assignment_epoch"], consumer_group["assignor"]) == (
                4,
                4,
                "uniform",
            )
            assert [
                (m["member_id"], m["member_epoch"], m["rack"], m["subscribed_topics"])
                for m in consumer_group["members"]
            ] == [("m-a", 4, "rack-a", [topic]), ("m-b", 4, "rack-b", [topic]), ("m-c", 3, "rack-a", [topic])]
            reference = detail["recommendation"]
            assert (reference["kind"], reference["server_assignor"]) == ("rebalance", "range")
            recommendation = await asyncio.to_thread(get_json, worker.url + reference["url"].lstrip("/"))
            assert recommendation is not None and recommendation["client_side"] is False
            advice = recommendation["server_assignor"]
            assert (advice["current"], advice["recommended"]) == ("uniform", "range")
            assert advice["largest_lag"] == {"uniform": 400.0, "range": 202.0}

            # m-c leaves: the broker bumps the epoch and gives its partitions to the others.
            relay.consumer_groups[group] = dataclasses.replace(
                relay.consumer_groups[group],
                group_epoch=5,
                assignment_epoch=5,
                members=(held("m-a", 5, (0, 2, 4), "rack-a"), held("m-b", 5, (1, 3, 5), "rack-b")),
            )
            after = await wait_json(
                f"{worker.url}api/groups/{group}",
                lambda b: b["summary"]["generation"] == 5 and all(m["offset_lag"] is not None for m in b["members"]),
                30,
                "the group's next epoch, its members' lag known",
            )
            assert [(m["member_id"], m["offset_lag"]) for m in after["members"]] == [("m-a", 402), ("m-b", 6)]
            assert [(m["member_id"], m["member_epoch"]) for m in after["consumer_group"]["members"]] == [
                ("m-a", 5),
                ("m-b", 5),
            ]
            async with DerivedEventsReader(bootstrap, f"{app_id}-derived-events") as events:
                await events.until(
                    lambda: any(
                        e["kind"] == "consumer-group-member-left" for e in events.events if e["group"] == group
                    ),
                    30,
                    "m-c's leave on the derived-events topic",
                    worker.log_tail,
                )
                kinds = [e["kind"] for e in events.events if e["group"] == group]
            assert kinds.count("consumer-group-epoch") == 2  # each epoch once: unchanged polls send nothing
            assert "group-assigned" not in kinds
            metrics = await asyncio.to_thread(worker.metrics)
            assert metrics is not None
            assert metric_total(metrics, "kagent_group_api_errors_total") == 0
            assert metric_total(metrics, "kagent_group_api_rejected_total") == 0
            assert relay.rewritten["ApiVersions"] >= 1 and relay.rewritten["ConsumerGroupDescribe"] >= 2
            assert worker.stop() == 0
    finally:
        await member.stop()
