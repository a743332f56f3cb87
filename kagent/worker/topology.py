"""kagent's topics and changelog tables, declared on a Faust app.

Every group table is keyed by group (or by a :func:`kagent.core.table_keys.partition_key`
holding the group) and its changelog partition is the group's partition of
the derived-events topic, so one worker holds all of a group's state and a
worker that takes the group over restores all of it. Values are the JSON of
the records in ``tables/``: the changelog topics carry exactly that contract.
One more table, ``applied-offsets``, is keyed by a derived-events partition
(its number, as text) and lives on that partition: how far storage has
applied it, restored with the state it describes.

The ``partition-lag`` table is kept in its topic only
(:class:`kagent.worker.changelog.PublishedTable`): lag is recomputed from the
committed offsets and the polled end offsets whenever it is read, so the
topic is a history for subscribers (the pipeline's backtests), not state to
restore. It keeps the name and records of the changelog it used to be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import TopicT

from kagent.core.table_keys import group_of_partition_key, partition_of_group
from kagent.settings import Settings
from kagent.worker.changelog import PublishedTable
from kagent.worker.changelog_restore import BulkRestoredStore
from kagent.worker.group_index import IndexedStore, PartitionIndex

__all__ = ["GroupPartitionedTable", "HeldGroups", "Topology", "declare"]

RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


class GroupPartitionedTable(faust.Table):  # type: ignore[misc]
    """A table whose changelog partition is always its key's group's partition (or, given
    ``partition_of``, the partition that function names for the key).

    Faust otherwise takes the partition of the event being processed and
    refuses writes outside stream iteration; kagent's timers (end-offset poll,
    evaluation) write lag and evaluation state, and those must land where the
    group's stream does.
    """

    def __init__(
        self,
        app: faust.App,
        *,
        group_of: Callable[[str], str] | None = None,
        partition_of: Callable[[str], int] | None = None,
        index: PartitionIndex | None = None,
        **kwargs: Any,
    ) -> None:
        """``index``, for a table keyed by :func:`~kagent.core.table_keys.partition_key`, is kept in step
        with its keys (:class:`~kagent.worker.group_index.IndexedStore`)."""
        if (group_of is None) == (partition_of is None):
            raise TypeError("give exactly one of group_of and partition_of")
        self._group_of = group_of
        self._partition_of = partition_of
        self.partition_index = index
        super().__init__(app, **kwargs)

    def _new_store(self) -> BulkRestoredStore:
        """Faust's in-memory store, taking records restored in bulk (:mod:`kagent.worker.changelog_restore`),
        keeping :attr:`partition_index` in step when there is one."""
        extra = {} if self.partition_index is None else {"index": self.partition_index}
        return (BulkRestoredStore if self.partition_index is None else IndexedStore)(
            "memory://",
            self.app,
            self,
            table_name=self.name,
            key_type=self.key_type,
            key_serializer=self.key_serializer,
            value_serializer=self.value_serializer,
            value_type=self.value_type,
            loop=self.loop,
            options=self.options,
            **extra,
        )

    @property
    def stored(self) -> Mapping[Any, Any]:
        """The store's own dict of what the table holds now, for reads on the hot path: ``table.get``
        goes through Faust's per-read sensor hooks and three mapping layers (1.4 µs a read in the profile
        of a worker ingesting commits).
        kagent writes through :class:`~kagent.worker.changelog.ChangelogWriter`, into this same
        store; the dict stays the store's for its life (cleared, never replaced)."""
        return self.data.data  # type: ignore[no-any-return]

    def partition_for_key(self, key: Any) -> int:
        if self._partition_of is not None:
            return self._partition_of(key)
        assert self._group_of is not None
        # The table's own partition count (given at declaration): Faust's settings lookup costs µs a write.
        return partition_of_group(self._group_of(key), self.partitions or self.app.conf.topic_partitions)


def _identity(group: str) -> str:
    return group


@dataclass(frozen=True)
class Topology:
    """The topics and tables of one kagent app."""

    consumer_offsets: TopicT
    """``__consumer_offsets``: raw coordinator records (source ``offsets-topic``)."""
    derived_events: TopicT
    """Derived events as JSON, each group's on its partition (packed records, no key; or one group's, keyed
    by it)."""
    recommendations: TopicT
    """Rebalance recommendations as JSON, keyed by group."""
    dead_letters: TopicT
    """Records that failed to decode, with their raw bytes, keyed by source topic-partition."""
    incidents: TopicT
    """Incident transitions (open, update, resolve) as JSON, keyed by group."""
    assignments: GroupPartitionedTable
    """group -> ``GroupAssigned`` JSON: the group's current generation and members."""
    committed: GroupPartitionedTable
    """partition key -> ``CommittedOffset`` JSON: the group's committed offset there and its last commits,
    for its health check (:mod:`kagent.core.committed_offset`)."""
    partition_lag: PublishedTable
    """partition key -> ``PartitionLag`` JSON, in ``<app id>-partition-lag-changelog`` only."""
    evaluation_state: GroupPartitionedTable
    """group -> ``EvaluationState`` JSON: hold count, arming and cooldown of the trigger."""
    consumer_group_state: GroupPartitionedTable
    """group -> ``ConsumerGroupState`` JSON: a KIP-848 group's epoch, topics and members, folded from its records."""
    incidents_state: GroupPartitionedTable
    """group -> ``IncidentsState`` JSON: the group's open incidents and the transitions still to send."""
    recent_recommendations: GroupPartitionedTable
    """group -> ``RecentRecommendations`` JSON: the group's latest recommendations, newest first."""
    applied_offsets: GroupPartitionedTable
    """derived-events partition (decimal text) -> the offset after the last record storage applied
    from it (decimal text), on that partition."""

    def tables(self) -> list[GroupPartitionedTable]:
        """Every table, in declaration order."""
        return [
            self.assignments,
            self.committed,
            self.evaluation_state,
            self.consumer_group_state,
            self.incidents_state,
            self.recent_recommendations,
            self.applied_offsets,
        ]


def declare(app: faust.App, settings: Settings) -> Topology:
    """Declare kagent's topics and tables on ``app``."""
    prefix = settings.app_id
    own = {"partitions": settings.topic_partitions, "internal": True, **RAW}

    def table(
        name: str,
        group_of: Callable[[str], str] | None,
        help: str,
        partition_of: Callable[[str], int] | None = None,
        index: PartitionIndex | None = None,
    ) -> GroupPartitionedTable:
        created = GroupPartitionedTable(
            app,
            group_of=group_of,
            partition_of=partition_of,
            index=index,
            name=name,
            beacon=app.tables.beacon,
            partitions=settings.topic_partitions,
            help=help,
            key_type=str,  # JSON-encoded in the changelog
            value_type=bytes,  # raw: the values are already the JSON of the records in tables/
        )
        app.tables.add(created)
        return created

    return Topology(
        consumer_offsets=app.topic("__consumer_offsets", **RAW),
        derived_events=app.topic(f"{prefix}-derived-events", **own),
        recommendations=app.topic(f"{prefix}-recommendations", **own),
        dead_letters=app.topic(f"{prefix}-dead-letters", **own),
        incidents=app.topic(f"{prefix}-incidents", **own),
        assignments=table("assignments", _identity, "Current assignment per group"),
        committed=table(
            "committed-offsets",
            group_of_partition_key,
            "Committed offset and recent commits per group-partition",
            index=PartitionIndex(),
        ),
        partition_lag=PublishedTable(
            app.topic(f"{prefix}-partition-lag-changelog", compacting=True, **own),
            settings.topic_partitions,
            group_of_partition_key,
        ),
        evaluation_state=table("evaluation-state", _identity, "Trigger state per group"),
        consumer_group_state=table("consumer-group-state", _identity, "KIP-848 consumer group state per group"),
        incidents_state=table("incidents", _identity, "Open incidents per group"),
        recent_recommendations=table(
            "recent-recommendations", _identity, "Latest recommendations per group, newest first"
        ),
        applied_offsets=table("applied-offsets", None, "Derived-events offset storage applied to, per partition", int),
    )


class HeldGroups:
    """Which groups this worker holds: those whose derived-events partition is assigned to it as active.

    Faust's assignor knows the worker's active partitions; this is the one
    place kagent asks it.
    """

    def __init__(self, app: faust.App, derived_events: TopicT, partitions: int) -> None:
        self._app = app
        self._topic = derived_events.get_topic_name()
        self._partitions = partitions

    def _active(self) -> set[int]:
        return {tp.partition for tp in self._app.assignor.assigned_actives() if tp.topic == self._topic}

    def partitions(self) -> frozenset[int]:
        """The derived-events partitions this worker holds as active now (which groups it holds)."""
        return frozenset(self._active())

    def holds(self, group: str) -> bool:
        """Whether this worker holds ``group`` now."""
        return partition_of_group(group, self._partitions) in self._active()

    def holding(self) -> Callable[[str], bool]:
        """Whether this worker holds a group, as of now: one look at the assignor for many groups."""
        active, partitions = self._active(), self._partitions
        return lambda group: partition_of_group(group, partitions) in active

    def among(self, groups: Iterable[str]) -> list[str]:
        """The ones of ``groups`` this worker holds now, sorted."""
        active = self._active()
        return sorted(group for group in groups if partition_of_group(group, self._partitions) in active)
