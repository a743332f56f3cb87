"""Where kagent's assignor finds a group's latest recommendation and its partition lag: in memory.

aiokafka calls an assignor's ``assign`` synchronously, on the event loop, in the middle of a
rebalance, so the assignor must never wait for the network there. A :class:`RecommendationFeed`
therefore answers from what it last heard, and keeps that up to date in a background task between
:meth:`~RecommendationFeed.start` and :meth:`~RecommendationFeed.stop`:

- :class:`ApiFeed` polls a kagent worker's HTTP API (any worker answers for any group): the
  group's newest recommendation and every partition's offset lag.
- :class:`TopicFeed` reads kagent's recommendations topic (``<app id>-recommendations``) without a
  consumer group: only the partition the group's key is placed on, from its beginning, keeping
  the group's newest record. The topic carries no per-partition lag.

:class:`FeedThread` runs either on an event loop of its own, in a thread, for clients that have no
event loop (kafka-python).

Both keep going through every failure (a worker or broker that does not answer, an answer that
does not parse): they keep what they had, log one line when the failure starts or changes and
one when it ends, and try again. ``start`` never fails for want of kagent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition
from pydantic import ValidationError

from kagent.core.api_records import GroupDetail, RecommendationsPage
from kagent.core.recommendation import Recommendation
from kagent.core.table_keys import partition_of_group

__all__ = ["ApiFeed", "FeedThread", "RecommendationFeed", "RecommendationSource", "TopicFeed"]

log = logging.getLogger(__name__)


class RecommendationSource(Protocol):
    """A group's latest recommendation and partition lag, answered from memory (never blocking): what kagent's
    assignors ask of a feed."""

    def latest(self, group: str) -> Recommendation | None:
        """The newest recommendation heard for ``group``; None when none was (or the feed is not for it)."""
        ...

    def partition_lag(self, group: str) -> Mapping[TopicPartition, int]:
        """The last offset lag heard for each of ``group``'s partitions; empty when none is known."""
        ...


class RecommendationFeed(RecommendationSource, Protocol):
    """A :class:`RecommendationSource` that refreshes itself on the running event loop."""

    async def start(self) -> None:
        """Begin refreshing in the background; returns at once, whether or not kagent answers."""
        ...

    async def stop(self) -> None:
        """Stop refreshing; what was heard stays readable."""
        ...


class _Trouble:
    """Logs a feed's failures once per change of state: when one starts or changes, and when it ends."""

    def __init__(self, source: str) -> None:
        self._source = source
        self.error: str | None = None

    def failed(self, error: str) -> None:
        if error != self.error:
            log.warning("%s: %s; the assignor keeps what it heard before", self._source, error)
        self.error = error

    def cleared(self) -> None:
        if self.error is not None:
            log.info("%s: answering again", self._source)
        self.error = None


class _Poller:
    """Awaits ``step`` again and again in a background task, ``interval`` s after each return, between
    ``start`` and ``stop``. A step handles the failures it expects; anything else it raises is logged
    with its traceback, and the next step comes all the same."""

    def __init__(self, step: Callable[[], Awaitable[None]], interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0 s, not {interval}")
        self._step = step
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self, name: str) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                await self._step()
            except Exception:  # a feed keeps going whatever happens (logged with its traceback)
                log.exception("a kagent recommendation feed failed unexpectedly; it goes on")
            await asyncio.sleep(self.interval)


class ApiFeed:
    """``group``'s newest recommendation and partition lag from the kagent worker at ``base_url``.

    Every ``refresh`` s it asks ``GET /api/recommendations?group=&limit=1`` and
    ``GET /api/groups/{group}`` (each partition's ``offset_lag``), each within ``timeout`` s. A group
    kagent does not know (404) has no lag yet; that is an answer, not a failure. On a failure it
    keeps the last answers (:attr:`error` says what failed) and tries again at the next refresh.
    """

    def __init__(self, base_url: str, group: str, *, refresh: float = 5.0, timeout: float = 2.0) -> None:
        self._poller = _Poller(self.refresh, refresh)
        self.base_url = base_url.rstrip("/")
        self.group = group
        self.timeout = timeout
        self._latest: Recommendation | None = None
        self._lag: dict[TopicPartition, int] = {}
        self._trouble = _Trouble(f"kagent API at {self.base_url} (group {group})")
        self._session: aiohttp.ClientSession | None = None

    @property
    def error(self) -> str | None:
        """What the last refresh failed on; None after one that succeeded."""
        return self._trouble.error

    def latest(self, group: str) -> Recommendation | None:
        return self._latest if group == self.group else None

    def partition_lag(self, group: str) -> Mapping[TopicPartition, int]:
        return self._lag if group == self.group else {}

    async def start(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        self._poller.start(f"kagent-api-feed-{self.group}")

    async def stop(self) -> None:
        await self._poller.stop()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def refresh(self) -> None:
        """Ask the worker once. On success hold its newest recommendation (keeping the one held when it has
        none) and its lag; on a failure keep what is held and note the failure."""
        try:
            page = await self._get("/api/recommendations", {"group": self.group, "limit": "1"})
            detail = await self._get(f"/api/groups/{quote(self.group, safe='')}")
            latest = RecommendationsPage.model_validate_json(page).recommendations if page is not None else ()
            partitions = GroupDetail.model_validate_json(detail).partitions if detail is not None else ()
        except (aiohttp.ClientError, TimeoutError, ValidationError) as exc:
            self._trouble.failed(_describe(exc))
            return
        if latest:
            self._latest = latest[0]
        # A partition whose lag the worker does not know is left out: the lag-aware assignors place it by
        # count, as they place any partition without a lag figure.
        self._lag = {TopicPartition(p.topic, p.partition): p.offset_lag for p in partitions if p.offset_lag is not None}
        self._trouble.cleared()

    async def _get(self, path: str, params: Mapping[str, str] | None = None) -> bytes | None:
        """The body of a 200 answer; None for a 404; raises ``aiohttp.ClientResponseError`` for other statuses."""
        assert self._session is not None, "start the feed first"
        async with self._session.get(self.base_url + path, params=params) as response:
            if response.status == 404:
                return None
            response.raise_for_status()
            return await response.read()


class TopicFeed:
    """``group``'s newest recommendation from kagent's recommendations ``topic``, read without a consumer group.

    kagent keys each recommendation by its group and lets the producer's default partitioner
    (murmur2) place it, so only that partition is read, from its beginning; the last record keyed by
    the group wins. ``client_options`` are aiokafka's client options (``bootstrap_servers``, TLS and
    SASL: ``KafkaConnection.client_options()`` gives kagent's). The topic holds no per-partition lag,
    so :meth:`partition_lag` is always empty. After a failure (broker unreachable, no such topic) it
    connects again after ``retry`` s, reading the partition from its beginning again.
    """

    def __init__(self, topic: str, group: str, *, retry: float = 5.0, **client_options: Any) -> None:
        self._poller = _Poller(self._read, retry)
        self.topic = topic
        self.group = group
        self._key = group.encode()
        self._client_options = client_options
        self._latest: Recommendation | None = None
        self._trouble = _Trouble(f"kagent recommendations topic {topic} (group {group})")

    @property
    def error(self) -> str | None:
        """What the last read failed on; None while reading."""
        return self._trouble.error

    def latest(self, group: str) -> Recommendation | None:
        return self._latest if group == self.group else None

    def partition_lag(self, group: str) -> Mapping[TopicPartition, int]:
        return {}

    async def start(self) -> None:
        self._poller.start(f"kagent-topic-feed-{self.group}")

    async def stop(self) -> None:
        await self._poller.stop()

    async def _read(self) -> None:
        """Read the group's partition from its beginning until a failure, which is noted (the poller comes back
        ``retry`` s later)."""
        consumer = _reader(self._client_options)
        try:
            await consumer.start()
            partitions = await self._partition_count(consumer)
            partition = TopicPartition(self.topic, partition_of_group(self.group, partitions))
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            while True:
                batches = await consumer.getmany(partition, timeout_ms=1000)
                self._trouble.cleared()
                for record in batches.get(partition, ()):
                    if record.key == self._key and record.value is not None:
                        self._take(record.value)
        except (KafkaError, OSError) as exc:
            self._trouble.failed(_describe(exc))
        finally:
            await consumer.stop()

    async def _partition_count(self, consumer: _PartitionReader) -> int:
        """How many partitions the topic has; raises ``KafkaError`` when the cluster names none."""
        count = len(consumer.partitions_for_topic(self.topic) or ()) if self.topic in await consumer.topics() else 0
        if not count:
            raise KafkaError(f"no topic {self.topic} on the cluster")
        return count

    def _take(self, value: bytes) -> None:
        """Hold the recommendation ``value`` holds; a value that is not one is logged and skipped."""
        try:
            self._latest = Recommendation.model_validate_json(value)
        except ValidationError as exc:
            log.warning("%s: skipping a record that is not a recommendation: %s", self.topic, _describe(exc))


class FeedThread:
    """Runs ``feed`` (:class:`ApiFeed`, :class:`TopicFeed`) on an event loop of its own, in a daemon thread,
    for a consumer that has no event loop (kafka-python's): a :class:`RecommendationSource` for its assignor.

    :meth:`start` and :meth:`stop` return once the feed has started (without waiting for kagent) or
    stopped, within ``timeout`` s. :meth:`latest` and :meth:`partition_lag` may be called from any
    thread: they read what the feed holds, which it replaces whole on each refresh, never in place.
    """

    def __init__(self, feed: RecommendationFeed, *, timeout: float = 10.0) -> None:
        self.feed = feed
        self.timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def latest(self, group: str) -> Recommendation | None:
        return self.feed.latest(group)

    def partition_lag(self, group: str) -> Mapping[TopicPartition, int]:
        return self.feed.partition_lag(group)

    def start(self) -> None:
        """Start the thread, its loop and the feed on it; raises what the feed's start raises."""
        if self._thread is not None:
            return
        loop = self._loop = asyncio.new_event_loop()
        thread = self._thread = threading.Thread(target=loop.run_forever, name="kagent-feed", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.feed.start(), loop).result(self.timeout)
        except BaseException:
            self._end_thread()
            raise

    def stop(self) -> None:
        """Stop the feed, then its loop and thread; what the feed heard stays readable."""
        if self._loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.feed.stop(), self._loop).result(self.timeout)
        finally:
            self._end_thread()

    def _end_thread(self) -> None:
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.timeout)
        if not thread.is_alive():
            loop.close()


class _PartitionReader(Protocol):
    """What :class:`TopicFeed` uses of aiokafka's consumer, typed (aiokafka leaves most of it unannotated)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def topics(self) -> set[str]: ...

    def partitions_for_topic(self, topic: str) -> set[int] | None: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None: ...

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]: ...


def _reader(client_options: Mapping[str, Any]) -> _PartitionReader:
    """An aiokafka consumer of no group that commits nothing and starts at the beginning of what it is assigned."""
    consumer: _PartitionReader = AIOKafkaConsumer(  # type: ignore[no-untyped-call]
        group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **client_options
    )
    return consumer


def _describe(exc: BaseException) -> str:
    """One line saying what failed."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"HTTP {exc.status} from {exc.request_info.url}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect: {exc.strerror or exc}"
    if isinstance(exc, ValidationError):
        return f"malformed answer ({exc.error_count()} problems)"
    return f"{type(exc).__name__}: {exc}"
