"""Applying kagent's recommendations inside aiokafka consumers.

    feed = ApiFeed("http://kagent:6066", "billing")
    assignor = RecommendedAssignor(feed, "billing")
    consumer = AIOKafkaConsumer("orders", group_id="billing", partition_assignment_strategy=(assignor,))
    await feed.start()
    await consumer.start()
    follower = RecommendationFollower(consumer, assignor, min_interval=300)  # optional
    await follower.start()

:class:`RecommendedAssignor` (protocol name ``kagent``) decides, when its member leads a rebalance,
in this order (:mod:`kagent.core.assignment_choice` chooses, :mod:`kagent.client.recommended` adds
the fallbacks; kafka-python's adapter, :mod:`kagent.client.kafka_python`, shares both):

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
from collections.abc import Iterable, Mapping

from aiokafka import AIOKafkaConsumer
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from kagent.client.member_protocol import VERSION, JoinedMember, by_topic
from kagent.client.recommended import PROTOCOL, Decision, FollowerState, RecommendedMember
from kagent.core.assignment_choice import Path, recommended_assignment, unfit_reason
from kagent.core.recommendation import Recommendation

__all__ = [
    "PROTOCOL",
    "Decision",
    "Path",
    "RecommendationFollower",
    "RecommendedAssignor",
    "recommended_assignment",
    "unfit_reason",
]


class RecommendedAssignor(RecommendedMember, AbstractPartitionAssignor):
    """An aiokafka assignor (protocol ``kagent``) that applies ``feed``'s recommendations for ``group_id``.

    See the module's docstring for the order it assigns in, and :class:`RecommendedMember` for what it
    keeps (one instance per consumer; ``feed`` may be shared; ``tolerance`` is lag-sticky's).
    """

    @property
    def name(self) -> str:
        return PROTOCOL

    # aiokafka declares metadata/assign/on_assignment as classmethods but calls them on the instance in
    # partition_assignment_strategy; this assignor keeps per-consumer state, so they are instance methods.
    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:  # type: ignore[override]
        """The sticky user data, followed by the requested recommendation's id once one was requested."""
        return ConsumerProtocolMemberMetadata(VERSION, sorted(topics), self.join_user_data())

    def assign(  # type: ignore[override]
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        """Assign as the module's docstring says; never raises unless aiokafka's round-robin does."""
        joined = {member_id: JoinedMember(m.subscription, m.user_data) for member_id, m in members.items()}
        decision, stamp = self.decide(cluster.partitions_for_topic, joined)
        return {
            member_id: ConsumerProtocolMemberAssignment(VERSION, by_topic(partitions), stamp)
            for member_id, partitions in decision.assignment.items()
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:  # type: ignore[override]
        self.assigned(assignment.partitions(), assignment.user_data)


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
        self._state = FollowerState(assignor, min_interval)
        self.check_interval = check_interval
        self._task: asyncio.Task[None] | None = None

    @property
    def min_interval(self) -> float:
        """Fewest seconds between two asks."""
        return self._state.min_interval

    def due(self) -> Recommendation | None:
        """The recommendation this member should ask the group to apply now, if any (ignoring ``min_interval``)."""
        return self._state.due()

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
        recommendation = self._state.step(now)
        if recommendation is not None:
            self._consumer._coordinator.request_rejoin()
        return recommendation

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.step(loop.time())
            await asyncio.sleep(self.check_interval)
