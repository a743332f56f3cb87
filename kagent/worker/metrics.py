"""The worker's Prometheus metrics, in a registry of their own (served at ``/metrics``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]


@dataclass
class Metrics:
    """Counters and gauges of one worker."""

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
        self.malformed_member_metadata = Counter(
            "kagent_malformed_member_metadata",
            "Member blobs from DescribeGroups that failed to decode (source admin-api), by part",
            ["part"],
            registry=r,
        )
        self.end_offset_polls = Counter(
            "kagent_end_offset_polls", "ListOffsets polls, by outcome", ["outcome"], registry=r
        )
        self.evaluations = Counter("kagent_evaluations", "Group evaluations", registry=r)
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
