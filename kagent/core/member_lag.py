"""Each member's lag under its group's current assignment, as every interface reports it.

The API, the metrics, the dashboard and the incidents all show a member's lag; they read it from
:func:`member_lags`, so they agree with each other and with the evaluation.

A member's lag adds up the partitions it holds that exist as far as kagent knows: below their topic's
partition count (a partition at or above it does not exist, and no lag is counted for it anywhere;
it stays visible, flagged, in the partition figures). It is unknown (None), never 0, when one of
them has no measured lag (:attr:`~kagent.core.snapshot.PartitionLag.measured`) or its topic's
partition count is unknown: a sum over the partitions that happen to be known would read as a
smaller lag than the member has. Seconds are added up in whole milliseconds, as the evaluation's
lag unit ``seconds`` counts them.

The partitions the group reads that no member holds (all of them for a group without members:
Kafka's ``Empty`` state, or one whose assignment kagent was never told) are added up likewise as
one more row, :data:`NO_MEMBER` in kafka-lag-exporter's convention, so that a group whose consumers
all crashed shows its lag rather than none.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from aiokafka.structs import TopicPartition

from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import skew
from kagent.core.snapshot import GroupSnapshot, PartitionLag

__all__ = ["NO_MEMBER", "MemberLag", "current_skew", "member_lags", "unit_lag"]

NO_MEMBER = "unknown"
"""The member id, client id and host kagent reports for partitions no member holds (kafka-lag-exporter's)."""


class MemberLag(NamedTuple):
    """One member's lag, or that of the partitions no member holds."""

    member_id: str
    """The member's id; :data:`NO_MEMBER` for the partitions no member holds."""
    client_id: str
    client_host: str
    assigned: bool
    """False for the row of the partitions no member holds."""
    partitions: tuple[TopicPartition, ...]
    """The partitions added up, by topic and partition."""
    offset_lag: int | None
    """Records, added up; None when one partition's offset lag is unknown."""
    time_lag: float | None
    """Seconds, added up in whole milliseconds; None when one partition's time lag is unknown."""
    unknown: int
    """How many of its partitions have no measured lag (or a topic of unknown partition count)."""


def _add_up(
    partitions: Iterable[TopicPartition], lag: Mapping[TopicPartition, PartitionLag]
) -> tuple[int | None, float | None, int]:
    records = millis = 0
    unknown = 0
    seconds_unknown = False
    for tp in partitions:
        figures = lag.get(tp)
        if figures is None or figures.offset_lag is None:
            unknown += 1
            continue
        records += figures.offset_lag
        if figures.offset_lag == 0:
            continue
        if figures.time_lag is None:
            seconds_unknown = True
        else:
            millis += round(figures.time_lag * 1000)
    if unknown:
        return None, None, unknown
    return records, None if seconds_unknown else millis / 1000, 0


def member_lags(snapshot: GroupSnapshot) -> tuple[list[MemberLag], MemberLag | None]:
    """Each member of ``snapshot``'s assignment with its lag, by member id; and the row of the partitions
    of ``snapshot.lag`` no member holds, None when there is none.

    A member's partitions are those it holds below their topic's count in ``snapshot.partition_counts``;
    one whose topic's count is unknown makes its lag unknown (counted in ``unknown``). The row of no
    member adds up every partition of ``snapshot.lag`` that no member holds and that exists as far as
    known (not at or above a known count).
    """
    counts, lag = snapshot.partition_counts, snapshot.lag
    held: set[TopicPartition] = set()
    rows = []
    for member in sorted(snapshot.assignment.members, key=lambda m: m.member_id):
        partitions = []
        uncounted = 0
        for ref in member.partitions:
            tp = ref.topic_partition
            held.add(tp)
            count = counts.get(tp.topic)
            if count is None:
                uncounted += 1
            elif tp.partition < count:
                partitions.append(tp)
        partitions.sort()
        offset_lag, time_lag, unknown = _add_up(partitions, lag)
        if uncounted:
            offset_lag, time_lag, unknown = None, None, unknown + uncounted
        rows.append(
            MemberLag(
                member_id=member.member_id,
                client_id=member.client_id,
                client_host=member.client_host,
                assigned=True,
                partitions=tuple(partitions),
                offset_lag=offset_lag,
                time_lag=time_lag,
                unknown=unknown,
            )
        )
    rest = sorted(tp for tp in lag if tp not in held and not (tp.topic in counts and tp.partition >= counts[tp.topic]))
    if not rest:
        return rows, None
    offset_lag, time_lag, unknown = _add_up(rest, lag)
    return rows, MemberLag(NO_MEMBER, NO_MEMBER, NO_MEMBER, False, tuple(rest), offset_lag, time_lag, unknown)


def unit_lag(row: MemberLag, unit: LagUnit) -> float | None:
    """``row``'s lag in ``unit``: records or seconds; None when unknown."""
    if unit is LagUnit.MESSAGES:
        return None if row.offset_lag is None else float(row.offset_lag)
    return row.time_lag


def current_skew(snapshot: GroupSnapshot, unit: LagUnit, metric: SkewMetric) -> float | None:
    """The skew ``metric`` of the members' lag in ``unit`` under the current assignment: what the
    evaluation reports, the API lists and the metrics export. None unless every member's lag is known
    (:attr:`GroupSnapshot.measured`, and in ``seconds`` every time lag): a skew over figures kagent does
    not know would read as a fact."""
    if not snapshot.measured:
        return None
    lags = []
    for row in member_lags(snapshot)[0]:
        value = unit_lag(row, unit)
        if value is None:
            return None
        lags.append(value)
    return skew(metric, lags)
