"""End offsets: poll ListOffsets for the partitions the held groups read, each partition answered alone.

Every ``KAGENT_END_OFFSET_INTERVAL`` seconds the stage asks storage (through
its read interface) which partitions the held groups subscribe to or are
assigned, asks the cluster for the earliest and latest offset of each through
a :class:`~kagent.worker.list_offsets.ListOffsetsClient` (one request per
leader and timestamp), and hands every poll's answers to storage as
:class:`~kagent.worker.group_state.EndOffsetsPolled` on its channel, whatever
they were: storage owns the figures and the lag computed from them, and its
per-poll work (KIP-848 groups waiting for topic names) goes on.

A partition that gets no answer (unknown to the cluster, no leader, a leader
that fails or is slow) costs only itself: it is named in the poll's
``unavailable`` with its :class:`~kagent.worker.list_offsets.Reason`, and the
others are measured. Each request (connecting, when the stage has no client
yet; a metadata refresh; each leader's ListOffsets) times out after
:func:`request_timeout`, :data:`TIMEOUT_SHARE` of the interval, so a poll
takes at most 3 such timeouts, 0.9 of the interval, however many partitions
or leaders fail: it never overruns its interval because of one partition.

Each poll is counted by :func:`poll_outcome` in ``kagent_end_offset_polls``
(``ok``, ``partial``, ``error``; a poll that asks nothing is not counted)
and the partitions without an answer are exported by reason
(``kagent_end_offset_partitions_unavailable``). When no poll has answered
for :func:`unready_after` seconds (every poll an ``error``), the worker is
not ready (:meth:`EndOffsets.answering`, ``GET /readyz``) until one does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum

import faust
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from kagent.connections import KafkaConnection
from kagent.worker.channel import Channel
from kagent.worker.group_state import EndOffsetsPolled, GroupStateReader
from kagent.worker.in_flight import InFlight
from kagent.worker.list_offsets import (
    ListOffsetsClient,
    ListOffsetsResult,
    Offsets,
    PartitionAnswer,
    Reason,
    Unavailable,
)
from kagent.worker.metrics import Metrics
from kagent.worker.missing_topics import DROP_AFTER_POLLS
from kagent.worker.stage import Stage

__all__ = [
    "TIMEOUT_SHARE",
    "UNREADY_AFTER_POLLS",
    "AnsweredPolls",
    "EndOffsets",
    "PollOutcome",
    "poll_outcome",
    "request_timeout",
    "unready_after",
]

log = logging.getLogger(__name__)

TIMEOUT_SHARE = 0.3
"""Each request of a poll times out after this share of the poll interval (1.5 s at the default 5 s)."""

UNREADY_AFTER_POLLS = 3
"""Poll intervals without an answered poll, at least, before the worker is not ready."""

REPEAT_AFTER = 60.0
"""Seconds between two log lines about partitions or polls that go on failing the same way."""

EXAMPLES = 3
"""Partitions a log line names, of those without an answer."""


class PollOutcome(StrEnum):
    """What one poll got, as ``kagent_end_offset_polls{outcome}`` counts it."""

    OK = "ok"
    """Every partition asked has offsets."""
    PARTIAL = "partial"
    """Some partitions asked have none (unknown, leaderless, their leader failed)."""
    ERROR = "error"
    """No partition has offsets and some leader could not be reached: the cluster answered nothing."""


def poll_outcome(answers: Mapping[TopicPartition, PartitionAnswer]) -> PollOutcome:
    """The outcome of a poll that asked at least one partition and got ``answers``.

    ``error`` needs a failed request: a poll whose partitions are all unknown to the cluster (the only
    groups read a deleted topic) was answered, by the metadata, and is ``partial``."""
    if all(isinstance(answer, Offsets) for answer in answers.values()):
        return PollOutcome.OK
    if any(isinstance(answer, Offsets) for answer in answers.values()):
        return PollOutcome.PARTIAL
    failed = any(a.reason is Reason.REQUEST_FAILED for a in answers.values() if isinstance(a, Unavailable))
    return PollOutcome.ERROR if failed else PollOutcome.PARTIAL


def request_timeout(interval: float) -> float:
    """Seconds each request of a poll every ``interval`` seconds may take: connecting, refreshing the metadata
    and each leader's ListOffsets, :data:`TIMEOUT_SHARE` of it; a poll makes at most 3 such waits in turn."""
    return TIMEOUT_SHARE * interval


def unready_after(interval: float, stall_after: float) -> float:
    """Seconds without an answered end-offset poll after which the worker is not ready: as long as a stage may
    make no progress (``KAGENT_STALL_AFTER``), and at least :data:`UNREADY_AFTER_POLLS` poll intervals."""
    return max(UNREADY_AFTER_POLLS * interval, stall_after)


class AnsweredPolls:
    """Whether the polls answer: the time the current run of ``error`` polls began, if one is under way."""

    def __init__(self, unready_after: float) -> None:
        self._unready_after = unready_after
        self.failing_since: float | None = None
        """When the first poll of the current run of ``error`` polls began; None when the latest poll answered
        (or asked nothing)."""
        self.failed = 0
        """Polls in the current run of ``error`` polls."""

    def observe(self, outcome: PollOutcome | None, began: float) -> None:
        """A poll that began at ``began`` ended with ``outcome`` (None: it asked nothing, so nothing failed)."""
        if outcome is PollOutcome.ERROR:
            if self.failing_since is None:
                self.failing_since = began
            self.failed += 1
        else:
            self.failing_since = None
            self.failed = 0

    def answering(self, now: float) -> bool:
        """False once every poll since ``unready_after`` seconds before ``now`` failed; True otherwise."""
        return self.failing_since is None or now - self.failing_since < self._unready_after


def _described(unavailable: Mapping[TopicPartition, Unavailable], asked: int) -> str:
    """``unavailable`` in a log line: how many of ``asked``, by reason, and a few of them with what said so."""
    reasons = Counter(answer.reason for answer in unavailable.values())
    by_reason = ", ".join(f"{reason.value} {count}" for reason, count in sorted(reasons.items()))
    examples = "; ".join(
        f"{tp.topic}-{tp.partition}: {answer.reason.value}" + (f" ({answer.detail})" if answer.detail else "")
        for tp, answer in sorted(unavailable.items())[:EXAMPLES]
    )
    more = f"; {len(unavailable) - EXAMPLES} more" if len(unavailable) > EXAMPLES else ""
    return f"{len(unavailable)} of {asked} partitions without offsets ({by_reason}): {examples}{more}"


class EndOffsets(Stage):
    """Polls the log-start and log-end offsets of the partitions the held groups read."""

    name = "end-offsets"

    def __init__(
        self,
        *,
        kafka: KafkaConnection,
        client_id: str,
        interval: float,
        groups: GroupStateReader,
        polled: Channel[EndOffsetsPolled],
        metrics: Metrics,
        stall_after: float,
    ) -> None:
        """``stall_after`` is ``KAGENT_STALL_AFTER``, which :func:`unready_after` reads."""
        self._kafka = kafka
        self._client_id = client_id
        self._interval = interval
        self._timeout = request_timeout(interval)
        self._groups = groups
        self._polled = polled
        self._metrics = metrics
        self._answered = AnsweredPolls(unready_after(interval, stall_after))
        self._client: ListOffsetsClient | None = None
        self._requests = InFlight()
        self._logged: tuple[tuple[PollOutcome, frozenset[tuple[Reason, int]]], float] | None = None
        """What the latest line about partitions without offsets said (outcome, partitions by reason), and when;
        None when the latest poll answered in full."""

    def register(self, app: faust.App) -> None:
        @app.timer(self._interval, name="poll-end-offsets")
        async def poll_end_offsets() -> None:
            if not self._requests.closed:  # the timer fires until Faust stops it
                await self.poll()

    async def stop(self) -> None:
        """End a poll's requests under way, then close the client (:mod:`kagent.worker.in_flight`)."""
        await self._requests.close()
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def answering(self) -> bool:
        """False once every poll has failed (``error``) for :func:`unready_after` seconds, until one answers."""
        return self._answered.answering(time.monotonic())

    async def _connected(self) -> ListOffsetsClient:
        """The stage's client, connected first if it has none (within one request timeout)."""
        if self._client is None:
            client = await asyncio.wait_for(
                ListOffsetsClient.connect(
                    self._kafka,
                    client_id=self._client_id,
                    timeout=self._timeout,
                    # a deleted topic leaves the metadata within the time it takes to drop it
                    metadata_max_age=DROP_AFTER_POLLS * self._interval,
                ),
                self._timeout,
            )
            if self._requests.closed:  # stopped while it connected: nothing closes it later
                await client.close()
            else:
                self._client = client
            return client
        return self._client

    async def _list_offsets(self, partitions: list[TopicPartition]) -> ListOffsetsResult:
        """Every partition's answer; all of them failed when no broker could be reached."""
        try:
            client = await self._connected()
        except (KafkaError, OSError, TimeoutError) as exc:
            failed = Unavailable(Reason.REQUEST_FAILED, f"no broker reachable: {exc!r}")
            return ListOffsetsResult(dict.fromkeys(partitions, failed))
        return await client.list_offsets(partitions)  # never raises: every partition gets an answer

    async def poll(self) -> None:
        """One round: ListOffsets for every partition the held groups read, handed to storage."""
        began = time.monotonic()
        partitions = await self._groups.partitions_read()
        result = await self._requests.run(self._list_offsets(partitions)) if partitions else ListOffsetsResult({})
        if result is None or self._requests.closed:  # stopped under it: the answers say nothing of the cluster
            return
        unavailable = result.unavailable
        outcome = poll_outcome(result.answers) if partitions else None
        if outcome is not None:
            self._metrics.end_offset_polls.labels(outcome.value).inc()
        reasons = Counter(answer.reason for answer in unavailable.values())
        for reason in Reason:
            self._metrics.end_offset_partitions_unavailable.labels(reason.value).set(reasons[reason])
        self._log(outcome, unavailable, len(partitions))
        self._answered.observe(outcome, began)
        self._polled.put(
            EndOffsetsPolled(
                polled_at=time.time(),
                log_start=result.log_start,
                log_end=result.log_end,
                partition_counts=result.partition_counts,
                unavailable={tp: answer.reason for tp, answer in unavailable.items()},
            )
        )

    def _log(self, outcome: PollOutcome | None, unavailable: Mapping[TopicPartition, Unavailable], asked: int) -> None:
        """One line when partitions go without offsets or a poll fails, repeated once a minute while it goes on
        the same way (the same outcome, as many partitions for each reason), and one when a poll answers in full
        again."""
        now = time.monotonic()
        if outcome is None or outcome is PollOutcome.OK:
            if self._logged is not None:
                self._logged = None
                log.info("ListOffsets: every partition asked has offsets again")
            return
        key = (outcome, frozenset(Counter(answer.reason for answer in unavailable.values()).items()))
        if self._logged is not None and self._logged[0] == key and now - self._logged[1] < REPEAT_AFTER:
            return
        self._logged = (key, now)
        if outcome is PollOutcome.ERROR:
            failed = self._answered.failed + 1
            log.warning("ListOffsets failed (%d polls in a row): %s", failed, _described(unavailable, asked))
        else:
            log.warning("ListOffsets: %s", _described(unavailable, asked))
