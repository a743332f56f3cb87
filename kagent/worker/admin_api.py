"""Source ``admin-api``: poll the group APIs on a timer -> derived events, packed per partition.

For clusters that forbid reading ``__consumer_offsets``. Every
``KAGENT_END_OFFSET_INTERVAL`` seconds (the pace of the lag figures) the
Faust leader asks ListGroups, then for each group but kagent's own
FindCoordinator, DescribeGroups (``consumer`` groups) and OffsetFetch, and
sends the derived events of what changed since its previous poll
(:func:`kagent.core.group_polling.poll`) to the derived-events topic, each
group's on its partition and packed as the ``offsets-topic`` source packs
them (:func:`kagent.core.events.packed_records`); the storage stage takes
them as it takes that source's. Only the leader polls: ListGroups answers
every worker the same, so each worker polling would send every event once
per worker. A worker that
is not the leader forgets its view, so when it leads it announces every group
afresh (the tables take the same events idempotently).

OffsetFetch is asked for all of a group's partitions (topics null). A broker
that cannot answer that form (Tansu cuts the answer short, and aiokafka
drops the connection) is asked for every partition of every topic instead,
from the first time that form fails where the explicit form works.

An admin-client error is counted (``kagent_group_api_errors{api}``) and
logged; the groups that did answer are still reported, and what the others
answered before stands. A member blob that fails to decode is counted
(``kagent_malformed_member_metadata{part}``) and logged; the member is kept
without it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import faust
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError, KafkaError, for_code
from aiokafka.structs import TopicPartition
from faust.types import TopicT

from kagent.core.events import DerivedEvents, by_group
from kagent.core.group_polling import (
    CONSUMER_PROTOCOL_TYPE,
    DescribedGroup,
    GroupAnswers,
    GroupView,
    committed_offsets,
    described_groups,
    poll,
    tracked_groups,
)
from kagent.settings import Settings
from kagent.worker.changelog import PRODUCER_ERRORS
from kagent.worker.metrics import Metrics
from kagent.worker.record_batches import send_derived_events
from kagent.worker.stage import Stage

__all__ = ["AdminApiSource", "GroupPoller"]

log = logging.getLogger(__name__)

_ADMIN_ERRORS = (KafkaError, TimeoutError)
"""What a failed admin request raises: Kafka errors, and timeouts waiting for a node."""

K = TypeVar("K")
V = TypeVar("V")

Send = Callable[[list[DerivedEvents]], Awaitable[None]]
"""Sends groups' derived events (one :class:`DerivedEvents` per group); returns when the broker has them."""


class GroupPoller:
    """The admin client, the view of the previous poll, and one poll of the group APIs."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._settings = settings
        self._records = metrics.records.labels("admin-api")
        self._errors = metrics.group_api_errors
        self._malformed = metrics.malformed_member_metadata
        self._admin: AIOKafkaAdminClient | None = None
        self._view: dict[str, GroupView] = {}
        self._fetch_all_partitions = True

    async def stop(self) -> None:
        """Close the admin client."""
        if self._admin is not None:
            await self._admin.close()
            self._admin = None

    def forget(self) -> None:
        """Drop the view: the next poll announces every group as new."""
        self._view = {}

    async def _client(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = self._settings.kafka.admin(client_id=f"{self._settings.app_id}-group-poller")
            try:
                await admin.start()
            except BaseException:
                await admin.close()
                raise
            self._admin = admin
        return self._admin

    def _failed(self, api: str, what: str, exc: BaseException) -> None:
        self._errors.labels(api).inc()
        log.warning("%s %s failed: %r", api, what, exc)

    async def poll(self, send: Send) -> bool:
        """One poll: ask the group APIs, ``send`` the events of what changed, then keep the new view;
        whether it completed (every event sent).

        If a send fails the view is kept as it was, so the next poll sends those events again.
        """
        polled_at = int(time.time() * 1000)
        try:
            admin = await self._client()
            listed = tracked_groups(await admin.list_consumer_groups(), self._settings.app_id)
        except _ADMIN_ERRORS as exc:
            self._failed("ListGroups", "of the cluster", exc)
            return False
        self._records.inc(len(listed))
        coordinators: dict[str, int] = {}
        for group, found in (await self._each({g: admin.find_coordinator(g) for g in listed})).items():
            if isinstance(found, BaseException):
                self._failed("FindCoordinator", f"of group {group!r}", found)
            else:
                coordinators[group] = found
        consumer_groups = {g: node for g, node in coordinators.items() if listed[g] == CONSUMER_PROTOCOL_TYPE}
        answers = GroupAnswers(
            polled_at=polled_at,
            listed=listed,
            described=await self._describe(admin, consumer_groups),
            committed=await self._committed(admin, coordinators),
        )
        result = poll(self._view, answers)
        for bad in result.malformed:
            self._malformed.labels(bad.part).inc()
            log.warning("member %r of group %r: malformed %s: %s", bad.member_id, bad.group, bad.part, bad.error)
        try:
            await send(by_group(result.events))
        except PRODUCER_ERRORS as exc:
            self._failed("Produce", f"of {len(result.events)} derived events", exc)
            return False
        self._view = result.view
        return True

    async def _each(self, calls: Mapping[K, Awaitable[V]]) -> dict[K, V | BaseException]:
        """Await ``calls`` together; each one's result, or the admin error it raised (others propagate)."""
        results = await asyncio.gather(*calls.values(), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, _ADMIN_ERRORS):
                raise result
        return dict(zip(calls, results, strict=True))

    async def _describe(self, admin: AIOKafkaAdminClient, coordinators: Mapping[str, int]) -> dict[str, DescribedGroup]:
        """DescribeGroups of ``coordinators``' groups, one request per coordinator.

        When a coordinator's request fails, its groups are asked one by one, so a
        group whose answer cannot be read (Tansu garbles some) hides only itself.
        """
        by_node: dict[int, list[str]] = defaultdict(list)
        for group, node in coordinators.items():
            by_node[node].append(group)
        batches = {
            tuple(groups): admin.describe_consumer_groups(groups, group_coordinator_id=node)
            for node, groups in by_node.items()
        }
        described: dict[str, DescribedGroup] = {}
        singles: dict[tuple[str, ...], Awaitable[Any]] = {}
        for groups, responses in (await self._each(batches)).items():
            if isinstance(responses, BaseException) and len(groups) > 1:
                singles.update(
                    ((group,), admin.describe_consumer_groups([group], group_coordinator_id=coordinators[group]))
                    for group in groups
                )
            else:
                self._take_described(groups, responses, described)
        for groups, responses in (await self._each(singles)).items():
            self._take_described(groups, responses, described)
        return described

    def _take_described(self, groups: tuple[str, ...], responses: Any, described: dict[str, DescribedGroup]) -> None:
        """Add what one DescribeGroups request answered for ``groups`` to ``described``; count failures."""
        if isinstance(responses, BaseException):
            self._failed("DescribeGroups", f"of {', '.join(map(repr, groups))}", responses)
            return
        answered, errors = described_groups(responses)
        described.update(answered)
        for error in errors:
            self._failed("DescribeGroups", f"of group {error.group!r}", for_code(error.error_code)())

    async def _committed(
        self, admin: AIOKafkaAdminClient, coordinators: Mapping[str, int]
    ) -> dict[str, dict[TopicPartition, int]]:
        """OffsetFetch of each group in ``coordinators``: its committed offsets, for the groups that answered."""
        committed: dict[str, dict[TopicPartition, int]] = {}
        retry = list(coordinators)
        if self._fetch_all_partitions:
            retry = []
            calls = {
                g: admin.list_consumer_group_offsets(g, group_coordinator_id=node) for g, node in coordinators.items()
            }
            for group, answer in (await self._each(calls)).items():
                if isinstance(answer, KafkaConnectionError):
                    retry.append(group)
                elif isinstance(answer, BaseException):
                    self._failed("OffsetFetch", f"of group {group!r}", answer)
                else:
                    committed[group] = committed_offsets(answer)
        if not retry:
            return committed
        try:
            partitions = await self._cluster_partitions(admin)
        except _ADMIN_ERRORS as exc:
            self._failed("Metadata", "of all topics", exc)
            return committed
        if not partitions:
            return committed | {group: {} for group in retry}
        calls = {g: admin.list_consumer_group_offsets(g, coordinators[g], partitions) for g in retry}
        for group, answer in (await self._each(calls)).items():
            if isinstance(answer, BaseException):
                self._failed("OffsetFetch", f"of group {group!r}", answer)
                continue
            committed[group] = committed_offsets(answer)
            if self._fetch_all_partitions:
                self._fetch_all_partitions = False
                log.warning(
                    "the broker does not answer OffsetFetch for all of a group's partitions; "
                    "asking for every partition of every topic from now on"
                )
        return committed

    @staticmethod
    async def _cluster_partitions(admin: AIOKafkaAdminClient) -> list[TopicPartition]:
        """Every partition of every topic in the cluster's metadata."""
        topics: list[dict[str, Any]] = await admin.describe_topics()
        return [
            TopicPartition(t["topic"], p["partition"]) for t in topics if not t["error_code"] for p in t["partitions"]
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
        await asyncio.gather(*await send_derived_events(self._app, topic, groups, self._partitions))

    async def stop(self) -> None:
        self._stopped = True
        await self._poller.stop()
