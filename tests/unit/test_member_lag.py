"""`kagent.core.member_lag`: each member's lag as every interface shows it, unknown never read as 0."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.member_lag import (
    NO_MEMBER,
    MemberTotals,
    current_skew,
    member_lags,
    members_of,
    read_lags,
    read_rows,
    unit_lag,
)
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.snapshot import UNDESCRIBED_GENERATION, GroupSnapshot, LagFlag, PartitionLag
from tests.support.lag_oracle import reference_member_lags


def figures(partition: int, offset_lag: int | None, time_lag: float | None = None, topic: str = "t") -> PartitionLag:
    return PartitionLag(
        group="g",
        topic=topic,
        partition=partition,
        committed=0,
        log_start=0,
        log_end=offset_lag if offset_lag is not None else 5,
        offset_lag=offset_lag,
        time_lag=time_lag,
        flags=() if offset_lag is not None else (LagFlag.REQUEST_FAILED,),
        polled_at=1.0,
    )


def member(member_id: str, *partitions: int, topic: str = "t") -> MemberAssignment:
    return MemberAssignment(
        member_id=member_id,
        client_id=f"c-{member_id}",
        client_host="/h",
        topics=(topic,),
        partitions=tuple(PartitionRef(topic=topic, partition=p) for p in partitions),
    )


def snapshot(
    members: Sequence[MemberAssignment], lags: Sequence[PartitionLag], counts: dict[str, int], described: bool = True
) -> GroupSnapshot:
    generation = 3 if described else UNDESCRIBED_GENERATION
    return GroupSnapshot(
        assignment=GroupAssigned(group="g", generation=generation, protocol=None, leader=None, members=tuple(members)),
        partition_counts=counts,
        lag={lag.topic_partition: lag for lag in lags},
        taken_at=2.0,
        described=described,
    )


def test_a_member_adds_up_its_partitions_and_the_rest_is_the_unknown_members() -> None:
    group = snapshot(
        [member("a", 0, 1), member("b", 2)],
        [figures(0, 10, 1.0), figures(1, 0), figures(2, 5, 0.5), figures(3, 7, 2.0)],
        {"t": 4},
    )
    rows, rest = member_lags(group)
    assert [(r.member_id, r.offset_lag, r.time_lag, r.unknown) for r in rows] == [("a", 10, 1.0, 0), ("b", 5, 0.5, 0)]
    assert rest is not None
    assert (rest.member_id, rest.client_id, rest.client_host, rest.assigned) == (NO_MEMBER, NO_MEMBER, NO_MEMBER, False)
    assert (rest.partitions, rest.offset_lag, rest.time_lag) == ((TopicPartition("t", 3),), 7, 2.0)
    assert current_skew(group, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) == pytest.approx(10 * 2 / 15)


def test_one_unknown_partition_makes_its_members_lag_and_the_skew_unknown_never_a_smaller_sum() -> None:
    group = snapshot([member("a", 0, 1), member("b", 2)], [figures(0, 10), figures(1, None), figures(2, 5)], {"t": 3})
    rows, rest = member_lags(group)
    assert [(r.member_id, r.offset_lag, r.unknown) for r in rows] == [("a", None, 1), ("b", 5, 0)]
    assert rest is None
    assert unit_lag(rows[0], LagUnit.MESSAGES) is None and unit_lag(rows[1], LagUnit.MESSAGES) == 5.0
    assert current_skew(group, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) is None


def test_a_partition_beyond_its_topics_count_is_counted_nowhere_and_blocks_nothing() -> None:
    """Partition 5 of a 2-partition topic does not exist: no lag for it anywhere, flagged in the partitions."""
    group = snapshot([member("a", 0, 5), member("b", 1)], [figures(0, 4), figures(1, 2), figures(5, None)], {"t": 2})
    rows, rest = member_lags(group)
    assert [(r.member_id, r.partitions, r.offset_lag) for r in rows] == [
        ("a", (TopicPartition("t", 0),), 4),
        ("b", (TopicPartition("t", 1),), 2),
    ]
    assert rest is None and current_skew(group, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) is not None


def test_a_topic_of_unknown_partition_count_makes_its_holders_lag_unknown() -> None:
    group = snapshot([member("a", 0), member("b", 0, topic="u")], [figures(0, 4)], {"t": 1})
    rows, _ = member_lags(group)
    assert [(r.member_id, r.offset_lag, r.unknown) for r in rows] == [("a", 4, 0), ("b", None, 1)]
    assert current_skew(group, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) is None


def test_in_seconds_an_unknown_time_lag_is_unknown_and_idle_partitions_count_zero() -> None:
    group = snapshot(
        [member("a", 0, 1), member("b", 2)], [figures(0, 10, None), figures(1, 0), figures(2, 3, 1.5)], {"t": 3}
    )
    rows, _ = member_lags(group)
    assert [(r.offset_lag, r.time_lag) for r in rows] == [(10, None), (3, 1.5)]
    assert current_skew(group, LagUnit.SECONDS, SkewMetric.PEAK_TO_MEAN) is None
    assert current_skew(group, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) == pytest.approx(10 * 2 / 13)


def test_a_group_without_members_has_its_lag_on_the_unknown_member_and_no_skew() -> None:
    for described in (True, False):
        group = snapshot([], [figures(0, 4, 1.0), figures(1, 6, 2.0)], {}, described)
        rows, rest = member_lags(group)
        assert rows == [] and rest is not None and (rest.offset_lag, rest.time_lag) == (10, 3.0)
        assert current_skew(group, LagUnit.MESSAGES, SkewMetric.GINI) is None


def test_a_member_whose_assignment_is_unknown_has_unknown_lag_and_its_partitions_are_the_unknown_members() -> None:
    """Tansu's DescribeGroups names the members but not their assignments: neither member may read as
    holding nothing with lag 0; every partition's lag is on the row of no member, and the skew is unknown."""
    unknown = [m.model_copy(update={"partitions": None}) for m in (member("a"), member("b"))]
    group = snapshot(unknown, [figures(0, 4, 1.0), figures(1, 6, 2.0)], {"t": 2})
    rows, rest = member_lags(group)
    assert [(r.member_id, r.partitions, r.offset_lag, r.time_lag, r.assigned) for r in rows] == [
        ("a", None, None, None, True),
        ("b", None, None, None, True),
    ]
    assert rest is not None and (rest.partitions, rest.offset_lag, rest.time_lag) == (
        (TopicPartition("t", 0), TopicPartition("t", 1)),
        10,
        3.0,
    )
    assert current_skew(group, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) is None
    # One member known, one not: the known one's lag stands, the skew is still unknown.
    mixed = snapshot([member("a", 0), unknown[1]], [figures(0, 4, 1.0), figures(1, 6, 2.0)], {"t": 2})
    rows, rest = member_lags(mixed)
    assert [(r.member_id, r.offset_lag) for r in rows] == [("a", 4), ("b", None)]
    assert rest is not None and rest.partitions == (TopicPartition("t", 1),)
    assert current_skew(mixed, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) is None


@st.composite
def _groups(draw: st.DrawFn) -> GroupSnapshot:
    """Members listing partitions of two topics (some twice, some beyond a topic's count, some of a topic of
    unknown count), and figures for some of the partitions (measured or not, with or without time lag)."""
    counts = {"t": draw(st.integers(0, 4))}
    if draw(st.booleans()):
        counts["u"] = draw(st.integers(0, 3))
    refs = st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 5))
    members = [
        MemberAssignment(
            member_id=draw(st.sampled_from(["a", "b", "c"])),
            client_id="c",
            client_host="/h",
            topics=("t",),
            partitions=draw(
                st.none()
                | st.lists(refs, max_size=5).map(lambda ps: tuple(PartitionRef(topic=t, partition=p) for t, p in ps))
            ),
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    lags = []
    for topic, partition in draw(st.sets(refs, max_size=8)):
        offset_lag = draw(st.none() | st.integers(0, 50))
        lag = figures(partition, offset_lag, draw(st.none() | st.floats(0, 100)) if offset_lag else None, topic)
        lags.append(lag)
    return snapshot(members, lags, counts)


@given(_groups())
def test_the_one_pass_sums_are_the_plain_ones(group: GroupSnapshot) -> None:
    assert member_lags(group) == reference_member_lags(group)


@given(_groups())
def test_the_figures_of_the_partitions_read_at_once_are_the_rows_of_adding_each(group: GroupSnapshot) -> None:
    """:func:`read_lags` of the :func:`read_rows` of the partitions read (the metrics' render) gives each row's
    figures as :meth:`~MemberTotals.add` of each partition and :meth:`~MemberTotals.rows` do, the row of no
    member last when there is one, as often as it is asked; each partition's labels are those of the first
    member, as the assignment lists them, that holds it, or no member's."""
    members = members_of(group.assignment)
    read = sorted(group.lag)
    offset_lags = [group.lag[tp].offset_lag for tp in read]
    time_lags = [group.lag[tp].time_lag for tp in read]
    one_by_one = MemberTotals(members, group.partition_counts)
    for tp, offset_lag, time_lag in zip(read, offset_lags, time_lags, strict=True):
        one_by_one.add(tp, offset_lag, time_lag)
    rows, rest = one_by_one.rows()
    assert (rows, rest) == member_lags(group)
    expected = [row.offset_lag for row in rows], [row.time_lag for row in rows]
    if rest is not None:
        expected[0].append(rest.offset_lag)
        expected[1].append(rest.time_lag)
    made = read_rows(members, group.partition_counts, read)
    assert [member.member_id for member in made.members] == [row.member_id for row in rows]
    assert made.rest_read == (rest is not None)
    assert read_lags(made.owners, offset_lags, time_lags, made.expected) == expected
    assert read_lags(made.owners, offset_lags, time_lags, made.expected) == expected  # nothing kept of the first
    first_holder = {}
    for member in members:
        for tp in member.partitions or ():
            first_holder.setdefault(tp, member)
    assert [made.members[holder] if holder < len(made.members) else None for holder in made.holders] == [
        first_holder.get(tp) for tp in read
    ]
