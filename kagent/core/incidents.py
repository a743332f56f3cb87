"""Incidents: when a group's skew or health deserves an alert, as a pure state machine.

Each group has at most one open incident per :class:`IncidentKind`: ``lag-skew``,
one per health status above WARN (``stop``, ``stall``, ``rewind``), and ``hot-partition``. WARN
opens no incident: it is a trend (the lag never fell over the window), not a
failure, and Burrow's ``ERR`` statuses are the ones that page. An incident
opens, may update, and resolves; each transition is one
:class:`IncidentTransition`, the record on ``<app id>-incidents`` keyed by group.

The evaluator (:mod:`kagent.worker.incident_log`) calls :func:`step` for each
group after its evaluation and its health check, with the group's
:class:`IncidentsState` from its changelog table (a fresh one the first
time), an :class:`IncidentObservation` and the time. It stores the state it
gets back with the transitions as :attr:`IncidentsState.pending` (an outbox)
and sends the transitions; the alerting stage delivers them to the sinks.
Because the state lives in a changelog table, open incidents and their ids
survive a worker failover.

Severities are PagerDuty Events API v2's words (Alertmanager takes any label;
these are the usual ones), one per kind (:data:`SEVERITY`):

- ``lag-skew``: warning. The group is consuming; its lag is unevenly spread
  and a recommendation says how to even it, or (a ``scale`` recommendation)
  its members together read slower than its producers write and it says how
  many members the group needs. Worth a look, not a page.
- ``stop``: critical. Records wait and nobody commits: the consumer is gone
  or stuck, and the lag grows without bound.
- ``stall``: critical. The consumer commits but never moves: as bad for the
  lag as ``stop``, and it hides behind live heartbeats.
- ``rewind``: error. Records are read again (or skipped) and the consumer
  still moves: a correctness problem to look into, not an outage.
- ``hot-partition``: warning. A partition is written faster than any member
  reads (a ``hot-partition`` recommendation): its lag grows whatever kagent
  moves, until its producers' keys are spread or its consumer is made faster.
  Not a page: the group is consuming, as fast as it can.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from enum import Enum
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kagent.core.drain_time import Drain
from kagent.core.group_health import GroupHealth, PartitionStatus
from kagent.core.heavy_partitions import heavy_partition_text
from kagent.core.hot_partitions import hot_partition_text
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import HotPartitionEvidence, PartitionMove, Recommendation, RecommendationKind

__all__ = [
    "HEALTH_KINDS",
    "INCIDENT_NAMESPACE",
    "RECOMMENDATION_KINDS",
    "SEVERITY",
    "CulpritPartition",
    "Incident",
    "IncidentAction",
    "IncidentKind",
    "IncidentObservation",
    "IncidentTransition",
    "IncidentsState",
    "Severity",
    "SkewDetail",
    "incident_id",
    "step",
]


class IncidentKind(str, Enum):
    """What an incident is about; a group has at most one open incident of each."""

    LAG_SKEW = "lag-skew"
    """The group's lag is unevenly spread over its members and a recommendation was sent."""
    STOP = "stop"
    """The group's status is STOP (see :mod:`kagent.core.group_health`)."""
    STALL = "stall"
    """The group's status is STALL."""
    REWIND = "rewind"
    """The group's status is REWIND."""
    HOT_PARTITION = "hot-partition"
    """A partition of the group is written faster than any member reads, and a ``hot-partition``
    recommendation was sent."""


class Severity(str, Enum):
    """An incident's severity, in PagerDuty Events API v2's words."""

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SEVERITY: Mapping[IncidentKind, Severity] = {
    IncidentKind.LAG_SKEW: Severity.WARNING,
    IncidentKind.STOP: Severity.CRITICAL,
    IncidentKind.STALL: Severity.CRITICAL,
    IncidentKind.REWIND: Severity.ERROR,
    IncidentKind.HOT_PARTITION: Severity.WARNING,
}
"""Each kind's severity (the module's docstring says why)."""

HEALTH_KINDS: Mapping[PartitionStatus, IncidentKind] = {
    PartitionStatus.STOP: IncidentKind.STOP,
    PartitionStatus.STALL: IncidentKind.STALL,
    PartitionStatus.REWIND: IncidentKind.REWIND,
}
"""The group statuses that open an incident, and its kind; OK and WARN open none."""

RECOMMENDATION_KINDS: Mapping[RecommendationKind, IncidentKind] = {
    RecommendationKind.REBALANCE: IncidentKind.LAG_SKEW,
    RecommendationKind.SCALE: IncidentKind.LAG_SKEW,
    RecommendationKind.HOT_PARTITION: IncidentKind.HOT_PARTITION,
}
"""The incident each kind of recommendation opens or updates."""

INCIDENT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:kagent:incident")
"""The UUID namespace of incident ids: a constant, the same for every app id and every worker."""

_ORDER = tuple(IncidentKind)
"""The order transitions of one step come in: resolves first, then opens and updates, each by kind."""


class IncidentAction(str, Enum):
    """What a transition does to its incident."""

    OPEN = "open"
    UPDATE = "update"
    RESOLVE = "resolve"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class SkewDetail(_Record):
    """A ``lag-skew`` or ``hot-partition`` incident's recommendation: the latest one of its kind sent for
    the group."""

    recommendation_id: str
    """The :class:`Recommendation`'s id, as on the recommendations topic."""
    strategy: str
    metric: SkewMetric
    threshold: float
    skew_before: float
    """Skew under the current assignment, in ``metric``."""
    skew_after: float
    """Skew under the recommended assignment."""
    moves: tuple[PartitionMove, ...]
    """Partitions the recommendation moves, by topic and partition."""
    members_needed: int | None = None
    """For a ``scale`` recommendation (no assignment of the members keeps up): the members the group
    needs; None for a rebalance."""
    hot: HotPartitionEvidence | None = None
    """The recommendation's hot partitions, their rates and the remedy; None when it names none."""

    @classmethod
    def of(cls, recommendation: Recommendation) -> SkewDetail:
        """The detail of ``recommendation``."""
        return cls(
            recommendation_id=recommendation.id,
            strategy=recommendation.strategy,
            metric=recommendation.trigger.metric,
            threshold=recommendation.trigger.threshold,
            skew_before=recommendation.skew_before,
            skew_after=recommendation.skew_after,
            moves=recommendation.moves,
            members_needed=recommendation.scale.members_needed if recommendation.scale is not None else None,
            hot=recommendation.hot,
        )


class CulpritPartition(_Record):
    """A partition at the group's status, as the health check judged it at the transition."""

    topic: str
    partition: int = Field(ge=0)
    reason: str
    """Why, in a sentence (``PartitionHealth.reason``)."""
    lag: int | None
    """Its current lag in records; None without a commit."""


class Incident(_Record):
    """One incident of one group, as of its latest transition.

    ``member_lag``, the drain times and the kind's detail (``skew`` for ``lag-skew``,
    ``culprits`` for the health kinds) describe the group at ``updated_at``
    (at ``resolved_at`` in a resolve); they are not refreshed between
    transitions.
    """

    id: str
    """A UUID (version 5) that stays the same from open to resolve: see :func:`incident_id`."""
    kind: IncidentKind
    severity: Severity
    group: str
    opened_at: float
    """Seconds since the epoch. For ``lag-skew``, the time of the recommendation that opened it."""
    updated_at: float
    """Seconds since the epoch of its latest transition (``opened_at`` at open, ``resolved_at`` at resolve)."""
    resolved_at: float | None = None
    """Seconds since the epoch; None while it is open."""
    lag_unit: LagUnit
    member_lag: dict[str, float]
    """Each current member's lag, by member id, in ``lag_unit``."""
    drain: Drain | None = None
    """When the group catches up at today's rates (its slowest member's drain time,
    :mod:`kagent.core.drain_time`); None in records of workers that did not measure it."""
    member_drain: dict[str, Drain] = {}
    """Each current member's drain time, by member id (the partitions no member holds as ``unknown``)."""
    skew: SkewDetail | None = None
    """``lag-skew`` and ``hot-partition`` only: the latest recommendation of its kind."""
    culprits: tuple[CulpritPartition, ...] = ()
    """Health kinds only: the partitions at the status, by topic and partition."""

    @model_validator(mode="after")
    def _detail_fits_kind(self) -> Incident:
        if self.severity is not SEVERITY[self.kind]:
            raise ValueError(f"a {self.kind.value} incident is {SEVERITY[self.kind].value}, not {self.severity.value}")
        recommended = self.kind in RECOMMENDATION_KINDS.values()
        if recommended != (self.skew is not None):
            raise ValueError("a lag-skew or hot-partition incident, and only one, has a skew detail")
        if recommended and self.culprits:
            raise ValueError(f"a {self.kind.value} incident has no culprits")
        return self

    @property
    def partitions(self) -> frozenset[tuple[str, int]]:
        """The culprits' (topic, partition)."""
        return frozenset((culprit.topic, culprit.partition) for culprit in self.culprits)


class IncidentTransition(_Record):
    """One transition of one incident (the record on ``<app id>-incidents``, keyed by group)."""

    action: IncidentAction
    incident: Incident
    """The incident as of this transition (``resolved_at`` set in a resolve)."""
    reason: str
    """Why, in a line, for the alert's summary."""


class IncidentsState(BaseModel):
    """One group's open incidents (value of the incidents table, keyed by group).

    It changes only on a transition, so a step that emits nothing costs no changelog write.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    group: str
    open_incidents: dict[IncidentKind, Incident] = {}
    """Each open incident, by kind."""
    opened: int = Field(default=0, ge=0)
    """Incidents opened for the group so far: numbers the next one's id."""
    last_recommendation_id: str | None = None
    """The latest recommendation an incident opened or updated on: the same one seen again (a
    recommendation re-sent after a failover) changes nothing."""
    pending: tuple[IncidentTransition, ...] = ()
    """Transitions decided but not yet known to be on the incidents topic (an outbox): the worker
    stores the state with them before sending them, and clears them once the broker has them, so a
    worker that takes the group over after a crash sends them again (the same records) instead of
    losing them or deciding them anew with other ids. :func:`step` never sets it."""

    @model_validator(mode="after")
    def _consistent(self) -> IncidentsState:
        for kind, incident in self.open_incidents.items():
            if incident.kind is not kind or incident.group != self.group or incident.resolved_at is not None:
                raise ValueError(f"open_incidents[{kind.value}] is not an open {kind.value} incident of {self.group}")
        return self


class IncidentObservation(NamedTuple):
    """What one step knows of a group."""

    group: str
    lag_unit: LagUnit
    member_lag: Mapping[str, float]
    """Each current member's lag, by member id, in ``lag_unit``."""
    gone: bool
    """The group was deleted or is empty (as for :func:`kagent.core.group_health.group_status`)."""
    skew: float | None
    """The skew under the current assignment; None when it could not be measured."""
    rearm_below: float
    """The policy's ``skew_threshold x hysteresis``: a skew below it resolves ``lag-skew``."""
    recommendation: Recommendation | None
    """The recommendation the evaluation emitted this round, if any."""
    health: GroupHealth
    falls_behind: bool = False
    """No assignment of the members keeps up with the producers (the evaluation's scale evidence), or a
    partition is hot (no member keeps up with it): a ``lag-skew`` incident stays open while it holds,
    whatever the skew."""
    drain: Drain | None = None
    """The group's drain time (:func:`kagent.core.drain_time.slowest` of ``member_drain``); None when not
    measured."""
    hot: bool = False
    """The evaluation found a hot partition (:func:`kagent.core.evaluation.hot_partition_evidence`): a
    ``hot-partition`` incident stays open while it does."""
    member_drain: Mapping[str, Drain] | None = None
    """Each member's drain time, by member id; None when not measured."""


def incident_id(group: str, kind: IncidentKind, opened_at: float, serial: int) -> str:
    """The id of the ``serial``-th incident (from 0) opened for ``group``, of ``kind``, at ``opened_at``.

    A UUID version 5 in :data:`INCIDENT_NAMESPACE` over the compact JSON array
    ``[group, kind, opened_at, serial]``: the same inputs give the same id on
    any worker, and the serial keeps two incidents of one group apart even
    when opened at the same time.
    """
    name = json.dumps([group, kind.value, float(opened_at), serial], separators=(",", ":"))
    return str(uuid.uuid5(INCIDENT_NAMESPACE, name))


def step(
    state: IncidentsState, observation: IncidentObservation, now: float
) -> tuple[IncidentsState, list[IncidentTransition]]:
    """The group's next state and the transitions to send, at ``now``.

    The contract, per kind, with at most one open incident of each:

    - ``lag-skew`` opens on a recommendation in ``observation`` when none is
      open, and updates on one when it is open; a recommendation whose id is
      ``state.last_recommendation_id`` (seen already) does neither. It
      resolves when no recommendation came this round, the skew was
      measured below ``rearm_below``, and the members keep up with the
      producers (not ``observation.falls_behind``). It opens and updates on
      ``rebalance`` and ``scale`` recommendations (:data:`RECOMMENDATION_KINDS`).
    - ``hot-partition`` opens and updates, like ``lag-skew``, on a
      ``hot-partition`` recommendation. It resolves when no such
      recommendation came this round, the skew was measured (the group's lag
      is known) and the evaluation found no hot partition (not
      ``observation.hot``).
    - A health kind opens when the group's status is its status and none is
      open; updates when the set of culprit partitions changes (not when only
      their reasons or lags do, which change every round); resolves when the
      status is any other (OK, WARN, or another health kind) but UNKNOWN: a
      group nothing could be judged of (not measured yet, at start or after a
      failover) keeps its health incidents as they are.
    - A gone group resolves every open incident and opens none.

    Transitions come resolves first, then opens and updates, each in
    :class:`IncidentKind` order. Every transition's incident carries
    ``observation.member_lag`` and its drain times. Times: ``now``, except that a ``lag-skew``
    open or update takes the recommendation's ``time`` (so that a
    recommendation re-sent after a failover opens an incident with the same
    id). Stepping the returned state with the same observation emits nothing.
    Raises ValueError when the observation, the state and the recommendation
    are not of the same group, or when ``state`` has :attr:`IncidentsState.pending`
    transitions (the caller sends those first).
    """
    group = state.group
    recommendation = observation.recommendation
    if state.pending:
        raise ValueError(f"the incidents of {group!r} have {len(state.pending)} transitions still to send")
    if observation.group != group or (recommendation is not None and recommendation.group != group):
        raise ValueError(f"observation of {observation.group!r} for the incidents of {group!r}")
    member_lag = dict(observation.member_lag)
    drains = {"drain": observation.drain, "member_drain": dict(observation.member_drain or {})}
    is_new = recommendation is not None and recommendation.id != state.last_recommendation_id
    health_kind = HEALTH_KINDS.get(observation.health.status)
    culprits = tuple(
        CulpritPartition(
            topic=culprit.partition.topic,
            partition=culprit.partition.partition,
            reason=culprit.health.reason,
            lag=culprit.health.lag,
        )
        for culprit in observation.health.culprits
    )

    opened = dict(state.open_incidents)
    serial, last_recommendation_id = state.opened, state.last_recommendation_id
    resolves: list[IncidentTransition] = []
    changes: list[IncidentTransition] = []

    for kind in _ORDER:
        incident = opened.get(kind)
        if incident is None:
            continue
        reason = None
        if observation.gone:
            reason = "group deleted or empty"
        elif kind is IncidentKind.LAG_SKEW:
            skew = observation.skew
            if (
                recommendation is None
                and not observation.falls_behind
                and skew is not None
                and skew < observation.rearm_below
            ):
                reason = f"skew {skew:.3g} below {observation.rearm_below:.3g} (threshold x hysteresis)"
        elif kind is IncidentKind.HOT_PARTITION:
            hot_again = recommendation is not None and RECOMMENDATION_KINDS[recommendation.kind] is kind
            if not hot_again and not observation.hot and observation.skew is not None:
                reason = "no partition is written faster than the group's members read"
        elif kind is not health_kind and observation.health.status is not PartitionStatus.UNKNOWN:
            reason = f"group status {observation.health.status.value}: {observation.health.reason}"
        if reason is not None:
            del opened[kind]
            resolved = incident.model_copy(
                update={
                    "updated_at": now,
                    "resolved_at": now,
                    "lag_unit": observation.lag_unit,
                    "member_lag": member_lag,
                    **drains,
                }
            )
            resolves.append(IncidentTransition(action=IncidentAction.RESOLVE, incident=resolved, reason=reason))

    if not observation.gone:
        for kind in _ORDER:
            incident = opened.get(kind)
            skew_detail: SkewDetail | None = None
            if kind in RECOMMENDATION_KINDS.values():
                if recommendation is None or not is_new or RECOMMENDATION_KINDS[recommendation.kind] is not kind:
                    continue
                at, skew_detail = recommendation.time, SkewDetail.of(recommendation)
                summary = _skew_summary(skew_detail, recommendation)
                last_recommendation_id = recommendation.id
            else:
                if kind is not health_kind or (incident is not None and incident.partitions == _partitions(culprits)):
                    continue
                at, summary = now, observation.health.reason
            if incident is None:
                incident = Incident(
                    id=incident_id(group, kind, at, serial),
                    kind=kind,
                    severity=SEVERITY[kind],
                    group=group,
                    opened_at=at,
                    updated_at=at,
                    lag_unit=observation.lag_unit,
                    member_lag=member_lag,
                    drain=observation.drain,
                    member_drain=drains["member_drain"],
                    skew=skew_detail,
                    culprits=() if skew_detail is not None else culprits,
                )
                serial += 1
                action = IncidentAction.OPEN
            else:
                incident = incident.model_copy(
                    update={
                        "updated_at": at,
                        "lag_unit": observation.lag_unit,
                        "member_lag": member_lag,
                        **drains,
                        **({"skew": skew_detail} if skew_detail is not None else {"culprits": culprits}),
                    }
                )
                action = IncidentAction.UPDATE
            opened[kind] = incident
            changes.append(IncidentTransition(action=action, incident=incident, reason=summary))

    transitions = resolves + changes
    if not transitions:
        return state, []
    next_state = IncidentsState(
        group=group,
        open_incidents={kind: opened[kind] for kind in _ORDER if kind in opened},
        opened=serial,
        last_recommendation_id=last_recommendation_id,
    )
    return next_state, transitions


def _partitions(culprits: tuple[CulpritPartition, ...]) -> frozenset[tuple[str, int]]:
    return frozenset((culprit.topic, culprit.partition) for culprit in culprits)


def _skew_summary(detail: SkewDetail, recommendation: Recommendation) -> str:
    """The ``lag-skew`` or ``hot-partition`` incident's summary: what the recommendation asks for, and why."""
    scale, hot = recommendation.scale, recommendation.hot
    if recommendation.kind is RecommendationKind.HOT_PARTITION and hot is not None:
        return (
            f"{hot_partition_text(hot)}: recommendation {detail.recommendation_id} moves nothing, as no "
            f"assignment or member count helps"
        )
    if scale is not None:
        return (
            f"the members cannot keep up ({scale.capacity:.4g} records/s read, {scale.production_rate:.4g}/s "
            f"written): recommendation {detail.recommendation_id} asks for {scale.members_needed} members "
            f"instead of {scale.members}"
        )
    if recommendation.isolated is not None:
        return (
            f"{heavy_partition_text(recommendation.isolated)}: recommendation {detail.recommendation_id} moves "
            f"{len(detail.moves)} partitions to give it a member of its own, skew {detail.skew_before:.3g} "
            f"({detail.metric.value}) -> {detail.skew_after:.3g}"
        )
    return (
        f"skew {detail.skew_before:.3g} ({detail.metric.value}) at or above "
        f"{detail.threshold:.3g}: recommendation {detail.recommendation_id} moves "
        f"{len(detail.moves)} partitions, skew after {detail.skew_after:.3g}"
    )
