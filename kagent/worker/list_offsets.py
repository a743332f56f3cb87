"""ListOffsets per partition: an error for one partition affects only that partition.

aiokafka's ``AIOKafkaConsumer.beginning_offsets``/``end_offsets`` answer all
the partitions asked or none: one partition the metadata does not know makes
them wait for it (``request_timeout_ms``, 40 s by default) and then fail as a
whole. :class:`ListOffsetsClient` asks instead so that each partition gets its
own answer (:data:`PartitionAnswer`): its log-start and log-end offsets, or
why it has none (:class:`Reason`).

- A partition the cluster's metadata does not know (partition 5 of a
  2-partition topic, a topic that does not exist) is answered
  :attr:`Reason.UNKNOWN_PARTITION` at once, without a request. It must not
  be asked: Tansu answers ListOffsets for such a partition with offset 0 and
  no error.
- The others are grouped by their leader (:func:`route`); each leader gets one
  request per timestamp (earliest, latest), all sent at once, each with its
  own timeout, so a slow or dead leader delays and fails only its partitions
  (:attr:`Reason.REQUEST_FAILED`). aiokafka opens one connection at a time
  (one lock per client), so a leader that hangs while being connected to holds
  up the first connection to the leaders queued behind it, for that call;
  the leader that failed first is therefore sent to last from then on
  (:func:`send_order`, :func:`suspects_after`) until it answers again.
- Each answer's error codes are read per partition (:func:`parse_response`).
- The metadata is all topics' (the client never names topics, so asking it
  auto-creates none), and is refreshed at most once per ``refresh_interval``:
  before asking, when some partition has no known leader or is not known, or
  when the previous call's answers said the metadata is stale (not leader,
  unknown to its leader, request failed).

The request is aiokafka's ``OffsetRequest``, which aiokafka sends at the
highest version both sides speak up to v3 (Tansu 0.6 declares v0-v9; Apache
Kafka 4.x dropped only v0), with isolation level read-uncommitted: log end = high
watermark, as the consumer's ``end_offsets`` gives.

The grouping and the parsing are plain functions over plain data, tested
without a broker; :class:`ListOffsetsClient` is the thin shell that sends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeAlias

from aiokafka import AIOKafkaClient
from aiokafka.errors import (
    KafkaError,
    LeaderNotAvailableError,
    NotLeaderForPartitionError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokafka.protocol.api import Response
from aiokafka.protocol.offset import OffsetRequest, OffsetResetStrategy
from aiokafka.structs import TopicPartition

from kagent.connections import KafkaConnection

__all__ = [
    "EARLIEST",
    "LATEST",
    "ListOffsetsClient",
    "ListOffsetsResult",
    "OffsetAnswer",
    "Offsets",
    "PartitionAnswer",
    "Reason",
    "Routing",
    "Unavailable",
    "combine",
    "offset_request",
    "parse_response",
    "partition_counts",
    "route",
    "send_order",
    "suspects_after",
    "wants_fresh_metadata",
]

log = logging.getLogger(__name__)

EARLIEST = OffsetResetStrategy.EARLIEST
"""ListOffsets' timestamp for a partition's log-start offset (-2)."""
LATEST = OffsetResetStrategy.LATEST
"""ListOffsets' timestamp for a partition's log-end offset (-1)."""

READ_UNCOMMITTED = 0
"""ListOffsets' isolation level whose latest offset is the high watermark."""

LEADERLESS = -1
"""The leader aiokafka's cluster metadata gives a partition that has none."""


class Reason(StrEnum):
    """Why a partition has no offsets in this answer."""

    UNKNOWN_PARTITION = "unknown-partition"
    """The metadata does not know it, or its leader answered UNKNOWN_TOPIC_OR_PARTITION."""
    NO_LEADER = "no-leader"
    """The metadata gives it no leader, or the broker asked is no longer (or not yet) its leader."""
    REQUEST_FAILED = "request-failed"
    """Its leader's request timed out, or the connection to it failed."""
    ERROR_CODE = "error-code"
    """Its leader answered another error code for it."""


_NO_LEADER_CODES = frozenset({LeaderNotAvailableError.errno, NotLeaderForPartitionError.errno})


@dataclass(frozen=True)
class Offsets:
    """A partition's log-start and log-end offsets."""

    log_start: int
    log_end: int


@dataclass(frozen=True)
class Unavailable:
    """Why a partition has no offsets, and what said so (an error's name, or the failure)."""

    reason: Reason
    detail: str = ""


PartitionAnswer: TypeAlias = Offsets | Unavailable
"""What one partition got: its offsets, or why it has none."""

OffsetAnswer: TypeAlias = int | Unavailable
"""What one partition got for one timestamp: its offset, or why it has none."""


@dataclass(frozen=True)
class ListOffsetsResult:
    """One answer for every partition asked."""

    answers: Mapping[TopicPartition, PartitionAnswer]
    """Each partition asked -> its offsets, or why it has none."""
    partition_counts: Mapping[str, int] = field(default_factory=dict)
    """Partition count of each topic asked that the metadata knows."""

    @property
    def log_start(self) -> dict[TopicPartition, int]:
        """The log-start offset of each partition that has offsets."""
        return {tp: a.log_start for tp, a in self.answers.items() if isinstance(a, Offsets)}

    @property
    def log_end(self) -> dict[TopicPartition, int]:
        """The log-end offset of each partition that has offsets."""
        return {tp: a.log_end for tp, a in self.answers.items() if isinstance(a, Offsets)}

    @property
    def unavailable(self) -> dict[TopicPartition, Unavailable]:
        """Each partition without offsets -> why."""
        return {tp: a for tp, a in self.answers.items() if isinstance(a, Unavailable)}


class PartitionLeaders(Protocol):
    """What :func:`route` reads of the cluster's metadata (aiokafka's ``ClusterMetadata`` is one)."""

    def partitions_for_topic(self, topic: str) -> set[int] | None: ...

    def leader_for_partition(self, partition: TopicPartition) -> int | None: ...


@dataclass(frozen=True)
class Routing:
    """Partitions to ask, by leader, and those answered without asking."""

    by_leader: Mapping[int, list[TopicPartition]]
    """Leader node id -> its partitions, sorted."""
    unavailable: Mapping[TopicPartition, Unavailable]
    """Partitions the metadata does not know or gives no leader."""


def route(partitions: Iterable[TopicPartition], metadata: PartitionLeaders) -> Routing:
    """Group ``partitions`` by their leader in ``metadata``.

    A partition whose topic the metadata does not know, or whose topic lacks
    that partition number, is :attr:`Reason.UNKNOWN_PARTITION`; one whose
    leader is unknown (-1) is :attr:`Reason.NO_LEADER`. Neither is asked.
    """
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    unavailable: dict[TopicPartition, Unavailable] = {}
    for tp in sorted(set(partitions)):
        known = metadata.partitions_for_topic(tp.topic)
        leader = metadata.leader_for_partition(tp) if known is not None and tp.partition in known else None
        if known is None:
            unavailable[tp] = Unavailable(Reason.UNKNOWN_PARTITION, "topic not in the cluster's metadata")
        elif leader is None:
            unavailable[tp] = Unavailable(Reason.UNKNOWN_PARTITION, f"topic has {len(known)} partitions")
        elif leader == LEADERLESS:
            unavailable[tp] = Unavailable(Reason.NO_LEADER, "no leader in the cluster's metadata")
        else:
            by_leader[leader].append(tp)
    return Routing(dict(by_leader), unavailable)


def offset_request(partitions: Iterable[TopicPartition], timestamp: int) -> OffsetRequest:
    """aiokafka's ListOffsets request for ``partitions`` at ``timestamp`` (:data:`EARLIEST` or :data:`LATEST`)."""
    topics: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for tp in sorted(partitions):
        topics[tp.topic].append((tp.partition, timestamp))
    return OffsetRequest(-1, READ_UNCOMMITTED, list(topics.items()))


def unavailable_for(error_code: int) -> Unavailable:
    """What a non-zero ListOffsets error code for one partition means for it."""
    error = for_code(error_code)
    if error_code == UnknownTopicOrPartitionError.errno:
        return Unavailable(Reason.UNKNOWN_PARTITION, error.__name__)
    if error_code in _NO_LEADER_CODES:
        return Unavailable(Reason.NO_LEADER, error.__name__)
    return Unavailable(Reason.ERROR_CODE, f"{error.__name__} ({error_code})")


def parse_response(response: Response, asked: Collection[TopicPartition]) -> dict[TopicPartition, OffsetAnswer]:
    """Each partition in ``asked`` -> the offset a ListOffsets response (any version aiokafka
    declares) gives it, or why it gives none.

    A partition answered with an error code gets what :func:`unavailable_for`
    says; one the response leaves out, or answers in v0 with no offset, is
    :attr:`Reason.ERROR_CODE`. Partitions the response names that were not
    asked are ignored.
    """
    answers: dict[TopicPartition, OffsetAnswer] = {}
    for topic in response.to_object()["topics"]:
        for partition in topic["partitions"]:
            tp = TopicPartition(topic["topic"], partition["partition"])
            if tp not in asked:
                continue
            if partition["error_code"]:
                answers[tp] = unavailable_for(partition["error_code"])
            elif "offset" in partition:
                answers[tp] = partition["offset"]
            elif partition["offsets"]:  # v0
                answers[tp] = partition["offsets"][0]
            else:
                answers[tp] = Unavailable(Reason.ERROR_CODE, "answered without an offset")
    missing = Unavailable(Reason.ERROR_CODE, "left out of its leader's answer")
    return {tp: answers.get(tp, missing) for tp in asked}


def combine(
    earliest: Mapping[TopicPartition, OffsetAnswer], latest: Mapping[TopicPartition, OffsetAnswer]
) -> dict[TopicPartition, PartitionAnswer]:
    """Each partition -> its :class:`Offsets`, or why it has none (the latest answer's reason
    first, then the earliest's). Both must answer the same partitions."""
    if earliest.keys() != latest.keys():
        raise ValueError("the earliest and latest answers are for different partitions")
    combined: dict[TopicPartition, PartitionAnswer] = {}
    for tp, end in latest.items():
        start = earliest[tp]
        if isinstance(end, Unavailable):
            combined[tp] = end
        elif isinstance(start, Unavailable):
            combined[tp] = start
        else:
            combined[tp] = Offsets(log_start=start, log_end=end)
    return combined


def wants_fresh_metadata(answers: Iterable[PartitionAnswer]) -> bool:
    """Whether some answer says the metadata it was routed by may be stale (its partition unknown,
    leaderless or moved, or its leader unreachable)."""
    stale = {Reason.UNKNOWN_PARTITION, Reason.NO_LEADER, Reason.REQUEST_FAILED}
    return any(isinstance(a, Unavailable) and a.reason in stale for a in answers)


def send_order(leaders: Iterable[int], suspects: Collection[int]) -> list[int]:
    """``leaders`` in the order their requests are started: ``suspects`` last, each part by node id."""
    return sorted(leaders, key=lambda leader: (leader in suspects, leader))


def suspects_after(order: Sequence[int], failed: Collection[int], suspects: Collection[int]) -> frozenset[int]:
    """The suspects after a call that sent to ``order`` (as :func:`send_order` gave it) and whose
    requests to ``failed`` failed.

    A suspect stays one until a call to it succeeds. Of the others, the first
    in ``order`` that failed becomes one: it was either slow itself or held
    aiokafka's connection lock while those after it waited for it, so they
    are not blamed.
    """
    kept = {leader for leader in suspects if leader in failed}
    first = next((leader for leader in order if leader in failed and leader not in suspects), None)
    return frozenset(kept if first is None else kept | {first})


def partition_counts(topics: Iterable[str], metadata: PartitionLeaders) -> dict[str, int]:
    """Partition count of each of ``topics`` the metadata knows."""
    counts = {}
    for topic in topics:
        known = metadata.partitions_for_topic(topic)
        if known:
            counts[topic] = len(known)
    return counts


_SEND_ERRORS = (KafkaError, OSError, NotImplementedError)
"""What one leader's request can fail with, besides the timeout: Kafka and connection errors, and
aiokafka's ``NotImplementedError`` for a broker that speaks no version of ListOffsets it declares."""


class ListOffsetsClient:
    """Asks ListOffsets leader by leader through an aiokafka client it owns.

    Not safe for concurrent calls of :meth:`list_offsets`; one poller calls it.
    """

    def __init__(
        self,
        client: AIOKafkaClient,
        *,
        timeout: float,
        refresh_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``client`` is bootstrapped, tracks all topics (no ``add_topic``/``set_topics``), and is
        closed by :meth:`close`; :meth:`connect` makes one. ``timeout`` (seconds) bounds each
        leader's request and each metadata refresh; ``refresh_interval`` is the least time
        between two metadata refreshes, on ``clock``."""
        self._client = client
        self._timeout = timeout
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._refreshed_at: float | None = None
        self._metadata_stale = True  # bootstrap's metadata may name no topic (Kafka's does not)
        self._suspects: frozenset[int] = frozenset()

    @classmethod
    async def connect(
        cls,
        kafka: KafkaConnection,
        *,
        client_id: str,
        timeout: float,
        refresh_interval: float = 10.0,
        metadata_max_age: float = 300.0,
    ) -> ListOffsetsClient:
        """A client of the cluster ``kafka`` reaches, whose own requests time out after ``timeout`` too,
        and whose metadata is refreshed in the background at least every ``metadata_max_age`` seconds
        (aiokafka's ``metadata_max_age_ms``; Kafka's default is 5 minutes). That is how a deleted topic
        leaves the metadata on a broker that answers ListOffsets for it without an error (Tansu answers
        offset 0); Kafka's leaders answer UNKNOWN_TOPIC_OR_PARTITION, after which the next call refreshes it.

        Raises aiokafka's ``KafkaConnectionError`` when no bootstrap server answers.
        """
        client = kafka.client(
            client_id=client_id,
            request_timeout_ms=int(timeout * 1000),
            metadata_max_age_ms=int(metadata_max_age * 1000),
        )
        try:
            await client.bootstrap()
        except BaseException:
            await client.close()
            raise
        return cls(client, timeout=timeout, refresh_interval=refresh_interval)

    async def close(self) -> None:
        """Close the client's connections."""
        await self._client.close()

    async def list_offsets(self, partitions: Collection[TopicPartition]) -> ListOffsetsResult:
        """The log-start and log-end offsets of each of ``partitions``, or why it has none.

        Never raises for a partition, a leader or the metadata: every partition
        gets an answer, within about one ``timeout`` (two when the metadata is
        refreshed first).
        """
        client = self._client
        routing = route(partitions, client.cluster)
        if (self._metadata_stale or routing.unavailable) and self._refresh_due():
            await self._refresh(client)
            routing = route(partitions, client.cluster)
        order = send_order(routing.by_leader, self._suspects)
        asked = [(leader, routing.by_leader[leader], ts) for leader in order for ts in (EARLIEST, LATEST)]
        sent = await asyncio.gather(*(self._send(client, *request) for request in asked))
        answers: dict[int, dict[TopicPartition, OffsetAnswer]] = {EARLIEST: {}, LATEST: {}}
        failed: set[int] = set()
        for (leader, _tps, timestamp), answer in zip(asked, sent, strict=True):
            answers[timestamp].update(answer)
            if any(isinstance(a, Unavailable) and a.reason is Reason.REQUEST_FAILED for a in answer.values()):
                failed.add(leader)
        self._suspects = suspects_after(order, failed, self._suspects)
        result: dict[TopicPartition, PartitionAnswer] = {**routing.unavailable}
        result.update(combine(answers[EARLIEST], answers[LATEST]))
        self._metadata_stale = wants_fresh_metadata(result.values())
        return ListOffsetsResult(result, partition_counts({tp.topic for tp in partitions}, client.cluster))

    def _refresh_due(self) -> bool:
        return self._refreshed_at is None or self._clock() - self._refreshed_at >= self._refresh_interval

    async def _refresh(self, client: AIOKafkaClient) -> None:
        """Refresh all topics' metadata, waiting at most ``timeout``; a failure leaves it as it was."""
        self._refreshed_at = self._clock()
        try:
            await asyncio.wait_for(client.force_metadata_update(), self._timeout)
        except TimeoutError:
            log.warning("cluster metadata not refreshed within %g s; using what it was", self._timeout)

    async def _send(
        self, client: AIOKafkaClient, leader: int, partitions: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, OffsetAnswer]:
        """One leader's answer for ``partitions`` at ``timestamp``; its failure fails only them."""
        try:
            response: Any = await asyncio.wait_for(
                client.send(leader, offset_request(partitions, timestamp)), self._timeout
            )
        except TimeoutError:
            failed = Unavailable(Reason.REQUEST_FAILED, f"node {leader} did not answer within {self._timeout:g} s")
            return dict.fromkeys(partitions, failed)
        except _SEND_ERRORS as exc:
            failed = Unavailable(Reason.REQUEST_FAILED, f"node {leader}: {exc!r}")
            return dict.fromkeys(partitions, failed)
        return parse_response(response, frozenset(partitions))
