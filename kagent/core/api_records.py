"""The records kagent's HTTP API serves (``/api/...``), and how a page of groups is cut from every worker's.

Every worker answers for the whole cluster: it asks the worker holding a group
for that group, and every worker for lists (see :mod:`kagent.worker.cluster_api`).
These models are the contract of those answers; the OpenAPI description at
``/api/openapi.json`` is generated from them. Lags are in records (``*_lag``)
and seconds (``*_lag_seconds``); a member's ``lag`` and ``recommended_lag``
are in the worker's lag unit (``lag_unit``), the unit the evaluation and the
recommendations use.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import Any, Literal

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.evaluation import EvaluationState
from kagent.core.events import PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.incidents import Incident, IncidentKind, Severity
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import PartitionMove, Proposal, Recommendation, RecommendationKind
from kagent.core.snapshot import GroupSnapshot, LagFlag, PartitionLag

__all__ = [
    "ApiError",
    "GroupDetail",
    "GroupSort",
    "GroupSummary",
    "GroupsPage",
    "HeldGroup",
    "HeldGroups",
    "IncidentRef",
    "MemberView",
    "PartitionView",
    "ReadinessReport",
    "RecommendationRef",
    "RecommendationsPage",
    "SkewPoint",
    "WorkerAnswer",
    "group_detail",
    "newest_recommendations",
    "page_groups",
    "recommendation_url",
    "summarize",
]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class GroupSort(str, Enum):
    """What ``GET /api/groups`` sorts by."""

    GROUP = "group"
    SKEW = "skew"
    MAX_LAG = "max_lag"
    MAX_LAG_SECONDS = "max_lag_seconds"
    TOTAL_LAG = "total_lag"
    STATUS = "status"


class IncidentRef(_Record):
    """An open incident of a group (the full record is on the incidents topic)."""

    id: str
    kind: IncidentKind
    severity: Severity
    opened_at: float
    """Seconds since the epoch."""


class GroupSummary(_Record):
    """One group as ``GET /api/groups`` lists it: as of its last evaluation (``evaluated_at``)."""

    group: str
    state: Literal["Stable", "Empty"]
    """Kafka's group state as the coordinator's last record shows it: ``Stable`` with members, ``Empty`` without."""
    status: GroupStatus
    """Burrow's status of the group (its worst partition's)."""
    generation: int
    protocol: str | None
    """The assignor the group chose (``range``, ``cooperative-sticky``, ...); None when unknown."""
    members: int = Field(ge=0)
    partitions: int = Field(ge=0)
    """Partitions with lag figures."""
    total_lag: float = Field(ge=0)
    """Known offset lags added up, in records."""
    max_lag: float | None
    """The largest partition offset lag, in records; None when none is known."""
    total_lag_seconds: float | None
    """Known time lags added up, in seconds; None when none is known."""
    max_lag_seconds: float | None
    """The largest partition time lag, in seconds; None when none is known."""
    skew: float | None
    """Skew of the members' lag under the current assignment, in ``skew_metric`` and the lag unit; None
    when it cannot be measured (no members, or unknown time lags in unit ``seconds``)."""
    skew_metric: SkewMetric
    lag_unit: LagUnit
    open_incidents: tuple[IncidentRef, ...] = ()
    last_recommendation_id: str | None = None
    last_recommendation_at: float | None = None
    evaluated_at: float
    """Seconds since the epoch of the evaluation these figures come from."""
    worker: str
    """The URL of the worker holding the group."""


class WorkerAnswer(_Record):
    """How one worker answered a request fanned out to every worker."""

    url: str
    ok: bool
    error: str | None = None
    """Why it did not answer (timeout, refused, a status); None when it did."""


class GroupsPage(_Record):
    """``GET /api/groups``: a page of the cluster's groups."""

    groups: tuple[GroupSummary, ...]
    total: int = Field(ge=0)
    """Groups matching the filter across every worker that answered (the page may hold fewer)."""
    offset: int = Field(ge=0)
    limit: int | None
    sort: GroupSort
    order: Literal["asc", "desc"]
    workers: tuple[WorkerAnswer, ...]
    complete: bool
    """Whether every worker answered; when not, the groups of those that did not are missing."""


class PartitionView(_Record):
    """One partition the group reads, with its lag figures."""

    topic: str
    partition: int = Field(ge=0)
    member_id: str | None
    """The member assigned it; None when no member is."""
    committed: int | None
    """The group's committed offset; None when it has none."""
    log_start: int
    log_end: int
    offset_lag: int = Field(ge=0)
    time_lag: float | None
    """Seconds; None when unknown."""
    flags: tuple[LagFlag, ...] = ()
    polled_at: float
    """Seconds since the epoch of the end-offset poll behind these figures."""


class MemberView(_Record):
    """One member of the current assignment: its lag now and under the latest recommendation."""

    member_id: str
    client_id: str
    client_host: str
    partitions: tuple[PartitionRef, ...]
    offset_lag: float = Field(ge=0)
    """Records of its partitions (every one with lag figures), added up."""
    time_lag: float | None
    """Seconds of its partitions, added up; None when one has records waiting and no time lag."""
    lag: float = Field(ge=0)
    """Its lag now, in ``lag_unit``, as the evaluation counts it (partitions of the topics it subscribes to
    whose partition count is known)."""
    recommended_partitions: tuple[PartitionRef, ...] | None = None
    """What the latest recommendation gives it; None without one, or when it does not name this member."""
    recommended_lag: float | None = None
    """The lag those partitions have now, in ``lag_unit``: what it would hold if the recommendation applied."""


class RecommendationRef(_Record):
    """The group's latest recommendation, in brief; the whole record is at ``url``."""

    id: str
    time: float
    generation: int
    current: bool
    """Whether it was made for the group's current generation (else the group rebalanced since)."""
    strategy: str
    skew_before: float
    skew_after: float
    moves: tuple[PartitionMove, ...]
    url: str
    """``/api/recommendations/<id>``."""
    kind: RecommendationKind = RecommendationKind.REBALANCE
    members_needed: int | None = None
    """For kind ``scale``: the members the group needs (it has ``summary.members``)."""
    server_assignor: str | None = None
    """For a group on the consumer protocol (KIP-848): the broker assignor that fits better."""


class SkewPoint(_Record):
    """The group's skew over one minute: the largest value measured in it."""

    time: float
    """Seconds since the epoch: the start of the minute."""
    skew: float


class GroupDetail(_Record):
    """``GET /api/groups/{group}``: one group, measured now."""

    summary: GroupSummary
    members: tuple[MemberView, ...]
    """By member id."""
    partitions: tuple[PartitionView, ...]
    """By topic and partition."""
    recommendation: RecommendationRef | None
    skew_history: tuple[SkewPoint, ...]
    """The last hour, oldest first; it starts empty on a worker that just took the group over."""


class HeldGroup(_Record):
    """A group this worker holds, straight from its tables (``GET /api/local/groups``)."""

    generation: int
    protocol: str | None
    member_lag: dict[str, int]
    """Each member's offset lag: the records of every partition it is assigned, added up."""
    partitions_with_lag: int = Field(ge=0)


class HeldGroups(_Record):
    """``GET /api/local/groups``: the groups the worker asked holds now, with an assignment, measured now;
    for seeing what one worker holds (the cluster's view is ``GET /api/groups``)."""

    worker: str
    groups: dict[str, HeldGroup]


class RecommendationsPage(_Record):
    """``GET /api/recommendations``: recent recommendations, newest first."""

    recommendations: tuple[Recommendation, ...]
    workers: tuple[WorkerAnswer, ...]
    complete: bool


class ReadinessReport(_Record):
    """``GET /readyz``: whether this worker serves what it holds, and if not, why."""

    ready: bool
    tables_recovered: bool
    """Faust has restored every table of the partitions it holds from their changelogs."""
    source_caught_up: bool
    """The source has read to within 10,000 records of the log end of each ``__consumer_offsets`` partition it reads
    (for the ``admin-api`` source: it has polled every group once)."""
    end_offsets_polled: bool
    """False once every end-offset poll has failed (no partition measured, no broker reached) for
    ``KAGENT_STALL_AFTER`` seconds, or 3 poll intervals if longer; true again from the first poll that answers."""
    stalled_stages: tuple[str, ...] = ()


class ApiError(_Record):
    """Any error answer: what was asked and why it failed."""

    error: str


def _figure(sort: GroupSort, summary: GroupSummary) -> float:
    """The figure ``summary`` is sorted by (``sort`` other than by name); unknown (None, NaN) is -inf."""
    if sort is GroupSort.STATUS:
        return float(summary.status.severity)
    value = getattr(summary, sort.value)
    return -math.inf if value is None or math.isnan(value) else float(value)


def page_groups(
    groups: Iterable[GroupSummary],
    *,
    sort: GroupSort,
    order: Literal["asc", "desc"],
    offset: int,
    limit: int | None,
    query: str = "",
) -> tuple[list[GroupSummary], int]:
    """The page of ``groups`` whose name contains ``query`` (case-insensitive), sorted by ``sort`` in
    ``order`` (ties by name, ascending), from ``offset``, at most ``limit`` (all when None), and how many
    matched. Unknown figures sort below every known one, so they come last in ``desc``. A page of a limit
    picks its groups without sorting all of them."""
    needle = query.casefold()
    matched = [g for g in groups if needle in g.group.casefold()] if needle else list(groups)
    key: Callable[[GroupSummary], Any]
    if sort is GroupSort.GROUP:
        key, reverse = (lambda g: g.group), order == "desc"
    elif order == "desc":
        key, reverse = (lambda g: (-_figure(sort, g), g.group)), False
    else:
        key, reverse = (lambda g: (_figure(sort, g), g.group)), False
    if limit is None:
        ordered = sorted(matched, key=key, reverse=reverse)
    else:
        pick = heapq.nlargest if reverse else heapq.nsmallest
        ordered = pick(offset + limit, matched, key=key)
    end = None if limit is None else offset + limit
    return ordered[offset:end], len(matched)


def newest_recommendations(lists: Iterable[Sequence[Recommendation]], limit: int) -> list[Recommendation]:
    """At most ``limit`` recommendations of ``lists``, newest first (ties by id), each id once."""
    seen: dict[str, Recommendation] = {}
    for recommendations in lists:
        for recommendation in recommendations:
            seen.setdefault(recommendation.id, recommendation)
    return sorted(seen.values(), key=lambda r: (-r.time, r.id))[:limit]


def _seconds(figures: PartitionLag) -> float | None:
    """A partition's time lag: 0 with nothing waiting, None when unknown."""
    return 0.0 if figures.offset_lag == 0 else figures.time_lag


def summarize(
    snapshot: GroupSnapshot,
    *,
    status: GroupStatus,
    skew: float | None,
    skew_metric: SkewMetric,
    lag_unit: LagUnit,
    state: EvaluationState | None,
    incidents: Iterable[Incident],
    worker: str,
) -> GroupSummary:
    """The group as ``GET /api/groups`` lists it, from the snapshot its evaluation at ``snapshot.taken_at``
    read and what that evaluation found (``status``, ``skew``, the trigger ``state`` and the open
    ``incidents``).

    Lag aggregates follow kafka-lag-exporter's (and :mod:`kagent.worker.lag_exporter`'s): partitions without
    a committed offset are left out (their lag is an estimate from ``auto.offset.reset``), a time lag is 0
    with nothing waiting, and unknown time lags are left out of the seconds.
    """
    records: list[int] = []
    seconds: list[float] = []
    for figures in snapshot.lag.values():
        if figures.committed is None:
            continue
        records.append(figures.offset_lag)
        known = _seconds(figures)
        if known is not None:
            seconds.append(known)
    assigned = snapshot.assignment
    return GroupSummary(
        group=assigned.group,
        state="Stable" if assigned.members else "Empty",
        status=status,
        generation=assigned.generation,
        protocol=assigned.protocol,
        members=len(assigned.members),
        partitions=len(snapshot.lag),
        total_lag=float(sum(records)),
        max_lag=float(max(records)) if records else None,
        total_lag_seconds=sum(seconds) if seconds else None,
        max_lag_seconds=max(seconds) if seconds else None,
        skew=skew,
        skew_metric=skew_metric,
        lag_unit=lag_unit,
        open_incidents=tuple(
            IncidentRef(id=i.id, kind=i.kind, severity=i.severity, opened_at=i.opened_at)
            for i in sorted(incidents, key=lambda i: i.kind.value)
        ),
        last_recommendation_id=state.last_recommendation_id if state else None,
        last_recommendation_at=state.last_recommendation_at if state else None,
        evaluated_at=snapshot.taken_at,
        worker=worker,
    )


def recommendation_url(recommendation_id: str) -> str:
    """Where the API serves a recommendation (a path on any worker)."""
    return f"/api/recommendations/{recommendation_id}"


def group_detail(
    summary: GroupSummary,
    proposal: Proposal,
    recommendation: Recommendation | None,
    history: Sequence[SkewPoint],
) -> GroupDetail:
    """One group measured now: ``proposal`` is the configured strategy run on the group's snapshot now (its
    lag ticks are how the evaluation counts each partition), ``summary`` the group's summary from the same
    snapshot, ``recommendation`` its latest (None without one), ``history`` its skew over the last hour.

    A member's ``offset_lag`` and ``time_lag`` add up the figures of every partition it is assigned; its
    ``lag`` counts those the evaluation counts (of subscribed topics whose partition count kagent knows, below
    it), in the lag unit. ``recommended_lag`` is the lag the partitions the recommendation gives the member
    have now, counted the same way: what it would hold had the group applied it.
    """
    snapshot = proposal.snapshot

    recommended = {m.member_id: m.recommended for m in recommendation.members} if recommendation else {}
    members = []
    owners: dict[TopicPartition, str] = {}
    for member in sorted(snapshot.assignment.members, key=lambda m: m.member_id):
        owned = [ref.topic_partition for ref in member.partitions]
        for tp in owned:
            owners.setdefault(tp, member.member_id)
        figures = [snapshot.lag[tp] for tp in owned if tp in snapshot.lag]
        seconds = [_seconds(f) for f in figures]
        target = recommended.get(member.member_id)
        members.append(
            MemberView(
                member_id=member.member_id,
                client_id=member.client_id,
                client_host=member.client_host,
                partitions=member.partitions,
                offset_lag=float(sum(f.offset_lag for f in figures)),
                time_lag=None if any(s is None for s in seconds) else sum(s or 0.0 for s in seconds),
                lag=proposal.in_unit(proposal.current_ticks.get(member.member_id, 0)),
                recommended_partitions=target,
                recommended_lag=(
                    None
                    if target is None
                    else proposal.in_unit(sum(proposal.lag.get(ref.topic_partition, 0) for ref in target))
                ),
            )
        )
    partitions = tuple(
        PartitionView(
            topic=tp.topic,
            partition=tp.partition,
            member_id=owners.get(tp),
            committed=figures.committed,
            log_start=figures.log_start,
            log_end=figures.log_end,
            offset_lag=figures.offset_lag,
            time_lag=figures.time_lag,
            flags=figures.flags,
            polled_at=figures.polled_at,
        )
        for tp, figures in sorted(snapshot.lag.items())
    )
    reference = None
    if recommendation is not None:
        reference = RecommendationRef(
            id=recommendation.id,
            time=recommendation.time,
            generation=recommendation.generation,
            current=recommendation.generation == snapshot.assignment.generation,
            strategy=recommendation.strategy,
            skew_before=recommendation.skew_before,
            skew_after=recommendation.skew_after,
            moves=recommendation.moves,
            url=recommendation_url(recommendation.id),
            kind=recommendation.kind,
            members_needed=recommendation.scale.members_needed if recommendation.scale is not None else None,
            server_assignor=(
                recommendation.server_assignor.recommended if recommendation.server_assignor is not None else None
            ),
        )
    return GroupDetail(
        summary=summary,
        members=tuple(members),
        partitions=partitions,
        recommendation=reference,
        skew_history=tuple(history),
    )
