"""The worker's Prometheus metrics, in a registry of their own (served at ``/metrics``).

Beside the metrics of :class:`Metrics`, the registry holds a
:class:`~kagent.worker.lag_exporter.LagExporter`, which computes the lag series at each scrape.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kagent.core.incidents import IncidentKind

__all__ = ["GroupGauges", "Metrics"]


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
        self.recommendations = Counter("kagent_recommendations", "Recommendations published", registry=r)
        self.stage_applied = Gauge(
            "kagent_stage_applied_records",
            "Records a stage has applied since the worker started",
            ["stage"],
            registry=r,
        )
        self.stage_backlog = Gauge("kagent_stage_backlog_records", "Records waiting for a stage", ["stage"], registry=r)
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
        self.group_gauges = GroupGauges(registry=r)
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

    def forget_group(self, cluster_name: str, group: str) -> None:
        """Remove ``group``'s series from the per-group gauges, so a group this worker no longer holds
        stops being exported; a group without series is no error."""
        self.group_gauges.forget(cluster_name, group)


class _GroupFigures:
    """The per-group gauges' values of one group; None: never set (no series)."""

    __slots__ = ("members", "open_incidents", "skew", "status")

    def __init__(self) -> None:
        self.status: float | None = None
        self.skew: float | None = None
        self.members: float | None = None
        self.open_incidents: frozenset[str] | None = None


class GroupGauges(Collector):
    """The per-group gauges, kept as plain figures per group and made into samples at each scrape.

    ``prometheus_client``'s labelled ``Gauge`` keeps an object, a value and a lock per series, about
    700 bytes: the seven series of each group came to 24 MB at 5,000 groups, and removing one group's
    series meant reading every series of the family. Here a group costs one small record.

    - ``kagent_group_status`` [cluster_name, group]: Burrow's status code, set at each evaluation; no
      series while the status is UNKNOWN (nothing could be judged);
    - ``kagent_group_recommended_skew`` [cluster_name, group]: the skew under the assignment the
      strategy would recommend, when the last evaluation could measure it (no series otherwise: a
      figure from an older measurement would read as today's);
    - ``kagent_group_recommended_members`` [cluster_name, group]: the members the group needs, when the
      last evaluation could measure its members' lag (no series otherwise);
    - ``kagent_group_open_incidents`` [cluster_name, group, kind]: 1 for each kind of incident open,
      0 for the others, once the incident log has looked at the group.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._groups: dict[tuple[str, str], _GroupFigures] = {}
        if registry is not None:
            registry.register(self)

    def _figures(self, cluster_name: str, group: str) -> _GroupFigures:
        figures = self._groups.get((cluster_name, group))
        if figures is None:
            figures = self._groups[cluster_name, group] = _GroupFigures()
        return figures

    def set_status(self, cluster_name: str, group: str, severity: float | None) -> None:
        """None: the status is unknown (no series)."""
        self._figures(cluster_name, group).status = severity

    def set_recommended_skew(self, cluster_name: str, group: str, skew: float | None) -> None:
        """None: not measured (no series)."""
        self._figures(cluster_name, group).skew = skew

    def set_recommended_members(self, cluster_name: str, group: str, members: float | None) -> None:
        """None: not measured (no series)."""
        self._figures(cluster_name, group).members = members

    def set_open_incidents(self, cluster_name: str, group: str, kinds: Iterable[IncidentKind]) -> None:
        """The kinds of incident open for ``group`` now (every other kind is exported as 0)."""
        self._figures(cluster_name, group).open_incidents = frozenset(kind.value for kind in kinds)

    def forget(self, cluster_name: str, group: str) -> None:
        self._groups.pop((cluster_name, group), None)

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        status, skew, members, incidents = self._families()
        kinds = [kind.value for kind in IncidentKind]
        for (cluster_name, group), figures in list(self._groups.items()):
            labels = [cluster_name, group]
            if figures.status is not None:
                status.add_metric(labels, figures.status)
            if figures.skew is not None:
                skew.add_metric(labels, figures.skew)
            if figures.members is not None:
                members.add_metric(labels, figures.members)
            if figures.open_incidents is not None:
                for kind in kinds:
                    incidents.add_metric([*labels, kind], 1.0 if kind in figures.open_incidents else 0.0)
        yield from (status, skew, members, incidents)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        group = ["cluster_name", "group"]
        return (
            GaugeMetricFamily(
                "kagent_group_status",
                "The group's health as Burrow's status code: 1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND",
                labels=group,
            ),
            GaugeMetricFamily(
                "kagent_group_recommended_skew",
                "Skew of the members' lag under the assignment the configured strategy would recommend now, "
                "in the evaluation's skew metric",
                labels=group,
            ),
            GaugeMetricFamily(
                "kagent_group_recommended_members",
                "Members the group needs to keep up with its producers: more than it has when no assignment of "
                "its members keeps up (a scale recommendation), otherwise the members it has",
                labels=group,
            ),
            GaugeMetricFamily(
                "kagent_group_open_incidents",
                "1 while the group has an open incident of the kind (lag-skew, stop, stall, rewind), else 0",
                labels=[*group, "kind"],
            ),
        )
