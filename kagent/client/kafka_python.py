"""Applying kagent's recommendations inside kafka-python consumers (``pip install 'kagent[kafka-python]'``).

    feed = FeedThread(ApiFeed("http://kagent:6066", "billing"))  # or a TopicFeed
    feed.start()
    assignor = RecommendedAssignor(feed, "billing")
    consumer = KafkaConsumer("orders", group_id="billing", partition_assignment_strategy=[assignor])
    follower = RecommendationFollower(consumer, assignor, min_interval=300)  # optional
    follower.start()
    for record in consumer: ...

kafka-python's assignor interface is the one aiokafka's grew from (``name``, ``metadata(topics)``,
``assign(cluster, members)`` on the leader, ``on_assignment(assignment)``), so this module is the
same assignor as :class:`kagent.client.applying.RecommendedAssignor`: it chooses by
:func:`kagent.core.assignment_choice.choose_assignment`, keeps its state and falls back as
:class:`kagent.client.recommended.RecommendedMember` does, and writes the same bytes
(:mod:`kagent.client.member_protocol`), so the same protocol name ``kagent`` is listed by both
libraries' consumers (a group may mix them). Only the wrapping is kafka-python's: its protocol
structs, its ``Subscription`` (which also carries a static member's ``group_instance_id``), and
threads rather than an event loop (hence :class:`FeedThread`, and a follower in a thread).

kagent itself does not need kafka-python: only importing this module does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Protocol

from aiokafka.structs import TopicPartition

try:
    from kafka import KafkaConsumer
    from kafka.cluster import ClusterMetadata
    from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
    from kafka.coordinator.protocol import ConsumerProtocolMemberAssignment_v0, ConsumerProtocolMemberMetadata_v0
    from kafka.coordinator.subscription import Subscription
except ImportError as missing:  # kafka-python is an optional extra: say which
    raise ImportError(
        f"kagent.client.kafka_python needs kafka-python ({missing}): pip install 'kagent[kafka-python]'"
    ) from missing

from kagent.client.member_protocol import VERSION, JoinedMember, by_topic
from kagent.client.recommendation_feed import FeedThread
from kagent.client.recommended import PROTOCOL, Decision, FollowerState, RecommendedMember
from kagent.core.assignment_choice import Path
from kagent.core.recommendation import Recommendation

__all__ = ["PROTOCOL", "Decision", "FeedThread", "Path", "RecommendationFollower", "RecommendedAssignor"]

log = logging.getLogger(__name__)


class _Assignment(Protocol):
    """What the assignor reads of the ``ConsumerProtocolMemberAssignment_v0`` kafka-python hands it (a struct
    whose fields its annotations do not declare)."""

    user_data: bytes

    def partitions(self) -> list[TopicPartition]: ...


class RecommendedAssignor(RecommendedMember, AbstractPartitionAssignor):
    """A kafka-python assignor (protocol ``kagent``) that applies ``feed``'s recommendations for ``group_id``.

    Pass the instance itself in ``partition_assignment_strategy`` (one per consumer: it keeps that
    member's owned partitions and generation); ``feed`` answers from memory (a :class:`FeedThread`)
    and may be shared. It assigns in the order :mod:`kagent.client.applying` describes, and never
    fails a rebalance.
    """

    @property
    def name(self) -> str:
        return PROTOCOL

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata_v0:
        """The sticky user data, followed by the requested recommendation's id once one was requested."""
        return ConsumerProtocolMemberMetadata_v0(VERSION, sorted(topics), self.join_user_data())

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, Subscription]
    ) -> dict[str, ConsumerProtocolMemberAssignment_v0]:
        """As the leader: each member's assignment, stamped with the generation."""
        joined = {
            member_id: JoinedMember(subscription.topics, subscription.user_data, subscription.group_instance_id)
            for member_id, subscription in members.items()
        }
        decision, stamp = self.decide(cluster.partitions_for_topic, joined)
        return {
            member_id: ConsumerProtocolMemberAssignment_v0(VERSION, by_topic(partitions), stamp)
            for member_id, partitions in decision.assignment.items()
        }

    def on_assignment(self, assignment: _Assignment) -> None:
        self.assigned(assignment.partitions(), assignment.user_data)


class RecommendationFollower:
    """Opt-in: makes the group of ``consumer`` rebalance when a new recommendation for it arrives, so that
    its ``assignor`` applies it, at most once every ``min_interval`` s; one beside every consumer.

    The same rules and cost as :class:`kagent.client.applying.RecommendationFollower` (kafka-python's
    consumer protocol is eager too): every ``check_interval`` s, in a daemon thread, the follower of
    the member that led the current generation asks for a recommendation worth applying by putting
    its id in the member's next JoinGroup user data and asking kafka-python's group coordinator to
    rejoin (``request_rejoin()``, no public call either; kafka-python's heartbeat thread calls it
    itself when the coordinator answers a heartbeat with a rebalance). The consumer rejoins, with its
    member id, at its next ``poll()``: a consumer that is not polled applies nothing.
    """

    def __init__(
        self,
        consumer: KafkaConsumer,
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
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def min_interval(self) -> float:
        """Fewest seconds between two asks."""
        return self._state.min_interval

    def due(self) -> Recommendation | None:
        """The recommendation this member should ask the group to apply now, if any (ignoring ``min_interval``)."""
        return self._state.due()

    def step(self, now: float) -> Recommendation | None:
        """Ask for the :meth:`due` recommendation, unless the last ask was less than ``min_interval`` s before
        ``now`` (seconds on ``time.monotonic``'s clock); returns the recommendation asked for."""
        recommendation = self._state.step(now)
        if recommendation is not None:
            coordinator = self._consumer._coordinator
            with coordinator._lock:  # the lock kafka-python holds while it joins and completes a join
                coordinator.request_rejoin()
        return recommendation

    def start(self) -> None:
        """Begin watching the feed, in a daemon thread."""
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(
                target=self._run, name=f"kagent-follower-{self._assignor.group_id}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop watching (waits for the thread)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping.set()
            thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(self.check_interval):
            try:
                self.step(time.monotonic())
            except Exception:  # a follower keeps going whatever happens (logged with its traceback)
                log.exception(
                    "the kagent recommendation follower of group %s failed; it goes on", self._assignor.group_id
                )
