"""A group's lag series, in kafka-lag-exporter's names and kagent's, rendered as Prometheus text.

The worker keeps each group's series as rendered text, one piece per family,
and a scrape joins the pieces family by family (:mod:`kagent.worker.lag_exporter`).
This module is what renders them: :func:`render_group` from a group's plain
figures (:class:`GroupLag`) and its :class:`GroupLayout` (its labels, made once
while its members and partitions stay the same), :func:`render_partition_offsets` for the
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
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from aiokafka.structs import TopicPartition

from kagent.core.collector import untrack
from kagent.core.exposition import family_header, go_float, go_int, label_value
from kagent.core.lag_twins import twin_of
from kagent.core.member_lag import NO_MEMBER, Member, read_lags, read_rows, skew_of_lags
from kagent.core.policy import LagUnit, SkewMetric

__all__ = [
    "FAMILIES",
    "GRANULARITIES",
    "GROUP_FAMILIES",
    "NO_MEMBER",
    "Family",
    "GroupLag",
    "GroupLayout",
    "LagsOf",
    "Level",
    "PartitionLabels",
    "PartitionOffsets",
    "RenderedGroup",
    "families_at",
    "member_labels",
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


LagsOf = Callable[[Sequence[TopicPartition], Sequence[int | None]], tuple[Sequence[int | None], Sequence[float | None]]]
"""The offset lag and time lag of a group on each of some partitions, from its committed offset on each
(None: none), as of the figures' time: two sequences in the partitions' order, each figure None when not
measured (the time lag 0 whenever the offset lag is)."""


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
    lags: LagsOf
    """Its lag on partitions, from the committed offsets: called once per render for all of
    :attr:`partitions` (the worker measures it then, kafka-lag-exporter's way: as of the latest poll)."""
    shape: Hashable = None
    """The same for two figures of the group whose :attr:`members`, :attr:`partition_counts` and
    :attr:`partitions` are the same (what its :class:`GroupLayout` is made of); None: not known to be
    the same as any other (a layout is made for these figures alone)."""


class PartitionOffsets(NamedTuple):
    """One partition's log offsets at the latest poll that answered for it (fresh)."""

    topic: str
    partition: int
    earliest: int
    latest: int


class PartitionLabels(NamedTuple):
    """The labels of a group's partition series, as the pieces they are written from: a partition's labels
    are its holder's member labels but their closing brace and space (``partition`` and ``topic`` sort after
    them), its number, and its topic's suffix; none of them is kept written out per partition."""

    members: tuple[str, ...]
    """Each member's series' labels, braces and the space before the value included (:func:`member_labels`),
    by member id, then those of no member."""
    holders: Sequence[int]
    """Per partition, its holder's place in :attr:`members`."""
    partitions: tuple[TopicPartition, ...]
    """The partitions, by topic, then partition."""
    topics: tuple[tuple[str, int], ...]
    """Each topic's suffix (from its name to the space before the value) and how many partitions, of those
    in order, are its."""


class GroupLayout:
    """What a group's series are written with apart from its figures: the label sets of its
    group-partition, member and group series, each partition's place in its topic, and how its
    partitions add up per member (:class:`~kagent.core.member_lag.ReadRows`). Made once (:meth:`of`) and
    used for every render of the group's figures of the same :attr:`GroupLag.shape`, so a render only
    measures and writes figures."""

    __slots__ = (
        "families",
        "family_names",
        "group_labels",
        "labels",
        "member_labels",
        "partitions",
        "row_labels",
        "rows",
        "shape",
        "topic_labels",
        "topics",
    )

    def __init__(self, figures: GroupLag, cluster_name: str, families: Iterable[Family]) -> None:
        """The layout of ``figures``' group for the ``families`` to export (those of :data:`GROUP_FAMILIES`,
        in that order)."""
        self.shape = figures.shape
        self.families = tuple(families)
        self.family_names = tuple(family.name for family in self.families)
        cluster = label_value(cluster_name)
        quoted = label_value(figures.group)
        self.group_labels = f'{{cluster_name="{cluster}",group="{quoted}"}} '
        """The labels of the per-group series, braces and the space before the value included."""
        self.partitions = tuple(figures.partitions)
        self.rows = read_rows(figures.members, figures.partition_counts, self.partitions)
        """How the partitions add up per member, and whose labels each carries."""
        self.member_labels = tuple(
            member_labels(cluster, quoted, member.client_host, member.member_id, member.client_id)
            for member in self.rows.members
        )
        """Each member's series' labels, by member id (the rows' order)."""
        rest_labels = member_labels(cluster, quoted, NO_MEMBER, NO_MEMBER, NO_MEMBER)
        self.row_labels = self.member_labels + ((rest_labels,) if self.rows.rest_read else ())
        """The labels of each row of :func:`~kagent.core.member_lag.read_lags`, the row of no member's last."""
        self.topics: list[tuple[str, int, int]] = []
        """Each topic read, with the range of :attr:`partitions` that are its partitions."""
        start, topic = 0, None
        for index, tp in enumerate(self.partitions):  # by topic, then partition
            if tp.topic != topic:
                if topic is not None:
                    self.topics.append((topic, start, index))
                start, topic = index, tp.topic
        if topic is not None:
            self.topics.append((topic, start, len(self.partitions)))
        escaped = [label_value(topic) for topic, _, _ in self.topics]
        self.topic_labels = tuple(f'{self.group_labels[:-2]},topic="{topic}"}} ' for topic in escaped)
        """The labels of each topic's series (of :attr:`topics`), braces and the space before the value included."""
        self.labels: PartitionLabels | None = None
        """The labels of the group-partition series; None when no group-partition family is exported."""
        if frozenset(self.family_names).isdisjoint((GROUP_OFFSET.name, GROUP_LAG.name, GROUP_LAG_SECONDS.name)):
            return
        self.labels = PartitionLabels(
            (*self.member_labels, rest_labels),
            self.rows.holders,
            self.partitions,
            tuple(
                (f'",topic="{topic}"}} ', end - start)
                for topic, (_, start, end) in zip(escaped, self.topics, strict=True)
            ),
        )

    @classmethod
    def of(
        cls, figures: GroupLag, cluster_name: str, families: Iterable[Family], known: GroupLayout | None = None
    ) -> GroupLayout:
        """``known`` when it is the layout of figures of the same shape (:attr:`GroupLag.shape`, not None)
        made for the same cluster name and families (the caller keeps one layout per group and passes the
        same two every time); a new one otherwise."""
        if known is not None and figures.shape is not None and known.shape == figures.shape:
            return known
        layout = cls(figures, cluster_name, families)
        rows = layout.rows
        # Kept per group, of text, numbers and partitions: out of the collector's watch (kagent.core.collector).
        untrack([layout, layout.families, layout.topics, layout.partitions, rows, rows.members])
        untrack([rows.owners, rows.expected, rows.holders, layout.labels, *(layout.labels or ())])
        return layout


def member_labels(cluster: str, group: str, host: str, member_id: str, client_id: str) -> str:
    """A member series' labels, braces and the space before the value included, sorted by name as
    :func:`~kagent.core.exposition.labels_text` sorts them; ``cluster`` and ``group`` already escaped
    (:func:`~kagent.core.exposition.label_value`), the others escaped here."""
    return (
        f'{{client_id="{label_value(client_id)}",cluster_name="{cluster}",consumer_id="{label_value(member_id)}",'
        f'group="{group}",member_host="{label_value(host)}"}} '
    )


def _time_lag_text(offset_lag: int | None, time_lag: float | None) -> str:
    """A partition's ``group_lag_seconds`` value: NaN when its offset lag is unknown, or when records wait
    and their time lag is unknown; 0 when nothing waits."""
    if offset_lag is None:
        return "NaN"
    if offset_lag == 0:
        return "0.0"
    if time_lag is None:
        return "NaN"
    return repr(time_lag) if time_lag < 1e6 else go_float(time_lag)


def _partition_pieces(
    labels: PartitionLabels,
    committed: Sequence[int | None],
    offset_lags: Sequence[int | None],
    time_lags: Sequence[float | None],
) -> tuple[bytes, bytes, bytes]:
    """The ``group_offset``, ``group_lag`` and ``group_lag_seconds`` samples of a group's partitions, each
    written with its labels (``labels``: the pieces they are made of) from its ``committed`` offset (None:
    no sample), its offset lag (None: NaN) and its time lag (NaN when the offset lag is unknown, or records
    wait and it is unknown; 0 when nothing waits). All in the partitions' order; raises ``ValueError`` when
    their lengths differ (or a topic's count is negative), ``IndexError`` for a holder that is no member's
    place.

    The scrape's innermost loop: its compiled twin (:mod:`kagent.core.lag_twins`) runs where it is built."""
    members, holders, partitions, topics = labels
    count, in_topics = len(partitions), sum(size for _, size in topics)
    if not count == len(holders) == in_topics == len(committed) == len(offset_lags) == len(time_lags) or any(
        size < 0 for _, size in topics
    ):
        raise ValueError(
            f"{count} partitions ({len(holders)} holders, {in_topics} in topics) but {len(committed)} committed "
            f"offsets and {len(offset_lags)}, {len(time_lags)} lags"
        )
    suffixes = [suffix for suffix, size in topics for _ in range(size)]
    written = [
        f'{members[holder][:-2]},partition="{tp.partition}{suffix}'
        for holder, tp, suffix in zip(holders, partitions, suffixes, strict=True)
    ]
    offset_name, lag_name, seconds_name = GROUP_OFFSET.name, GROUP_LAG.name, GROUP_LAG_SECONDS.name
    offsets = "".join(
        [
            f"{offset_name}{label}{f'{position}.0' if 0 <= position < 1_000_000 else go_int(position)}\n"
            for label, position in zip(written, committed, strict=True)
            if position is not None
        ]
    )
    lags = "".join(
        [
            f"{lag_name}{label}{'NaN' if lag is None else f'{lag}.0' if lag < 1_000_000 else go_int(lag)}\n"
            for label, lag in zip(written, offset_lags, strict=True)
        ]
    )
    seconds = "".join(
        [
            f"{seconds_name}{label}{_time_lag_text(lag, waiting)}\n"
            for label, lag, waiting in zip(written, offset_lags, time_lags, strict=True)
        ]
    )
    return offsets.encode(), lags.encode(), seconds.encode()


partition_pieces = twin_of(_partition_pieces)


def _member_pieces(
    labels: Sequence[str], offset_lags: Sequence[int | None], time_lags: Sequence[float | None]
) -> tuple[bytes, bytes]:
    """The ``kafka_consumergroup_member_lag`` and ``kafka_consumergroup_member_lag_seconds`` samples of a
    group's rows (its members, and the row of no member), each written with its ``labels`` (braces and the
    space before the value included) from its offset lag and its time lag, and left out where that is
    unknown (None). All three in the rows' order; raises ``ValueError`` when their lengths differ.

    Every render of a group's series calls it, once: its compiled twin (:mod:`kagent.core.lag_twins`)
    runs where it is built."""
    if not len(labels) == len(offset_lags) == len(time_lags):
        raise ValueError(f"{len(labels)} labels but {len(offset_lags)} offset lags and {len(time_lags)} time lags")
    lag_name, seconds_name = MEMBER_LAG.name, MEMBER_LAG_SECONDS.name
    lags = "".join(
        [f"{lag_name}{label}{go_int(lag)}\n" for label, lag in zip(labels, offset_lags, strict=True) if lag is not None]
    )
    seconds = "".join(
        [
            f"{seconds_name}{label}{go_float(waiting)}\n"
            for label, waiting in zip(labels, time_lags, strict=True)
            if waiting is not None
        ]
    )
    return lags.encode(), seconds.encode()


member_pieces = twin_of(_member_pieces)


def _lag_sums(
    offset_lags: Sequence[int | None], time_lags: Sequence[float | None], topics: Sequence[tuple[str, int, int]]
) -> tuple[int | None, int | None, float, list[float]]:
    """A group's largest and total offset lag (None when none is known), its largest time lag (NaN when
    none is known; 0 on a partition without lag) and each topic's total offset lag (a float; NaN when
    none of its partitions' is known), from its partitions' figures (unknown: None) and each topic's
    range of them (``topics``: name, start, end). Unknown figures count in none of them. Raises
    ``ValueError`` when there are not as many time lags as offset lags.

    The scrape's loop over every group-partition: its compiled twin (:mod:`kagent.core.lag_twins`) runs
    where it is built."""
    if len(offset_lags) != len(time_lags):
        raise ValueError(f"{len(offset_lags)} offset lags but {len(time_lags)} time lags")
    known = [lag for lag in offset_lags if lag is not None]
    waited = [seconds for lag, seconds in zip(offset_lags, time_lags, strict=True) if lag and seconds is not None]
    if 0 in offset_lags:  # caught up on a partition: nothing waits there
        waited.append(0.0)
    topic_sums = []
    for _, start, end in topics:
        in_topic = [lag for lag in offset_lags[start:end] if lag is not None]
        topic_sums.append(float(sum(in_topic)) if in_topic else NAN)
    return (max(known) if known else None, sum(known) if known else None, max(waited, default=NAN), topic_sums)


lag_sums = twin_of(_lag_sums)


class RenderedGroup(NamedTuple):
    """One group's series as text, and whether their figures age with time."""

    pieces: tuple[bytes, ...]
    """A piece per family asked for, in that order (empty when it has no sample)."""
    lagging: bool
    """Whether a partition had lag: its time lag grows with each poll, so the text changes with it."""


def render_group(figures: GroupLag, layout: GroupLayout, unit: LagUnit, metric: SkewMetric) -> RenderedGroup:
    """The text of ``figures``' samples in each of ``layout``'s families, one piece per family (empty when
    it has none), written with ``layout`` (made for figures of the same shape: :meth:`GroupLayout.of`);
    the lines as ``prometheus_client`` would write the same samples. ``unit`` and ``metric`` are the
    evaluation's (the skew exported is the one it measures). Measures the partitions' lag once
    (:attr:`GroupLag.lags`), and adds up the members' (:func:`~kagent.core.member_lag.read_lags`)."""
    labels, rows = layout.labels, layout.rows
    partitions, committed_offsets = figures.partitions, figures.committed
    offset_lags, time_lags = figures.lags(partitions, committed_offsets)
    if not len(layout.partitions) == len(partitions) == len(committed_offsets) == len(offset_lags) == len(time_lags):
        raise ValueError(
            f"{len(partitions)} partitions ({len(layout.partitions)} laid out) but {len(committed_offsets)} "
            f"committed offsets and {len(offset_lags)}, {len(time_lags)} lags"
        )
    max_lag, sum_lag, max_seconds, topic_sums = lag_sums(offset_lags, time_lags, layout.topics)
    offsets = lags = seconds = b""
    if labels is not None:
        offsets, lags, seconds = partition_pieces(labels, committed_offsets, offset_lags, time_lags)

    row_lags, row_seconds = read_lags(rows.owners, offset_lags, time_lags, rows.expected)
    member_lag, member_seconds = member_pieces(layout.row_labels, row_lags, row_seconds)
    members = len(layout.member_labels)
    skew = skew_of_lags(row_lags[:members], row_seconds[:members], unit, metric)
    group_labels, name = layout.group_labels, TOPIC_SUM_LAG.name
    pieces = {
        GROUP_OFFSET.name: offsets,
        GROUP_LAG.name: lags,
        GROUP_LAG_SECONDS.name: seconds,
        MEMBER_LAG.name: member_lag,
        MEMBER_LAG_SECONDS.name: member_seconds,
        name: "".join(
            [
                f"{name}{labels}{go_float(total)}\n"
                for labels, total in zip(layout.topic_labels, topic_sums, strict=True)
            ]
        ).encode(),
        GROUP_MEMBERS.name: f"{GROUP_MEMBERS.name}{group_labels}{go_int(len(figures.members))}\n".encode(),
    }
    if skew is not None:
        pieces[GROUP_SKEW.name] = f"{GROUP_SKEW.name}{group_labels}{go_float(skew)}\n".encode()
    if partitions:
        pieces[MAX_LAG.name] = f"{MAX_LAG.name}{group_labels}{'NaN' if max_lag is None else go_int(max_lag)}\n".encode()
        pieces[MAX_LAG_SECONDS.name] = f"{MAX_LAG_SECONDS.name}{group_labels}{go_float(max_seconds)}\n".encode()
        pieces[SUM_LAG.name] = f"{SUM_LAG.name}{group_labels}{'NaN' if sum_lag is None else go_int(sum_lag)}\n".encode()
    return RenderedGroup(
        tuple([pieces.get(name, b"") for name in layout.family_names]), max_lag is not None and max_lag > 0
    )


def render_partition_offsets(cluster_name: str, offsets: Iterable[PartitionOffsets]) -> tuple[bytes, bytes]:
    """The ``kafka_partition_latest_offset`` and ``kafka_partition_earliest_offset`` samples of
    ``offsets``, in the order given."""
    cluster = label_value(cluster_name)
    latest: list[str] = []
    earliest: list[str] = []
    for row in offsets:
        labels = f'{{cluster_name="{cluster}",partition="{row.partition}",topic="{label_value(row.topic)}"}} '
        latest.append(f"{LATEST_OFFSET.name}{labels}{go_int(row.latest)}\n")
        earliest.append(f"{EARLIEST_OFFSET.name}{labels}{go_int(row.earliest)}\n")
    return "".join(latest).encode(), "".join(earliest).encode()
