"""Reading kagent's recommendations topic (``<app id>-recommendations``) as a bystander.

The reader joins no consumer group and commits nothing: its aiokafka consumer
(made by :class:`~kagent.connections.KafkaConnection`) is assigned every
partition of the topic by hand.

- :func:`read_recommendations`: every partition from its beginning up to the
  end offsets listed when the read starts (records arriving meanwhile may be
  included, never waited for).
- :func:`follow_recommendations`: from the end offsets at start, each new
  recommendation as it arrives, until a stop event is set.

A record whose value is not a recommendation's JSON is skipped (and counted).
Every failure to reach the cluster or read the topic raises
:class:`TopicReadError`, whose ``str()`` is one line naming the cluster, the
topic and what failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition
from pydantic import ValidationError

from kagent.connections import ClusterUnreachable, KafkaConnection
from kagent.core.recommendation import Recommendation

__all__ = [
    "RecommendationsRead",
    "TopicReadError",
    "follow_recommendations",
    "parse_recommendation",
    "read_recommendations",
    "recommendations_topic",
]

_T = TypeVar("_T")

REACH_TIMEOUT = 5.0
"""Seconds the reader waits for the cluster to answer before it gives up."""
STALL_TIMEOUT = 15.0
"""Seconds a read may go without a record while a partition is still short of its end offset."""
FETCH_WAIT_MS = 500
"""Longest a fetch waits for records (also how soon a stop is noticed)."""


class TopicReadError(Exception):
    """The topic could not be read; ``str()`` is one line naming the cluster, the topic and why."""


def recommendations_topic(app_id: str) -> str:
    """The topic kagent workers with app id ``app_id`` publish recommendations to."""
    return f"{app_id}-recommendations"


def parse_recommendation(value: bytes | None) -> Recommendation | None:
    """The recommendation a record's value holds; None when it holds none (a tombstone, other JSON)."""
    if value is None:
        return None
    try:
        return Recommendation.model_validate_json(value)
    except ValidationError:
        return None


@dataclass
class RecommendationsRead:
    """What a read of the topic found, in topic order within each partition."""

    recommendations: list[Recommendation] = field(default_factory=list)
    skipped: int = 0
    """Records that were not recommendations."""

    def add(self, value: bytes | None) -> Recommendation | None:
        """Keep the recommendation ``value`` holds (and return it), or count it as skipped."""
        recommendation = parse_recommendation(value)
        if recommendation is None:
            self.skipped += 1
        else:
            self.recommendations.append(recommendation)
        return recommendation


async def read_recommendations(kafka: KafkaConnection, topic: str) -> RecommendationsRead:
    """Every record of ``topic`` from the beginning of each partition up to its end offset at start."""
    read = RecommendationsRead()
    async with _assigned_consumer(kafka, topic) as (consumer, partitions):
        ends = await _answered(kafka, topic, "list the end offsets", consumer.end_offsets(partitions))
        await consumer.seek_to_beginning(*partitions)
        pending = await _short_of(kafka, topic, consumer, partitions, ends)
        progress = time.monotonic()
        while pending:
            batches = await _answered(
                kafka, topic, "fetch records", consumer.getmany(*pending, timeout_ms=FETCH_WAIT_MS)
            )
            for records in batches.values():
                for record in records:
                    read.add(record.value)
                progress = time.monotonic()
            pending = await _short_of(kafka, topic, consumer, pending, ends)
            if pending and time.monotonic() - progress > STALL_TIMEOUT:
                raise TopicReadError(
                    f"reading {topic} from the Kafka cluster at {kafka.bootstrap_servers}: no record of "
                    f"{_names(pending)} within {STALL_TIMEOUT:g} s while short of the end offsets"
                )
    return read


async def follow_recommendations(
    kafka: KafkaConnection, topic: str, stop: asyncio.Event, on_ready: Callable[[], None] | None = None
) -> AsyncIterator[Recommendation]:
    """Each recommendation written to ``topic`` after the call's start, as it arrives, until ``stop`` is set.

    ``on_ready`` is called once every partition's start (its end offset) is fixed: any record written after
    that is yielded. Records that are not recommendations are skipped."""
    async with _assigned_consumer(kafka, topic) as (consumer, partitions):
        await consumer.seek_to_end(*partitions)
        for tp in partitions:  # fix the start now, not at the first fetch
            await _answered(kafka, topic, "list the end offsets", consumer.position(tp))
        if on_ready is not None:
            on_ready()
        while not stop.is_set():
            batches = await _answered(kafka, topic, "fetch records", consumer.getmany(timeout_ms=FETCH_WAIT_MS))
            for records in batches.values():
                for record in records:
                    recommendation = parse_recommendation(record.value)
                    if recommendation is not None:
                        yield recommendation


@asynccontextmanager
async def _assigned_consumer(
    kafka: KafkaConnection, topic: str
) -> AsyncIterator[tuple[AIOKafkaConsumer, list[TopicPartition]]]:
    """A started consumer of no group, assigned every partition of ``topic``; stopped on the way out."""
    try:
        await kafka.check_reachable(REACH_TIMEOUT, quiet=True)
    except ClusterUnreachable as exc:
        raise TopicReadError(str(exc)) from None
    consumer = kafka.consumer(
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=int(STALL_TIMEOUT * 1000),
    )
    try:
        await _answered(kafka, topic, "connect", consumer.start())
        known = await _answered(kafka, topic, "read the cluster's metadata", consumer.topics())
        if topic not in known:
            raise TopicReadError(
                f"no topic {topic} on the Kafka cluster at {kafka.bootstrap_servers} (a kagent worker creates it "
                "when it starts; is KAGENT_APP_ID the workers' app id?)"
            )
        numbers = consumer.partitions_for_topic(topic)
        if not numbers:
            raise TopicReadError(f"the Kafka cluster at {kafka.bootstrap_servers} named no partition of {topic}")
        partitions = [TopicPartition(topic, p) for p in sorted(numbers)]
        consumer.assign(partitions)
        yield consumer, partitions
    finally:
        await consumer.stop()


async def _answered(kafka: KafkaConnection, topic: str, what: str, operation: Awaitable[_T]) -> _T:
    """``operation``'s result; :class:`TopicReadError` naming the cluster, the topic and ``what`` if it fails or
    takes longer than :data:`STALL_TIMEOUT`."""
    try:
        return await asyncio.wait_for(operation, STALL_TIMEOUT)
    except (TimeoutError, KafkaError, OSError) as exc:
        reason = f"no answer within {STALL_TIMEOUT:g} s" if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
        raise TopicReadError(
            f"reading {topic} from the Kafka cluster at {kafka.bootstrap_servers}: cannot {what}: {reason}"
        ) from None


async def _short_of(
    kafka: KafkaConnection,
    topic: str,
    consumer: AIOKafkaConsumer,
    partitions: Collection[TopicPartition],
    ends: Mapping[TopicPartition, int],
) -> set[TopicPartition]:
    """Those of ``partitions`` whose consumer position is still below their end offset in ``ends``."""
    short = set()
    for tp in partitions:
        if await _answered(kafka, topic, "look up the read positions", consumer.position(tp)) < ends[tp]:
            short.add(tp)
    return short


def _names(partitions: Collection[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(partitions))
