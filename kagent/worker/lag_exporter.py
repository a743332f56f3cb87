"""Lag series in kafka-lag-exporter's names, and kagent's own per-member figures, computed at each scrape.

:class:`LagExporter` is a ``prometheus_client`` custom collector for the
worker's registry. At each scrape it reads the snapshot of every group this
worker holds (:class:`~kagent.worker.group_state.GroupStateReader`) and
exports, with each worker exporting only the groups it holds:

kafka-lag-exporter's series (names, label names and meaning as its ``Metrics.scala`` defines them;
all gauges), with the coarsest :class:`~kagent.settings.MetricsGranularity` that still exports each:

- ``kafka_consumergroup_group_offset``, ``kafka_consumergroup_group_lag``,
  ``kafka_consumergroup_group_lag_seconds`` [cluster_name, group, topic, partition, member_host,
  consumer_id, client_id]: ``partition``;
- ``kafka_partition_latest_offset``, ``kafka_partition_earliest_offset`` [cluster_name, topic,
  partition]: ``partition``;
- ``kafka_consumergroup_group_topic_sum_lag`` [cluster_name, group, topic]: ``topic``;
- ``kafka_consumergroup_group_max_lag``, ``kafka_consumergroup_group_max_lag_seconds``,
  ``kafka_consumergroup_group_sum_lag`` [cluster_name, group]: ``group``.

So ``partition`` exports all of them, ``topic`` drops the per-partition ones, ``group`` keeps only the
per-group ones.

kagent's own series, exported at every granularity (a group has few members):

- ``kagent_group_member_lag`` [cluster_name, group, member_host, consumer_id, client_id]: the offset lag
  of the partitions the member is assigned, added up (records); the partitions no member holds (all of
  them for a group without members) as one more member labelled ``unknown``; no series for a member
  with a partition whose lag is unknown (:mod:`kagent.core.member_lag`);
- ``kagent_group_member_lag_seconds`` [same]: their time lag added up (seconds), as the evaluator adds it
  up in lag unit ``seconds``; no series when one of them has no known time lag;
- ``kagent_group_skew`` [cluster_name, group]: the skew under the current assignment in the policy's
  skew metric and lag unit, as the evaluation measures it (``Evaluation.skew``); no series when it
  cannot be measured (no members, or a member's lag unknown);
- ``kagent_group_members`` [cluster_name, group]: the members of the group's current assignment.

A figure kagent does not know is never exported as 0: a partition whose offset lag is not measured
(the latest end-offset poll had no answer for it, or that answer is stale, or there is no committed
offset while records wait: :attr:`~kagent.core.snapshot.PartitionLag.measured`) has NaN lag and time
lag, and counts in no sum.

Choices, following kafka-lag-exporter's source (``src/main/scala/com/lightbend/kafkalagexporter``,
``Metrics.scala``, ``ConsumerGroupCollector.scala`` and ``KafkaClient.scala``, v0.8.2):

- **Labels of a partition no member holds**: kafka-lag-exporter reports the partitions of a group
  without member information with ``member_host``, ``consumer_id`` and ``client_id`` set to
  ``unknown`` (``KafkaClient.getGroupPartitionsInfo``, PR #128); kagent does the same (:data:`NO_MEMBER`)
  for every partition the group reads that no member of the current assignment holds: every partition
  of a group without members, or whose assignment kagent was never told, and those it has committed
  offsets on that no member holds. (For a group with members, kafka-lag-exporter takes the partitions
  from the members' assignments only, so it has no series for such a partition; kagent shows its lag
  rather than hide it.)
- **No committed offset** (``PartitionLag.committed`` is None): kafka-lag-exporter reports NaN for the
  offset, the lag and the time lag (CHANGELOG 0.4.x, PR #50). kagent exports no ``group_offset`` series
  for it, and NaN for ``group_lag`` and ``group_lag_seconds`` while records wait: the lag there would
  follow ``auto.offset.reset`` (an estimate), not a position the group reached; with no record in the
  partition, nothing is left to read and the lag is 0.
- **Unknown time lag** (``PartitionLag.time_lag`` is None with records waiting): NaN
  ``group_lag_seconds``, as kafka-lag-exporter reports NaN when its lookup table has too few points;
  with no records waiting the time lag is 0 (its ``LagIsZero``).
- **Aggregates** leave NaN out: ``sum_lag`` and ``topic_sum_lag`` add up the known lags, as
  kafka-lag-exporter does since PR #158, and are NaN when none is known (not 0: a group whose every
  figure is unknown has no lag kagent can state). ``max_lag`` and ``max_lag_seconds`` are the
  largest known value, NaN when none is known (kafka-lag-exporter takes ``maxBy`` without filtering,
  so one NaN partition can make its maximum NaN; kagent does not copy that).
- **No** ``is_simple_consumer`` **label**: kafka-lag-exporter's README still lists it on ``max_lag`` and
  ``max_lag_seconds``, but it was removed from every metric in 0.4.1 (``Metrics.scala``: group metrics
  carry ``cluster_name, group``), so queries dividing ``max_lag`` by ``sum_lag`` match one to one as
  they do against kafka-lag-exporter. (It would always be ``false`` here: it is Kafka's
  ``ConsumerGroupDescription.isSimpleConsumerGroup``, true for a group with no protocol type, one whose
  consumers only ``assign()`` and commit; kagent holds only groups of the ``consumer`` protocol.)
- ``kafka_partition_*`` series come from the partitions of the held groups' lag figures, once per
  partition (a partition read by several groups has one series), and only while the latest poll's
  answer for it is fresh: a partition without one has no series.

A group whose snapshot cannot be read or turned into figures is left out of the scrape and
logged once (until it succeeds again); the other groups are exported.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from aiokafka.structs import TopicPartition
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kagent.core.events import MemberAssignment
from kagent.core.member_lag import NO_MEMBER, current_skew, member_lags
from kagent.core.policy import EvaluationPolicy
from kagent.core.snapshot import UNANSWERED_FLAGS, GroupSnapshot, LagFlag, PartitionLag
from kagent.worker.group_state import GroupStateReader

if TYPE_CHECKING:
    # Only for annotations: kagent.worker.metrics imports this module, and every stage imports it,
    # so it does not load the settings module (a str enum; its members are looked up by value below).
    from kagent.settings import MetricsGranularity

__all__ = [
    "NO_MEMBER",
    "GroupFigures",
    "GroupLagRow",
    "LagExporter",
    "MemberRow",
    "PartitionOffsetRow",
    "PartitionRow",
    "TopicLagRow",
    "group_figures",
    "group_lag_row",
    "group_skew",
    "member_rows",
    "metric_families",
    "partition_offset_rows",
    "partition_rows",
    "topic_lag_rows",
]

log = logging.getLogger(__name__)

NAN = math.nan


# --------------------------------------------------------------------------------------------------------------------
# Rows: what one scrape exports, as plain data.


@dataclass(frozen=True)
class PartitionRow:
    """One group-partition's figures, for the per-partition series of kafka-lag-exporter."""

    group: str
    topic: str
    partition: int
    member_host: str
    consumer_id: str
    client_id: str
    """The member holding it (its client host, member id and client id); :data:`NO_MEMBER` when none does."""
    committed: int | None
    """The group's committed offset (``kafka_consumergroup_group_offset``); None: no series."""
    lag: float
    """Offset lag in records; NaN when the group has no committed offset."""
    lag_seconds: float
    """Time lag in seconds; NaN when unknown (no committed offset, or no time lag with records waiting)."""


@dataclass(frozen=True)
class TopicLagRow:
    """One group's known lag on one topic, added up (``kafka_consumergroup_group_topic_sum_lag``)."""

    group: str
    topic: str
    sum_lag: float


@dataclass(frozen=True)
class GroupLagRow:
    """One group's lag aggregates (``kafka_consumergroup_group_{max_lag,max_lag_seconds,sum_lag}``)."""

    group: str
    max_lag: float
    """Largest known offset lag; NaN when none is known."""
    max_lag_seconds: float
    """Largest known time lag; NaN when none is known."""
    sum_lag: float
    """Known offset lags added up; 0 when none is known."""


@dataclass(frozen=True)
class PartitionOffsetRow:
    """One partition's log offsets (``kafka_partition_latest_offset``, ``kafka_partition_earliest_offset``)."""

    topic: str
    partition: int
    latest: int
    earliest: int
    polled_at: float
    """Seconds since the epoch of the poll the offsets come from."""


@dataclass(frozen=True)
class MemberRow:
    """One member's lag (``kagent_group_member_lag``, ``kagent_group_member_lag_seconds``)."""

    group: str
    member_host: str
    consumer_id: str
    client_id: str
    lag: float | None
    """Records, added up over the partitions it is assigned; None when one of them is unknown."""
    lag_seconds: float | None
    """Seconds, added up likewise; None when one of its partitions has no known time lag."""


@dataclass(frozen=True)
class GroupFigures:
    """Everything one group contributes to a scrape."""

    group: str
    partitions: tuple[PartitionRow, ...]
    topics: tuple[TopicLagRow, ...]
    lag: GroupLagRow | None
    """None for a group without any partition lag figures (no per-group kafka-lag-exporter series)."""
    members: tuple[MemberRow, ...]
    member_count: int
    skew: float | None
    """Skew under the current assignment; None when it cannot be measured."""
    offsets: tuple[PartitionOffsetRow, ...]
    """Log offsets of the partitions with lag figures, by topic and partition."""


# --------------------------------------------------------------------------------------------------------------------
# Pure functions: snapshot -> rows.


def _owners(members: Iterable[MemberAssignment]) -> dict[TopicPartition, MemberAssignment]:
    """The member holding each assigned partition (the first one listed, should two claim it)."""
    owners: dict[TopicPartition, MemberAssignment] = {}
    for member in members:
        for ref in member.partitions:
            owners.setdefault(ref.topic_partition, member)
    return owners


def partition_rows(snapshot: GroupSnapshot) -> list[PartitionRow]:
    """One row per partition of ``snapshot.lag``, by topic and partition.

    A partition held by a member carries its ``client_host``, ``member_id`` and ``client_id``; one held by
    no member carries :data:`NO_MEMBER` in all three. Without a committed offset the row has no offset; its
    lag is NaN unless measured (:attr:`PartitionLag.measured`), its time lag NaN unless known (0 with
    no records waiting).
    """
    owners = _owners(snapshot.assignment.members)
    rows = []
    for tp in sorted(snapshot.lag):
        figures = snapshot.lag[tp]
        owner = owners.get(tp)
        if figures.offset_lag is None:
            lag, lag_seconds = NAN, NAN
        else:
            time_lag = 0.0 if figures.offset_lag == 0 else figures.time_lag
            lag, lag_seconds = float(figures.offset_lag), NAN if time_lag is None else time_lag
        rows.append(
            PartitionRow(
                group=snapshot.group,
                topic=tp.topic,
                partition=tp.partition,
                member_host=owner.client_host if owner else NO_MEMBER,
                consumer_id=owner.member_id if owner else NO_MEMBER,
                client_id=owner.client_id if owner else NO_MEMBER,
                committed=figures.committed,
                lag=lag,
                lag_seconds=lag_seconds,
            )
        )
    return rows


def _known(values: Iterable[float]) -> list[float]:
    return [value for value in values if not math.isnan(value)]


def topic_lag_rows(rows: Sequence[PartitionRow]) -> list[TopicLagRow]:
    """Each (group, topic) of ``rows`` with its known offset lags added up (NaN left out; NaN when none is
    known), sorted."""
    sums: dict[tuple[str, str], float] = {}
    for row in rows:
        key = (row.group, row.topic)
        total = sums.get(key, NAN)
        if not math.isnan(row.lag):
            total = row.lag if math.isnan(total) else total + row.lag
        sums[key] = total
    return [TopicLagRow(group, topic, total) for (group, topic), total in sorted(sums.items())]


def group_lag_row(group: str, rows: Sequence[PartitionRow]) -> GroupLagRow | None:
    """``group``'s aggregates over its partition ``rows``; None when there are none.

    Maxima are over known values, the sum adds the known offset lags; each NaN when none is known.
    """
    if not rows:
        return None
    lags = _known(row.lag for row in rows)
    seconds = _known(row.lag_seconds for row in rows)
    return GroupLagRow(
        group=group,
        max_lag=max(lags, default=NAN),
        max_lag_seconds=max(seconds, default=NAN),
        sum_lag=float(sum(lags)) if lags else NAN,
    )


def partition_offset_rows(figures: Iterable[GroupFigures]) -> list[PartitionOffsetRow]:
    """Each partition of ``figures`` once, with its offsets from the newest poll among the groups, sorted."""
    newest: dict[tuple[str, int], PartitionOffsetRow] = {}
    for group in figures:
        for row in group.offsets:
            key = (row.topic, row.partition)
            if key not in newest or row.polled_at > newest[key].polled_at:
                newest[key] = row
    return [newest[key] for key in sorted(newest)]


def member_rows(snapshot: GroupSnapshot) -> list[MemberRow]:
    """Each member of the current assignment with its lag in records and in seconds, by member id, then
    the partitions no member holds as member :data:`NO_MEMBER` (:func:`kagent.core.member_lag.member_lags`);
    a figure None when unknown (no series)."""
    rows, rest = member_lags(snapshot)
    return [
        MemberRow(
            group=snapshot.group,
            member_host=row.client_host,
            consumer_id=row.member_id,
            client_id=row.client_id,
            lag=None if row.offset_lag is None else float(row.offset_lag),
            lag_seconds=row.time_lag,
        )
        for row in [*rows, *([rest] if rest is not None else [])]
    ]


def group_skew(snapshot: GroupSnapshot, policy: EvaluationPolicy) -> float | None:
    """The skew under the current assignment in ``policy.skew_metric`` and ``policy.lag_unit``: the value
    :func:`kagent.core.evaluation.evaluate` reports (:func:`kagent.core.member_lag.current_skew`); None
    when a member's lag is unknown or the group has no members."""
    return current_skew(snapshot, policy.lag_unit, policy.skew_metric)


def _fresh(figures: PartitionLag) -> bool:
    """Whether the partition's offsets come from the latest poll, answered and not stale."""
    return figures.log_end is not None and not any(
        flag in UNANSWERED_FLAGS or flag is LagFlag.STALE_END_OFFSET for flag in figures.flags
    )


def group_figures(snapshot: GroupSnapshot, policy: EvaluationPolicy) -> GroupFigures:
    """Every row one group contributes to a scrape (all granularities; the collector picks)."""
    rows = partition_rows(snapshot)
    return GroupFigures(
        group=snapshot.group,
        partitions=tuple(rows),
        topics=tuple(topic_lag_rows(rows)),
        lag=group_lag_row(snapshot.group, rows),
        members=tuple(member_rows(snapshot)),
        member_count=len(snapshot.assignment.members),
        skew=group_skew(snapshot, policy),
        offsets=tuple(
            PartitionOffsetRow(tp.topic, tp.partition, figures.log_end, figures.log_start, figures.polled_at)
            for tp, figures in sorted(snapshot.lag.items())
            if _fresh(figures)
            and figures.log_end is not None
            and figures.log_start is not None
            and figures.polled_at is not None
        ),
    )


# --------------------------------------------------------------------------------------------------------------------
# Metric families.


class _Level(Enum):
    """The finest thing a series is about; decides at which granularities it is exported."""

    PARTITION = "partition"
    TOPIC = "topic"
    GROUP = "group"
    ALWAYS = "always"


_KEPT: Mapping[str, frozenset[_Level]] = {
    "partition": frozenset(_Level),
    "topic": frozenset({_Level.TOPIC, _Level.GROUP, _Level.ALWAYS}),
    "group": frozenset({_Level.GROUP, _Level.ALWAYS}),
}
"""The levels each :class:`~kagent.settings.MetricsGranularity` exports, by its value."""

GROUP_PARTITION_LABELS = ("cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id")
PARTITION_LABELS = ("cluster_name", "topic", "partition")
GROUP_TOPIC_LABELS = ("cluster_name", "group", "topic")
GROUP_LABELS = ("cluster_name", "group")
MEMBER_LABELS = ("cluster_name", "group", "member_host", "consumer_id", "client_id")


@dataclass(frozen=True)
class _Family:
    name: str
    help: str
    labels: tuple[str, ...]
    level: _Level

    def empty(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.name, self.help, labels=self.labels)


GROUP_OFFSET = _Family(
    "kafka_consumergroup_group_offset",
    "Last group consumed offset of a partition (none without a committed offset)",
    GROUP_PARTITION_LABELS,
    _Level.PARTITION,
)
GROUP_LAG = _Family(
    "kafka_consumergroup_group_lag",
    "Group offset lag of a partition (NaN without a committed offset)",
    GROUP_PARTITION_LABELS,
    _Level.PARTITION,
)
GROUP_LAG_SECONDS = _Family(
    "kafka_consumergroup_group_lag_seconds",
    "Group time lag of a partition (NaN when unknown)",
    GROUP_PARTITION_LABELS,
    _Level.PARTITION,
)
LATEST_OFFSET = _Family(
    "kafka_partition_latest_offset", "Latest offset of a partition", PARTITION_LABELS, _Level.PARTITION
)
EARLIEST_OFFSET = _Family(
    "kafka_partition_earliest_offset", "Earliest offset of a partition", PARTITION_LABELS, _Level.PARTITION
)
TOPIC_SUM_LAG = _Family(
    "kafka_consumergroup_group_topic_sum_lag",
    "Sum of group offset lag across topic partitions",
    GROUP_TOPIC_LABELS,
    _Level.TOPIC,
)
MAX_LAG = _Family("kafka_consumergroup_group_max_lag", "Max group offset lag", GROUP_LABELS, _Level.GROUP)
MAX_LAG_SECONDS = _Family("kafka_consumergroup_group_max_lag_seconds", "Max group time lag", GROUP_LABELS, _Level.GROUP)
SUM_LAG = _Family("kafka_consumergroup_group_sum_lag", "Sum of group offset lag", GROUP_LABELS, _Level.GROUP)
MEMBER_LAG = _Family(
    "kagent_group_member_lag",
    "Offset lag of the partitions a member is assigned, added up (records)",
    MEMBER_LABELS,
    _Level.ALWAYS,
)
MEMBER_LAG_SECONDS = _Family(
    "kagent_group_member_lag_seconds",
    "Time lag of the partitions a member is assigned, added up (seconds; none when one is unknown)",
    MEMBER_LABELS,
    _Level.ALWAYS,
)
GROUP_SKEW = _Family(
    "kagent_group_skew",
    "Skew of the members' lag under the current assignment, in the evaluation's skew metric and lag unit",
    GROUP_LABELS,
    _Level.ALWAYS,
)
GROUP_MEMBERS = _Family(
    "kagent_group_members", "Members of the group's current assignment", GROUP_LABELS, _Level.ALWAYS
)

_FAMILIES: tuple[_Family, ...] = (
    GROUP_OFFSET,
    GROUP_LAG,
    GROUP_LAG_SECONDS,
    LATEST_OFFSET,
    EARLIEST_OFFSET,
    TOPIC_SUM_LAG,
    MAX_LAG,
    MAX_LAG_SECONDS,
    SUM_LAG,
    MEMBER_LAG,
    MEMBER_LAG_SECONDS,
    GROUP_SKEW,
    GROUP_MEMBERS,
)


def _families(granularity: MetricsGranularity | None) -> list[_Family]:
    if granularity is None:
        return list(_FAMILIES)
    kept = _KEPT[granularity]
    return [family for family in _FAMILIES if family.level in kept]


def metric_families(granularity: MetricsGranularity | None = None) -> list[Metric]:
    """The (empty) families :class:`LagExporter` exports at ``granularity``; every one it can export when None."""
    return [family.empty() for family in _families(granularity)]


def _fill(families: Mapping[str, GaugeMetricFamily], cluster_name: str, figures: Sequence[GroupFigures]) -> None:
    """Add the samples of ``figures`` to those of ``families`` (by name) that are present."""

    def add(family: _Family, labels: Sequence[str], value: float) -> None:
        target = families.get(family.name)
        if target is not None:
            target.add_metric(list(labels), value)

    for group in figures:
        for row in group.partitions:
            labels = (
                cluster_name,
                row.group,
                row.topic,
                str(row.partition),
                row.member_host,
                row.consumer_id,
                row.client_id,
            )
            if row.committed is not None:
                add(GROUP_OFFSET, labels, float(row.committed))
            add(GROUP_LAG, labels, row.lag)
            add(GROUP_LAG_SECONDS, labels, row.lag_seconds)
        for topic in group.topics:
            add(TOPIC_SUM_LAG, (cluster_name, topic.group, topic.topic), topic.sum_lag)
        if group.lag is not None:
            add(MAX_LAG, (cluster_name, group.group), group.lag.max_lag)
            add(MAX_LAG_SECONDS, (cluster_name, group.group), group.lag.max_lag_seconds)
            add(SUM_LAG, (cluster_name, group.group), group.lag.sum_lag)
        for member in group.members:
            member_labels = (cluster_name, member.group, member.member_host, member.consumer_id, member.client_id)
            if member.lag is not None:
                add(MEMBER_LAG, member_labels, member.lag)
            if member.lag_seconds is not None:
                add(MEMBER_LAG_SECONDS, member_labels, member.lag_seconds)
        if group.skew is not None:
            add(GROUP_SKEW, (cluster_name, group.group), group.skew)
        add(GROUP_MEMBERS, (cluster_name, group.group), float(group.member_count))
    if LATEST_OFFSET.name in families or EARLIEST_OFFSET.name in families:
        for offsets in partition_offset_rows(figures):
            add(LATEST_OFFSET, (cluster_name, offsets.topic, str(offsets.partition)), float(offsets.latest))
            add(EARLIEST_OFFSET, (cluster_name, offsets.topic, str(offsets.partition)), float(offsets.earliest))


# --------------------------------------------------------------------------------------------------------------------
# The collector.


REUSE_FOR = 1.0
"""Seconds a scrape's figures serve later scrapes: a scrape takes a snapshot of every held group, and a
scraper polling many times a second (a test harness, several Prometheus servers) must not take a core."""


class LagExporter(Collector):
    """A custom collector: at each scrape, the lag series of every group ``reader`` holds.

    Register it in the worker's registry (``registry.register(LagExporter(...))``): registering calls
    :meth:`describe`, which reads nothing. :meth:`collect` reads ``reader`` at ``clock()`` and never
    raises for a group's sake: a group whose snapshot raises (or whose figures cannot be computed) is
    skipped and logged once, until it succeeds again; a reader whose ``held_groups`` raises gives a scrape
    with no samples from this collector, logged likewise. Call it from the thread that owns ``reader``
    (the event loop's, where the ``/metrics`` view runs).
    """

    def __init__(
        self,
        reader: GroupStateReader,
        *,
        cluster_name: str,
        granularity: MetricsGranularity,
        policy: EvaluationPolicy,
        clock: Callable[[], float] = time.time,
        reuse_for: float = REUSE_FOR,
    ) -> None:
        if granularity not in _KEPT:
            raise ValueError(f"unknown metrics granularity {granularity!r}; expected one of {sorted(_KEPT)}")
        self._reader = reader
        self._cluster_name = cluster_name
        self._granularity = granularity
        self._policy = policy
        self._clock = clock
        self._failing: set[str] = set()
        """Groups whose last scrape failed (logged once)."""
        self._listing_failed = False
        """Whether the last ``held_groups`` call failed (logged once)."""
        self._reuse_for = reuse_for
        self._computed: tuple[float, list[GroupFigures]] | None = None
        """(``time.monotonic()`` when, the figures) of the last scrape's computation."""

    def describe(self) -> list[Metric]:
        """The families this collector exports at its granularity, without samples; reads nothing."""
        return metric_families(self._granularity)

    def collect(self) -> Iterator[Metric]:
        """The families of :meth:`describe`, with the samples of every held group that could be read;
        a scrape within ``reuse_for`` seconds of the last computation gets its figures again."""
        started = time.monotonic()
        if self._computed is None or started - self._computed[0] >= self._reuse_for:
            self._computed = (started, self.figures())
        families = {family.name: family.empty() for family in _families(self._granularity)}
        _fill(families, self._cluster_name, self._computed[1])
        yield from families.values()

    def figures(self) -> list[GroupFigures]:
        """The figures of every held group that could be read at ``clock()``, by group."""
        now = self._clock()
        try:
            groups = self._reader.held_groups()
        except Exception:  # a scrape must not fail because the reader did
            if not self._listing_failed:
                self._listing_failed = True
                log.exception("lag exporter: could not list the held groups; no lag series (logged once)")
            return []
        self._listing_failed = False
        result = []
        for group in groups:
            try:
                snapshot = self._reader.snapshot(group, now)
                figures = group_figures(snapshot, self._policy) if snapshot is not None else None
            except Exception:  # one broken group must not break the scrape
                if group not in self._failing:
                    self._failing.add(group)
                    log.exception(
                        "lag exporter: group %r left out of the scrape (logged once until it recovers)", group
                    )
                continue
            if group in self._failing:
                self._failing.discard(group)
                log.info("lag exporter: group %r exports again", group)
            if figures is not None:
                result.append(figures)
        self._failing &= set(groups)
        return result
