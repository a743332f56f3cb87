"""The lag series as kagent computed them before they were kept as text: from each group's snapshot (its
pydantic figures), through ``prometheus_client``'s own families and text format. The oracle the rendered
exposition (:mod:`kagent.core.lag_series`, :mod:`kagent.worker.lag_exporter`) is held to, byte for byte;
and the conversions from a snapshot to the plain figures the exporter reads."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

from aiokafka.structs import TopicPartition
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kagent.core.lag_series import (
    EARLIEST_OFFSET,
    GROUP_LAG,
    GROUP_LAG_SECONDS,
    GROUP_MEMBERS,
    GROUP_OFFSET,
    GROUP_SKEW,
    LATEST_OFFSET,
    MAX_LAG,
    MAX_LAG_SECONDS,
    MEMBER_LAG,
    MEMBER_LAG_SECONDS,
    NO_MEMBER,
    SUM_LAG,
    TOPIC_SUM_LAG,
    GroupLag,
    PartitionOffsets,
    families_at,
)
from kagent.core.member_lag import MemberLag, members_of, skew_of
from kagent.core.policy import EvaluationPolicy
from kagent.core.snapshot import UNANSWERED_FLAGS, GroupSnapshot, LagFlag, PartitionLag

__all__ = ["group_lag_of", "oracle_exposition", "partition_offsets_of", "reference_member_lags"]

NAN = math.nan


def group_lag_of(snapshot: GroupSnapshot) -> GroupLag:
    """The plain figures of ``snapshot``, as storage gives them to the exporter; its lag measured as the
    snapshot's figures say."""
    partitions = sorted(snapshot.lag)

    def lags(
        tps: Sequence[TopicPartition], committed: Sequence[int | None]
    ) -> tuple[list[int | None], list[float | None]]:
        figures = [snapshot.lag[tp] for tp in tps]
        assert list(committed) == [one.committed for one in figures]
        return [one.offset_lag for one in figures], [one.time_lag for one in figures]

    return GroupLag(
        snapshot.group,
        members_of(snapshot.assignment),
        dict(snapshot.partition_counts),
        partitions,
        [snapshot.lag[tp].committed for tp in partitions],
        lags,
    )


def _add_up(partitions: Iterable[TopicPartition], snapshot: GroupSnapshot) -> tuple[int | None, float | None, int]:
    records = millis = unknown = 0
    seconds_unknown = False
    for tp in partitions:
        figures = snapshot.lag.get(tp)
        if figures is None or figures.offset_lag is None:
            unknown += 1
            continue
        records += figures.offset_lag
        if figures.offset_lag:
            if figures.time_lag is None:
                seconds_unknown = True
            else:
                millis += round(figures.time_lag * 1000)
    if unknown:
        return None, None, unknown
    return records, None if seconds_unknown else millis / 1000, 0


def reference_member_lags(snapshot: GroupSnapshot) -> tuple[list[MemberLag], MemberLag | None]:
    """Members' lag by :func:`kagent.core.member_lag.member_lags_of`'s rules, written the plain way (each
    member's partitions listed, then added up; the partitions no member holds gathered after): the
    reference its one-pass :class:`~kagent.core.member_lag.MemberTotals` is held to."""
    counts = snapshot.partition_counts
    held: set[TopicPartition] = set()
    rows = []
    for member in sorted(snapshot.assignment.members, key=lambda m: m.member_id):
        if member.partitions is None:  # which partitions it holds is unknown: so is its lag
            rows.append(MemberLag(member.member_id, member.client_id, member.client_host, True, None, None, None, 0))
            continue
        partitions = []
        uncounted = 0
        for ref in member.partitions:
            held.add(ref.topic_partition)
            count = counts.get(ref.topic)
            if count is None:
                uncounted += 1
            elif ref.partition < count:
                partitions.append(ref.topic_partition)
        offset_lag, time_lag, unknown = _add_up(partitions, snapshot)
        if uncounted:
            offset_lag, time_lag, unknown = None, None, unknown + uncounted
        row = MemberLag(
            member.member_id,
            member.client_id,
            member.client_host,
            True,
            tuple(sorted(partitions)),
            offset_lag,
            time_lag,
            unknown,
        )
        rows.append(row)
    rest = sorted(
        tp for tp in snapshot.lag if tp not in held and not (tp.topic in counts and tp.partition >= counts[tp.topic])
    )
    if not rest:
        return rows, None
    offset_lag, time_lag, unknown = _add_up(rest, snapshot)
    return rows, MemberLag(NO_MEMBER, NO_MEMBER, NO_MEMBER, False, tuple(rest), offset_lag, time_lag, unknown)


def _fresh(figures: PartitionLag) -> bool:
    return (
        figures.log_end is not None
        and figures.log_start is not None
        and figures.polled_at is not None
        and not any(flag in UNANSWERED_FLAGS or flag is LagFlag.STALE_END_OFFSET for flag in figures.flags)
    )


def partition_offsets_of(snapshots: Iterable[GroupSnapshot]) -> list[PartitionOffsets]:
    """Each partition of ``snapshots`` with fresh offsets once, from the newest poll among them, sorted."""
    newest: dict[tuple[str, int], tuple[float, PartitionOffsets]] = {}
    for snapshot in snapshots:
        for tp, figures in snapshot.lag.items():
            if _fresh(figures):
                assert figures.log_start is not None and figures.log_end is not None and figures.polled_at is not None
                key = (tp.topic, tp.partition)
                if key not in newest or figures.polled_at > newest[key][0]:
                    newest[key] = (
                        figures.polled_at,
                        PartitionOffsets(tp.topic, tp.partition, figures.log_start, figures.log_end),
                    )
    return [newest[key][1] for key in sorted(newest)]


def _samples(snapshot: GroupSnapshot, cluster: str, policy: EvaluationPolicy) -> Iterator[tuple[str, list[str], float]]:
    """(family, labels in the family's order, value) of every sample of one group."""
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    for member in snapshot.assignment.members:
        for ref in member.partitions:
            owners.setdefault((ref.topic, ref.partition), (member.client_host, member.member_id, member.client_id))
    group = snapshot.group
    lags: list[float] = []
    seconds: list[float] = []
    topics: dict[str, float] = {}
    for tp, figures in sorted(snapshot.lag.items()):
        host, member_id, client_id = owners.get((tp.topic, tp.partition), (NO_MEMBER, NO_MEMBER, NO_MEMBER))
        labels = [cluster, group, tp.topic, str(tp.partition), host, member_id, client_id]
        if figures.offset_lag is None:
            lag, lag_seconds = NAN, NAN
        else:
            lag = float(figures.offset_lag)
            time_lag = 0.0 if figures.offset_lag == 0 else figures.time_lag
            lag_seconds = NAN if time_lag is None else time_lag
        if figures.committed is not None:
            yield GROUP_OFFSET.name, labels, float(figures.committed)
        yield GROUP_LAG.name, labels, lag
        yield GROUP_LAG_SECONDS.name, labels, lag_seconds
        total = topics.get(tp.topic, NAN)
        if not math.isnan(lag):
            total = lag if math.isnan(total) else total + lag
            lags.append(lag)
        topics[tp.topic] = total
        if not math.isnan(lag_seconds):
            seconds.append(lag_seconds)
    for topic, total in sorted(topics.items()):
        yield TOPIC_SUM_LAG.name, [cluster, group, topic], total
    if snapshot.lag:
        yield MAX_LAG.name, [cluster, group], max(lags, default=NAN)
        yield MAX_LAG_SECONDS.name, [cluster, group], max(seconds, default=NAN)
        yield SUM_LAG.name, [cluster, group], float(sum(lags)) if lags else NAN
    rows, rest = reference_member_lags(snapshot)
    for row in [*rows, *([rest] if rest is not None else [])]:
        labels = [cluster, group, row.client_host, row.member_id, row.client_id]
        if row.offset_lag is not None:
            yield MEMBER_LAG.name, labels, float(row.offset_lag)
        if row.time_lag is not None:
            yield MEMBER_LAG_SECONDS.name, labels, row.time_lag
    skew = skew_of(rows, policy.lag_unit, policy.skew_metric)
    if skew is not None:
        yield GROUP_SKEW.name, [cluster, group], skew
    yield GROUP_MEMBERS.name, [cluster, group], float(len(snapshot.assignment.members))


class _Oracle(Collector):
    def __init__(
        self, snapshots: Sequence[GroupSnapshot], cluster: str, granularity: str, policy: EvaluationPolicy
    ) -> None:
        self._snapshots, self._cluster, self._granularity, self._policy = snapshots, cluster, granularity, policy

    def collect(self) -> Iterator[Metric]:
        families = {f.name: GaugeMetricFamily(f.name, f.help, labels=f.labels) for f in families_at(self._granularity)}
        for snapshot in self._snapshots:
            for name, labels, value in _samples(snapshot, self._cluster, self._policy):
                if name in families:
                    families[name].add_metric(labels, value)
        for row in partition_offsets_of(self._snapshots):
            labels = [self._cluster, row.topic, str(row.partition)]
            if LATEST_OFFSET.name in families:
                families[LATEST_OFFSET.name].add_metric(labels, float(row.latest))
                families[EARLIEST_OFFSET.name].add_metric(labels, float(row.earliest))
        yield from families.values()


def oracle_exposition(
    snapshots: Sequence[GroupSnapshot], cluster: str, granularity: str, policy: EvaluationPolicy
) -> bytes:
    """``prometheus_client``'s text for the lag series of ``snapshots`` (in that order) at ``granularity``."""
    registry = CollectorRegistry()
    registry.register(_Oracle(snapshots, cluster, granularity, policy))
    return generate_latest(registry)
