"""Applying kagent's recommendations inside aiokafka consumers.

    feed = ApiFeed("http://kagent:6066", "billing")
    assignor = RecommendedAssignor(feed, "billing")
    consumer = AIOKafkaConsumer("orders", group_id="billing", partition_assignment_strategy=(assignor,))
    await feed.start()
    await consumer.start()
    follower = RecommendationFollower(consumer, assignor, min_interval=300)  # optional
    await follower.start()

:class:`RecommendedAssignor` (protocol name ``kagent``) decides, when its member leads a rebalance,
in this order:

1. ``recommendation``: the feed's latest recommendation for the group, handed out exactly, when it
   is a client-side rebalance (``kind`` ``rebalance``, ``client_side``) and still fits the group
   (:func:`unfit_reason`);
2. ``lag-sticky``: otherwise kagent's lag-aware sticky strategy, when the feed knows the lag of any
   of the group's partitions;
3. ``sticky``: otherwise Kafka's sticky strategy; also when anything in the steps above raises;
4. ``roundrobin``: aiokafka's round-robin assignor, should the sticky strategy raise too.

It never fails a rebalance: every path gives each partition of the subscribed topics (as the
leader's cluster metadata has them) to exactly one member subscribed to its topic, and the leader
logs one line saying which path it took and why (:attr:`RecommendedAssignor.last_decision` holds
the same). Members report their owned partitions and generation as :class:`KagentPartitionAssignor`
does.

A group only rebalances when something changes (a member comes or goes, a topic grows), so a
recommendation waits for the next rebalance unless a :class:`RecommendationFollower` asks for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from io import BytesIO

from aiokafka import AIOKafkaConsumer
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyAssignorUserDataV1
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.protocol.types import String
from aiokafka.structs import TopicPartition

from kagent.client.assignors import KagentPartitionAssignor
from kagent.client.recommendation_feed import RecommendationFeed
from kagent.core.assignors import Assignment, Group, LagStickyAssignor, StickyAssignor
from kagent.core.recommendation import Recommendation, RecommendationKind

__all__ = [
    "PROTOCOL",
    "Decision",
    "Path",
    "RecommendationFollower",
    "RecommendedAssignor",
    "recommended_assignment",
    "unfit_reason",
]

log = logging.getLogger(__name__)

PROTOCOL = "kagent"
"""The assignor's protocol name in JoinGroup (and in the group's metadata on ``__consumer_offsets``)."""

_REQUEST = String("utf-8")
"""What follows a member's ``StickyAssignorUserDataV1`` in its user data once its follower asked for
a recommendation: that recommendation's id, as a Kafka STRING. Readers of the sticky user data
(aiokafka's, Java's, kagent's) read their fields and ignore what follows."""


class Path(str, Enum):
    """Which way the leader assigned."""

    RECOMMENDATION = "recommendation"
    LAG_STICKY = "lag-sticky"
    STICKY = "sticky"
    ROUND_ROBIN = "roundrobin"


@dataclass(frozen=True)
class Decision:
    """What the leader handed out in one rebalance, and why."""

    path: Path
    reason: str
    recommendation_id: str | None
    """The recommendation applied; on the other paths the latest one, which did not fit (None: there was none)."""
    requested: frozenset[str]
    """Ids of the recommendations the members' followers asked for in this rebalance's JoinGroup."""
    assignment: Mapping[str, tuple[TopicPartition, ...]]
    """Each member's partitions, sorted."""


def recommended_assignment(recommendation: Recommendation) -> Assignment:
    """Each member's recommended partitions, sorted."""
    return {m.member_id: sorted(p.topic_partition for p in m.recommended) for m in recommendation.members}


def unfit_reason(recommendation: Recommendation, group: Group) -> str | None:
    """Why ``recommendation`` cannot be handed out to ``group`` as it is; None when it can.

    It can when it is a client-side rebalance and fits: its members are exactly the group's, no
    partition is recommended twice, the partitions recommended are exactly those of the topics the
    members subscribe to (``group.partitions``, from the cluster's metadata), and each member is
    recommended partitions of its own subscription only.
    """
    what = f"recommendation {recommendation.id}"
    if recommendation.kind is not RecommendationKind.REBALANCE:
        return f"{what} is a {recommendation.kind.value} recommendation, with no assignment to apply"
    if not recommendation.client_side:
        return f"{what} is for a group whose broker assigns (KIP-848)"
    recommended = {m.member_id for m in recommendation.members}
    if recommended != set(group.members):
        gone, new = recommended - set(group.members), set(group.members) - recommended
        return f"{what} is for other members (gone: {_listed(gone)}; new: {_listed(new)})"
    given = Counter(p.topic_partition for m in recommendation.members for p in m.recommended)
    twice = [tp for tp, count in given.items() if count > 1]
    if twice:
        return f"{what} gives {_listed(twice)} to more than one member"
    subscribed = set(group.subscribed_partitions())
    if set(given) != subscribed:
        missing, unknown = subscribed - set(given), set(given) - subscribed
        return f"{what} is for other partitions (missing: {_listed(missing)}; not subscribed: {_listed(unknown)})"
    for member in recommendation.members:
        foreign = {p.topic for p in member.recommended} - set(group.subscriptions[member.member_id])
        if foreign:
            return f"{what} gives {member.member_id} partitions of {_listed(foreign)}, which it does not subscribe to"
    return None


def _listed(items: Collection[object], shown: int = 5) -> str:
    """Up to ``shown`` of ``items``, sorted, and how many more; ``none`` for none."""
    names = sorted(f"{item[0]}[{item[1]}]" if isinstance(item, tuple) else str(item) for item in items)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more if names else "none"


class _Planner:
    """The strategy a :class:`RecommendedAssignor` runs (kagent's ``Assignor``): steps 1-3 of the module's
    order. Notes in :attr:`plan` the path it took, why, and the latest recommendation's id."""

    name = PROTOCOL

    def __init__(self, feed: RecommendationFeed, group_id: str, tolerance: float) -> None:
        self._feed = feed
        self._group_id = group_id
        self._lag_sticky = LagStickyAssignor(tolerance)
        self._sticky = StickyAssignor()
        self.plan: tuple[Path, str, str | None] = (Path.STICKY, "nothing planned yet", None)

    def assign(self, group: Group) -> Assignment:
        recommendation = self._feed.latest(self._group_id)
        if recommendation is None:
            why = "no recommendation for the group"
        else:
            unfit = unfit_reason(recommendation, group)
            if unfit is None:
                self.plan = (Path.RECOMMENDATION, f"recommendation {recommendation.id} fits", recommendation.id)
                return recommended_assignment(recommendation)
            why = unfit
        latest = None if recommendation is None else recommendation.id
        if group.lag:
            self.plan = (Path.LAG_STICKY, f"{why}; lag known for {len(group.lag)} partitions", latest)
            return self._lag_sticky.assign(group)
        self.plan = (Path.STICKY, f"{why}; no lag known", latest)
        return self._sticky.assign(group)


class RecommendedAssignor(KagentPartitionAssignor):
    """An aiokafka assignor (protocol ``kagent``) that applies ``feed``'s recommendations for ``group_id``.

    See the module's docstring for the order it assigns in. One instance per consumer (it keeps that
    member's owned partitions and generation); ``feed`` may be shared. ``tolerance`` is lag-sticky's.
    Nothing it does blocks: the feed answers from memory.
    """

    def __init__(self, feed: RecommendationFeed, group_id: str, *, tolerance: float = 0.05) -> None:
        self.feed = feed
        self.group_id = group_id
        self._planner = _Planner(feed, group_id, tolerance)
        super().__init__(self._planner, self._partition_lag)
        self._sticky = KagentPartitionAssignor(StickyAssignor())
        self._requested: str | None = None
        self._deciding: Decision | None = None
        self.last_decision: Decision | None = None
        """The last rebalance this member led (it may not have completed)."""
        self.leading: Decision | None = None
        """The decision behind the assignment this member holds now, when this member made it as the
        leader; None when another member led that rebalance."""

    def request(self, recommendation_id: str) -> None:
        """Ask for ``recommendation_id`` in this member's next JoinGroup (its user data changes, which makes
        a rejoin rebalance the group)."""
        self._requested = recommendation_id

    def _partition_lag(self, partitions: Collection[TopicPartition]) -> Mapping[TopicPartition, int]:
        return self.feed.partition_lag(self.group_id)

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:  # type: ignore[override]
        """The sticky user data, followed by the requested recommendation's id once one was requested."""
        self._deciding = None  # a new join: this member leads it only if assign() is called
        metadata = super().metadata(topics)
        if self._requested is None:
            return metadata
        user_data = metadata.user_data + _REQUEST.encode(self._requested)
        return ConsumerProtocolMemberMetadata(metadata.version, metadata.subscription, user_data)

    def assign(  # type: ignore[override]
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Assign as the module's docstring says; never raises unless aiokafka's round-robin does."""
        requested = frozenset(filter(None, (_requested_in(metadata) for metadata in members.values())))
        try:
            assignments = super().assign(cluster, members)
            path, reason, recommendation_id = self._planner.plan
        except Exception as exc:  # noqa: BLE001 - a rebalance must not fail for want of a recommendation
            assignments, path, reason = self._fallback(cluster, members, exc)
            recommendation_id = None
        decision = Decision(
            path,
            reason,
            recommendation_id,
            requested,
            {member_id: tuple(sorted(assignment.partitions())) for member_id, assignment in assignments.items()},
        )
        log.info("group %s: assigned by %s: %s", self.group_id, path.value, reason)
        self._deciding = self.last_decision = decision
        return assignments

    def _fallback(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata], error: Exception
    ) -> tuple[dict[str, ConsumerProtocolMemberAssignment], Path, str]:
        """Sticky after ``error``; aiokafka's round-robin if sticky raises too."""
        try:
            return self._sticky.assign(cluster, members), Path.STICKY, f"failed ({error!r}), so sticky"
        except Exception as second:  # noqa: BLE001 - the last resort below needs nothing of kagent
            reason = f"failed ({error!r}), and sticky too ({second!r}), so round-robin"
            return RoundRobinPartitionAssignor.assign(cluster, members), Path.ROUND_ROBIN, reason

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:  # type: ignore[override]
        super().on_assignment(assignment)
        self.leading, self._deciding = self._deciding, None


def _requested_in(metadata: ConsumerProtocolMemberMetadata) -> str | None:
    """The recommendation id a member's user data asks for (see ``_REQUEST``); None if it asks for none."""
    data = BytesIO(metadata.user_data)
    try:
        StickyAssignorUserDataV1.decode(data)
        return _REQUEST.decode(data) if data.tell() < len(metadata.user_data) else None
    except ValueError:
        return None


class RecommendationFollower:
    """Opt-in: makes the group rebalance when a new recommendation for it arrives, so that the
    ``assignor`` of ``consumer`` applies it, at most once every ``min_interval`` s.

    Cost: aiokafka's consumer protocol is eager, so every rebalance pauses the whole group: each
    member revokes all its partitions (committing through its rebalance listener), stops consuming,
    rejoins, and waits until every member has rejoined and the leader's assignment is synced, which
    takes from about a heartbeat interval up to the rebalance timeout when a member is slow to poll.
    ``min_interval`` bounds how often the group pays that.

    Run one beside every consumer of the group: every ``check_interval`` s each looks at the feed,
    but only the one whose member led the rebalance behind the group's current assignment (it knows
    the whole assignment) acts, and only for a recommendation that is a client-side rebalance (kind
    ``rebalance``, ``client_side``), is for exactly the group's current members (otherwise the
    rebalance could only fall back), differs from what the group holds, and that it has not asked
    for before.

    How it triggers the rebalance without leaving the group (a new member id would make the
    recommendation no longer fit): it asks the assignor to put the recommendation's id after its
    sticky user data (:meth:`RecommendedAssignor.request`), then calls aiokafka's
    ``request_rejoin()`` on the consumer's group coordinator (aiokafka 0.14 has no public call for
    it; its leader calls it itself when a subscribed topic's partition count changes). The member
    rejoins with its member id. On Kafka's classic protocol a JoinGroup from a known member of a
    Stable group starts a rebalance when that member is the leader or its metadata changed; here
    both hold. Tansu (the embedded broker; measured) answers a rejoin with unchanged metadata, even
    the leader's, within the current generation, and starts a new generation for a changed one:
    hence the changed metadata.
    """

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        assignor: RecommendedAssignor,
        *,
        min_interval: float = 300.0,
        check_interval: float = 1.0,
    ) -> None:
        if min_interval < 0 or check_interval <= 0:
            raise ValueError(f"need min_interval >= 0 and check_interval > 0, not {min_interval}, {check_interval}")
        self._consumer = consumer
        self._assignor = assignor
        self.min_interval = min_interval
        self.check_interval = check_interval
        self._asked: set[str] = set()
        self._last_asked: float | None = None
        self._task: asyncio.Task[None] | None = None

    def due(self) -> Recommendation | None:
        """The recommendation this member should ask the group to apply now, if any (ignoring ``min_interval``)."""
        assignor = self._assignor
        recommendation = assignor.feed.latest(assignor.group_id)
        holding = assignor.leading
        if recommendation is None or holding is None or recommendation.id in self._asked:
            return None
        if recommendation.kind is not RecommendationKind.REBALANCE or not recommendation.client_side:
            return None
        wanted = {member: tuple(tps) for member, tps in recommended_assignment(recommendation).items()}
        if set(wanted) != set(holding.assignment) or wanted == holding.assignment:
            return None
        return recommendation

    async def start(self) -> None:
        """Begin watching the feed, in a background task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"kagent-follower-{self._assignor.group_id}")

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def step(self, now: float) -> Recommendation | None:
        """Ask for the :meth:`due` recommendation, unless the last ask was less than ``min_interval`` s before
        ``now`` (seconds on the event loop's clock); returns the recommendation asked for."""
        recommendation = self.due()
        if recommendation is None or (self._last_asked is not None and now - self._last_asked < self.min_interval):
            return None
        self._asked.add(recommendation.id)
        self._last_asked = now
        self._assignor.request(recommendation.id)
        log.info(
            "group %s: rejoining to apply recommendation %s (the whole group pauses while it rebalances)",
            self._assignor.group_id,
            recommendation.id,
        )
        self._consumer._coordinator.request_rejoin()
        return recommendation

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.step(loop.time())
            await asyncio.sleep(self.check_interval)
