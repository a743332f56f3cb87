"""A batch of raw ``__consumer_offsets`` records -> derived-event records per group, and failures.

Pure: no I/O, no Faust. The ``offsets-topic`` source calls :func:`ingest` on
each batch it fetches, sends what it returns, and sends each malformed record
to the dead-letter topic with its reason.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeAlias, TypeVar

from pydantic import ValidationError

from kagent.core.assigned_json import AssignedJson, assigned_json, plain_assigned
from kagent.core.consumer_offsets import DecodeError, GroupMetadata, OffsetCommit, Record, decode
from kagent.core.events import CommitRun, DerivedEvent, DerivedEvents, derive, grouped_events
from kagent.core.lag_twins import twin_of
from kagent.core.record_checks import RecordRejected, check, checked_commit

__all__ = ["Failure", "Ingested", "RawRecord", "checked_events", "ingest"]


class RawRecord(Protocol):
    """What :func:`ingest` reads of a fetched record (aiokafka's ``ConsumerRecord`` has it)."""

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


R = TypeVar("R", bound=RawRecord)

Failure: TypeAlias = DecodeError | RecordRejected
"""Why a record is malformed: where decoding stopped (:class:`DecodeError`), or the rule of
:mod:`kagent.core.record_checks` it broke with the field and value (:class:`RecordRejected`).
``str()`` of either is the reason a dead letter carries."""


@dataclass(frozen=True)
class Ingested(Generic[R]):
    """What one batch of records yields."""

    events: list[DerivedEvents] = field(default_factory=list)
    """One record of the derived-events topic per group that has events, in order; offset commits in
    their compact form: a group's consecutive commits (no other event of the group between them) on a
    partition as one :data:`~kagent.core.events.CommitRun`, where its first commit was."""
    malformed: list[tuple[R, Failure]] = field(default_factory=list)
    """The records that failed to decode, or decoded but broke a rule or could not be derived,
    each with why, in order."""


def _ingest(records: Iterable[R], skip_groups: Collection[str]) -> Ingested[R]:
    """Decode, check (:func:`kagent.core.record_checks.check`) and derive ``records`` (each
    group's in log order, as one partition of ``__consumer_offsets`` holds them), dropping the
    events of ``skip_groups`` (kagent's own).

    Every record is either derived (possibly into no events) or returned as malformed with
    why: a record without a key, bytes that do not decode, a record that breaks a rule, and a
    record whose events cannot be built for any other reason (a missing rule; the reason names
    what failed). Never raises, whatever the records hold.

    The source's step for every record it reads: compiled where built (``_events_twins.pyx``, which
    reads a plainly valid offset commit in place and gives every other record to
    :func:`_ingest_one`; ``tests/unit/test_events_twins.py`` holds it to returning exactly what this
    returns).
    """
    grouped: dict[str, list[DerivedEvent | CommitRun | AssignedJson]] = {}
    runs: dict[str, dict[tuple[str, int], CommitRun]] = {}
    malformed: list[tuple[R, Failure]] = []
    for record in records:
        _ingest_one(record, skip_groups, grouped, runs, malformed)
    return _finished(grouped, malformed)


ingest = twin_of(_ingest, "kagent.core._events_twins")


def _ingest_one(
    record: R,
    skip_groups: Collection[str],
    grouped: dict[str, list[DerivedEvent | CommitRun | AssignedJson]],
    runs: dict[str, dict[tuple[str, int], CommitRun]],
    malformed: list[tuple[R, Failure]],
) -> None:
    """Add ``record`` to a batch of :func:`ingest`: its events to ``grouped`` (group -> its events so
    far), or it and why to ``malformed``. ``runs`` is each group's open runs: a commit extends its
    partition's run until the group's next other event."""
    key = record.key
    try:
        if key is None:
            raise DecodeError(None, "key", None, 0, "the record has no key")
        decoded = decode(key, record.value)
        if type(decoded) is OffsetCommit:  # nearly every record: a run's three fields, no model
            commit = checked_commit(decoded)  # group, topic, partition, offset, metadata, commit_timestamp, ...
            group = commit[0]
            if group in skip_groups:
                return
            open_runs = runs.get(group)
            if open_runs is None:
                open_runs = runs[group] = {}
            where = commit[1:3]
            run = open_runs.get(where)
            if run is None:
                open_runs[where] = run = [commit[1], commit[2], commit[3], commit[5], commit[7]]
                events = grouped.get(group)
                if events is None:
                    events = grouped[group] = []
                events.append(run)
            else:
                run += (commit[3], commit[5], commit[7])
            return
        derived = _derived(decoded)
    except (DecodeError, RecordRejected) as exc:
        malformed.append((record, _detached(exc)))
        return
    for event in derived:
        group = event["group"] if isinstance(event, dict) else event.group
        if group not in skip_groups:
            grouped.setdefault(group, []).append(event)
            runs.pop(group, None)  # the group's later commits come after it


def _finished(
    grouped: dict[str, list[DerivedEvent | CommitRun | AssignedJson]], malformed: list[tuple[R, Failure]]
) -> Ingested[R]:
    return Ingested(grouped_events(grouped), malformed)


def _detached(exc: Failure) -> Failure:
    """``exc`` without its traceback and the exceptions behind it: what a dead letter says of a record
    is ``str(exc)``, and a kept traceback's frames reach back to :func:`ingest`'s, whose list of
    failures holds ``exc``: a reference cycle that kept each batch with a malformed record (every record
    fetched, and what was derived of them) in memory until the garbage collector next ran."""
    exc.__traceback__ = None
    exc.__cause__ = exc.__context__ = None
    exc.__suppress_context__ = True
    return exc


def checked_events(record: Record) -> list[DerivedEvent]:
    """The events of a decoded ``record`` as the ``offsets-topic`` source derives them: checked by
    :func:`~kagent.core.record_checks.check` (without what a dropping rule removes), then
    :func:`~kagent.core.events.derive`. Raises :class:`RecordRejected` for a broken rule, and as the rule
    ``invalid-event`` for any failure to build the events. What the pipeline's backfill and the
    ``admin-api`` source hold their records to."""
    return _events(check(record), type(record).__name__)


def _derived(record: Record) -> list[DerivedEvent] | list[AssignedJson]:
    """The events of a checked ``record`` (:func:`~kagent.core.events.derive`; a classic group's
    assignment as its :data:`~kagent.core.assigned_json.AssignedJson` where that is plainly valid).
    Raises :class:`RecordRejected` for a broken rule, and as the rule ``invalid-event`` for any
    failure to build the events: the backstop of the rules, naming the event's field and value
    pydantic refused, or the exception."""
    checked = check(record)
    if type(checked) is GroupMetadata and checked.protocol_type == "consumer":
        event = assigned_json(checked)
        if plain_assigned(event):
            return [event]
    return _events(checked, type(record).__name__)


def _events(checked: Record, name: str) -> list[DerivedEvent]:
    """:func:`~kagent.core.events.derive` of a ``checked`` record (of type ``name``), any failure raised
    as :class:`RecordRejected` of the rule ``invalid-event``."""
    try:
        return derive(checked)
    except Exception as exc:  # the backstop: no record may stop the source
        if isinstance(exc, ValidationError):
            error = exc.errors(include_url=False)[0]
            where = ".".join((exc.title, *(str(part) for part in error["loc"])))
            raise RecordRejected(name, "invalid-event", where, error["input"], error["msg"]) from exc
        raise RecordRejected(name, "invalid-event", "record", exc, "deriving its events failed") from exc
