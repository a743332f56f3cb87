"""Evaluation: each held group's table snapshot -> trigger state -> recommendations on the topic.

Every group is evaluated once per ``KAGENT_EVALUATE_INTERVAL``; a short tick
finds the groups that are due, so a group first seen, or one that changed
after a quiet spell, is evaluated within a tick rather than a whole interval.
The decision itself is :func:`kagent.evaluation.evaluate`, a pure function of
the snapshot and the group's trigger state, which lives in a changelog table
so hold counts, hysteresis and cooldown survive a failover.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from kagent.evaluation import EvaluationPolicy, EvaluationState, evaluate
from kagent.keys import partition_key
from kagent.settings import Settings
from kagent.snapshot import GroupSnapshot, PartitionLag
from kagent.topology import Topology
from kagent.worker.end_offsets import EndOffsetPoller
from kagent.worker.metrics import Metrics

__all__ = ["Evaluator"]

log = logging.getLogger(__name__)


class Evaluator:
    """Evaluates the held groups at their cadence and publishes what triggers."""

    def __init__(self, settings: Settings, topology: Topology, metrics: Metrics, poller: EndOffsetPoller) -> None:
        self._interval = settings.evaluate_interval
        self._policy = EvaluationPolicy.from_settings(settings)
        self._topology = topology
        self._metrics = metrics
        self._poller = poller
        self._last_evaluated: dict[str, float] = {}

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
        lag: dict = {}
        for topic, count in counts.items():
            for partition in range(count):
                raw = self._topology.partition_lag.get(partition_key(group, topic, partition))
                if raw is not None:
                    entry = PartitionLag.model_validate_json(raw)
                    lag[entry.topic_partition] = entry
        return GroupSnapshot(assignment=assignment, partition_counts=counts, lag=lag, taken_at=now)

    async def run_due(self, groups: Iterable[str]) -> None:
        """Evaluate each of ``groups`` whose last evaluation is an interval old or more."""
        now = time.time()
        held = set(groups)
        for group in list(self._last_evaluated):
            if group not in held:
                del self._last_evaluated[group]
        for group in sorted(held):
            if now - self._last_evaluated.get(group, float("-inf")) >= self._interval:
                self._last_evaluated[group] = now
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
            self._topology.evaluation_state[group] = new_state.model_dump_json().encode()
        if recommendation is not None:
            self._metrics.recommendations.inc()
            log.info("recommendation %s for group %s", recommendation.id, group)
            await self._topology.recommendations.send(
                key=group.encode(), value=recommendation.model_dump_json().encode()
            )
