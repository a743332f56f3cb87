"""Many records to many topic-partitions, sent as whole record batches.

Faust's ``Producer.send`` costs about 15 µs of CPU per record (a future, a
partition lookup and an accumulator append each, measured in a worker's
profile: 27 % of its time went to the changelog flush). A flush or a fetched
batch writes hundreds to thousands of records at once, each with its
partition already known, so :func:`send_batches` appends them to aiokafka
``BatchBuilder`` s (its C record-batch builder), one chain per partition, and
hands each full batch to the producer: one future per batch, not per record.

The producer is Faust's own (the same connections, security settings, acks and
batch size); batches of one partition go to it in order, so records reach a
partition in the order given, as with one ``send`` per record.

A send is bounded from the moment it starts, by progress: handing a batch to
the producer (aiokafka's wait for the topic's metadata, and for room behind
the partition's previous batch in its accumulator) and waiting for the broker
to acknowledge the batches (:func:`acknowledged`) each fail with aiokafka's
``KafkaTimeoutError`` once :data:`SEND_TIMEOUT` seconds pass without a step
forward. Faust's producer would wait for its request timeout, 20 minutes,
holding every caller behind it (a table's flush, the batch a stage
acknowledges after it) for as long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import faust
from aiokafka.errors import KafkaTimeoutError
from faust.exceptions import NotReady, ProducerSendError

from kagent.worker.loop_slices import LoopSlices

__all__ = ["SEND_TIMEOUT", "OutgoingRecord", "abandon", "acknowledged", "send_batches", "send_derived_events"]

SEND_TIMEOUT = 30.0
"""Seconds a send may go without progress (a batch handed to the producer, or one acknowledged by the
broker) before it counts as failed: its caller sends again, and nothing waits the producer's 20-minute
request timeout. A large send that makes progress is never cut short."""

OutgoingRecord = tuple[str, int, bytes | None, bytes | None]
"""(topic, partition, key, value) of one record to send; a value of None is a tombstone."""


async def send_batches(
    app: faust.App, records: Iterable[OutgoingRecord], timeout: float = SEND_TIMEOUT
) -> list[asyncio.Future[Any]]:
    """Append ``records`` to record batches, one chain of batches per topic-partition, and hand every
    batch to Faust's producer; a future per batch, done when the broker has it. ``records`` is read in
    slices of the event loop (:class:`~kagent.worker.loop_slices.LoopSlices`): what it reads must not
    change meanwhile.

    Raises what the producer raises when a batch cannot be queued (``aiokafka.errors.KafkaError``,
    or Faust's ``ProducerSendError`` family, raised too when the producer is stopped), and
    ``KafkaTimeoutError`` when a batch is not taken within ``timeout`` seconds (the producer has no
    metadata for its topic, or the partition's previous batch is not sent); batches queued before
    that are sent regardless.
    """
    producer = app.producer
    await producer.maybe_start()
    try:
        kafka = producer._ensure_producer()  # Faust's AIOKafkaProducer: no public accessor in faust-streaming 0.15
    except NotReady as exc:  # the worker is stopping: Faust stopped its producer before a stage's timer last ran
        raise ProducerSendError("the producer is stopped: the worker is stopping") from exc
    chains: dict[tuple[str, int], list[Any]] = {}
    slices = LoopSlices()
    for topic, partition, key, value in records:
        if slices.over():  # a flush of thousands of records: the rest of the worker runs between slices
            await slices.next()
        chain = chains.get((topic, partition))
        if chain is None:
            chain = chains[topic, partition] = [kafka.create_batch()]
        if chain[-1].append(timestamp=None, key=key, value=value, headers=[]) is None:
            batch = kafka.create_batch()  # the last one is full: a new one takes the record, however large
            batch.append(timestamp=None, key=key, value=value, headers=[])
            chain.append(batch)
    queued: list[asyncio.Future[Any]] = []
    sent = await asyncio.gather(
        *(_send_chain(kafka, topic, partition, chain, timeout, queued) for (topic, partition), chain in chains.items()),
        return_exceptions=True,
    )
    for outcome in sent:
        if isinstance(outcome, BaseException):
            abandon(queued)
            raise outcome
    return queued


async def _send_chain(
    kafka: Any, topic: str, partition: int, chain: list[Any], timeout: float, queued: list[asyncio.Future[Any]]
) -> None:
    """Queue one partition's batches in order (aiokafka queues the next once the previous is drained),
    each within ``timeout`` seconds; each batch's future appended to ``queued``."""
    for batch in chain:
        try:
            async with asyncio.timeout(timeout):
                queued.append(await kafka.send_batch(batch, topic, partition=partition))
        except TimeoutError:
            raise KafkaTimeoutError(
                f"a record batch for {topic}[{partition}] not taken by the producer within {timeout:g} s "
                "(no metadata for the topic, or the partition's previous batch not sent)"
            ) from None


async def acknowledged(pending: Iterable[asyncio.Future[Any]], timeout: float = SEND_TIMEOUT) -> None:
    """Wait until the broker has acknowledged every send in ``pending``; raise the first send's error,
    or ``KafkaTimeoutError`` once ``timeout`` seconds pass with none acknowledged. On either, every
    send of ``pending`` is abandoned (:func:`abandon`); a cancelled wait leaves them to the caller."""
    pending = list(pending)
    waiting: set[asyncio.Future[Any]] = set(pending)
    try:
        while waiting:
            done, waiting = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise KafkaTimeoutError(f"{len(waiting)} sends not acknowledged by the broker within {timeout:g} s")
            for future in done:
                future.result()
    except Exception:
        abandon(pending)
        raise


def abandon(futures: Iterable[asyncio.Future[Any]]) -> None:
    """Give up waiting for ``futures``: each is cancelled (a send already handed to aiokafka is shielded
    there and still goes out), and an error it ends with is taken, so asyncio does not log it as
    never retrieved."""
    for future in futures:
        future.cancel()
        future.add_done_callback(_take_outcome)


def _take_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def send_derived_events(
    app: faust.App, topic: str, packed: Iterable[tuple[int, bytes]]
) -> list[asyncio.Future[Any]]:
    """Send the derived-events records ``packed`` ((partition, value) each, each group's events on its
    partition, as both sources pack them: :class:`~kagent.core.events.PackedRecords`) to ``topic``;
    :func:`send_batches`' futures and errors."""
    return await send_batches(app, ((topic, partition, None, value) for partition, value in packed))
