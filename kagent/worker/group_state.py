"""What the stages tell each other about group state, and how they read it.

The storage stage (:mod:`kagent.worker.storage`) is the one owner of group
state: assignments, committed offsets, KIP-848 group states, lag per
group-partition and the end offsets and partition counts behind it. Other
stages read it only through :class:`GroupStateReader`, learn of changes from
:class:`GroupChanged` notices on a :class:`~kagent.worker.channel.Channel`,
and hand it end offsets as :class:`EndOffsetsPolled` on another.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import filterfalse
from typing import NamedTuple, Protocol

from aiokafka.structs import TopicPartition

from kagent.core.consumer_group_state import ConsumerGroupState
from kagent.core.group_health import GroupHealth
from kagent.core.incidents import Incident
from kagent.core.lag_series import GroupLag, PartitionOffsets
from kagent.core.snapshot import GroupSnapshot
from kagent.core.throughput import PartitionThroughput
from kagent.worker.list_offsets import Reason

__all__ = [
    "HELD_RUN",
    "EndOffsetsPolled",
    "GroupChange",
    "GroupChanged",
    "GroupStateReader",
    "LagClock",
    "OpenIncidentsReader",
    "held_runs",
]

HELD_RUN = 1024
"""Stored groups looked at, at most, for one run of :meth:`GroupStateReader.held_group_runs` (the look asks
which worker holds each group): 0.8-2.1 ms a run at 50,000 groups with a benchmark busy beside it. Produced
one group at a time, the groups with commits and no assignment came after a look at every group with both,
which no caller could break off: 5.6-7.2 ms at once in the same measurement, more on a worker's large heap."""


def held_runs(
    assigned: Sequence[str], committed: Sequence[str], holds: Callable[[str], bool], run: int = HELD_RUN
) -> Iterator[list[str]]:
    """The groups of ``assigned`` (those with an assignment stored), then those of ``committed`` (those with
    committed offsets stored) not among them, that ``holds``: each once, in runs, a run from at most
    ``run`` of either looked at (:meth:`GroupStateReader.held_group_runs`; a run may be empty). Each run
    is filtered in C, no Python step a group but ``holds``."""
    seen: set[str] = set()
    for start in range(0, len(assigned), run):
        looked_at = assigned[start : start + run]
        seen.update(looked_at)
        yield list(filter(holds, looked_at))
    for start in range(0, len(committed), run):
        yield list(filter(holds, filterfalse(seen.__contains__, committed[start : start + run])))


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
    at: float
    """Seconds since the epoch when the change was durable (the flush that wrote it ended)."""


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


class LagClock(NamedTuple):
    """When the figures the metrics export are taken (:meth:`GroupStateReader.group_lag`)."""

    at: float
    """The latest end-offset poll's time; now, once that is older than the end offsets' staleness bound
    (the figures then read unknown) or before any poll."""
    polls: int
    """Polls taken: the figures of a group with lag (its time lag) change with each."""
    stale: bool
    """Whether :attr:`at` is now because the latest poll is stale (or there was none)."""


class GroupStateReader(Protocol):
    """Read access to the group state of the groups this worker holds."""

    def held_groups(self) -> list[str]:
        """The groups with an assignment whose partition this worker holds, sorted."""
        ...

    def held_group_runs(self) -> Iterator[list[str]]:
        """The groups :meth:`held_groups` lists, in no particular order, in runs produced as they are asked
        for: for a caller that goes over all of them a slice of the event loop at a time (at 50,000 groups,
        listing and sorting them at once takes tens of ms). Each run comes of at most :data:`HELD_RUN` stored
        groups looked at, so a caller that may let the loop go between runs (and between the groups of one)
        never waits on more than one run's look, however few of the groups looked at this worker holds (a
        run may be empty). Taken from what is stored when it is called; a group whose worker changes
        meanwhile is left out from then."""
        ...

    def holding(self) -> Callable[[str], bool]:
        """Whether this worker holds a group now: one look at what it holds, asked of many groups."""
        ...

    def held_partitions(self) -> frozenset[int]:
        """The derived-events partitions this worker holds now: while they stay the same, the held groups
        change only as groups are assigned or deleted (which storage's notices say)."""
        ...

    def snapshot(self, group: str, now: float) -> GroupSnapshot | None:
        """The group's assignment, partition counts and lag at ``now``; None without an assignment."""
        ...

    def consumer_group(self, group: str) -> ConsumerGroupState | None:
        """A KIP-848 group's state (epochs, assignor, members' epochs, racks and subscriptions); None for
        a classic group, or one whose coordinator has not described it here."""
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

    def lag_clock(self, now: float) -> LagClock:
        """When the figures :meth:`group_lag` gives at ``now`` are taken: kafka-lag-exporter's rule, lag
        and time lag as of the latest poll, not interpolated to each reader's clock."""
        ...

    def lag_version(self, group: str) -> Hashable:
        """Changes whenever :meth:`group_lag` of ``group`` may give other figures at the same
        :class:`LagClock`: a commit, an assignment, a deletion, a poll that moved a partition it reads
        (or answered for it again, or no longer), a partition count that changed."""
        ...

    def group_lag(self, group: str, clock: LagClock) -> GroupLag | None:
        """``group``'s members, partition counts and plain lag figures at ``clock.at`` (every partition it
        reads, as :meth:`snapshot`'s); None for a group with neither an assignment nor commits."""
        ...

    def partition_offsets(self, partitions: Iterable[TopicPartition], clock: LagClock) -> list[PartitionOffsets]:
        """The log offsets of those of ``partitions`` whose latest answer is fresh at ``clock.at``, in the
        order given."""
        ...

    async def partitions_read(self) -> list[TopicPartition]:
        """Every partition the held groups subscribe to or are assigned, sorted: what to poll end offsets of;
        less those of topics gone from the cluster for a while, but at their re-checks
        (:mod:`kagent.worker.missing_topics`). Gathered in slices of the event loop: at thousands of
        groups it takes tens of milliseconds."""
        ...


class OpenIncidentsReader(Protocol):
    """Read access to the open incidents of the groups this worker holds (the evaluator keeps them)."""

    def open_incidents(self) -> list[Incident]:
        """Every open incident of the held groups, by group and then kind."""
        ...
