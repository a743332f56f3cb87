"""What the stages tell each other about group state, and how they read it.

The storage stage (:mod:`kagent.worker.storage`) is the one owner of group
state: assignments, committed offsets, KIP-848 group states, lag per
group-partition and the end offsets and partition counts behind it. Other
stages read it only through :class:`GroupStateReader`, learn of changes from
:class:`GroupChanged` notices on a :class:`~kagent.worker.channel.Channel`,
and hand it end offsets as :class:`EndOffsetsPolled` on another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from aiokafka.structs import TopicPartition

from kagent.core.events import GroupAssigned
from kagent.core.group_health import GroupHealth
from kagent.core.incidents import Incident
from kagent.core.snapshot import GroupSnapshot
from kagent.core.throughput import PartitionThroughput
from kagent.worker.list_offsets import Reason

__all__ = ["EndOffsetsPolled", "GroupChange", "GroupChanged", "GroupStateReader", "OpenIncidentsReader"]


class GroupChange(str, Enum):
    """What changed in a group's state."""

    COMMITTED = "committed"
    """A committed offset (and so the group's lag on that partition)."""
    ASSIGNED = "assigned"
    """The assignment: a new generation, members or partitions."""
    DELETED = "deleted"
    """The group is gone: its state was dropped."""
    END_OFFSETS = "end-offsets"
    """A partition it reads moved: its log-end or log-start offset at a poll differs from the previous
    poll's (its lag changed, though nothing of the group's own did)."""


@dataclass(frozen=True)
class GroupChanged:
    """Notice from storage that one held group's state changed."""

    group: str
    change: GroupChange


@dataclass(frozen=True)
class EndOffsetsPolled:
    """One ListOffsets round's answers, from the end-offsets stage to storage: one a poll, whatever it
    answered (storage's per-poll work hangs on it). Every partition asked is in :attr:`log_end` (and
    :attr:`log_start`) or in :attr:`unavailable`."""

    polled_at: float
    """Seconds since the epoch when the answers came."""
    log_start: Mapping[TopicPartition, int]
    log_end: Mapping[TopicPartition, int]
    """Partitions that answered: their log-start and log-end offsets."""
    partition_counts: Mapping[str, int]
    """Partition count of each topic asked that the cluster's metadata knows."""
    unavailable: Mapping[TopicPartition, Reason] = field(default_factory=dict)
    """Partitions asked for that got no answer -> why (every partition asked when no broker answered)."""


class GroupStateReader(Protocol):
    """Read access to the group state of the groups this worker holds."""

    def held_groups(self) -> list[str]:
        """The groups with an assignment whose partition this worker holds, sorted."""
        ...

    def holding(self) -> Callable[[str], bool]:
        """Whether this worker holds a group now: one look at what it holds, asked of many groups."""
        ...

    def held_partitions(self) -> frozenset[int]:
        """The derived-events partitions this worker holds now: while they stay the same, the held groups
        change only as groups are assigned or deleted (which storage's notices say)."""
        ...

    def assignment(self, group: str) -> GroupAssigned | None:
        """The group's current assignment; None if it has none here."""
        ...

    def snapshot(self, group: str, now: float) -> GroupSnapshot | None:
        """The group's assignment, partition counts and lag at ``now``; None without an assignment."""
        ...

    def health(self, snapshot: GroupSnapshot, now: float) -> GroupHealth:
        """The status at ``now`` of the group of ``snapshot`` (taken at ``now``) by Burrow's rules
        (:mod:`kagent.core.group_health`), judged on the commit window of each partition it has one
        on; OK with nothing judged for a group without members."""
        ...

    def status_holds_until(self, snapshot: GroupSnapshot) -> float:
        """Until when :meth:`health` of the group of ``snapshot`` says what it says at the snapshot's
        time unless the group's state changes (a notice says so): the earliest time at which one of its
        partitions could turn STOP (:func:`kagent.core.group_health.stop_possible_from`); infinity
        when none could."""
        ...

    def throughput(self, snapshot: GroupSnapshot, window: float) -> dict[TopicPartition, PartitionThroughput]:
        """Every partition the group of ``snapshot`` reads: its production rate and the group's consumption
        on it over the ``window`` seconds before the snapshot (:mod:`kagent.core.throughput`), counting only
        the commits since the group's current generation began (earlier ones were other members')."""
        ...

    def partitions_read(self) -> list[TopicPartition]:
        """Every partition the held groups subscribe to or are assigned, sorted: what to poll end offsets of;
        less those of topics gone from the cluster for a while, but at their re-checks
        (:mod:`kagent.worker.missing_topics`)."""
        ...


class OpenIncidentsReader(Protocol):
    """Read access to the open incidents of the groups this worker holds (the evaluator keeps them)."""

    def open_incidents(self) -> list[Incident]:
        """Every open incident of the held groups, by group and then kind."""
        ...
