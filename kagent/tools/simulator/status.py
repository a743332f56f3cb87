"""What a running simulation reports to its caller, as it happens."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiokafka.structs import TopicPartition

__all__ = ["GroupRebalanced", "OffsetsCommitted", "SimulationEvent", "StatusCallback"]


@dataclass(frozen=True)
class GroupRebalanced:
    """Every member of `group` adopted its assignment of `generation`.

    `assignment` maps each member id to its partitions.
    """

    group: str
    generation: int
    protocol: str
    leader: str
    assignment: Mapping[str, tuple[TopicPartition, ...]]


@dataclass(frozen=True)
class OffsetsCommitted:
    """The broker accepted a commit of `offsets` by `member_id` of `group` in
    `generation`; when the simulator publishes coordinator records, they are
    on `__consumer_offsets` by the time this is reported."""

    group: str
    member_id: str
    generation: int
    offsets: Mapping[TopicPartition, int]


SimulationEvent = GroupRebalanced | OffsetsCommitted
#: Called synchronously, on the event loop, for each event; it must not block.
StatusCallback = Callable[[SimulationEvent], None]
