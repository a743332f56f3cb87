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

A member whose assignment the cluster did not say (``partitions`` None: a DescribeGroups answer
without it, as Tansu gives) holds no partition kagent knows of, and its lag is unknown, never 0:
its row has no partitions (None) and no figures, and the partitions it may hold are counted on the
row of no member, where their lag is seen.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from aiokafka.structs import TopicPartition

from kagent.core.collector import untrack
from kagent.core.events import GroupAssigned
from kagent.core.lag_twins import twin_of
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import skew
from kagent.core.snapshot import GroupSnapshot

__all__ = [
    "NO_MEMBER",
    "MeasuredLag",
    "Member",
    "MemberLag",
    "MemberTotals",
    "current_skew",
    "member_lags",
    "member_lags_of",
    "members_of",
    "read_lags",
    "skew_of",
    "skew_of_lags",
    "unit_lag",
]

NO_MEMBER = "unknown"
"""The member id, client id and host kagent reports for partitions no member holds (kafka-lag-exporter's)."""


class MeasuredLag(Protocol):
    """A partition's lag figures as far as members' lag needs them (a
    :class:`~kagent.core.snapshot.PartitionLag`, or plain figures with the same two attributes)."""

    @property
    def offset_lag(self) -> int | None: ...

    @property
    def time_lag(self) -> float | None: ...


class Member(NamedTuple):
    """One member of a group's current assignment, as members' lag needs it."""

    member_id: str
    client_id: str
    client_host: str
    partitions: Sequence[TopicPartition] | None
    """The partitions it is assigned; None when the cluster did not say."""


def members_of(assignment: GroupAssigned) -> list[Member]:
    """The members of ``assignment``, as :func:`member_lags_of` takes them."""
    return [
        Member(
            member.member_id,
            member.client_id,
            member.client_host,
            None if member.partitions is None else [ref.topic_partition for ref in member.partitions],
        )
        for member in assignment.members
    ]


class MemberLag(NamedTuple):
    """One member's lag, or that of the partitions no member holds."""

    member_id: str
    """The member's id; :data:`NO_MEMBER` for the partitions no member holds."""
    client_id: str
    client_host: str
    assigned: bool
    """False for the row of the partitions no member holds."""
    partitions: tuple[TopicPartition, ...] | None
    """The partitions added up, by topic and partition; None when the member's assignment is unknown."""
    offset_lag: int | None
    """Records, added up; None when one partition's offset lag is unknown, or which partitions are."""
    time_lag: float | None
    """Seconds, added up in whole milliseconds; None when one partition's time lag is unknown, or which
    partitions are."""
    unknown: int
    """How many of its partitions have no measured lag (or a topic of unknown partition count); 0 when
    which partitions it holds is unknown."""


class MemberTotals:
    """Members' lag by :func:`member_lags_of`'s rules, added up one partition at a time, or, for the
    partitions of a group's layout (the metrics' render), all in one call as often as their figures change.

    :meth:`add` each partition the group reads once, then read :meth:`rows`; or, for the partitions given
    at the start, read their rows' figures alone in one call (:meth:`read_lags`), as often as they change.
    A member's partitions are those it holds below their topic's count in ``counts`` (a partition listed
    twice counts twice); one whose topic's count is unknown makes its lag unknown, and so does one of its
    partitions never added. The row of no member adds up the partitions added that no member holds and
    that exist as far as known (not at or above a known count).
    """

    __slots__ = (
        "_counts",
        "_expected",
        "_held",
        "_members",
        "_owners",
        "_read_expected",
        "_read_owners",
        "_rest",
        "_sums",
        "_uncounted",
    )

    def __init__(
        self, members: Iterable[Member], counts: Mapping[str, int], read: Sequence[TopicPartition] = ()
    ) -> None:
        """Totals of ``members`` with nothing added; ``read``: the partitions :meth:`read_lags` adds up."""
        self._members = sorted(members, key=_member_id)
        self._counts = counts
        self._owners: dict[TopicPartition, tuple[int, ...]] = {}
        self._held: set[TopicPartition] = set()
        self._uncounted = [0] * len(self._members)
        self._expected = [0] * len(self._members)
        shared: dict[tuple[int, ...], tuple[int, ...]] = {}
        """One tuple object per set of owners, however many partitions have it (a layout keeps these)."""
        owners_of = self._owners
        for index, member in enumerate(self._members):
            alone = shared[(index,)] = (index,)
            for tp in member.partitions or ():
                count = counts.get(tp.topic)
                if count is None:
                    self._uncounted[index] += 1
                elif tp.partition < count:
                    others = owners_of.get(tp)
                    if others is None:  # as a rule: one owner
                        owners_of[tp] = alone
                    else:
                        owners = (*others, index)
                        owners_of[tp] = shared.setdefault(owners, owners)
                    self._expected[index] += 1
            self._held.update(member.partitions or ())
        self._sums = [[0, 0, 0, False, 0] for _ in range(len(self._members) + 1)]
        """Per member, then the row of no member: records, milliseconds, partitions unknown, whether a time
        lag is unknown, partitions added."""
        self._rest: list[TopicPartition] = []
        held_by = owners_of.get  # a partition a member holds has its owners (never empty) there
        self._read_owners = [held_by(tp) or self._owners_of(tp) for tp in read]
        """The rows each partition read adds to (:meth:`read_lags`)."""
        self._read_expected: list[int | None] = [
            None if member.partitions is None else expected + uncounted
            for member, expected, uncounted in zip(self._members, self._expected, self._uncounted, strict=True)
        ]
        """How many partitions each row adds up when its lag is known, for :func:`read_lags`: a member's (None
        when its assignment is unknown), then the row of no member's when a partition read is no member's."""
        unowned = self._read_owners.count(_REST)
        if unowned:
            self._read_expected.append(unowned)
        untrack(  # a scrape's layout keeps one per group: numbers, members and partitions (kagent.core.collector)
            [
                self,
                self._members,
                self._owners,
                self._held,
                self._uncounted,
                self._expected,
                self._sums,
                *self._sums,
                self._rest,
                self._read_owners,
                self._read_expected,
            ]
        )

    @property
    def members(self) -> Sequence[Member]:
        """The members, by member id: the order of :meth:`rows`."""
        return self._members

    def _owners_of(self, tp: TopicPartition) -> Sequence[int]:
        """The rows ``tp``'s figures add to: its members'; :data:`_REST` (the row of no member) for one no
        member holds; none for one held beyond its topic's count or of a topic of unknown count, or one
        beyond a known count."""
        owners: Sequence[int] | None = self._owners.get(tp)
        if owners is not None:
            return owners
        if tp in self._held:
            return ()
        count = self._counts.get(tp.topic)
        return () if count is not None and tp.partition >= count else _REST

    def add(self, tp: TopicPartition, offset_lag: int | None, time_lag: float | None) -> None:
        """One partition the group reads, with its offset lag and time lag (None: unknown)."""
        owners = self._owners_of(tp)
        if owners is _REST:
            self._rest.append(tp)
        _add_up(self._sums, (owners,), (offset_lag,), (time_lag,))

    @property
    def rest_read(self) -> bool:
        """Whether a partition given when the totals were made is no member's: :meth:`read_lags` then gives
        the row of no member last."""
        return len(self._read_expected) > len(self._members)

    def read_lags(
        self, offset_lags: Sequence[int | None], time_lags: Sequence[float | None]
    ) -> tuple[list[int | None], list[float | None]]:
        """The offset lag and time lag (None: unknown) of each row that :meth:`rows` would give, members by
        member id and then the row of no member (when :attr:`rest_read`), had each partition given when the
        totals were made been :meth:`add`-ed with the figures at its place in ``offset_lags`` and
        ``time_lags``: the figures alone, in one call (:func:`read_lags`), of totals to which nothing was
        added. Raises ``ValueError`` unless there are as many figures as partitions."""
        if not len(offset_lags) == len(time_lags) == len(self._read_owners):
            raise ValueError(
                f"{len(self._read_owners)} partitions read but {len(offset_lags)} offset lags and "
                f"{len(time_lags)} time lags"
            )
        return read_lags(self._read_owners, offset_lags, time_lags, self._read_expected)

    def rows(self) -> tuple[list[MemberLag], MemberLag | None]:
        """Each member with its lag, by member id, and the row of no member (None without one); a member's
        ``partitions`` None when its assignment is unknown."""
        rows = []
        for index, member in enumerate(self._members):
            if member.partitions is None:
                rows.append(MemberLag(*member[:3], True, None, None, None, 0))  # its lag is unknown, as its partitions
                continue
            records, millis, unknown, seconds_unknown, added = self._sums[index]
            unknown += self._expected[index] - added + self._uncounted[index]
            counts = self._counts
            counted = tuple(
                sorted(tp for tp in member.partitions if tp.topic in counts and tp.partition < counts[tp.topic])
            )
            rows.append(
                MemberLag(
                    member.member_id,
                    member.client_id,
                    member.client_host,
                    True,
                    counted,
                    None if unknown else records,
                    None if unknown or seconds_unknown else millis / 1000,
                    unknown,
                )
            )
        if not self._rest:
            return rows, None
        records, millis, unknown, seconds_unknown, _ = self._sums[-1]
        rest = MemberLag(
            NO_MEMBER,
            NO_MEMBER,
            NO_MEMBER,
            False,
            tuple(sorted(self._rest)),
            None if unknown else records,
            None if unknown or seconds_unknown else millis / 1000,
            unknown,
        )
        return rows, rest


_REST = (-1,)
"""The owners of a partition no member holds: the row of no member."""


def _read_lags(
    owners: Sequence[Sequence[int]],
    offset_lags: Sequence[int | None],
    time_lags: Sequence[float | None],
    expected: Sequence[int | None],
) -> tuple[list[int | None], list[float | None]]:
    """Each row's offset lag and time lag from partitions' figures, by :class:`MemberTotals`' rules: the
    partition at each place of ``owners`` (the rows it adds to: indexes into ``expected``, -1 the last)
    has the offset lag and time lag at that place of ``offset_lags`` and ``time_lags`` (None: unknown).

    A row adds up its partitions' offset lags, and their time lags in whole milliseconds where the offset
    lag is not 0. Its offset lag is unknown (None) when one of them is, and unless it added exactly as
    many partitions as ``expected`` says (None: its lag is unknown whatever is added); its time lag is
    unknown then too, and when a partition with lag has none. Raises ``IndexError`` for an owner that is
    no row, ``ValueError`` for figures of other lengths than ``owners``.

    Every render of a group's series calls it, once: its compiled twin (:mod:`kagent.core.lag_twins`)
    runs where it is built."""
    sums = [[0, 0, 0, False, 0] for _ in expected]
    _add_up(sums, owners, offset_lags, time_lags)
    offsets: list[int | None] = []
    seconds: list[float | None] = []
    for (records, millis, unknown, seconds_unknown, added), needed in zip(sums, expected, strict=True):
        unknown = 1 if needed is None else unknown + needed - added
        offsets.append(None if unknown else records)
        seconds.append(None if unknown or seconds_unknown else millis / 1000)
    return offsets, seconds


read_lags = twin_of(_read_lags)


def _add_up(
    sums: Sequence[list[int]],
    owners: Sequence[Sequence[int]],
    offset_lags: Sequence[int | None],
    time_lags: Sequence[float | None],
) -> None:
    """Add each partition's figures to the sums of the rows it adds to (``owners``, a sequence per
    partition; indexes into ``sums``). A row's sums: records, milliseconds (where the offset lag is not 0),
    partitions whose offset lag is unknown, whether one with lag has no time lag (0 or 1), partitions added."""
    for rows, offset_lag, time_lag in zip(owners, offset_lags, time_lags, strict=True):
        for index in rows:
            total = sums[index]
            total[4] += 1
            if offset_lag is None:
                total[2] += 1
            else:
                total[0] += offset_lag
                if offset_lag:
                    if time_lag is None:
                        total[3] = True
                    else:
                        total[1] += round(time_lag * 1000)


def _member_id(member: Member) -> str:
    return member.member_id


def member_lags(snapshot: GroupSnapshot) -> tuple[list[MemberLag], MemberLag | None]:
    """:func:`member_lags_of` the members, partition counts and lag of ``snapshot``."""
    return member_lags_of(members_of(snapshot.assignment), snapshot.partition_counts, snapshot.lag)


def member_lags_of(
    members: Iterable[Member], counts: Mapping[str, int], lag: Mapping[TopicPartition, MeasuredLag]
) -> tuple[list[MemberLag], MemberLag | None]:
    """Each of ``members`` with its lag, by member id; and the row of the partitions of ``lag`` (every
    partition the group reads) no member holds, None when there is none (:class:`MemberTotals`' rules).

    A member's partitions are those it holds below their topic's count in ``counts``; one whose topic's
    count is unknown makes its lag unknown (counted in ``unknown``), and so does one with no figures in
    ``lag``. The row of no member adds up every partition of ``lag`` that no member holds and that exists
    as far as known (not at or above a known count).
    """
    totals = MemberTotals(members, counts)
    for tp, figures in lag.items():
        totals.add(tp, figures.offset_lag, figures.time_lag)
    return totals.rows()


def unit_lag(row: MemberLag, unit: LagUnit) -> float | None:
    """``row``'s lag in ``unit``: records or seconds; None when unknown."""
    if unit is LagUnit.MESSAGES:
        return None if row.offset_lag is None else float(row.offset_lag)
    return row.time_lag


def current_skew(snapshot: GroupSnapshot, unit: LagUnit, metric: SkewMetric) -> float | None:
    """The skew ``metric`` of the members' lag in ``unit`` under the current assignment: what the
    evaluation reports, the API lists and the metrics export (:func:`skew_of` the members' rows)."""
    return skew_of(member_lags(snapshot)[0], unit, metric)


def skew_of(rows: Sequence[MemberLag], unit: LagUnit, metric: SkewMetric) -> float | None:
    """The skew ``metric`` of the lag in ``unit`` of the members' ``rows`` (the assigned ones of
    :func:`member_lags_of`). None without members, or unless every member's lag is known (every
    partition it holds measured, its topics' partition counts known, and in ``seconds`` every time
    lag): a skew over figures kagent does not know would read as a fact."""
    return skew_of_lags([row.offset_lag for row in rows], [row.time_lag for row in rows], unit, metric)


def skew_of_lags(
    offset_lags: Sequence[int | None], time_lags: Sequence[float | None], unit: LagUnit, metric: SkewMetric
) -> float | None:
    """:func:`skew_of` the members whose offset lags and time lags these are (None: unknown), each
    member's at the same place of both."""
    lags: Sequence[float | None] = offset_lags if unit is LagUnit.MESSAGES else time_lags
    if not lags or None in lags:
        return None
    return skew(metric, [float(lag) for lag in lags])  # type: ignore[arg-type]  # none is None
