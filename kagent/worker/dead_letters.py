"""The dead-letter topic: where a record that cannot be applied goes, with its raw bytes and why.

Not a stage: a sink the stages that read records (the sources, storage,
alerting) share. Each letter is a :class:`~kagent.core.contracts.DeadLetter`
keyed by the record's topic-partition.

A letter is sent until the broker has it, never dropped. Each attempt is
bounded: :data:`~kagent.worker.record_batches.SEND_TIMEOUT` seconds for the
producer to take it (aiokafka waits for the topic's metadata and for room in
its accumulator) and as long again for the broker's acknowledgement. An
attempt that fails or runs out of time is counted
(``kagent_dead_letter_send_failures_total{topic}``, the topic of the record
the letter carries) and logged (the first at once, then one line per
:data:`LOG_EVERY` seconds saying how many more failed and how many letters
wait), and the letter waits to be sent again with the others that failed:
the oldest is tried after a capped exponential backoff with jitter
(:func:`kagent.core.backoff.backoff_delay`), one attempt at a time while they
fail, and once it is sent the rest go out as new letters do. A letter sent
while others wait queues behind them, so a broker that is gone costs one
bounded wait, not one per letter.

:meth:`DeadLetters.send` returns a future that is done once the broker has
the letter, and each caller acknowledges the record's batch only after that
(the source commits its offsets, storage acknowledges its derived events,
alerting commits the incidents): a worker that stops or dies first reads the
record again and sends its letter then. So a letter is written at least once;
its topic, partition and offset say which record it is. A caller that gives
up on a batch cancels its letters' futures, which stops their sending (the
source, which reads the batch again and sends new ones).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass

import faust

from kagent.core.backoff import RetryPolicy, backoff_delay
from kagent.core.contracts import DeadLetter
from kagent.worker.changelog import PRODUCER_ERRORS
from kagent.worker.metrics import Metrics
from kagent.worker.record_batches import SEND_TIMEOUT

__all__ = ["DeadLetters"]

log = logging.getLogger(__name__)

RESEND = RetryPolicy()
"""The backoff between attempts to send one letter: from 0.5 s, doubling, at most 30 s."""

LOG_EVERY = 10.0
"""Seconds between two lines about letters not sent (a broker gone fails every letter's attempt)."""

_FAILURES = (*PRODUCER_ERRORS, TimeoutError)
"""What one attempt to send a letter fails with: the producer's errors, or running out of time."""


@dataclass(frozen=True)
class _Letter:
    """One letter as it is sent: its record key and value, and what it carries in words."""

    key: bytes
    value: bytes
    topic: str
    """The topic of the record the letter carries."""
    where: str
    """The record's topic, partition and offset, for the log."""


class DeadLetters:
    """Sends dead letters through the app's producer to ``topic``, each until the broker has it."""

    def __init__(self, app: faust.App, topic: str, metrics: Metrics, timeout: float = SEND_TIMEOUT) -> None:
        """``timeout``: seconds an attempt may wait for the producer to take a letter, and as long again
        for the broker's acknowledgement."""
        self._app = app
        self._topic = topic
        self._metrics = metrics
        self._timeout = timeout
        self._random = random.Random()
        self._waiting: dict[asyncio.Future[None], _Letter] = {}
        """Letters whose attempt failed, oldest first, by the future each caller holds; a letter
        leaves when it is sent or its future is cancelled."""
        self._resending: asyncio.Task[None] | None = None
        self._logged_at = float("-inf")
        self._unlogged = 0
        """Failed attempts since the last line about them."""

    async def send(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        error: str,
    ) -> asyncio.Future[None]:
        """Send a record's raw bytes and ``error``; the future is done when the broker has the letter.

        The letter is handed to the producer before this returns (so letters go out in the order
        of the calls), unless letters sent earlier wait to be sent again: then it waits behind them,
        and this returns at once. A failed attempt is counted, logged and made again (see the
        module). Cancelling the future stops the attempts.
        """
        dead = DeadLetter.from_record(
            topic=topic, partition=partition, offset=offset, timestamp=timestamp_ms, key=key, value=value, error=error
        )
        letter = _Letter(
            f"{topic}-{partition}".encode(),
            dead.model_dump_json().encode(),
            topic,
            f"{topic} partition {partition} offset {offset}",
        )
        delivered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiting:
            self._wait(letter, delivered)
            return delivered
        try:
            acknowledged = await self._hand_over(letter)
        except _FAILURES as exc:
            self._failed(letter, delivered, exc)
        else:
            self._watch(letter, delivered, acknowledged)
        return delivered

    async def _hand_over(self, letter: _Letter) -> asyncio.Future[object]:
        """Give ``letter`` to the producer within the timeout; the future is done when the broker has it."""
        producer = self._app.producer
        try:
            async with asyncio.timeout(self._timeout):
                await producer.maybe_start()
                acknowledged: asyncio.Future[object] = await producer.send(
                    self._topic, letter.key, letter.value, None, None, None
                )
        except TimeoutError:
            raise TimeoutError(f"not taken by the producer within {self._timeout:g} s") from None
        return acknowledged

    def _watch(self, letter: _Letter, delivered: asyncio.Future[None], acknowledged: asyncio.Future[object]) -> None:
        """Settle ``delivered`` when the broker acknowledges the letter, or send it again if that fails
        or does not come within the timeout. A callback, not a task: a batch can carry thousands."""
        expiry = asyncio.get_running_loop().call_later(self._timeout, acknowledged.cancel)

        def settle(done: asyncio.Future[object]) -> None:
            expiry.cancel()
            failure = (
                TimeoutError(f"not acknowledged within {self._timeout:g} s") if done.cancelled() else done.exception()
            )
            if delivered.done():  # the caller gave up on it
                return
            if failure is None:
                delivered.set_result(None)
            else:
                self._failed(letter, delivered, failure)

        acknowledged.add_done_callback(settle)

    def _failed(self, letter: _Letter, delivered: asyncio.Future[None], exc: BaseException) -> None:
        """Count and log a failed attempt; the letter waits to be sent again."""
        self._wait(letter, delivered)
        self._count_failure(letter, exc)

    def _wait(self, letter: _Letter, delivered: asyncio.Future[None]) -> None:
        """Queue ``letter`` to be sent again (behind those queued before), until ``delivered`` is done."""
        self._waiting[delivered] = letter
        delivered.add_done_callback(self._forget)
        if self._resending is None or self._resending.done():
            self._resending = asyncio.ensure_future(self._resend())

    def _forget(self, delivered: asyncio.Future[None]) -> None:
        self._waiting.pop(delivered, None)

    async def _resend(self) -> None:
        """Send the waiting letters again, the oldest first, one at a time after a backoff while
        attempts fail; once one is sent, the others are handed to the producer as new ones are."""
        attempt = 0
        while self._waiting:
            await asyncio.sleep(backoff_delay(RESEND, attempt, self._random.random()))
            if not self._waiting:
                return
            delivered, letter = next(iter(self._waiting.items()))
            try:
                acknowledged = await self._hand_over(letter)
                async with asyncio.timeout(self._timeout):
                    await asyncio.shield(acknowledged)
            except _FAILURES as exc:
                if isinstance(exc, TimeoutError) and not exc.args:
                    exc = TimeoutError(f"not acknowledged within {self._timeout:g} s")
                attempt += 1
                self._count_failure(letter, exc)
                continue
            self._waiting.pop(delivered, None)
            if not delivered.done():
                delivered.set_result(None)
            attempt = 0
            while self._waiting:  # the broker takes letters again: the rest go out as new ones do
                delivered, letter = next(iter(self._waiting.items()))
                try:
                    acknowledged = await self._hand_over(letter)
                except _FAILURES as exc:
                    attempt += 1
                    self._count_failure(letter, exc)
                    break
                self._waiting.pop(delivered, None)
                self._watch(letter, delivered, acknowledged)

    def _count_failure(self, letter: _Letter, exc: BaseException) -> None:
        """Count a failed attempt; log it, or count it for the next line (one per :data:`LOG_EVERY` s)."""
        self._metrics.dead_letter_failures.labels(letter.topic).inc()
        now = time.monotonic()
        if now - self._logged_at < LOG_EVERY:
            self._unlogged += 1
            return
        more, self._unlogged, self._logged_at = self._unlogged, 0, now
        log.warning(
            "dead letter of %s not sent (%r); %d letters wait to be sent again%s",
            letter.where,
            exc,
            len(self._waiting),
            f" ({more} more attempts failed in the last {LOG_EVERY:g} s)" if more else "",
        )
