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
    "ReadRows",
    "current_skew",
    "member_lags",
    "member_lags_of",
    "members_of",
    "partition_rows",
    "read_lags",
    "read_rows",
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
    """Members' lag by :func:`member_lags_of`'s rules, added up one partition at a time.

    :meth:`add` each partition the group reads once, then read :meth:`rows`. A member's partitions are those
    it holds below their topic's count in ``counts`` (a partition listed twice counts twice); one whose
    topic's count is unknown makes its lag unknown, and so does one of its partitions never added. The row
    of no member adds up the partitions added that no member holds and that exist as far as known (not at
    or above a known count). For the same partitions' figures again and again (the metrics' render),
    :func:`read_rows` once and :func:`read_lags` each time give the same figures in one call.
    """

    __slots__ = ("_counts", "_expected", "_holders", "_members", "_owners", "_rest", "_sums")

    def __init__(self, members: Iterable[Member], counts: Mapping[str, int]) -> None:
        """Totals of ``members`` with nothing added."""
        self._members = sorted(members, key=_member_id)
        self._counts = counts
        self._owners, self._holders, self._expected = _holdings(
            [member.partitions for member in self._members], range(len(self._members)), counts
        )
        self._sums = [[0, 0, 0, False, 0] for _ in range(len(self._members) + 1)]
        """Per member, then the row of no member: records, milliseconds, partitions unknown, whether a time
        lag is unknown, partitions added."""
        self._rest: list[TopicPartition] = []

    def add(self, tp: TopicPartition, offset_lag: int | None, time_lag: float | None) -> None:
        """One partition the group reads, with its offset lag and time lag (None: unknown)."""
        owners = _owners_in(tp, self._owners, self._holders, self._counts)
        if owners is _REST:
            self._rest.append(tp)
        _add_up(self._sums, (owners,), (offset_lag,), (time_lag,))

    def rows(self) -> tuple[list[MemberLag], MemberLag | None]:
        """Each member with its lag, by member id, and the row of no member (None without one); a member's
        ``partitions`` None when its assignment is unknown."""
        rows = []
        for index, member in enumerate(self._members):
            if member.partitions is None:
                rows.append(MemberLag(*member[:3], True, None, None, None, 0))  # its lag is unknown, as its partitions
                continue
            records, millis, unknown, seconds_unknown, added = self._sums[index]
            expected = self._expected[index]
            assert expected is not None  # None only for a member whose partitions are unknown
            unknown += expected - added
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


class ReadRows(NamedTuple):
    """How the partitions a group reads add up to its rows, and whose labels each is written with: made once
    per shape of the group (:func:`read_rows`; a scrape's layout keeps it), read by :func:`read_lags` at each
    render."""

    members: tuple[Member, ...]
    """The members by member id: the rows, in order (the row of no member follows them)."""
    owners: list[tuple[int, ...]]
    """Per partition read, the rows its figures add to (:func:`read_lags`' ``owners``): the members holding it
    below its topic's known count; ``(-1,)``, the row of no member, for one that no member holds and that
    exists as far as known; none for one held only beyond its topic's count or of a topic of unknown count,
    or one beyond a known count."""
    expected: list[int | None]
    """Per row, how many partitions it adds up when its lag is known (:func:`read_lags`' ``expected``): a
    member's (None when its assignment is unknown; one of a topic of unknown count is expected and never
    added, so its lag is unknown), then the row of no member's when a partition read is no member's."""
    holders: list[int]
    """Per partition read, the row of the member whose labels its series carry: the first member, in the
    order the assignment lists them, that holds it; ``len(members)`` for one that no member holds."""

    @property
    def rest_read(self) -> bool:
        """Whether a partition read is no member's: :func:`read_lags` then gives the row of no member last."""
        return len(self.expected) > len(self.members)


def read_rows(members: Sequence[Member], counts: Mapping[str, int], read: Sequence[TopicPartition]) -> ReadRows:
    """The :class:`ReadRows` of the partitions ``read`` (each once) of a group of ``members`` (as the assignment
    lists them), by :class:`MemberTotals`' rules: :func:`read_lags` of them and of the partitions' figures
    gives the figures of the rows that :meth:`MemberTotals.add` of each partition and
    :meth:`MemberTotals.rows` give."""
    order = sorted(range(len(members)), key=[member.member_id for member in members].__getitem__)
    listed = sorted(range(len(order)), key=order.__getitem__)  # each member's row, as the assignment lists them
    by_id = [members[index] for index in order]
    owners, expected, holders = partition_rows([member.partitions for member in by_id], listed, counts, read)
    return ReadRows(tuple(by_id), owners, expected, holders)


def _partition_rows(
    held: Sequence[Sequence[TopicPartition] | None],
    listed: Sequence[int],
    counts: Mapping[str, int],
    read: Sequence[TopicPartition],
) -> tuple[list[tuple[int, ...]], list[int | None], list[int]]:
    """:class:`ReadRows`' ``owners``, ``expected`` and ``holders`` of the partitions ``read``, from each row's
    ``held`` partitions (None: unknown), ``listed``: the rows in the order the assignment lists their
    members, and the topics' partition ``counts``. Raises ``IndexError`` for a row listed that is not one.

    Made once per shape of a group, for every group a scrape renders after a restart or a rebalance: its
    compiled twin (:mod:`kagent.core.lag_twins`) runs where it is built."""
    owners_of, holder_of, expected = _holdings(held, listed, counts)
    owners = [_owners_in(tp, owners_of, holder_of, counts) for tp in read]
    unheld = owners.count(_REST)
    if unheld:
        expected.append(unheld)
    rest = len(held)
    return owners, expected, [holder_of.get(tp, rest) for tp in read]


def _holdings(
    held: Sequence[Sequence[TopicPartition] | None], listed: Iterable[int], counts: Mapping[str, int]
) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[TopicPartition, int], list[int | None]]:
    """Who holds what, from each row's ``held`` partitions (None: unknown), the rows taken in the order
    ``listed``: the rows each partition adds to (the members holding it below its topic's known count), the
    first row holding each partition (whatever its count), and how many partitions each row adds up when its
    lag is known (None when its assignment is unknown; one of a topic of unknown count is expected and never
    added, so its lag is unknown). Raises ``IndexError`` for a row listed that is not one."""
    owners_of: dict[TopicPartition, tuple[int, ...]] = {}
    holder_of: dict[TopicPartition, int] = {}
    expected: list[int | None] = [None] * len(held)
    for row in listed:
        partitions = held[row]
        if partitions is None:
            continue
        alone, counted = (row,), 0
        for tp in partitions:
            holder_of.setdefault(tp, row)
            count = counts.get(tp.topic)
            if count is None:
                counted += 1  # never added: the member's lag is unknown
            elif tp.partition < count:
                counted += 1
                others = owners_of.get(tp)
                owners_of[tp] = alone if others is None else (*others, row)  # as a rule: one owner
        expected[row] = counted
    return owners_of, holder_of, expected


def _owners_in(
    tp: TopicPartition,
    owners_of: Mapping[TopicPartition, tuple[int, ...]],
    holder_of: Mapping[TopicPartition, int],
    counts: Mapping[str, int],
) -> tuple[int, ...]:
    """The rows ``tp``'s figures add to (:func:`_holdings`' ``owners_of`` and ``holder_of``): its members';
    :data:`_REST` (the row of no member) for one no member holds; none for one held only beyond its topic's
    count or of a topic of unknown count, or one beyond a known count."""
    owners = owners_of.get(tp)
    if owners is not None:
        return owners
    if tp in holder_of:
        return ()
    count = counts.get(tp.topic)
    return () if count is not None and tp.partition >= count else _REST


partition_rows = twin_of(_partition_rows)


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
