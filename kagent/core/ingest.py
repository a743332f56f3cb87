"""A batch of raw ``__consumer_offsets`` records -> derived-event records per group, and failures.

Pure: no I/O, no Faust. The ``offsets-topic`` source calls :func:`ingest` on
each batch it fetches and sends what it returns.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from kagent.core.consumer_offsets import DecodeError, decode
from kagent.core.events import DerivedEvent, DerivedEvents, by_group, derive

__all__ = ["Ingested", "RawRecord", "ingest"]


class RawRecord(Protocol):
    """What :func:`ingest` reads of a fetched record (aiokafka's ``ConsumerRecord`` has it)."""

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


R = TypeVar("R", bound=RawRecord)


@dataclass(frozen=True)
class Ingested(Generic[R]):
    """What one batch of records yields."""

    events: list[DerivedEvents] = field(default_factory=list)
    """One record of the derived-events topic per group that has events, in order."""
    malformed: list[tuple[R, DecodeError]] = field(default_factory=list)
    """The records that failed to decode, each with why, in order."""


def ingest(records: Iterable[R], skip_groups: Collection[str]) -> Ingested[R]:
    """Decode and derive ``records`` (each group's in log order, as one partition
    of ``__consumer_offsets`` holds them), dropping the events of ``skip_groups``
    (kagent's own). A record without a key is malformed; nothing raises."""
    derived: list[DerivedEvent] = []
    malformed: list[tuple[R, DecodeError]] = []
    for record in records:
        key = record.key
        try:
            if key is None:
                raise DecodeError(None, "key", None, 0, "the record has no key")
            events = derive(decode(key, record.value))
        except DecodeError as exc:
            malformed.append((record, exc))
            continue
        derived.extend(event for event in events if event.group not in skip_groups)
    return Ingested(by_group(derived), malformed)
