"""kagent's ``kagent`` assignor and its follower, apart from the client library they run in.

:class:`RecommendedMember` is one consumer's side of the assignor: the user data it joins with, the
assignment it hands out when it leads (chosen by :func:`kagent.core.assignment_choice.choose_assignment`),
and what it keeps between rebalances. :class:`FollowerState` is when a follower asks the group to
rebalance. The adapters wrap both in their library's types and calls: aiokafka's in
:mod:`kagent.client.applying`, kafka-python's in :mod:`kagent.client.kafka_python`.

A leader never fails a rebalance: when choosing raises it assigns by Kafka's sticky strategy, and
should that raise too, by aiokafka's round-robin assignor, which needs nothing of kagent (aiokafka
comes with kagent whatever the client; kafka-python 2.3's own round-robin raises ``KeyError`` when
members subscribe to different topics). Every path gives each partition of the subscribed topics
(as the leader's cluster metadata has them) to exactly one member subscribed to its topic. The
leader logs one line saying which path it took and why.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import cast

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.structs import TopicPartition

from kagent.client.member_protocol import (
    VERSION,
    JoinedMember,
    PartitionsOf,
    generation_stamp,
    join_user_data,
    joined_group,
    member_of,
    requested_in,
    stamped_generation,
)
from kagent.client.recommendation_feed import RecommendationSource
from kagent.core.assignment_choice import Path, choose_assignment, worth_rebalancing_for
from kagent.core.assignors import StickyAssignor
from kagent.core.recommendation import Recommendation

__all__ = ["PROTOCOL", "Decision", "FollowerState", "RecommendedMember"]

log = logging.getLogger(__name__)

PROTOCOL = "kagent"
"""The assignor's protocol name in JoinGroup (and in the group's metadata on ``__consumer_offsets``)."""


@dataclass(frozen=True)
class _Topics:
    """All that aiokafka's round-robin assignor reads of a ``ClusterMetadata``."""

    partitions_for_topic: PartitionsOf


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


class RecommendedMember:
    """One consumer's side of the ``kagent`` assignor, for ``feed``'s recommendations for ``group_id``.

    One instance per consumer: it keeps that member's owned partitions and generation between
    rebalances; ``feed`` may be shared. ``tolerance`` is lag-sticky's. Nothing it does blocks: the
    feed answers from memory. An adapter calls :meth:`join_user_data` when its client builds the
    JoinGroup metadata, :meth:`decide` when its member leads, and :meth:`assigned` with each
    assignment the member receives.
    """

    def __init__(self, feed: RecommendationSource, group_id: str, *, tolerance: float = 0.05) -> None:
        self.feed = feed
        self.group_id = group_id
        self.tolerance = tolerance
        self._owned: list[TopicPartition] = []
        self._generation = -1
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

    def join_user_data(self) -> bytes:
        """The user data of this member's next JoinGroup: what it owns, and the recommendation it asked for."""
        self._deciding = None  # a new join: this member leads it only if decide() is called
        return join_user_data(self._owned, self._generation, self._requested)

    def decide(self, partitions_of: PartitionsOf, members: Mapping[str, JoinedMember]) -> tuple[Decision, bytes]:
        """As the leader: what each of ``members`` gets, and the user data to send every member with it.

        Never raises unless aiokafka's round-robin assignor does."""
        requested = frozenset(filter(None, (requested_in(joined.user_data) for joined in members.values())))
        recommendation_id: str | None = None
        try:
            group = joined_group(partitions_of, members, self._partition_lag)
            choice = choose_assignment(group, self.feed.latest(self.group_id), tolerance=self.tolerance)
            assignment: Mapping[str, Collection[TopicPartition]] = choice.assignment
            path, reason, recommendation_id = choice.path, choice.reason, choice.recommendation_id
        except Exception as exc:  # noqa: BLE001 - a rebalance must not fail for want of a recommendation
            assignment, path, reason = self._fallback(partitions_of, members, exc)
        decision = Decision(
            path,
            reason,
            recommendation_id,
            requested,
            {member_id: tuple(sorted(assignment.get(member_id, ()))) for member_id in members},
        )
        log.info("group %s: assigned by %s: %s", self.group_id, path.value, reason)
        self._deciding = self.last_decision = decision
        return decision, generation_stamp(member_of(joined) for joined in members.values())

    def _partition_lag(self, partitions: Collection[TopicPartition]) -> Mapping[TopicPartition, int]:
        return self.feed.partition_lag(self.group_id)

    @staticmethod
    def _fallback(
        partitions_of: PartitionsOf, members: Mapping[str, JoinedMember], error: Exception
    ) -> tuple[Mapping[str, Collection[TopicPartition]], Path, str]:
        """Sticky, without lag, after ``error``; aiokafka's round-robin if sticky raises too."""
        try:
            sticky = StickyAssignor().assign(joined_group(partitions_of, members))
            return sticky, Path.STICKY, f"failed ({error!r}), so sticky"
        except Exception as second:  # noqa: BLE001 - the last resort below needs nothing of kagent
            reason = f"failed ({error!r}), and sticky too ({second!r}), so round-robin"
            subscriptions = {
                member_id: ConsumerProtocolMemberMetadata(VERSION, sorted(joined.topics), b"")
                for member_id, joined in members.items()
            }
            given = RoundRobinPartitionAssignor.assign(cast(ClusterMetadata, _Topics(partitions_of)), subscriptions)
            return {member_id: a.partitions() for member_id, a in given.items()}, Path.ROUND_ROBIN, reason

    def assigned(self, partitions: Collection[tuple[str, int]], user_data: bytes) -> None:
        """Keep the ``partitions`` this member was just given, with the generation ``user_data`` carries."""
        self._owned = [TopicPartition(topic, partition) for topic, partition in partitions]
        generation = stamped_generation(user_data)
        if generation is not None:
            self._generation = generation
        self.leading, self._deciding = self._deciding, None


class FollowerState:
    """When a follower beside ``member``'s consumer asks its group to rebalance, at most once every
    ``min_interval`` s; the adapter's follower makes the client rejoin when :meth:`step` asks.

    Only the follower whose member led the rebalance behind the group's current assignment (it knows
    the whole assignment) asks, and only for a recommendation worth it
    (:func:`~kagent.core.assignment_choice.worth_rebalancing_for`) that it has not asked for before.
    """

    def __init__(self, member: RecommendedMember, min_interval: float) -> None:
        if min_interval < 0:
            raise ValueError(f"need min_interval >= 0, not {min_interval}")
        self.member = member
        self.min_interval = min_interval
        self._asked: set[str] = set()
        self._last_asked: float | None = None

    def due(self) -> Recommendation | None:
        """The recommendation this member should ask the group to apply now, if any (ignoring ``min_interval``)."""
        recommendation = self.member.feed.latest(self.member.group_id)
        holding = self.member.leading
        if recommendation is None or holding is None or recommendation.id in self._asked:
            return None
        return recommendation if worth_rebalancing_for(recommendation, holding.assignment) else None

    def step(self, now: float) -> Recommendation | None:
        """Ask for the :meth:`due` recommendation in the member's next JoinGroup, unless the last ask was less
        than ``min_interval`` s before ``now`` (seconds on any one clock); returns the recommendation asked
        for, after which the adapter makes its client rejoin."""
        recommendation = self.due()
        if recommendation is None or (self._last_asked is not None and now - self._last_asked < self.min_interval):
            return None
        self._asked.add(recommendation.id)
        self._last_asked = now
        self.member.request(recommendation.id)
        log.info(
            "group %s: rejoining to apply recommendation %s (the whole group pauses while it rebalances)",
            self.member.group_id,
            recommendation.id,
        )
        return recommendation
