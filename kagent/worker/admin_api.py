"""Source ``admin-api``: poll the group APIs on a timer -> derived events, packed per partition.

For clusters that forbid reading ``__consumer_offsets``. Every
``KAGENT_END_OFFSET_INTERVAL`` seconds (the pace of the lag figures) the
Faust leader asks the cluster's metadata, ListGroups of every broker (v5
where the broker has it, which says which groups are on the consumer
protocol, KIP-848: :mod:`kagent.core.list_groups`), then for each group but
kagent's own FindCoordinator, DescribeGroups (classic ``consumer`` groups)
or ConsumerGroupDescribe (groups on the consumer protocol, which
DescribeGroups does not describe: :mod:`kagent.core.consumer_group_describe`)
and OffsetFetch, and sends the derived events of what changed since its
previous poll (:func:`kagent.core.group_polling.poll`, which holds the
answers to the rules of :mod:`kagent.core.record_checks`) to the
derived-events topic, each group's on its partition and packed as the
``offsets-topic`` source packs them (:func:`kagent.core.events.packed_records`);
the storage stage takes them as it takes that source's. Only the leader
polls: ListGroups answers every worker the same, so each worker polling
would send every event once per worker. A worker that is not the leader
forgets its view, so when it leads it announces every group afresh (the
tables take the same events idempotently).

The requests go through one aiokafka client with aiokafka's request types
(and kagent's ListGroups v5 and ConsumerGroupDescribe), not aiokafka's admin client, whose OffsetFetch
raises for the whole group when one partition's answer has an error, and
reads a failed answer (an error code of the whole response) as "no commits".

OffsetFetch is asked for all of a group's partitions (topics null). A broker
that cannot answer that form (Tansu cuts the answer short, and aiokafka
drops the connection) is asked for every partition of every topic instead,
from the first time that form fails where the explicit form works.

What fails is counted and logged, and what it would have changed stands:

- a failed request (``kagent_group_api_errors{api}``): the groups that did
  answer are still reported, and what the others answered before stands.
  So a group on the consumer protocol that ConsumerGroupDescribe cannot
  describe (a broker without the API, or one that answers
  ``UNSUPPORTED_VERSION``: the consumer protocol not enabled) is counted in
  ``kagent_group_api_errors{api="ConsumerGroupDescribe"}`` at every poll,
  and if it was never described its members are unknown: no assignment, so
  the API shows it ``Unknown`` with its committed offsets' lag on no member,
  not as a group of no members, nor as gone;
- a partition OffsetFetch answers with an error
  (``kagent_group_api_partition_errors{api,error}``): that partition's last
  known commit stands (none if it had none), the group's other partitions
  are reported;
- an answer that breaks a rule of :mod:`kagent.core.record_checks`
  (``kagent_group_api_rejected{api,rule}``): that partition's commit, or that
  group's assignment, is skipped and what was known before stands. Such an
  answer is no record of a topic, so it is logged (once a poll, the first
  and how many), not dead-lettered;
- a member blob that fails to decode
  (``kagent_malformed_member_metadata{part}``): the member is kept without it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import faust
from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError, KafkaError, UnsupportedVersionError, for_code
from aiokafka.protocol.admin import DescribeGroupsRequest
from aiokafka.protocol.commit import OffsetFetchRequest
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest
from faust.types import TopicT

from kagent.core.consumer_group_describe import ConsumerGroupDescribe, DescribedConsumerGroup, described_consumer_groups
from kagent.core.events import DerivedEvents, by_group, packed_records
from kagent.core.group_polling import (
    CONSUMER_GROUP_TYPE,
    CONSUMER_PROTOCOL_TYPE,
    DescribedGroup,
    FetchedOffsets,
    GroupAnswers,
    GroupView,
    PollResult,
    described_groups,
    fetched_offsets,
    poll,
    tracked_groups,
)
from kagent.core.list_groups import ListedGroup, ListGroupsWithTypes, listed_groups
from kagent.settings import Settings
from kagent.worker.changelog import PRODUCER_ERRORS
from kagent.worker.in_flight import InFlight
from kagent.worker.metrics import Metrics
from kagent.worker.record_batches import send_derived_events
from kagent.worker.stage import Stage

__all__ = ["AdminApiSource", "GroupPoller"]

log = logging.getLogger(__name__)

_ADMIN_ERRORS = (KafkaError, TimeoutError)
"""What a failed request raises: Kafka errors, and timeouts waiting for a node."""

K = TypeVar("K")
V = TypeVar("V")

Send = Callable[[list[DerivedEvents]], Awaitable[None]]
"""Sends groups' derived events (one :class:`DerivedEvents` per group); returns when the broker has them."""


class GroupPoller:
    """The Kafka client, the view of the previous poll, and one poll of the group APIs."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._settings = settings
        self._records = metrics.records.labels("admin-api")
        self._errors = metrics.group_api_errors
        self._partition_errors = metrics.group_api_partition_errors
        self._rejected = metrics.group_api_rejected
        self._malformed = metrics.malformed_member_metadata
        self._client: AIOKafkaClient | None = None
        self._requests = InFlight()
        self._view: dict[str, GroupView] = {}
        self._fetch_all_partitions = True

    async def stop(self) -> None:
        """End a poll under way, then close the client (:mod:`kagent.worker.in_flight`)."""
        await self._requests.close()
        if self._client is not None:
            await self._client.close()
            self._client = None

    def forget(self) -> None:
        """Drop the view: the next poll announces every group as new."""
        self._view = {}

    async def _connected(self) -> AIOKafkaClient:
        if self._client is None:
            client = self._settings.kafka.client(client_id=f"{self._settings.app_id}-group-poller")
            try:
                await client.bootstrap()
            except BaseException:
                await client.close()
                raise
            self._client = client
        return self._client

    def _failed(self, api: str, what: str, exc: BaseException) -> None:
        self._errors.labels(api).inc()
        log.warning("%s %s failed: %r", api, what, exc)

    async def poll(self, send: Send) -> bool:
        """One poll: ask the group APIs, ``send`` the events of what changed, then keep the new view;
        whether it completed (every event sent); not when :meth:`stop` ended it.

        If a send fails the view is kept as it was, so the next poll sends those events again.
        """
        return bool(await self._requests.run(self._poll(send)))

    async def _poll(self, send: Send) -> bool:
        polled_at = int(time.time() * 1000)
        try:
            client = await self._connected()
            metadata = await client.send(client.get_random_node(), MetadataRequest(None))
        except _ADMIN_ERRORS as exc:
            self._failed("Metadata", "of the cluster", exc)
            return False
        try:
            listed = tracked_groups(await self._list_groups(client, metadata), self._settings.app_id)
        except _ADMIN_ERRORS as exc:
            self._failed("ListGroups", "of the cluster", exc)
            return False
        self._records.inc(len(listed))
        coordinators: dict[str, int] = {}
        for group, found in (await self._each({g: _coordinator(client, g) for g in listed})).items():
            if isinstance(found, BaseException):
                self._failed("FindCoordinator", f"of group {group!r}", found)
            else:
                coordinators[group] = found
        answers = GroupAnswers(
            polled_at=polled_at,
            listed=listed,
            described=await self._describe(client, {g: n for g, n in coordinators.items() if _classic(listed[g])}),
            consumer_described=await self._describe_consumer_groups(
                client, {g: n for g, n in coordinators.items() if _consumer_protocol(listed[g])}
            ),
            committed=await self._committed(client, coordinators, metadata),
            partition_counts=_partition_counts(metadata),
        )
        result = poll(self._view, answers)
        self._report(answers, result)
        try:
            await send(by_group(result.events))
        except PRODUCER_ERRORS as exc:
            self._failed("Produce", f"of {len(result.events)} derived events", exc)
            return False
        self._view = result.view
        return True

    def _report(self, answers: GroupAnswers, result: PollResult) -> None:
        """Count and log what the poll's answers failed or broke, partition by partition."""
        for group, fetched in answers.committed.items():
            failed = sorted(fetched.failed.items())
            for _, error_code in failed:
                self._partition_errors.labels("OffsetFetch", for_code(error_code).message).inc()
            if failed:
                standing = [tp for tp, _ in failed if tp in result.view[group].committed]
                log.warning(
                    "OffsetFetch of group %r failed for %d partitions (%s); the last known commit of %d stands",
                    group,
                    len(failed),
                    ", ".join(f"{tp.topic}[{tp.partition}]: {for_code(code).message}" for tp, code in failed),
                    len(standing),
                )
        for rejected in result.rejected:
            self._rejected.labels(rejected.api, rejected.error.rule).inc()
        if result.rejected:
            first = result.rejected[0]
            more = len(result.rejected) - 1
            log.warning(
                "%s answer of group %r skipped: %s%s",
                first.api,
                first.group,
                first.error,
                f" (and {more} more in this poll)" if more else "",
            )
        for bad in result.malformed:
            self._malformed.labels(bad.part).inc()
            log.warning("member %r of group %r: malformed %s: %s", bad.member_id, bad.group, bad.part, bad.error)

    async def _each(self, calls: Mapping[K, Awaitable[V]]) -> dict[K, V | BaseException]:
        """Await ``calls`` together; each one's result, or the Kafka error it raised (others propagate)."""
        results = await asyncio.gather(*calls.values(), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, _ADMIN_ERRORS):
                raise result
        return dict(zip(calls, results, strict=True))

    async def _list_groups(self, client: AIOKafkaClient, metadata: Any) -> dict[str, ListedGroup]:
        """ListGroups of every broker in ``metadata`` (each lists the groups it coordinates); raises if any
        fails, since a group missing from the list would be reported gone."""
        responses = await asyncio.gather(
            *(client.send(broker[0], ListGroupsWithTypes()) for broker in metadata.brokers)
        )
        for response in responses:
            if response.error_code:
                raise for_code(response.error_code)("listing the groups of a broker")
        return listed_groups(responses)

    async def _describe(self, client: AIOKafkaClient, coordinators: Mapping[str, int]) -> dict[str, DescribedGroup]:
        """DescribeGroups of ``coordinators``' groups, one request per coordinator.

        When a coordinator's request fails, its groups are asked one by one, so a
        group whose answer cannot be read (Tansu garbles some) hides only itself.
        """
        by_node: dict[int, list[str]] = defaultdict(list)
        for group, node in coordinators.items():
            by_node[node].append(group)
        batches = {tuple(groups): client.send(node, DescribeGroupsRequest(groups)) for node, groups in by_node.items()}
        described: dict[str, DescribedGroup] = {}
        singles: dict[tuple[str, ...], Awaitable[Any]] = {}
        for groups, response in (await self._each(batches)).items():
            if isinstance(response, BaseException) and len(groups) > 1:
                singles.update(
                    ((group,), client.send(coordinators[group], DescribeGroupsRequest([group]))) for group in groups
                )
            else:
                self._take_described(groups, response, described)
        for groups, response in (await self._each(singles)).items():
            self._take_described(groups, response, described)
        return described

    def _take_described(self, groups: tuple[str, ...], response: Any, described: dict[str, DescribedGroup]) -> None:
        """Add what one DescribeGroups request answered for ``groups`` to ``described``; count failures."""
        if isinstance(response, BaseException):
            self._failed("DescribeGroups", f"of {', '.join(map(repr, groups))}", response)
            return
        answered, errors = described_groups([response])
        described.update(answered)
        for error in errors:
            self._failed("DescribeGroups", f"of group {error.group!r}", for_code(error.error_code)())

    async def _describe_consumer_groups(
        self, client: AIOKafkaClient, coordinators: Mapping[str, int]
    ) -> dict[str, DescribedConsumerGroup]:
        """ConsumerGroupDescribe of ``coordinators``' groups (on the consumer protocol), one request per
        coordinator; a request that fails is counted once for each of its groups."""
        by_node: dict[int, list[str]] = defaultdict(list)
        for group, node in coordinators.items():
            by_node[node].append(group)
        requests = {tuple(groups): _consumer_group_describe(client, node, groups) for node, groups in by_node.items()}
        described: dict[str, DescribedConsumerGroup] = {}
        for groups, response in (await self._each(requests)).items():
            if isinstance(response, BaseException):
                for group in groups:
                    self._failed("ConsumerGroupDescribe", f"of group {group!r}", response)
                continue
            answered, errors = described_consumer_groups([response])
            described.update(answered)
            for error in errors:
                exc = for_code(error.error_code)(error.error_message or "")
                self._failed("ConsumerGroupDescribe", f"of group {error.group!r}", exc)
        return described

    async def _committed(
        self, client: AIOKafkaClient, coordinators: Mapping[str, int], metadata: Any
    ) -> dict[str, FetchedOffsets]:
        """OffsetFetch of each group in ``coordinators``: its answer, for the groups whose answer did not fail."""
        committed: dict[str, FetchedOffsets] = {}
        retry = list(coordinators)
        if self._fetch_all_partitions:
            retry = []
            calls = {g: client.send(node, OffsetFetchRequest(g, None)) for g, node in coordinators.items()}
            for group, response in (await self._each(calls)).items():
                if isinstance(response, KafkaConnectionError):
                    retry.append(group)
                else:
                    self._take_fetched(group, response, committed)
        if not retry:
            return committed
        partitions = _cluster_partitions(metadata)
        if not partitions:
            return committed | {group: FetchedOffsets({}) for group in retry}
        calls = {g: client.send(coordinators[g], OffsetFetchRequest(g, partitions)) for g in retry}
        for group, response in (await self._each(calls)).items():
            if self._take_fetched(group, response, committed) and self._fetch_all_partitions:
                self._fetch_all_partitions = False
                log.warning(
                    "the broker does not answer OffsetFetch for all of a group's partitions; "
                    "asking for every partition of every topic from now on"
                )
        return committed

    def _take_fetched(self, group: str, response: Any, committed: dict[str, FetchedOffsets]) -> bool:
        """Add ``group``'s OffsetFetch answer to ``committed`` unless it failed (then counted); whether it did."""
        if isinstance(response, BaseException):
            self._failed("OffsetFetch", f"of group {group!r}", response)
            return False
        fetched = fetched_offsets(response)
        if fetched.error_code:
            self._failed("OffsetFetch", f"of group {group!r}", for_code(fetched.error_code)())
            return False
        committed[group] = fetched
        return True


def _classic(listed: ListedGroup) -> bool:
    """Whether DescribeGroups describes the group: a ``consumer`` group not on the consumer protocol."""
    return listed.protocol_type == CONSUMER_PROTOCOL_TYPE and listed.group_type != CONSUMER_GROUP_TYPE


def _consumer_protocol(listed: ListedGroup) -> bool:
    """Whether ConsumerGroupDescribe describes the group: one on the consumer protocol (KIP-848)."""
    return listed.group_type == CONSUMER_GROUP_TYPE


async def _consumer_group_describe(client: AIOKafkaClient, node: int, groups: list[str]) -> Any:
    """ConsumerGroupDescribe of ``groups`` on ``node``; a broker whose versions of the API kagent does not
    know raises :class:`UnsupportedVersionError`, as one without the API raises ``IncompatibleBrokerVersion``."""
    try:
        return await client.send(node, ConsumerGroupDescribe(groups))
    except NotImplementedError as exc:
        raise UnsupportedVersionError(str(exc)) from exc


async def _coordinator(client: AIOKafkaClient, group: str) -> int:
    """The node id of ``group``'s coordinator (FindCoordinator); raises its error."""
    response = await client.send(client.get_random_node(), FindCoordinatorRequest(group, 0))
    if response.error_code:
        raise for_code(response.error_code)(f"finding the coordinator of group {group!r}")
    return int(response.coordinator_id)


def _partition_counts(metadata: Any) -> dict[str, int]:
    """Topic -> its partition count, for every topic the cluster's ``metadata`` answers without error."""
    return {topic: len(partitions) for topic, partitions in _cluster_partitions(metadata)}


def _cluster_partitions(metadata: Any) -> list[tuple[str, list[int]]]:
    """Every partition of every topic in the cluster's ``metadata``, as OffsetFetch asks for them."""
    return [
        (topic["topic"], [partition["partition"] for partition in topic["partitions"]])
        for topic in metadata.to_object()["topics"]
        if not topic["error_code"]
    ]


class AdminApiSource(Stage):
    """Source ``admin-api``: a timer that polls the group APIs on the Faust leader and sends the
    derived events of what changed to the derived-events topic."""

    name = "admin-api-source"

    def __init__(self, settings: Settings, derived_events: TopicT, metrics: Metrics) -> None:
        self._interval = settings.end_offset_interval
        self._derived_events = derived_events
        self._partitions = settings.topic_partitions
        self._app: faust.App | None = None
        self._poller = GroupPoller(settings, metrics)
        self._stopped = False
        self._caught_up = False

    def register(self, app: faust.App) -> None:
        self._app = app

        @app.timer(self._interval, name="admin-api-source")
        async def poll_group_apis() -> None:
            if self._stopped:  # the timer fires until Faust stops it
                return
            if app.is_leader():
                self._caught_up = await self._poller.poll(self._send) or self._caught_up
            else:
                self._poller.forget()
                self._caught_up = True  # only the leader polls: nothing waits for this worker

    async def caught_up(self) -> bool:
        """Whether this worker's source has nothing left to read: on the leader, once one poll has
        reported every group; on any other worker, once it knows it is not the leader."""
        return self._caught_up

    async def _send(self, groups: list[DerivedEvents]) -> None:
        """Send the groups' events packed as the offsets-topic source packs them, and wait for the broker."""
        assert self._app is not None
        topic = self._derived_events.get_topic_name()
        await asyncio.gather(*await send_derived_events(self._app, topic, packed_records(groups, self._partitions)))

    async def stop(self) -> None:
        self._stopped = True
        await self._poller.stop()
