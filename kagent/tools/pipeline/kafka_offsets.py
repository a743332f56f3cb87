"""Where a Kafka read starts and ends: offset specifications, their resolution, offset ranges.

Pure: no I/O. The options follow Spark's own Kafka source where they overlap:

- ``startingOffsets``: ``earliest`` (the default here), ``latest``, or JSON
  ``{"topic": {"0": 23, "1": -2}}`` where -2 means earliest and -1 latest;
  partitions the JSON leaves out start at earliest.
- ``endingOffsets`` (batch only): ``latest`` (the default) or JSON as above;
  partitions left out end at latest.
- ``startingTimestamp`` / ``endingTimestamp``: milliseconds since the epoch;
  each partition starts (ends) at the first offset whose record timestamp is
  at or after it, or at latest when there is none. A timestamp wins over the
  offsets option of the same side.

An offset here is always the offset of the *next* record: a range
``[start, end)`` holds the records with ``start <= offset < end``. Streaming
offsets travel through Spark's checkpoints as ``{"topic": {"partition":
offset}}`` (JSON object keys are strings).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from aiokafka.structs import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "Bounds",
    "OffsetRange",
    "OffsetSpec",
    "SourceOptionError",
    "from_checkpoint",
    "parse_offsets",
    "ranges",
    "resolve",
    "to_checkpoint",
]

EARLIEST = -2
"""In a JSON offsets option: the partition's earliest offset (Spark's convention)."""
LATEST = -1
"""In a JSON offsets option: the partition's latest offset (Spark's convention)."""

OffsetSpec: TypeAlias = Literal["earliest", "latest"] | Mapping[TopicPartition, int]
"""Where to start or end on every partition: a bound for all, or an offset (or -2/-1) per partition."""


class SourceOptionError(ValueError):
    """An option of the Kafka source is missing, does not parse, or names a partition that does not exist."""


@dataclass(frozen=True)
class Bounds:
    """A partition's earliest offset and its log end (the high watermark: the next offset to be written)."""

    earliest: int
    end: int


@dataclass(frozen=True)
class OffsetRange:
    """The records ``start <= offset < end`` of one topic partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def parse_offsets(text: str | None, option: str, default: Literal["earliest", "latest"]) -> OffsetSpec:
    """The :data:`OffsetSpec` of an offsets option's text (None: ``default``).

    Raises :class:`SourceOptionError` naming ``option`` for anything but
    ``earliest``, ``latest`` or a JSON object of topics to objects of
    partition numbers to integers >= -2.
    """
    if text is None:
        return default
    stripped = text.strip()
    if stripped in ("earliest", "latest"):
        return stripped  # type: ignore[return-value]
    try:
        parsed = json.loads(stripped)
    except json.JSONDecodeError:
        raise SourceOptionError(f"{option}: expected earliest, latest or a JSON object, not {text!r}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise SourceOptionError(f'{option}: expected {{"topic": {{"partition": offset}}}}, not {text!r}')
    spec: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or type(offset) is not int or offset < EARLIEST:
                raise SourceOptionError(f"{option}: bad offset {offset!r} for {topic}[{partition}]")
            spec[TopicPartition(topic, int(partition))] = offset
    return spec


def resolve(
    spec: OffsetSpec,
    bounds: Mapping[TopicPartition, Bounds],
    option: str,
    unnamed: int,
    at_time: Mapping[TopicPartition, int | None] | None = None,
) -> dict[TopicPartition, int]:
    """The concrete offset ``spec`` (or ``at_time``, when given) means on every partition of ``bounds``.

    A partition a per-partition ``spec`` does not name gets ``unnamed``
    (:data:`EARLIEST` or :data:`LATEST`). ``at_time`` is the answer of a timestamp lookup: per partition, the first
    offset at or after the timestamp, None for none (latest). Offsets are
    clamped into ``[earliest, end]``, as a consumer's reset would. Raises
    :class:`SourceOptionError` naming ``option`` if ``spec`` names a partition
    missing from ``bounds``.
    """
    if at_time is not None:
        return {tp: _clamp(at_time.get(tp), b) for tp, b in bounds.items()}
    if spec == "earliest":
        return {tp: b.earliest for tp, b in bounds.items()}
    if spec == "latest":
        return {tp: b.end for tp, b in bounds.items()}
    unknown = sorted(set(spec) - set(bounds))
    if unknown:
        raise SourceOptionError(f"{option}: no such partitions {', '.join(f'{t}[{p}]' for t, p in unknown)}")
    chosen = {tp: spec.get(tp, unnamed) for tp in bounds}
    return {
        tp: b.earliest if chosen[tp] == EARLIEST else _clamp(None if chosen[tp] == LATEST else chosen[tp], b)
        for tp, b in bounds.items()
    }


def _clamp(offset: int | None, bounds: Bounds) -> int:
    return bounds.end if offset is None else min(max(offset, bounds.earliest), bounds.end)


def ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """The non-empty ranges from ``start`` to ``end``, in topic then partition order.

    A partition missing from ``start`` (new since) starts at 0, the broker
    skips what retention removed; one missing from ``end`` is not read.
    """
    return [
        OffsetRange(tp.topic, tp.partition, start.get(tp, 0), stop)
        for tp, stop in sorted(end.items())
        if stop > start.get(tp, 0)
    ]


def to_checkpoint(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Offsets as Spark checkpoints them: ``{"topic": {"partition": offset}}``, sorted."""
    checkpoint: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        checkpoint.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return checkpoint


def from_checkpoint(checkpoint: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The inverse of :func:`to_checkpoint`."""
    return {
        TopicPartition(topic, int(partition)): offset
        for topic, partitions in checkpoint.items()
        for partition, offset in partitions.items()
    }
