"""The worker's Prometheus metrics: a registry of their own, and the per-group gauges kept as text.

``/metrics`` serves the registry, then the per-group gauges (:class:`GroupGauges`), then the lag
series (:class:`~kagent.worker.lag_exporter.LagExporter`): :mod:`kagent.worker.scrape`.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kagent.core.collector import untrack
from kagent.core.exposition import go_float, label_value, labels_text
from kagent.core.incidents import IncidentKind
from kagent.core.lag_series import MEMBER_LABELS, Family, Level, member_labels
from kagent.worker.loop_slices import LoopSlices
from kagent.worker.scrape import LoopHold, family_blocks

__all__ = ["GROUP_GAUGE_FAMILIES", "GroupGauges", "HotPartitionFigures", "MemberDrain", "Metrics"]


@dataclass
class Metrics:
    """Counters, gauges and histograms of one worker.

    The per-group gauges (:attr:`group_gauges`, a :class:`GroupGauges`) are set by the stage that
    owns each figure; :meth:`forget_group` removes a group's series from all of them.
    """

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.records = Counter(
            "kagent_source_records", "Records read from the group-state source", ["source"], registry=r
        )
        self.malformed = Counter(
            "kagent_malformed_records",
            "Records that failed to decode and went to the dead-letter topic",
            ["topic"],
            registry=r,
        )
        self.dead_letter_failures = Counter(
            "kagent_dead_letter_send_failures",
            "Attempts to send a dead letter that failed or ran out of time (the letter is sent again until the "
            "broker has it), by the topic of the record it carries",
            ["topic"],
            registry=r,
        )
        self.source_restarts = Counter(
            "kagent_source_restarts",
            "Times the offsets-topic source's consumer failed and was made again, by where it failed "
            "(start, fetch, commit; error for anything else)",
            ["reason"],
            registry=r,
        )
        self.derived_events = Counter(
            "kagent_derived_events", "Derived events applied to the tables", ["kind"], registry=r
        )
        self.stale_events = Counter(
            "kagent_stale_events",
            "Derived events older than the state they would overwrite (read again), skipped",
            ["kind"],
            registry=r,
        )
        self.groups = Gauge("kagent_groups", "Groups this worker holds", registry=r)
        self.group_partitions = Gauge(
            "kagent_group_partitions", "Group-partitions with lag figures on this worker", registry=r
        )
        self.group_api_errors = Counter(
            "kagent_group_api_errors", "Failed group API requests (source admin-api), by API", ["api"], registry=r
        )
        self.group_api_partition_errors = Counter(
            "kagent_group_api_partition_errors",
            "Partitions a group API answered with an error (source admin-api; the last known commit stands), "
            "by API and Kafka error",
            ["api", "error"],
            registry=r,
        )
        self.group_api_rejected = Counter(
            "kagent_group_api_rejected",
            "Parts of group API answers that broke a rule of record_checks, skipped (source admin-api), "
            "by API and rule",
            ["api", "rule"],
            registry=r,
        )
        self.malformed_member_metadata = Counter(
            "kagent_malformed_member_metadata",
            "Member blobs from DescribeGroups that failed to decode (source admin-api), by part",
            ["part"],
            registry=r,
        )
        self.end_offset_polls = Counter(
            "kagent_end_offset_polls",
            "ListOffsets polls, by outcome: ok (every partition answered), partial (some without offsets), "
            "error (none, and no broker reached)",
            ["outcome"],
            registry=r,
        )
        self.end_offset_partitions_unavailable = Gauge(
            "kagent_end_offset_partitions_unavailable",
            "Partitions the latest ListOffsets poll asked for that got no offsets, by reason (unknown-partition, "
            "no-leader, request-failed, error-code)",
            ["reason"],
            registry=r,
        )
        self.evaluations = Counter("kagent_evaluations", "Group evaluations", registry=r)
        self.evaluations_skipped = Counter(
            "kagent_evaluations_skipped",
            "Groups due for evaluation that were not evaluated: quiet at their last evaluation, and nothing "
            "they read has changed since",
            registry=r,
        )
        self.evaluation_cpu = Counter(
            "kagent_evaluation_cpu_seconds",
            "CPU time of the event loop's thread spent looking for due groups and evaluating them",
            registry=r,
        )
        self.evaluation_loop_share = Gauge(
            "kagent_evaluation_loop_share",
            "The most of the event loop's time a long round of evaluations takes, as its last look at "
            "ingest found: less while the source or storage is behind",
            registry=r,
        )
        self.recommendations = Counter("kagent_recommendations", "Recommendations published", registry=r)
        self.stage_applied = Gauge(
            "kagent_stage_applied_records",
            "Records a stage has applied since the worker started",
            ["stage"],
            registry=r,
        )
        self.stage_backlog = Gauge("kagent_stage_backlog_records", "Records waiting for a stage", ["stage"], registry=r)
        self.stage_delay = Gauge(
            "kagent_stage_delay_seconds",
            "Seconds the newest record of a stage's last batch waited from its timestamp until applied; no "
            "series before its first batch",
            ["stage"],
            registry=r,
        )
        self.stage_stalled = Gauge(
            "kagent_stage_stalled", "1 while a stage has records waiting and applies none", ["stage"], registry=r
        )
        self.stage_stalls = Counter("kagent_stage_stalls", "Stalls of a stage", ["stage"], registry=r)
        self.derived_events_reread = Counter(
            "kagent_derived_events_reread",
            "Derived-events records read again, by why: lost by Faust before storage applied them (seeks back), "
            "or applied before (skipped)",
            ["reason"],
            registry=r,
        )
        self.evaluation_seconds = Histogram("kagent_evaluation_seconds", "Time to evaluate one group", registry=r)
        self.evaluation_delay = Histogram(
            "kagent_evaluation_delay_seconds",
            "Seconds from when a group came due (an interval after its last evaluation; half of one after a "
            "change, or after it was first seen) until its evaluation ran",
            buckets=(0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0),
            registry=r,
        )
        self.gc_pauses = Histogram(
            "kagent_gc_pause_seconds",
            "Time the cyclic garbage collector held the process (the event loop with it), by generation",
            ["generation"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.loop_lag = Histogram(
            "kagent_event_loop_lag_seconds",
            "How late the event loop ran a timer due every 50 ms (worker/loop_lag.py): how long anything due "
            "waited on top of its own time; the largest over a window is the loop's longest stall, give or take 50 ms",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=r,
        )
        self.gc_thaws = Counter(
            "kagent_gc_thaws",
            "Full collections that went over the objects frozen since the last (see worker/garbage_collection.py)",
            registry=r,
        )
        self.gc_freed_at_thaw = Gauge(
            "kagent_gc_freed_at_thaw_objects",
            "Objects the last collection that thawed the frozen ones freed (NaN before the first)",
            registry=r,
        )
        self.gc_freed_at_thaw.set(math.nan)
        self.scrapes = Counter("kagent_scrapes", "/metrics scrapes served", registry=r)
        self.scrape_cpu = Counter(
            "kagent_scrape_cpu_seconds",
            "CPU time of the event loop's thread spent rendering and writing /metrics (the scrapes' own)",
            registry=r,
        )
        self.scrape_longest_hold = Gauge(
            "kagent_scrape_longest_hold_seconds",
            "The longest the last full /metrics scrape (not one by name[]) held the event loop at once (rendering "
            "or writing a block), the garbage collector's pauses in it left out (kagent_gc_pause_seconds)",
            registry=r,
        )
        self.group_gauges = GroupGauges()
        self.incident_transitions = Counter(
            "kagent_incident_transitions",
            "Incident transitions sent, by incident kind and action (open, update, resolve)",
            ["kind", "action"],
            registry=r,
        )
        self.alert_deliveries = Counter(
            "kagent_alert_deliveries",
            "Deliveries of incident transitions to alert sinks, by sink and outcome (accepted, retried, rejected)",
            ["sink", "outcome"],
            registry=r,
        )
        self.alert_delivery_seconds = Histogram(
            "kagent_alert_delivery_seconds",
            "Time from an incident transition's record timestamp to its acceptance by the sink",
            ["sink"],
            buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0),
            registry=r,
        )
        self.alert_resends = Counter(
            "kagent_alert_resends",
            "Re-sends of the open incidents to alert sinks, by sink and outcome",
            ["sink", "outcome"],
            registry=r,
        )
        self.alerting_backlog = Gauge(
            "kagent_alerting_backlog_records",
            "Incident records the alerting stage has read but not yet delivered",
            registry=r,
        )

    def gc_paused(self, generation: int, seconds: float) -> None:
        """One collection of ``generation`` held the process ``seconds``."""
        self.gc_pauses.labels(str(generation)).observe(seconds)

    def gc_thawed(self, freed: int) -> None:
        """A full collection went over the objects frozen since the last, and freed ``freed`` objects."""
        self.gc_thaws.inc()
        self.gc_freed_at_thaw.set(freed)

    def forget_group(self, cluster_name: str, group: str) -> None:
        """Remove ``group``'s series from the per-group gauges, so a group this worker no longer holds
        stops being exported; a group without series is no error."""
        self.group_gauges.forget(cluster_name, group)


class _GroupFigures:
    """The per-group gauges' values of one group (None: never set, no series), their rendered text (None
    until rendered after the last change), and the text of its cluster and group labels: its figures
    change at nearly every evaluation, those never."""

    __slots__ = ("drain", "hot", "labels", "members", "open_incidents", "rendered", "skew", "status")

    def __init__(self, cluster_name: str, group: str) -> None:
        self.status: float | None = None
        self.skew: float | None = None
        self.members: float | None = None
        self.open_incidents: frozenset[str] | None = None
        self.drain: tuple[MemberDrain, ...] = ()
        self.hot: tuple[HotPartitionFigures, ...] = ()
        self.rendered: tuple[bytes, ...] | None = None
        self.labels = labels_text((("cluster_name", cluster_name), ("group", group)))
        """The inside of the braces of its samples labelled by cluster and group alone."""


GROUP_LABELS = ("cluster_name", "group")
GROUP_STATUS = Family(
    "kagent_group_status",
    "The group's health as Burrow's status code: 1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND",
    GROUP_LABELS,
    Level.ALWAYS,
)
RECOMMENDED_SKEW = Family(
    "kagent_group_recommended_skew",
    "Skew of the members' lag under the assignment the configured strategy would recommend now, "
    "in the evaluation's skew metric",
    GROUP_LABELS,
    Level.ALWAYS,
)
RECOMMENDED_MEMBERS = Family(
    "kagent_group_recommended_members",
    "Members the group needs to keep up with its producers: more than it has when no assignment of "
    "its members keeps up (a scale recommendation), otherwise the members it has",
    GROUP_LABELS,
    Level.ALWAYS,
)
OPEN_INCIDENTS = Family(
    "kagent_group_open_incidents",
    "1 while the group has an open incident of the kind (lag-skew, stop, stall, rewind, hot-partition), else 0",
    (*GROUP_LABELS, "kind"),
    Level.ALWAYS,
)
MEMBER_DRAIN = Family(
    "kagent_group_member_drain_seconds",
    "Seconds the member's offset lag takes to close at the rates of the rate window: its consumption less "
    "the production of its partitions (+Inf when it falls behind; none when a rate or its lag is unknown)",
    MEMBER_LABELS,
    Level.ALWAYS,
)
HOT_PARTITION_LABELS = (*GROUP_LABELS, "topic", "partition")
PARTITION_HOT = Family(
    "kagent_group_partition_hot",
    "1 while the group's last evaluation found the partition hot: written faster than its member, and any "
    "member of the group, reads, so no assignment or member count fixes it (no series otherwise)",
    HOT_PARTITION_LABELS,
    Level.ALWAYS,
)
HOT_PRODUCTION_RATE = Family(
    "kagent_group_partition_hot_production_rate",
    "Records per second written to a hot partition over the rate window (no series while it is not hot)",
    HOT_PARTITION_LABELS,
    Level.ALWAYS,
)
HOT_BEST_CAPACITY = Family(
    "kagent_group_partition_hot_best_capacity",
    "Records per second the fastest member of the group read over the rate window, beside each hot partition "
    "(no series while it is not hot)",
    HOT_PARTITION_LABELS,
    Level.ALWAYS,
)
GROUP_GAUGE_FAMILIES = (
    GROUP_STATUS,
    RECOMMENDED_SKEW,
    RECOMMENDED_MEMBERS,
    OPEN_INCIDENTS,
    MEMBER_DRAIN,
    PARTITION_HOT,
    HOT_PRODUCTION_RATE,
    HOT_BEST_CAPACITY,
)
"""The per-group gauges' families, in exposition order."""


class MemberDrain(NamedTuple):
    """One member's ``kagent_group_member_drain_seconds`` sample: its labels and its value."""

    member_host: str
    consumer_id: str
    client_id: str
    seconds: float
    """:attr:`kagent.core.drain_time.Drain.metric_value`: ``+Inf`` when it falls behind."""


class HotPartitionFigures(NamedTuple):
    """One hot partition's samples of ``kagent_group_partition_hot`` (1) and its rates."""

    topic: str
    partition: int
    production_rate: float
    """Records/s written to it over the rate window."""
    best_capacity: float
    """Records/s the fastest member of its group read over the rate window."""


class GroupGauges:
    """The per-group gauges, kept as plain figures per group and rendered as text once per change.

    ``prometheus_client``'s labelled ``Gauge`` keeps an object, a value and a lock per series, about
    700 bytes, and formats every sample at every scrape: at 50,000 groups, seconds of the event loop.
    Here a group costs one small record and its text, rendered at the first scrape after a change and
    joined at the others (:meth:`exposition`, served at ``/metrics`` beside the registry).

    - ``kagent_group_status`` [cluster_name, group]: Burrow's status code, set at each evaluation; no
      series while the status is UNKNOWN (nothing could be judged);
    - ``kagent_group_recommended_skew`` [cluster_name, group]: the skew under the assignment the
      strategy would recommend, when the last evaluation weighed a rebalance (its trigger could hold:
      :func:`kagent.core.evaluation.weighs_rebalance`); no series otherwise (a group below the threshold
      or the floor, whose strategy is not run; or one not measured: a figure from an older measurement
      would read as today's);
    - ``kagent_group_recommended_members`` [cluster_name, group]: the members the group needs, when the
      last evaluation could measure its members' lag (no series otherwise);
    - ``kagent_group_open_incidents`` [cluster_name, group, kind]: 1 for each kind of incident open,
      0 for the others, once the incident log has looked at the group;
    - ``kagent_group_member_drain_seconds`` [cluster_name, group, member_host, consumer_id, client_id]:
      each member's drain time at the last evaluation (:mod:`kagent.core.drain_time`; ``+Inf`` when it
      falls behind), the partitions no member holds as member ``unknown``; no series for a member whose
      drain is unknown. It is set here, at each evaluation, rather than rendered with the lag series at
      each scrape: it needs each partition's rates, read from the commit windows and end-offset histories
      (:meth:`~kagent.worker.group_state.GroupStateReader.throughput`), which the scrape path does not read
      and should not (a lagging group is rendered again at every scrape), and rates over a window of
      minutes move no faster than the evaluations.
    - ``kagent_group_partition_hot`` [cluster_name, group, topic, partition]: 1 for each partition the
      last evaluation found hot (:attr:`kagent.core.evaluation.Evaluation.hot`), beside its
      ``kagent_group_partition_hot_production_rate`` and the group's
      ``kagent_group_partition_hot_best_capacity`` (records/s, over the rate window); a partition's
      three series go at the first evaluation that does not find it hot (no longer hot, or not judged).
    """

    families = GROUP_GAUGE_FAMILIES

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], _GroupFigures] = {}

    def _set(self, cluster_name: str, group: str, figure: str, value: object) -> None:
        """Set one of ``group``'s figures; its text is rendered again only when the value changed (each
        evaluation sets them all)."""
        figures = self._groups.get((cluster_name, group))
        if figures is None:
            figures = self._groups[cluster_name, group] = _GroupFigures(cluster_name, group)
            untrack([figures])  # kept per group: numbers and text (kagent.core.collector)
        if getattr(figures, figure) != value:
            if isinstance(value, tuple | frozenset):  # samples' names and numbers, kept until the next change
                untrack([value, *value])
            setattr(figures, figure, value)
            figures.rendered = None

    def set_status(self, cluster_name: str, group: str, severity: float | None) -> None:
        """None: the status is unknown (no series)."""
        self._set(cluster_name, group, "status", severity)

    def set_recommended_skew(self, cluster_name: str, group: str, skew: float | None) -> None:
        """None: not measured (no series)."""
        self._set(cluster_name, group, "skew", skew)

    def set_recommended_members(self, cluster_name: str, group: str, members: float | None) -> None:
        """None: not measured (no series)."""
        self._set(cluster_name, group, "members", members)

    def set_open_incidents(self, cluster_name: str, group: str, kinds: Iterable[IncidentKind]) -> None:
        """The kinds of incident open for ``group`` now (every other kind is exported as 0)."""
        self._set(cluster_name, group, "open_incidents", frozenset(kind.value for kind in kinds))

    def set_member_drain(self, cluster_name: str, group: str, members: Sequence[MemberDrain]) -> None:
        """Each member's drain time whose drain is known (a member left out has no series)."""
        self._set(cluster_name, group, "drain", tuple(members))

    def set_hot_partitions(self, cluster_name: str, group: str, partitions: Sequence[HotPartitionFigures]) -> None:
        """The partitions the last evaluation found hot (none: no series)."""
        self._set(cluster_name, group, "hot", tuple(partitions))

    def forget(self, cluster_name: str, group: str) -> None:
        self._groups.pop((cluster_name, group), None)

    async def exposition(self, names: Collection[str] | None, hold: LoopHold) -> AsyncIterator[bytes]:
        """The text of each family (only those named in ``names``, when given), header first, groups
        rendered again only where a figure was set since; lets the event loop go between slices."""
        indexes = [index for index, family in enumerate(self.families) if names is None or family.name in names]
        if not indexes:
            return
        pieces: list[tuple[bytes, ...]] = []
        slices = LoopSlices()
        for (cluster_name, group), figures in list(self._groups.items()):
            if figures.rendered is None:
                figures.rendered = _render(cluster_name, group, figures)
            pieces.append(figures.rendered)
            if slices.over():  # even a look at 50,000 rendered groups takes its time
                await hold.pause(slices)
        for index in indexes:
            async for block in family_blocks(self.families[index].header, pieces, index, hold):
                yield block


_KINDS = tuple((kind.value, f',kind="{label_value(kind.value)}"') for kind in IncidentKind)
"""Each kind of incident, and what its ``kind`` label adds to a group's labels (sorted by name, it comes
after ``cluster_name`` and ``group``)."""


def _render(cluster_name: str, group: str, figures: _GroupFigures) -> tuple[bytes, ...]:
    """One group's samples of each of :data:`GROUP_GAUGE_FAMILIES`, as ``prometheus_client`` writes them
    (36 µs for a group of six members and its incidents when each sample's labels went through
    :func:`~kagent.core.exposition.labels_text`, 14 µs with its labels' text kept and its members' written
    by :func:`~kagent.core.lag_series.member_labels`, as the lag series write theirs)."""
    labels = figures.labels

    def line(family: Family, value: float | None) -> bytes:
        return b"" if value is None else f"{family.name}{{{labels}}} {go_float(value)}\n".encode()

    incidents = b""
    if figures.open_incidents is not None:
        incidents = "".join(
            f"{OPEN_INCIDENTS.name}{{{labels}{kind_label}}} {'1.0' if kind in figures.open_incidents else '0.0'}\n"
            for kind, kind_label in _KINDS
        ).encode()
    cluster, name = label_value(cluster_name), label_value(group)
    drain = "".join(
        f"{MEMBER_DRAIN.name}{member_labels(cluster, name, member.member_host, member.consumer_id, member.client_id)}"
        f"{go_float(member.seconds)}\n"
        for member in figures.drain
    ).encode()
    hot = [(labels_text(_hot_pairs(cluster_name, group, partition)), partition) for partition in figures.hot]
    return (
        line(GROUP_STATUS, figures.status),
        line(RECOMMENDED_SKEW, figures.skew),
        line(RECOMMENDED_MEMBERS, figures.members),
        incidents,
        drain,
        "".join(f"{PARTITION_HOT.name}{{{pairs}}} 1.0\n" for pairs, _ in hot).encode(),
        "".join(
            f"{HOT_PRODUCTION_RATE.name}{{{pairs}}} {go_float(partition.production_rate)}\n" for pairs, partition in hot
        ).encode(),
        "".join(
            f"{HOT_BEST_CAPACITY.name}{{{pairs}}} {go_float(partition.best_capacity)}\n" for pairs, partition in hot
        ).encode(),
    )


def _hot_pairs(cluster_name: str, group: str, partition: HotPartitionFigures) -> tuple[tuple[str, str], ...]:
    return (
        ("cluster_name", cluster_name),
        ("group", group),
        ("topic", partition.topic),
        ("partition", str(partition.partition)),
    )
