"""A broker that stops answering for longer than a send's bound, under a running worker (issue 35, item 4).

The broker's process is stopped with SIGSTOP (a hung broker, or a network dropping packets, as a client
sees it) for longer than :data:`~kagent.worker.record_batches.SEND_TIMEOUT`. The worker polls end
offsets twice a second, so storage has lag entries to write when it stops: their flush, waiting for the
producer to take a batch or for the broker to answer, must fail within its bound (Faust's producer would
wait its 20-minute request timeout, and storage behind it), keep its writes, and send them once the
broker answers again; the worker must then apply what comes as before. What a user sees is asserted:
the log's line for the failed flush, readiness, and the API's figures after.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path

import faust
import pytest
from aiokafka.structs import TopicPartition
from faust.exceptions import ProducerSendError

from kagent.tools.embedded import EmbeddedBroker
from kagent.worker.record_batches import SEND_TIMEOUT, send_batches
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration

STOPPED = SEND_TIMEOUT + 8.0
"""Seconds the broker stays stopped: past a send's bound, with room for the flush that fails."""


def committed(worker: Worker, group: str, partition: int) -> int | None:
    detail = get_json(f"{worker.url}api/groups/{group}") or {}
    return next((p["committed"] for p in detail.get("partitions", []) if p["partition"] == partition), None)


async def test_a_flush_to_a_broker_stopped_past_its_bound_fails_in_time_and_the_worker_carries_on(
    tmp_path: Path,
) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"bounded-{suffix}", f"bounded-group-{suffix}"
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        bootstrap = broker.bootstrap_servers
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, topic: 2})
        await produce(bootstrap, topic, {0: 20, 1: 20})
        members = {"a-1": [TopicPartition(topic, 0)], "b-1": [TopicPartition(topic, 1)]}
        await publish(bootstrap, [group_metadata(group, 1, members), offset_commit(group, topic, 0, 5)])
        worker = Worker(bootstrap, tmp_path, f"bounded-{suffix}", **FAST).start()
        try:
            await asyncio.to_thread(worker.wait_ready, 120)
            await asyncio.to_thread(
                wait_until, lambda: committed(worker, group, 0) == 5, 60, "the first commit", detail=worker.log_tail
            )
            assert broker.pid is not None
            os.kill(broker.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                await asyncio.to_thread(
                    wait_until,
                    lambda: worker.check_alive() or "changelog records not sent" in worker.log(),
                    STOPPED,
                    f"a flush to fail within its {SEND_TIMEOUT:g} s bound",
                    detail=worker.log_tail,
                )
                failed_after = time.monotonic() - stopped
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            assert failed_after < SEND_TIMEOUT + 15, f"the flush failed {failed_after:.0f} s after the broker stopped"
            line = next(line for line in worker.log().splitlines() if "changelog records not sent" in line)
            assert f"within {SEND_TIMEOUT:g} s" in line, line

            await asyncio.to_thread(worker.wait_ready, 120)
            await publish(bootstrap, [offset_commit(group, topic, 0, 12)])
            await asyncio.to_thread(
                wait_until,
                lambda: worker.check_alive() or committed(worker, group, 0) == 12,
                90,
                "a commit written after the broker answered again",
                detail=worker.log_tail,
            )
            assert worker.stop() == 0
        finally:
            worker.kill()
        assert "Traceback" not in worker.log(), worker.log_tail(200)


async def test_a_send_once_the_producer_stopped_raises_a_producer_error_the_stages_catch(
    kafka_broker: EmbeddedBroker,
) -> None:
    """A worker stopping stops Faust's producer before a stage's timer has last run (seen: the admin-api
    source's poll, crashing the worker's exit with Faust's ``NotReady``). A send then raises Faust's
    ``ProducerSendError``, which every stage handles as a failed send, with why."""
    app = faust.App(f"stopped-producer-{uuid.uuid4().hex[:6]}", broker=f"kafka://{kafka_broker.bootstrap_servers}")
    await app.producer.start()
    await app.producer.stop()
    with pytest.raises(ProducerSendError, match="the producer is stopped"):
        await send_batches(app, [("stopped-producer-topic", 0, None, b"x")])
