"""A group's lag series, in kafka-lag-exporter's names and kagent's, rendered as Prometheus text.

The worker keeps each group's series as rendered text, one piece per family,
and a scrape joins the pieces family by family (:mod:`kagent.worker.lag_exporter`).
This module is what renders them: :func:`render_group` from a group's plain
figures (:class:`GroupLag`), :func:`render_partition_offsets` for the
per-partition log offsets the groups share. What it writes is what
``prometheus_client`` writes for the same samples (:mod:`kagent.core.exposition`).

kafka-lag-exporter's series (names, label names and meaning as its ``Metrics.scala`` defines them;
all gauges), with the coarsest granularity (``KAGENT_METRICS_GRANULARITY``) that still exports each:

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
  skew metric and lag unit, as the evaluation measures it; no series when it cannot be measured (no
  members, or a member's lag unknown);
- ``kagent_group_members`` [cluster_name, group]: the members of the group's current assignment.

A figure kagent does not know is never exported as 0: a partition whose offset lag is not measured
(the latest end-offset poll had no answer for it, or that answer is stale, or there is no committed
offset while records wait) has NaN lag and time lag, and counts in no sum.

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
- **No committed offset**: kafka-lag-exporter reports NaN for the offset, the lag and the time lag
  (CHANGELOG 0.4.x, PR #50). kagent exports no ``group_offset`` series for it, and NaN for
  ``group_lag`` and ``group_lag_seconds`` while records wait: the lag there would follow
  ``auto.offset.reset`` (an estimate), not a position the group reached; with no record in the
  partition, nothing is left to read and the lag is 0.
- **Unknown time lag** (with records waiting): NaN ``group_lag_seconds``, as kafka-lag-exporter
  reports NaN when its lookup table has too few points; with no records waiting the time lag is 0
  (its ``LagIsZero``).
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
- ``kafka_partition_*`` series: once per partition the held groups read (a partition read by several
  groups has one series), and only while the latest poll's answer for it is fresh.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from aiokafka.structs import TopicPartition

from kagent.core.exposition import family_header, go_float, label_value, labels_text
from kagent.core.member_lag import NO_MEMBER, Member, MemberTotals, skew_of
from kagent.core.policy import LagUnit, SkewMetric

__all__ = [
    "FAMILIES",
    "GRANULARITIES",
    "GROUP_FAMILIES",
    "NO_MEMBER",
    "Family",
    "GroupLag",
    "LagOf",
    "Level",
    "PartitionOffsets",
    "RenderedGroup",
    "families_at",
    "render_group",
    "render_partition_offsets",
]

NAN = math.nan


class Level(Enum):
    """The finest thing a series is about; decides at which granularities it is exported."""

    PARTITION = "partition"
    TOPIC = "topic"
    GROUP = "group"
    ALWAYS = "always"


GRANULARITIES: Mapping[str, frozenset[Level]] = {
    "partition": frozenset(Level),
    "topic": frozenset({Level.TOPIC, Level.GROUP, Level.ALWAYS}),
    "group": frozenset({Level.GROUP, Level.ALWAYS}),
}
"""The levels each granularity (``KAGENT_METRICS_GRANULARITY``'s values) exports."""


@dataclass(frozen=True)
class Family:
    """One gauge family: its name, help, label names (in the order kagent thinks of them) and level."""

    name: str
    help: str
    labels: tuple[str, ...]
    level: Level

    @property
    def header(self) -> bytes:
        """The lines that open the family in the exposition."""
        return family_header(self.name, self.help)


GROUP_PARTITION_LABELS = ("cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id")
PARTITION_LABELS = ("cluster_name", "topic", "partition")
GROUP_TOPIC_LABELS = ("cluster_name", "group", "topic")
GROUP_LABELS = ("cluster_name", "group")
MEMBER_LABELS = ("cluster_name", "group", "member_host", "consumer_id", "client_id")

GROUP_OFFSET = Family(
    "kafka_consumergroup_group_offset",
    "Last group consumed offset of a partition (none without a committed offset)",
    GROUP_PARTITION_LABELS,
    Level.PARTITION,
)
GROUP_LAG = Family(
    "kafka_consumergroup_group_lag",
    "Group offset lag of a partition (NaN without a committed offset)",
    GROUP_PARTITION_LABELS,
    Level.PARTITION,
)
GROUP_LAG_SECONDS = Family(
    "kafka_consumergroup_group_lag_seconds",
    "Group time lag of a partition (NaN when unknown)",
    GROUP_PARTITION_LABELS,
    Level.PARTITION,
)
LATEST_OFFSET = Family(
    "kafka_partition_latest_offset", "Latest offset of a partition", PARTITION_LABELS, Level.PARTITION
)
EARLIEST_OFFSET = Family(
    "kafka_partition_earliest_offset", "Earliest offset of a partition", PARTITION_LABELS, Level.PARTITION
)
TOPIC_SUM_LAG = Family(
    "kafka_consumergroup_group_topic_sum_lag",
    "Sum of group offset lag across topic partitions",
    GROUP_TOPIC_LABELS,
    Level.TOPIC,
)
MAX_LAG = Family("kafka_consumergroup_group_max_lag", "Max group offset lag", GROUP_LABELS, Level.GROUP)
MAX_LAG_SECONDS = Family("kafka_consumergroup_group_max_lag_seconds", "Max group time lag", GROUP_LABELS, Level.GROUP)
SUM_LAG = Family("kafka_consumergroup_group_sum_lag", "Sum of group offset lag", GROUP_LABELS, Level.GROUP)
MEMBER_LAG = Family(
    "kagent_group_member_lag",
    "Offset lag of the partitions a member is assigned, added up (records)",
    MEMBER_LABELS,
    Level.ALWAYS,
)
MEMBER_LAG_SECONDS = Family(
    "kagent_group_member_lag_seconds",
    "Time lag of the partitions a member is assigned, added up (seconds; none when one is unknown)",
    MEMBER_LABELS,
    Level.ALWAYS,
)
GROUP_SKEW = Family(
    "kagent_group_skew",
    "Skew of the members' lag under the current assignment, in the evaluation's skew metric and lag unit",
    GROUP_LABELS,
    Level.ALWAYS,
)
GROUP_MEMBERS = Family("kagent_group_members", "Members of the group's current assignment", GROUP_LABELS, Level.ALWAYS)

GROUP_FAMILIES: tuple[Family, ...] = (
    GROUP_OFFSET,
    GROUP_LAG,
    GROUP_LAG_SECONDS,
    TOPIC_SUM_LAG,
    MAX_LAG,
    MAX_LAG_SECONDS,
    SUM_LAG,
    MEMBER_LAG,
    MEMBER_LAG_SECONDS,
    GROUP_SKEW,
    GROUP_MEMBERS,
)
"""The families each group renders a piece of (:func:`render_group`), in exposition order."""

FAMILIES: tuple[Family, ...] = (*GROUP_FAMILIES[:3], LATEST_OFFSET, EARLIEST_OFFSET, *GROUP_FAMILIES[3:])
"""Every family of this module, in exposition order: the per-partition log offsets
(:func:`render_partition_offsets`) after the group-partitions'."""


def families_at(granularity: str | None) -> tuple[Family, ...]:
    """The families exported at ``granularity`` (a value of ``KAGENT_METRICS_GRANULARITY``), in
    exposition order; all of them when None. Raises ``ValueError`` for an unknown granularity."""
    if granularity is None:
        return FAMILIES
    kept = GRANULARITIES.get(granularity)
    if kept is None:
        raise ValueError(f"unknown metrics granularity {granularity!r}; expected one of {sorted(GRANULARITIES)}")
    return tuple(family for family in FAMILIES if family.level in kept)


LagOf = Callable[[TopicPartition, int | None], tuple[int | None, float | None]]
"""The offset lag and time lag (each None when not measured; the time lag 0 whenever the offset lag is)
of a committed offset (None: none) on a partition, as of the figures' time."""


class GroupLag(NamedTuple):
    """Everything one group's series are rendered from: plain data, and how to measure its lag."""

    group: str
    members: Sequence[Member]
    """The members of the current assignment, in its order (the first one listed holding a partition
    is its owner, should two claim it)."""
    partition_counts: Mapping[str, int]
    """Partition count of each topic the group reads, as far as known."""
    partitions: Sequence[TopicPartition]
    """Every partition the group reads, by topic and partition."""
    committed: Sequence[int | None]
    """The group's committed offset on each of :attr:`partitions`; None without one (no ``group_offset``
    series, and NaN lag while records wait)."""
    lag_of: LagOf
    """Its lag on a partition, from the committed offset: called once per partition per render (the
    worker measures it then, kafka-lag-exporter's way: as of the latest poll)."""


class PartitionOffsets(NamedTuple):
    """One partition's log offsets at the latest poll that answered for it (fresh)."""

    topic: str
    partition: int
    earliest: int
    latest: int


def _value(number: int) -> str:
    """An integer figure as :func:`go_float` writes it, from its digits (a float is exact below 2**53)."""
    if -1_000_000_000_000_000 < number < 1_000_000:
        return f"{number}.0"
    if number >= 2**53:
        return go_float(float(number))
    digits = str(number)
    rest = digits[1:].rstrip("0")
    return f"{digits[0]}.{rest}e+{len(digits) - 1:02d}" if rest else f"{digits[0]}e+{len(digits) - 1:02d}"


class RenderedGroup(NamedTuple):
    """One group's series as text, and whether their figures age with time."""

    pieces: tuple[bytes, ...]
    """A piece per family asked for, in that order (empty when it has no sample)."""
    lagging: bool
    """Whether a partition had lag: its time lag grows with each poll, so the text changes with it."""


def render_group(
    figures: GroupLag, cluster_name: str, families: Iterable[Family], unit: LagUnit, metric: SkewMetric
) -> RenderedGroup:
    """The text of ``figures``' samples in each of ``families`` (those of :data:`GROUP_FAMILIES` to
    export, in that order), one piece per family (empty when it has none); the lines as
    ``prometheus_client`` would write the same samples. ``unit`` and ``metric`` are the evaluation's
    (the skew exported is the one it measures). Measures each partition's lag once
    (:attr:`GroupLag.lag_of`), and adds up the members' as it goes (:class:`MemberTotals`)."""
    wanted = frozenset(family.name for family in families)
    group = figures.group
    cluster = label_value(cluster_name)
    quoted = label_value(group)
    group_labels = f'{{cluster_name="{cluster}",group="{quoted}"}} '

    offsets: list[str] = []
    lags: list[str] = []
    seconds: list[str] = []
    topic_sums: dict[str, float] = {}
    known = 0
    max_lag = total_lag = 0
    max_seconds = NAN
    per_partition = GROUP_OFFSET.name in wanted or GROUP_LAG.name in wanted or GROUP_LAG_SECONDS.name in wanted
    owners: dict[TopicPartition, str] = {}
    for member in figures.members:
        prefix = (
            f'{{client_id="{label_value(member.client_id)}",cluster_name="{cluster}",'
            f'consumer_id="{label_value(member.member_id)}",group="{quoted}",'
            f'member_host="{label_value(member.client_host)}",partition="'
        )
        for tp in member.partitions or ():  # none known: its partitions are the unknown member's
            owners.setdefault(tp, prefix)
    unowned = (
        f'{{client_id="{NO_MEMBER}",cluster_name="{cluster}",consumer_id="{NO_MEMBER}",group="{quoted}",'
        f'member_host="{NO_MEMBER}",partition="'
    )
    offset_name, lag_name, seconds_name = GROUP_OFFSET.name, GROUP_LAG.name, GROUP_LAG_SECONDS.name
    totals = MemberTotals(figures.members, figures.partition_counts)
    add_to_members, lag_of = totals.add, figures.lag_of
    topic = suffix = ""
    topic_total = NAN
    for tp, committed in zip(figures.partitions, figures.committed, strict=True):  # by topic, then partition
        offset_lag, time_lag = lag_of(tp, committed)
        add_to_members(tp, offset_lag, time_lag)
        if tp.topic != topic:
            if topic:
                topic_sums[topic] = topic_total
            topic, topic_total = tp.topic, NAN
            suffix = f'",topic="{label_value(topic)}"}} '
        if offset_lag is None:
            lag_text = seconds_text = "NaN"
        else:
            lag_text = f"{offset_lag}.0" if offset_lag < 1_000_000 else _value(offset_lag)
            known += 1
            total_lag += offset_lag
            if offset_lag > max_lag:
                max_lag = offset_lag
            topic_total = offset_lag if topic_total != topic_total else topic_total + offset_lag
            if offset_lag == 0:
                seconds_text = "0.0"
                if not max_seconds >= 0.0:
                    max_seconds = 0.0
            elif time_lag is None:
                seconds_text = "NaN"
            else:
                seconds_text = repr(time_lag) if time_lag < 1e6 else go_float(time_lag)
                if not max_seconds >= time_lag:
                    max_seconds = time_lag
        if per_partition:
            labels = f"{owners.get(tp, unowned)}{tp.partition}{suffix}"
            if committed is not None:
                value = f"{committed}.0" if 0 <= committed < 1_000_000 else _value(committed)
                offsets.append(f"{offset_name}{labels}{value}\n")
            lags.append(f"{lag_name}{labels}{lag_text}\n")
            seconds.append(f"{seconds_name}{labels}{seconds_text}\n")
    if topic:
        topic_sums[topic] = topic_total

    rows, rest = totals.rows(partitions=False)
    member_lag: list[str] = []
    member_seconds: list[str] = []
    for member_row in [*rows, *([rest] if rest is not None else [])]:
        member_labels = labels_text(
            (
                ("cluster_name", cluster_name),
                ("group", group),
                ("member_host", member_row.client_host),
                ("consumer_id", member_row.member_id),
                ("client_id", member_row.client_id),
            )
        )
        if member_row.offset_lag is not None:
            member_lag.append(f"{MEMBER_LAG.name}{{{member_labels}}} {_value(member_row.offset_lag)}\n")
        if member_row.time_lag is not None:
            member_seconds.append(f"{MEMBER_LAG_SECONDS.name}{{{member_labels}}} {go_float(member_row.time_lag)}\n")
    skew = skew_of(rows, unit, metric)

    pieces: dict[str, str] = {
        offset_name: "".join(offsets),
        lag_name: "".join(lags),
        seconds_name: "".join(seconds),
        TOPIC_SUM_LAG.name: "".join(
            f'{TOPIC_SUM_LAG.name}{{cluster_name="{cluster}",group="{quoted}",topic="{label_value(topic)}"}} '
            f"{go_float(float(total))}\n"
            for topic, total in topic_sums.items()
        ),
        MEMBER_LAG.name: "".join(member_lag),
        MEMBER_LAG_SECONDS.name: "".join(member_seconds),
        GROUP_SKEW.name: "" if skew is None else f"{GROUP_SKEW.name}{group_labels}{go_float(skew)}\n",
        GROUP_MEMBERS.name: f"{GROUP_MEMBERS.name}{group_labels}{go_float(float(len(figures.members)))}\n",
    }
    if figures.partitions:
        pieces[MAX_LAG.name] = f"{MAX_LAG.name}{group_labels}{_value(max_lag) if known else 'NaN'}\n"
        pieces[MAX_LAG_SECONDS.name] = f"{MAX_LAG_SECONDS.name}{group_labels}{go_float(max_seconds)}\n"
        pieces[SUM_LAG.name] = f"{SUM_LAG.name}{group_labels}{_value(total_lag) if known else 'NaN'}\n"
    return RenderedGroup(tuple(pieces.get(family.name, "").encode() for family in families), max_lag > 0)


def render_partition_offsets(cluster_name: str, offsets: Iterable[PartitionOffsets]) -> tuple[bytes, bytes]:
    """The ``kafka_partition_latest_offset`` and ``kafka_partition_earliest_offset`` samples of
    ``offsets``, in the order given."""
    cluster = label_value(cluster_name)
    latest: list[str] = []
    earliest: list[str] = []
    for row in offsets:
        labels = f'{{cluster_name="{cluster}",partition="{row.partition}",topic="{label_value(row.topic)}"}} '
        latest.append(f"{LATEST_OFFSET.name}{labels}{_value(row.latest)}\n")
        earliest.append(f"{EARLIEST_OFFSET.name}{labels}{_value(row.earliest)}\n")
    return "".join(latest).encode(), "".join(earliest).encode()
