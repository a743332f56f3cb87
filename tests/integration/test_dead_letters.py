"""Dead letters the broker does not take: counted, logged, sent once it takes them; against a broker of their
own that stops answering, and through a real worker whose broker refuses its dead-letter topic (issue 35)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import uuid
from pathlib import Path

import faust
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker
from kagent.tools.simulator.coordinator_records import OffsetsTopicMessage
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.metrics import Metrics
from tests.support.answer_rewriter import rewritten_broker
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.processes import process_stopped
from tests.support.waiting import wait_until, wait_until_async
from tests.support.web import get_json
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration


async def _letters(broker: EmbeddedBroker, topic: str, offsets: set[int]) -> list[int]:
    """The offsets of the records the letters of ``topic`` carry, read until all of ``offsets`` are there."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        carried: list[int] = []

        async def all_read() -> bool:
            fetched = await consumer.getmany(timeout_ms=1000)
            carried.extend(json.loads(record.value)["offset"] for records in fetched.values() for record in records)
            return set(carried) >= offsets

        await wait_until_async(all_read, 60, f"letters of the records at {sorted(offsets)}", interval=0)
        return carried
    finally:
        await consumer.stop()


async def test_letters_the_broker_does_not_take_are_counted_logged_and_sent_once_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker stops answering (SIGSTOP: a hung broker, or a network dropping packets) while
    letters are sent, through a producer that writes one record a batch: the first letter's request
    gets no answer, the second waits behind it, the third finds no room. Each attempt fails within
    the 1 s bound, is counted and logged, and no letter's future is done until the broker has it;
    once the broker answers again every letter reaches the topic."""
    topic = f"letters-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        await broker.create_topics({topic: 1})
        app = faust.App(f"{topic}-app", broker=broker.url, producer_max_batch_size=ONE_RECORD_BATCH)
        metrics = Metrics()
        letters = DeadLetters(app, topic, metrics, timeout=1.0)

        async def letter(offset: int) -> asyncio.Future[None]:
            return await letters.send(
                topic="source", partition=0, offset=offset, timestamp_ms=None, key=b"k", value=b"v", error="bad"
            )

        def failures() -> float:
            return metrics.registry.get_sample_value("kagent_dead_letter_send_failures_total", {"topic": "source"}) or 0

        pid = broker.pid
        assert pid is not None
        caplog.set_level(logging.WARNING, logger="kagent.worker.dead_letters")
        try:
            await asyncio.wait_for(await letter(0), 30)  # the producer is started and knows the topic
            os.kill(broker.pid, signal.SIGSTOP)
            await asyncio.to_thread(wait_until, lambda: process_stopped(pid), 10, "the broker stopped", interval=0.01)
            try:
                sent = [await letter(offset) for offset in (1, 2, 3)]

                async def every_first_attempt_failed() -> bool:
                    return failures() >= 3

                await wait_until_async(every_first_attempt_failed, 30, "three failed attempts", interval=0.1)
                assert not any(future.done() for future in sent)
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            await asyncio.wait_for(asyncio.gather(*sent), 60)
        finally:
            await app.producer.stop()
        carried = await _letters(broker, topic, {0, 1, 2, 3})
    assert len(carried) <= 7, carried  # a letter may be written twice (its first attempt went out late), no more
    warnings = [r.getMessage() for r in caplog.records if r.name == "kagent.worker.dead_letters"]
    assert any(
        message.startswith("dead letter of source partition 0 offset ") and "not sent (" in message
        for message in warnings
    ), warnings


async def test_a_worker_whose_dead_letters_the_broker_refuses_counts_them_and_delivers_them_once_it_takes_them(
    tmp_path: Path,
) -> None:
    """Through a real worker: the broker refuses the writes to its dead-letter topic (TOPIC_AUTHORIZATION_FAILED,
    as an ACL that forgot the topic answers; a relay before the broker says so, ``tests/support/answer_rewriter``)
    when a record that does not decode arrives. Each attempt is counted and logged, the letter waits, the
    commits after the record are applied meanwhile, and once the broker takes the topic again the letter is on
    it, with the record's offset."""
    app = f"refused-letters-{uuid.uuid4().hex[:6]}"
    async with rewritten_broker(tmp_path) as (broker, relay):
        bootstrap = f"127.0.0.1:{relay.port}"
        topic, group = f"{app}-orders", f"{app}-group"
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, topic: 2})
        await produce(bootstrap, topic, {0: 10, 1: 10})
        members = {"a-1": [TopicPartition(topic, 0)], "b-1": [TopicPartition(topic, 1)]}
        await publish(bootstrap, [group_metadata(group, 1, members), offset_commit(group, topic, 0, 2)])
        worker = Worker(bootstrap, tmp_path, app, **FAST).start()
        try:
            await asyncio.to_thread(worker.wait_ready, 120)
            letters_topic = f"{app}-dead-letters"
            relay.produce_errors[letters_topic] = 29  # TOPIC_AUTHORIZATION_FAILED
            poison = OffsetsTopicMessage(0, b"\x00\x01\x00\xff", b"\x00\x03garbage")  # a group length past the end
            await publish(bootstrap, [poison, offset_commit(group, topic, 0, 6)])

            def refused_twice() -> bool:
                worker.check_alive()
                samples = worker.metrics("kagent_dead_letter_send_failures_total") or {}
                return samples.get('kagent_dead_letter_send_failures_total{topic="__consumer_offsets"}', 0) >= 2

            await asyncio.to_thread(wait_until, refused_twice, 60, "two refused attempts", detail=worker.log_tail)
            # The records after it are applied while its letter waits.
            await asyncio.to_thread(
                wait_until, lambda: committed(worker, group, 0) == 6, 60, "the commit after it", detail=worker.log_tail
            )
            relay.produce_errors.clear()
            carried = await _letters_of(bootstrap, letters_topic)
            assert any(offset is not None for offset in carried), carried
            log = worker.log()
            assert "dead letter of __consumer_offsets partition 0 offset " in log, worker.log_tail(80)
            assert "TopicAuthorizationFailedError" in log, worker.log_tail(80)
            assert worker.stop() == 0
        finally:
            worker.kill()


def committed(worker: Worker, group: str, partition: int) -> int | None:
    detail = get_json(f"{worker.url}api/groups/{group}") or {}
    return next((p["committed"] for p in detail.get("partitions", []) if p["partition"] == partition), None)


async def _letters_of(bootstrap: str, topic: str) -> list[int]:
    """The offsets of the records the letters of ``topic`` carry, read until there is one."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        carried: list[int] = []

        async def one() -> bool:
            fetched = await consumer.getmany(timeout_ms=1000)
            carried.extend(json.loads(r.value)["offset"] for records in fetched.values() for r in records)
            return bool(carried)

        await wait_until_async(one, 90, f"a letter on {topic}", interval=0)
        return carried
    finally:
        await consumer.stop()
