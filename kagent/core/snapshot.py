"""What evaluation reads: each partition's lag, and a group's state at one moment.

:class:`PartitionLag` is the value of the partition-lag changelog table;
:class:`GroupSnapshot` is what the worker assembles from its tables for one
group before handing it to the pure evaluation. Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.events import GroupAssigned

__all__ = ["UNANSWERED_FLAGS", "UNDESCRIBED_GENERATION", "GroupSnapshot", "LagFlag", "PartitionLag"]


class LagFlag(str, Enum):
    """Why a partition's lag figure is unknown, an estimate, or deserves less trust than usual."""

    NO_COMMIT = "no-commit"
    """The group has committed nothing on the partition. With records in the log its offset lag is
    unknown, and ``estimated_lag`` says where ``auto.offset.reset`` would start it; with none, nothing
    is left to read whatever it does (offset lag 0)."""
    STALE_END_OFFSET = "stale-end-offset"
    """The latest answer for the partition's end offsets is older than a few polls: its lag is unknown."""
    DATA_LOSS = "data-loss"
    """The committed offset is below the log-start offset: retention deleted records the group never read."""
    NOT_POLLED = "not-polled"
    """This worker has had no answer for the partition's end offsets yet (it just started or took the
    group over): its lag is unknown."""
    UNKNOWN_PARTITION = "unknown-partition"
    """The latest poll found no such partition in the cluster (its topic deleted, or a partition number
    beyond the topic's count): its lag is unknown."""
    NO_LEADER = "no-leader"
    """The latest poll found the partition without a leader: its lag is unknown."""
    REQUEST_FAILED = "request-failed"
    """The latest poll's request to the partition's leader failed or timed out: its lag is unknown."""
    ERROR_CODE = "error-code"
    """The partition's leader answered the latest poll with another error: its lag is unknown."""


UNANSWERED_FLAGS = frozenset(
    {
        LagFlag.NOT_POLLED,
        LagFlag.UNKNOWN_PARTITION,
        LagFlag.NO_LEADER,
        LagFlag.REQUEST_FAILED,
        LagFlag.ERROR_CODE,
    }
)
"""The flags that say the latest poll had no end offsets for the partition."""


class PartitionLag(BaseModel):
    """The lag of one group on one partition (value of the partition-lag table).

    A figure kagent does not know is None, never 0: ``offset_lag`` is None unless it was measured (the
    partition's end offsets answered at the latest poll, that poll fresh, and a committed offset to
    measure from, or no record in the log to read); ``flags`` say why it is unknown.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    topic: str
    partition: int = Field(ge=0)
    committed: int | None
    """The group's committed offset; None when it has none."""
    log_start: int | None
    """The partition's earliest offset at the last poll that answered for it; None before any did."""
    log_end: int | None
    """The partition's latest offset (high watermark) as far as known: the last poll's answer, or the
    committed offset when a commit made after that poll is beyond it; None before any poll answered."""
    offset_lag: int | None = Field(ge=0)
    """Records between the committed offset and the log end (KAFKA-5337's rule, see ``kagent.core.lag``);
    None when not measured (see ``flags``)."""
    estimated_lag: int | None = Field(default=None, ge=0)
    """Without a committed offset, the records the group would have to read if it started where its
    ``auto.offset.reset`` puts it: an estimate, never counted as measured lag; None otherwise."""
    time_lag: float | None
    """Seconds since the log end was at the committed offset; None when not measured or the history
    cannot tell."""
    flags: tuple[LagFlag, ...] = ()
    polled_at: float | None
    """Seconds since the epoch of the last end-offset poll that answered for the partition; None before any did."""

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def measured(self) -> bool:
        """Whether the offset lag was measured."""
        return self.offset_lag is not None


UNDESCRIBED_GENERATION = -1
"""The generation of the empty assignment a snapshot holds for a group with committed offsets whose
assignment kagent has never been told (a group that only commits, or one the cluster does not describe)."""


@dataclass(frozen=True)
class GroupSnapshot:
    """One group's assignment and lag at ``taken_at``: the whole input of its evaluation."""

    assignment: GroupAssigned
    """The group's current generation, assignor and members with their partitions; for a group not
    :attr:`described`, an empty one of generation :data:`UNDESCRIBED_GENERATION`."""
    partition_counts: Mapping[str, int]
    """Partition count of every topic the group subscribes to."""
    lag: Mapping[TopicPartition, PartitionLag]
    """Every partition the group reads: those of the topics its members subscribe to (as far as their
    partition counts are known), those assigned to a member, and those it has a committed offset on; each
    with its figures, measured or not (:attr:`PartitionLag.measured`)."""
    taken_at: float
    """Seconds since the epoch."""
    described: bool = True
    """Whether kagent knows the group's assignment; False for a group it knows only committed offsets of."""

    @property
    def group(self) -> str:
        return self.assignment.group
