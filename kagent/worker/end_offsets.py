"""End offsets: poll ListOffsets for the topics this worker's groups read, and know their lag.

Every ``KAGENT_END_OFFSET_INTERVAL`` seconds the poller asks for the earliest
and latest offset of every partition of every topic the held groups
subscribe to, in one batched request each (aiokafka groups them by leader),
and records the latest in each partition's end-offset history (for time lag).
:meth:`EndOffsetPoller.partition_lag` computes a group's lag on a partition
from these and the committed-offsets table whenever it is asked: evaluation
always sees the latest figures.

The partition-lag table keeps those figures for subscribers and for a worker
that takes the group over: an entry is written when a commit changes it,
when it is new, when data loss appears, and otherwise at most every
``REFRESH_AFTER_POLLS`` polls, through the changelog writer (flushed at the
end of each poll, and by the storage agent for writes that commits cause).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from kagent.core.events import GroupAssigned, OffsetCommitted
from kagent.core.table_keys import partition_key
from kagent.settings import Settings
from kagent.core.snapshot import LagFlag, PartitionLag
from kagent.core.time_lag import EndOffsetHistory, partition_lag_record
from kagent.worker.topology import Topology
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.metrics import Metrics

__all__ = ["EndOffsetPoller"]

log = logging.getLogger(__name__)

STALE_AFTER_POLLS = 3
"""An end offset older than this many poll intervals is flagged stale."""

REFRESH_AFTER_POLLS = 12
"""A lag entry unchanged by commits is rewritten in the table at most this many polls apart."""


class EndOffsetPoller:
    """Log-start and log-end offsets of the partitions the held groups read, and their lag."""

    def __init__(
        self,
        settings: Settings,
        topology: Topology,
        writer: ChangelogWriter,
        metrics: Metrics,
        held_groups: Callable[[], Iterable[str]],
    ) -> None:
        self._settings = settings
        self._topology = topology
        self._writer = writer
        self._metrics = metrics
        self._held_groups = held_groups
        self._consumer: AIOKafkaConsumer | None = None
        self._log_start: dict[TopicPartition, int] = {}
        self._log_end: dict[TopicPartition, int] = {}
        self._polled_at: dict[TopicPartition, float] = {}
        self._history: dict[TopicPartition, EndOffsetHistory] = {}
        self._partition_counts: dict[str, int] = {}
        self._written: dict[tuple[str, TopicPartition], tuple[int | None, bool, float]] = {}
        """(group, partition) -> (committed offset, data loss, when) of the last table write here."""
        self._refresh_after = REFRESH_AFTER_POLLS * settings.end_offset_interval

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def _client(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._settings.bootstrap_servers,
                client_id=f"{self._settings.app_id}-end-offsets",
                enable_auto_commit=False,
            )
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each topic that a poll has seen."""
        return {topic: self._partition_counts[topic] for topic in topics if topic in self._partition_counts}

    def assignment(self, group: str) -> GroupAssigned | None:
        """The held group's current assignment, from the assignments table."""
        raw = self._topology.assignments.get(group)
        return GroupAssigned.model_validate_json(raw) if raw is not None else None

    def _group_partitions(self, assignment: GroupAssigned) -> list[TopicPartition]:
        topics = {topic for member in assignment.members for topic in member.topics}
        known = [TopicPartition(t, p) for t, count in self.partition_counts(topics).items() for p in range(count)]
        assigned = [ref.topic_partition for member in assignment.members for ref in member.partitions]
        return sorted(set(known) | set(assigned))

    async def poll(self) -> None:
        """One round: ListOffsets for every partition the held groups read, then their lag entries."""
        groups = {group: a for group in self._held_groups() if (a := self.assignment(group)) is not None}
        self._metrics.groups.set(len(groups))
        self._written = {key: value for key, value in self._written.items() if key[0] in groups}
        partitions = sorted({tp for a in groups.values() for tp in self._group_partitions(a)})
        if not partitions:
            return
        try:
            consumer = await self._client()
            log_start = await consumer.beginning_offsets(partitions)
            log_end = await consumer.end_offsets(partitions)
        except KafkaError as exc:
            self._metrics.end_offset_polls.labels("error").inc()
            log.warning("ListOffsets for %d partitions failed: %s", len(partitions), exc)
            return
        self._metrics.end_offset_polls.labels("ok").inc()
        now = time.time()
        for tp, end in log_end.items():
            self._log_end[tp] = end
            self._log_start[tp] = log_start.get(tp, 0)
            self._polled_at[tp] = now
            self._history[tp] = self._history.get(tp, EndOffsetHistory()).add(end, now)
        for topic in {tp.topic for tp in partitions}:
            known = consumer.partitions_for_topic(topic)
            if known:
                self._partition_counts[topic] = len(known)
        tracked = 0
        for group, assignment in groups.items():
            for tp in self._group_partitions(assignment):
                tracked += tp in self._log_end
                if self._due(group, tp, now):
                    self.refresh_partition(group, tp, now)
        self._metrics.group_partitions.set(tracked)
        await self._writer.flush()

    def _due(self, group: str, tp: TopicPartition, now: float) -> bool:
        """Whether a poll should rewrite this lag entry: never written here, data loss newly
        visible, or older than the refresh period. Commits rewrite it as they come."""
        written = self._written.get((group, tp))
        if written is None:
            return True
        committed, data_loss, written_at = written
        newly_lost = committed is not None and not data_loss and committed < self._log_start.get(tp, 0)
        return newly_lost or now - written_at >= self._refresh_after

    def refresh_group(self, group: str, assignment: GroupAssigned | None = None, now: float | None = None) -> None:
        """Rewrite all lag entries of ``group`` from the last polled end offsets."""
        assignment = assignment or self.assignment(group)
        if assignment is None:
            return
        now = time.time() if now is None else now
        for tp in self._group_partitions(assignment):
            self.refresh_partition(group, tp, now)

    def refresh_partition(self, group: str, tp: TopicPartition, now: float | None = None) -> None:
        """Rewrite the lag entry of ``group`` on ``tp`` in the table, if ``tp``'s end offsets were ever polled."""
        now = time.time() if now is None else now
        lag = self.partition_lag(group, tp, now)
        if lag is None:
            return
        key = partition_key(group, tp.topic, tp.partition)
        self._writer.set(self._topology.partition_lag, key, lag.model_dump_json().encode())
        self._written[group, tp] = (lag.committed, LagFlag.DATA_LOSS in lag.flags, now)

    def partition_lag(self, group: str, tp: TopicPartition, now: float) -> PartitionLag | None:
        """``group``'s lag on ``tp`` now, from its committed offset and the last polled end offsets.

        Before this worker has polled ``tp`` (just after taking the group over), the
        partition-lag table's entry, as the previous holder last wrote it; None if neither.
        """
        key = partition_key(group, tp.topic, tp.partition)
        if tp not in self._log_end:
            raw = self._topology.partition_lag.get(key)
            return PartitionLag.model_validate_json(raw) if raw is not None else None
        raw = self._topology.committed.get(key)
        committed = OffsetCommitted.model_validate_json(raw).offset if raw is not None else None
        return partition_lag_record(
            group=group,
            topic=tp.topic,
            partition=tp.partition,
            committed=committed,
            log_start=self._log_start[tp],
            log_end=self._log_end[tp],
            history=self._history[tp],
            now=now,
            polled_at=self._polled_at[tp],
            auto_offset_reset=self._settings.auto_offset_reset,
            stale_after=STALE_AFTER_POLLS * self._settings.end_offset_interval,
        )
