"""Evaluation: each held group's table snapshot -> trigger state -> recommendations on the topic.

Every group is evaluated once per ``KAGENT_EVALUATE_INTERVAL``; a short tick
finds the groups that are due. A group whose commits or assignment changed is
evaluated at the next tick if its trigger is not already holding and half an
interval has passed, so a skew that appears is seen soon, while the hold still
takes whole intervals.
The decision itself is :func:`kagent.core.evaluation.evaluate`, a pure function of
the snapshot and the group's trigger state, which lives in a changelog table
so hold counts, hysteresis and cooldown survive a failover.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from aiokafka.structs import TopicPartition

from kagent.core.evaluation import EvaluationState, evaluate
from kagent.settings import Settings
from kagent.core.snapshot import GroupSnapshot, PartitionLag
from kagent.worker.topology import Topology
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.end_offsets import EndOffsetPoller
from kagent.worker.metrics import Metrics

__all__ = ["Evaluator"]

log = logging.getLogger(__name__)


class Evaluator:
    """Evaluates the held groups at their cadence and publishes what triggers."""

    def __init__(
        self,
        settings: Settings,
        topology: Topology,
        writer: ChangelogWriter,
        metrics: Metrics,
        poller: EndOffsetPoller,
    ) -> None:
        self._interval = settings.evaluate_interval
        self._policy = settings.evaluation_policy
        self._topology = topology
        self._writer = writer
        self._metrics = metrics
        self._poller = poller
        self._last_evaluated: dict[str, float] = {}
        self._changed: set[str] = set()

    @property
    def tick(self) -> float:
        """How often to look for due groups."""
        return min(0.5, self._interval / 4)

    def snapshot(self, group: str, now: float) -> GroupSnapshot | None:
        """The group's assignment and lag as the tables hold them now; None without an assignment."""
        assignment = self._poller.assignment(group)
        if assignment is None:
            return None
        topics = {topic for member in assignment.members for topic in member.topics}
        counts = self._poller.partition_counts(topics)
        lag: dict[TopicPartition, PartitionLag] = {}
        for topic, count in counts.items():
            for partition in range(count):
                tp = TopicPartition(topic, partition)
                entry = self._poller.partition_lag(group, tp, now)
                if entry is not None:
                    lag[tp] = entry
        return GroupSnapshot(assignment=assignment, partition_counts=counts, lag=lag, taken_at=now)

    def changed(self, group: str) -> None:
        """Note that ``group``'s commits or assignment changed, so it is evaluated soon."""
        self._changed.add(group)

    def _due(self, group: str, now: float) -> bool:
        """An interval since the last evaluation; or a change, half an interval since, while
        the trigger is not already holding (changes must not make a hold count faster)."""
        since = now - self._last_evaluated.get(group, float("-inf"))
        if since >= self._interval:
            return True
        if group not in self._changed or since < self._interval / 2:
            return False
        raw_state = self._topology.evaluation_state.get(group)
        return raw_state is None or EvaluationState.model_validate_json(raw_state).held == 0

    async def run_due(self, groups: Iterable[str]) -> None:
        """Evaluate each of ``groups`` that is due (see :meth:`_due`)."""
        now = time.time()
        held = set(groups)
        for group in list(self._last_evaluated):
            if group not in held:
                del self._last_evaluated[group]
        self._changed &= held
        for group in sorted(held):
            if self._due(group, now):
                self._last_evaluated[group] = now
                self._changed.discard(group)
                await self.evaluate_group(group, now)

    async def evaluate_group(self, group: str, now: float) -> None:
        """Evaluate one group, store its trigger state and publish a recommendation if it triggers."""
        snapshot = self.snapshot(group, now)
        if snapshot is None:
            return
        raw_state = self._topology.evaluation_state.get(group)
        state = EvaluationState.model_validate_json(raw_state) if raw_state is not None else None
        with self._metrics.evaluation_seconds.time():
            new_state, recommendation = evaluate(snapshot, state, self._policy, now)
        self._metrics.evaluations.inc()
        if new_state != state:
            self._writer.set(self._topology.evaluation_state, group, new_state.model_dump_json().encode())
            await self._writer.flush()  # the state a recommendation follows from is durable first
        if recommendation is not None:
            self._metrics.recommendations.inc()
            log.info("recommendation %s for group %s", recommendation.id, group)
            await self._topology.recommendations.send(
                key=group.encode(), value=recommendation.model_dump_json().encode()
            )
