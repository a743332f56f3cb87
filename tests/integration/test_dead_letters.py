"""Dead letters against a broker of their own that stops answering: counted, logged, sent once it answers."""

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
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.metrics import Metrics
from tests.support.waiting import wait_until_async

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

        assert broker.pid is not None
        caplog.set_level(logging.WARNING, logger="kagent.worker.dead_letters")
        try:
            await asyncio.wait_for(await letter(0), 30)  # the producer is started and knows the topic
            os.kill(broker.pid, signal.SIGSTOP)
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
