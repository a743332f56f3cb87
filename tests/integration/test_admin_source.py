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

So this test checks for real: the group's real member ids and their change
on a rebalance, the committed offsets and their change, no repeated events
while nothing changes, kagent's own group skipped, and the tables fed. What
Tansu cannot answer (decoded subscriptions and assignments, client ids and
hosts, the assignor, DescribeGroups errors) is tested on aiokafka's real
DescribeGroups response structs in ``tests/unit/test_group_polling.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from kagent.core.events import DerivedEvents
from kagent.core.group_polling import UNKNOWN_GENERATION
from kagent.settings import Settings
from kagent.tools.embedded import EmbeddedBroker, free_port
from kagent.worker.admin_api import GroupPoller
from kagent.worker.metrics import Metrics
from tests.support.answer_rewriter import AnswerRewriter, rewritten_broker
from tests.support.coordinator import produce
from tests.support.topics import TopicReader
from tests.support.waiting import wait_until_async
from tests.support.web import wait_json
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
        metrics = await asyncio.to_thread(worker.metrics)
        assert metrics is not None and metric_total(metrics, "kagent_group_api_errors_total") == 0
        assert "does not answer OffsetFetch for all of a group's partitions" in worker.log()
    assert worker.stop() == 0


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


async def test_a_group_on_the_consumer_protocol_is_marked_so_and_its_offsets_reported(
    rewriting_broker: tuple[EmbeddedBroker, AnswerRewriter], tmp_path: Path
) -> None:
    """Through a real worker: ListGroups v5 says the group is on the consumer protocol (KIP-848). Tansu has no
    such groups (no ConsumerGroupHeartbeat, and its ListGroups v5 types every group ``classic``), so the relay
    before it rewrites that one field; the group itself is a real aiokafka group with a member and commits.
    The worker does not describe it (Kafka would answer ``Dead``), announces it on the derived-events topic
    with ``group_protocol`` ``consumer`` and no members (DescribeGroups would have named one), and sends its
    commits."""
    broker, relay = rewriting_broker
    bootstrap = f"127.0.0.1:{relay.port}"
    topic, group, app_id = "kip848-orders", "kip848-app", "admin-kip848-test"
    relay.consumer_protocol_groups.add(group)
    await broker.create_topics({topic: 2})
    await produce(bootstrap, topic, {0: 10, 1: 10})
    member = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=6000
    )
    await member.start()
    try:
        await assigned([member], 2)
        await member.commit({tp: 4 for tp in member.assignment()})
        with running_workers(bootstrap, tmp_path) as start:
            worker = start(app_id, **FAST)
            async with DerivedEventsReader(bootstrap, f"{app_id}-derived-events") as events:

                def announced() -> bool:
                    ours = [e for e in events.events if e["group"] == group]
                    return (
                        any(e["kind"] == "group-assigned" for e in ours)
                        and len([e for e in ours if e["kind"] == "offset-committed"]) == 2
                    )

                await events.until(announced, 120, "the KIP-848 group's announcement and commits", worker.log_tail)
                (assignment,) = [e for e in events.events if e["group"] == group and e["kind"] == "group-assigned"]
                assert (assignment["group_protocol"], assignment["members"], assignment["protocol"]) == (
                    "consumer",
                    [],
                    None,
                )
                first, *commits = [e for e in events.events if e["group"] == group]
                assert first == assignment  # announced before its offsets
                assert [(e["kind"], e["partition"], e["offset"]) for e in commits] == [
                    ("offset-committed", 0, 4),
                    ("offset-committed", 1, 4),
                ]
            # The API knows the group; its members and their partitions are ConsumerGroupDescribe's to say
            # (issue 37), so its epoch is unknown and no member is shown: the partitions it committed on are
            # shown on the unknown member, their lag measured as for any group.
            body = await wait_json(
                f"{worker.url}api/groups/{group}",
                lambda b: b["summary"]["group"] == group and b["unassigned"] is not None,
                30,
            )
            assert (body["summary"]["generation"], body["summary"]["members"], body["recommendation"]) == (
                None,
                0,
                None,
            )
            assert [(p["partition"], p["member_id"], p["committed"]) for p in body["partitions"]] == [
                (0, None, 4),
                (1, None, 4),
            ]
            assert relay.rewritten["ListGroups"] >= 1
            assert not [e for e in events.events if e["group"] == group and e["kind"] == "group-deleted"]
            assert worker.stop() == 0
    finally:
        await member.stop()
