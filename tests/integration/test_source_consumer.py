"""The source's consumer fails under a running worker, which makes it again and reads on (issue 35).

The fault is caused through the broker, with ordinary Kafka requests: the source's consumer group
(``<app id>-offsets-topic-source``) is deleted (DeleteGroups) and a foreign consumer whose only
assignor is one the source does not speak takes the group id at once. The source's consumer, told
by the coordinator that it is no longer a member, rejoins and is refused with
INCONSISTENT_GROUP_PROTOCOL: aiokafka raises it from the next fetch (``getmany``) and from
``start()`` of every consumer made while the foreign one holds the group. Apache Kafka refuses to
delete a group that has members; Tansu deletes it, which is how the test has the coordinator forget
the source's membership while the broker serves the worker's other clients (Faust's consumer and
producer, the end-offset poller) as before. Tansu also keeps an emptied group's protocol (Kafka
forgets it), so once the foreign consumer has left, the group is deleted again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import InconsistentGroupProtocolError, KafkaConnectionError
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import OFFSETS_TOPIC, group_metadata, offset_commit, produce, publish
from tests.support.waiting import wait_until, wait_until_async
from tests.support.web import get_answer, get_json
from tests.support.worker import STEADY, Worker

pytestmark = pytest.mark.integration


class _ForeignAssignor(RoundRobinPartitionAssignor):  # type: ignore[misc]
    """An assignor no kagent consumer offers: a group whose members use only it refuses the source."""

    name = "foreign"


async def _delete_group(bootstrap: str, group: str) -> None:
    """Delete consumer group ``group`` (its members and committed offsets) with a DeleteGroups request."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        coordinator = await admin.find_coordinator(group)
        answer = await admin._send_request_to_node(coordinator, DeleteGroupsRequest([group]))
        assert [(group_id, code) for group_id, code in answer.results] == [(group, 0)], answer
    finally:
        await admin.close()


@asynccontextmanager
async def _group_taken_over(bootstrap: str, group: str, timeout: float) -> AsyncIterator[None]:
    """Delete ``group`` and have a foreign consumer join it first, trying again until it is in (the
    group's own member may rejoin first); the foreign consumer leaves on the way out."""

    async def taken() -> AIOKafkaConsumer | None:
        await _delete_group(bootstrap, group)
        foreign = AIOKafkaConsumer(
            OFFSETS_TOPIC,
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy=(_ForeignAssignor,),
            session_timeout_ms=3000,
            heartbeat_interval_ms=1000,
            enable_auto_commit=False,
        )
        try:
            await foreign.start()  # returns once the group has assigned it partitions
        except (InconsistentGroupProtocolError, KafkaConnectionError):
            await foreign.stop()
            return None
        return foreign

    foreign = await wait_until_async(taken, timeout, f"a foreign consumer to take group {group}", interval=0.5)
    try:
        yield
    finally:
        await foreign.stop()


def _restarts(worker: Worker) -> dict[str, float]:
    """``kagent_source_restarts_total`` by reason."""
    samples = worker.metrics("kagent_source_restarts_total") or {}
    return {key.split('"')[1]: value for key, value in samples.items() if key.endswith("}")}


def _partition(worker: Worker, group: str, partition: int) -> dict[str, Any] | None:
    """The API's figures of ``group``'s partition ``partition``; None while it has none."""
    detail = get_json(f"{worker.url}api/groups/{quote(group, safe='')}") or {}
    return next((p for p in detail.get("partitions", []) if p["partition"] == partition), None)


async def test_a_source_consumer_refused_by_its_coordinator_is_made_again_and_reads_on(
    kafka_broker: EmbeddedBroker, offsets_topic: str, start_worker: Callable[..., Worker]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"refused-{suffix}", f"refused-app-{suffix}"
    await kafka_broker.create_topics({topic: 2})
    await produce(bootstrap, topic, {0: 10, 1: 10})
    members = {"a-1": [TopicPartition(topic, 0)], "b-1": [TopicPartition(topic, 1)]}
    await publish(bootstrap, [group_metadata(group, 1, members), *(offset_commit(group, topic, p, 2) for p in (0, 1))])
    worker = start_worker(f"refused-{suffix}", **STEADY)
    await asyncio.to_thread(worker.wait_ready)
    await asyncio.to_thread(
        wait_until, lambda: (_partition(worker, group, 0) or {}).get("committed") == 2, 60, "the group's first commit"
    )

    async with _group_taken_over(bootstrap, f"{worker.app_id}-offsets-topic-source", 60):
        # The running consumer fails at its next fetch, and each one made while the group is taken fails to start.
        await asyncio.to_thread(
            wait_until,
            lambda: worker.check_alive() or {"fetch", "start"} <= _restarts(worker).keys(),
            60,
            "the source's consumer to fail at a fetch and then at a start",
            detail=worker.log_tail,
        )
        status, body = get_answer(worker.url + "readyz")
        assert (status, body["source_caught_up"], body["ready"]) == (503, False, False), body
        # Written while the source cannot read: the next consumer must read it.
        await publish(bootstrap, [offset_commit(group, topic, 0, 7)])
    await _delete_group(bootstrap, f"{worker.app_id}-offsets-topic-source")

    figures = await asyncio.to_thread(
        wait_until,
        # and its lag known (a busy machine may delay the first end-offsets poll after the restart)
        lambda: (
            worker.check_alive()
            or ((p := _partition(worker, group, 0)) and p["committed"] == 7 and p["offset_lag"] is not None and p)
        ),
        90,
        "the commit written while the source was refused, in the API, with its lag",
        detail=worker.log_tail,
    )
    assert figures["offset_lag"] == 3, figures
    await asyncio.to_thread(worker.wait_ready, 60)
    log = worker.log()
    assert "source's consumer failed at fetch (InconsistentGroupProtocolError" in log, worker.log_tail(80)
    assert "source's consumer failed at start (InconsistentGroupProtocolError" in log, worker.log_tail(80)
    assert "Traceback" not in log, worker.log_tail(200)
    assert worker.stop() == 0
