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

from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Literal

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.consumer_group_state import ConsumerGroupState, subscribed_topics
from kagent.core.drain_time import Drain, group_drain
from kagent.core.evaluation import EvaluationState
from kagent.core.events import PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.incidents import Incident, IncidentKind, Severity
from kagent.core.member_lag import MemberLag, member_lags, unit_lag
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import (
    HotPartitionEvidence,
    IsolationEvidence,
    PartitionMove,
    Recommendation,
    RecommendationKind,
)
from kagent.core.remedies import Remedy
from kagent.core.snapshot import GroupSnapshot, LagFlag, PartitionLag
from kagent.core.throughput import PartitionThroughput

__all__ = [
    "ApiError",
    "ConsumerGroupMemberView",
    "ConsumerGroupView",
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
    """One group as ``GET /api/groups`` lists it: as of its last evaluation (``evaluated_at``).

    A figure kagent does not know is null, never 0: ``total_lag`` and ``max_lag`` add up and compare the
    partitions whose lag was measured (``partitions - partitions_unknown`` of them) and are null when
    none was; ``skew`` is null unless every partition the members hold was measured; ``status`` is
    ``UNKNOWN`` when no partition could be judged.
    """

    group: str
    state: Literal["Stable", "Empty", "Unknown"]
    """Kafka's group state as the coordinator's last record shows it: ``Stable`` with members, ``Empty``
    without (its consumers stopped or crashed); ``Unknown`` for a group kagent knows only committed offsets
    of (one that only commits, or whose assignment the cluster does not describe)."""
    status: GroupStatus
    """Burrow's status of the group (its worst partition's); ``UNKNOWN`` when no partition could be judged."""
    generation: int | None
    """None when the group's assignment or generation is not known (``state`` ``Unknown``; a KIP-848 group
    the ``admin-api`` source cannot describe)."""
    protocol: str | None
    """The assignor the group chose (``range``, ``cooperative-sticky``, ...; for a group on the consumer
    protocol, the broker's: ``uniform``, ``range``); None when unknown."""
    members: int | None = Field(ge=0)
    """How many members the group has; None when its assignment is not known (``state`` ``Unknown``: a
    group that only commits, or one the cluster does not describe)."""
    partitions: int = Field(ge=0)
    """Partitions the group reads: those of its subscribed topics, those assigned, those it has committed
    offsets on."""
    partitions_unknown: int = Field(default=0, ge=0)
    """Those of ``partitions`` whose offset lag is not measured (see each partition's ``flags``)."""
    total_lag: float | None = Field(ge=0)
    """Measured offset lags added up, in records; None when none is measured."""
    max_lag: float | None
    """The largest measured partition offset lag, in records; None when none is measured."""
    total_lag_seconds: float | None
    """Known time lags added up, in seconds; None when none is known."""
    max_lag_seconds: float | None
    """The largest partition time lag, in seconds; None when none is known."""
    skew: float | None
    """Skew of the members' lag under the current assignment, in ``skew_metric`` and the lag unit; None
    when it cannot be measured (no members, or unknown time lags in unit ``seconds``)."""
    skew_metric: SkewMetric
    lag_unit: LagUnit
    min_total_lag: float = Field(ge=0)
    """The trigger's minimum (``KAGENT_MIN_TOTAL_LAG``), in ``lag_unit``: a group whose lag adds up to less
    is never recommended a rebalance, whatever its skew (a skew over a few records is noise)."""
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
    """One partition the group reads, with its lag figures (null when not known; ``flags`` say why)."""

    topic: str
    partition: int = Field(ge=0)
    member_id: str | None
    """The member assigned it; None when no member is."""
    committed: int | None
    """The group's committed offset; None when it has none."""
    log_start: int | None
    """None before an end-offset poll answered for it."""
    log_end: int | None
    """The log end as far as known: the polled one, or the committed offset when a commit made after the
    poll is beyond it; None before a poll answered for it."""
    offset_lag: int | None = Field(ge=0)
    """Records; None when not measured."""
    estimated_lag: int | None = Field(default=None, ge=0)
    """Without a committed offset: the records ``auto.offset.reset`` would leave the group to read, an
    estimate (never counted as lag); None otherwise."""
    time_lag: float | None
    """Seconds; None when unknown."""
    flags: tuple[LagFlag, ...] = ()
    polled_at: float | None
    """Seconds since the epoch of the end-offset poll behind these figures; None before one answered."""
    drain: Drain = Drain()
    """When its offset lag closes at the rates measured over the rate window: its production rate against
    the group's consumption on it (:mod:`kagent.core.drain_time`); ``unknown`` when the lag or a rate is
    not measured."""


class MemberView(_Record):
    """One member of the current assignment: its lag now and under the latest recommendation
    (:mod:`kagent.core.member_lag`'s figures: unknown, null, when one of its partitions is)."""

    member_id: str
    client_id: str
    client_host: str
    partitions: tuple[PartitionRef, ...] | None
    """The partitions it holds; None when the cluster did not say (a DescribeGroups answer without its
    assignment, as Tansu gives): then its lag is unknown too, and the partitions the group reads are
    shown on ``unassigned``, with their lag."""
    offset_lag: float | None = Field(ge=0)
    """Records of its partitions, added up; None when one of them has no measured lag."""
    time_lag: float | None
    """Seconds of its partitions, added up; None when one of them has no measured time lag."""
    lag: float | None = Field(ge=0)
    """Its lag now, in ``lag_unit`` (``offset_lag`` or ``time_lag``); None when unknown."""
    partitions_unknown: int = Field(default=0, ge=0)
    """How many of its partitions have no measured lag."""
    recommended_partitions: tuple[PartitionRef, ...] | None = None
    """What the latest recommendation gives it; None without one, or when it does not name this member."""
    recommended_lag: float | None = None
    """The lag those partitions have now, in ``lag_unit``: what it would hold if the recommendation applied;
    None without a recommendation or when one of those partitions has no measured lag."""
    drain: Drain = Drain()
    """When its offset lag closes at today's rates: its consumption less the production of the partitions
    it holds (:mod:`kagent.core.drain_time`); ``unknown`` when its lag or one of those rates is not
    measured (just after a rebalance its pace is not yet)."""


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
    hot: HotPartitionEvidence | None = None
    """The group's hot partitions, their rates beside the fastest member's and the remedy: for kind
    ``hot-partition``, and for a rebalance or scale of the rest that leaves them where they are."""
    isolated: IsolationEvidence | None = None
    """For a rebalance: the heavy partitions it leaves each alone on a member, with their rates."""
    remedies: tuple[Remedy, ...] = ()
    """The options it weighed and what each would give (the recommendation's ``remedies``)."""


class SkewPoint(_Record):
    """The group's skew over one minute: the largest value measured in it."""

    time: float
    """Seconds since the epoch: the start of the minute."""
    skew: float


class ConsumerGroupMemberView(_Record):
    """One member of a group on the consumer protocol (KIP-848), as its coordinator describes it."""

    member_id: str
    member_epoch: int | None
    """The member's epoch (the group epoch it has caught up with); None until its assignment is known."""
    group_instance_id: str | None
    client_id: str | None
    """None until its metadata is known."""
    client_host: str | None
    rack: str | None
    """Its ``client.rack``; None when it gave none."""
    subscribed_topics: tuple[str, ...]
    """The topic names it subscribed to (and, from the offsets topic, those its regular expression matched)."""
    subscribed_topic_regex: str | None
    server_assignor: str | None
    """The server assignor it asked for (``group.remote.assignor``); None for the broker's default, or when
    not known (ConsumerGroupDescribe does not say it)."""


class ConsumerGroupView(_Record):
    """A group on the consumer protocol (KIP-848) beyond its assignment: its epochs, the server assignor,
    and each member's epoch, rack and subscription, as its coordinator's records (source
    ``offsets-topic``) or ConsumerGroupDescribe (source ``admin-api``) last said them."""

    group_epoch: int | None
    """Bumped whenever its members or subscriptions change; None until known."""
    assignment_epoch: int | None
    """The group epoch its target assignment was computed for; None until known (only
    ConsumerGroupDescribe says it)."""
    assignor: str | None
    """The server assignor the broker selected for the group; None until known (only
    ConsumerGroupDescribe says it)."""
    members: tuple[ConsumerGroupMemberView, ...]
    """By member id; their partitions and lag are the group's ``members``."""


class GroupDetail(_Record):
    """``GET /api/groups/{group}``: one group, measured now."""

    summary: GroupSummary
    members: tuple[MemberView, ...]
    """By member id."""
    unassigned: MemberView | None = None
    """The partitions the group reads that no member holds (all of them for a group without members),
    as one more member of id, client id and host ``unknown`` (kafka-lag-exporter's convention); None
    when every partition is held."""
    partitions: tuple[PartitionView, ...]
    """By topic and partition."""
    recommendation: RecommendationRef | None
    skew_history: tuple[SkewPoint, ...]
    """The last hour, oldest first; it starts empty on a worker that just took the group over."""
    drain: Drain = Drain()
    """When the group catches up at today's rates: when its slowest member does (``falling-behind`` when
    one member is; ``unknown`` when one member's drain is and none falls behind)."""
    consumer_group: ConsumerGroupView | None = None
    """For a group on the consumer protocol (KIP-848): its epochs, assignor and members' epochs, racks and
    subscriptions; None for a classic group, and for one whose coordinator has not described it."""


class HeldGroup(_Record):
    """A group this worker holds, straight from its tables (``GET /api/local/groups``)."""

    generation: int | None
    """None when the group's assignment is not known."""
    protocol: str | None
    member_lag: dict[str, int | None]
    """Each member's offset lag (:class:`MemberView`'s ``offset_lag``), None when unknown; the partitions no
    member holds as member ``unknown``."""
    partitions_with_lag: int = Field(ge=0)
    """Partitions whose offset lag is measured and above 0."""


class HeldGroups(_Record):
    """``GET /api/local/groups``: the groups the worker asked holds now, measured now;
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


def newest_recommendations(lists: Iterable[Sequence[Recommendation]], limit: int) -> list[Recommendation]:
    """At most ``limit`` recommendations of ``lists``, newest first (ties by id), each id once."""
    seen: dict[str, Recommendation] = {}
    for recommendations in lists:
        for recommendation in recommendations:
            seen.setdefault(recommendation.id, recommendation)
    return sorted(seen.values(), key=lambda r: (-r.time, r.id))[:limit]


def _seconds(figures: PartitionLag) -> float | None:
    """A measured partition's time lag: 0 with nothing waiting, None when unknown."""
    return 0.0 if figures.offset_lag == 0 else figures.time_lag


def _state(snapshot: GroupSnapshot) -> Literal["Stable", "Empty", "Unknown"]:
    if not snapshot.described:
        return "Unknown"
    return "Stable" if snapshot.assignment.members else "Empty"


def summarize(
    snapshot: GroupSnapshot,
    *,
    status: GroupStatus,
    skew: float | None,
    skew_metric: SkewMetric,
    lag_unit: LagUnit,
    min_total_lag: float,
    state: EvaluationState | None,
    incidents: Iterable[Incident],
    worker: str,
) -> GroupSummary:
    """The group as ``GET /api/groups`` lists it, from the snapshot its evaluation at ``snapshot.taken_at``
    read and what that evaluation found (``status``, ``skew``, the trigger ``state`` and the open
    ``incidents``); ``skew_metric``, ``lag_unit`` and ``min_total_lag`` are the evaluation policy's.

    Lag aggregates follow kafka-lag-exporter's (and :mod:`kagent.worker.lag_exporter`'s) over the
    partitions whose lag was measured: the others (no answer from the end-offset poll, no committed
    offset while records wait: their lag is unknown or an estimate) are left out and counted in
    ``partitions_unknown``; a time lag is 0 with nothing waiting, and unknown time lags are left out of
    the seconds. Each aggregate is None when nothing is left to aggregate.
    """
    records: list[int] = []
    seconds: list[float] = []
    unknown = 0
    for figures in snapshot.lag.values():
        if figures.offset_lag is None:
            unknown += 1
            continue
        records.append(figures.offset_lag)
        known = _seconds(figures)
        if known is not None:
            seconds.append(known)
    assigned = snapshot.assignment
    return GroupSummary(
        group=assigned.group,
        state=_state(snapshot),
        status=status,
        generation=assigned.generation if snapshot.described and assigned.generation >= 0 else None,
        protocol=assigned.protocol,
        members=len(assigned.members) if snapshot.described else None,
        partitions=len(snapshot.lag),
        partitions_unknown=unknown,
        total_lag=float(sum(records)) if records else None,
        max_lag=float(max(records)) if records else None,
        total_lag_seconds=sum(seconds) if seconds else None,
        max_lag_seconds=max(seconds) if seconds else None,
        skew=skew,
        skew_metric=skew_metric,
        lag_unit=lag_unit,
        min_total_lag=min_total_lag,
        open_incidents=tuple(
            IncidentRef(id=i.id, kind=i.kind, severity=i.severity, opened_at=i.opened_at)
            for i in sorted(incidents, key=lambda i: i.kind.value)
        ),
        last_recommendation_id=state.last_recommendation_id if state else None,
        last_recommendation_at=state.last_recommendation_at if state else None,
        evaluated_at=snapshot.taken_at,
        worker=worker,
    )


def _refs(partitions: Iterable[TopicPartition]) -> list[PartitionRef]:
    return [PartitionRef(topic=tp.topic, partition=tp.partition) for tp in partitions]


def _target_lag(snapshot: GroupSnapshot, target: Sequence[PartitionRef], lag_unit: LagUnit) -> float | None:
    """The lag ``target``'s partitions have in ``snapshot``, added up as a member's; None when one is unknown."""
    figures = snapshot.lag
    records = 0
    millis = 0
    for ref in target:
        entry = figures.get(ref.topic_partition)
        if entry is None or entry.offset_lag is None:
            return None
        records += entry.offset_lag
        if entry.offset_lag:
            if entry.time_lag is None:
                if lag_unit is LagUnit.SECONDS:
                    return None
            else:
                millis += round(entry.time_lag * 1000)
    return float(records) if lag_unit is LagUnit.MESSAGES else millis / 1000


def recommendation_url(recommendation_id: str) -> str:
    """Where the API serves a recommendation (a path on any worker)."""
    return f"/api/recommendations/{recommendation_id}"


def group_detail(
    summary: GroupSummary,
    snapshot: GroupSnapshot,
    lag_unit: LagUnit,
    recommendation: Recommendation | None,
    history: Sequence[SkewPoint],
    throughput: Mapping[TopicPartition, PartitionThroughput],
    consumer_group: ConsumerGroupState | None = None,
) -> GroupDetail:
    """One group measured now: ``summary`` is the group's summary from ``snapshot``, ``recommendation`` its
    latest (None without one), ``history`` its skew over the last hour, ``throughput`` each partition's rates
    over the rate window (one missing has unknown rates), ``consumer_group`` its KIP-848 state (shown, by
    :func:`consumer_group_view`, when the snapshot's assignment is on the consumer protocol).

    Each member's figures are :func:`kagent.core.member_lag.member_lags`' (unknown when one of its
    partitions is), ``lag`` in ``lag_unit``. ``recommended_lag`` adds up, the same way, the lag the
    partitions the recommendation gives the member have now: what it would hold had the group applied it.
    Every ``drain`` (each partition's, member's, the partitions no member holds', the group's) is
    :func:`kagent.core.drain_time.group_drain`'s from the same lag and ``throughput``.
    """
    recommended = {m.member_id: m.recommended for m in recommendation.members} if recommendation else {}
    rows, rest = member_lags(snapshot)
    drains = group_drain(
        [*rows, *([rest] if rest is not None else [])],
        {tp: figures.offset_lag for tp, figures in snapshot.lag.items()},
        throughput,
    )
    owners: dict[TopicPartition, str] = {}
    for member in sorted(snapshot.assignment.members, key=lambda m: m.member_id):
        for ref in member.partitions or ():
            owners.setdefault(ref.topic_partition, member.member_id)
    by_id = {member.member_id: member for member in snapshot.assignment.members}

    def view(row: MemberLag) -> MemberView:
        target = recommended.get(row.member_id) if row.assigned else None
        partitions = by_id[row.member_id].partitions if row.assigned else tuple(_refs(row.partitions or ()))
        return MemberView(
            member_id=row.member_id,
            client_id=row.client_id,
            client_host=row.client_host,
            partitions=partitions,
            offset_lag=None if row.offset_lag is None else float(row.offset_lag),
            time_lag=row.time_lag,
            lag=unit_lag(row, lag_unit),
            partitions_unknown=row.unknown,
            recommended_partitions=target,
            recommended_lag=None if target is None else _target_lag(snapshot, target, lag_unit),
            drain=drains.members[row.member_id],
        )

    members = [view(row) for row in rows]
    partitions = tuple(
        PartitionView(
            topic=tp.topic,
            partition=tp.partition,
            member_id=owners.get(tp),
            committed=figures.committed,
            log_start=figures.log_start,
            log_end=figures.log_end,
            offset_lag=figures.offset_lag,
            estimated_lag=figures.estimated_lag,
            time_lag=figures.time_lag,
            flags=figures.flags,
            polled_at=figures.polled_at,
            drain=drains.partitions[tp],
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
            hot=recommendation.hot,
            isolated=recommendation.isolated,
            remedies=recommendation.remedies,
        )
    return GroupDetail(
        summary=summary,
        members=tuple(members),
        unassigned=view(rest) if rest is not None else None,
        partitions=partitions,
        recommendation=reference,
        skew_history=tuple(history),
        drain=drains.group,
        consumer_group=(
            consumer_group_view(consumer_group)
            if consumer_group is not None and snapshot.assignment.group_protocol == "consumer"
            else None
        ),
    )


def consumer_group_view(state: ConsumerGroupState) -> ConsumerGroupView:
    """What the API shows of a KIP-848 group's ``state`` beyond its assignment, members by id."""
    members = []
    for member_id in sorted(state.members):
        member = state.members[member_id]
        members.append(
            ConsumerGroupMemberView(
                member_id=member_id,
                member_epoch=member.member_epoch,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rack=member.rack,
                subscribed_topics=subscribed_topics(state, member),
                subscribed_topic_regex=member.topic_regex,
                server_assignor=member.server_assignor,
            )
        )
    return ConsumerGroupView(
        group_epoch=state.epoch,
        assignment_epoch=state.assignment_epoch,
        assignor=state.assignor,
        members=tuple(members),
    )
