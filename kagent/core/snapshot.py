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

__all__ = ["GroupSnapshot", "LagFlag", "PartitionLag"]


class LagFlag(str, Enum):
    """Why a partition's lag figure deserves less trust than usual."""

    NO_COMMIT = "no-commit"
    """The group has committed nothing on the partition; the lag follows ``auto.offset.reset``."""
    STALE_END_OFFSET = "stale-end-offset"
    """The log-end offset is older than a few polls: the partition's leader did not answer."""
    DATA_LOSS = "data-loss"
    """The committed offset is below the log-start offset: retention deleted records the group never read."""


class PartitionLag(BaseModel):
    """The lag of one group on one partition (value of the partition-lag table)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    topic: str
    partition: int = Field(ge=0)
    committed: int | None
    """The group's committed offset; None when it has none."""
    log_start: int
    """The partition's earliest offset at the last poll."""
    log_end: int
    """The partition's latest offset (high watermark) at the last poll."""
    offset_lag: int = Field(ge=0)
    """Records between the committed offset and the log end (KAFKA-5337's rule, see ``kagent.core.lag``)."""
    time_lag: float | None
    """Seconds since the log end was at the committed offset; None when the history cannot tell."""
    flags: tuple[LagFlag, ...] = ()
    polled_at: float
    """Seconds since the epoch of the end-offset poll these figures come from."""

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class GroupSnapshot:
    """One group's assignment and lag at ``taken_at``: the whole input of its evaluation."""

    assignment: GroupAssigned
    """The group's current generation, assignor and members with their partitions."""
    partition_counts: Mapping[str, int]
    """Partition count of every topic the group subscribes to."""
    lag: Mapping[TopicPartition, PartitionLag]
    """Lag of every partition the group reads that kagent has figures for."""
    taken_at: float
    """Seconds since the epoch."""

    @property
    def group(self) -> str:
        return self.assignment.group
