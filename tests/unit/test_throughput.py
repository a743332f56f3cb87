"""`kagent.core.throughput`: production and consumption rates, member capacity, and the members a group needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from aiokafka.structs import TopicPartition

from kagent.core.group_health import CommitObservation, CommitWindow, add_commit
from kagent.core.throughput import (
    RATE_WINDOW,
    GroupThroughput,
    MemberThroughput,
    PartitionThroughput,
    falls_behind,
    group_throughput,
    members_needed,
    partition_consumption,
    partition_throughput,
    production_rate,
)
from kagent.core.time_lag import EndOffsetHistory, EndOffsetPoint


def history(*polls: tuple[int, float]) -> EndOffsetHistory:
    """A history built poll by poll, as the end-offset stage builds it."""
    h = EndOffsetHistory()
    for offset, time in polls:
        h = h.add(offset, time)
    return h


def window(*commits: tuple[int, float, int | None]) -> CommitWindow:
    """A window of (offset, timestamp, log end) commits."""
    return CommitWindow(
        capacity=max(1, len(commits)),
        min_distance=0,
        commits=tuple(CommitObservation(offset, timestamp, log_end) for offset, timestamp, log_end in commits),
    )


def tp(partition: int) -> TopicPartition:
    return TopicPartition("orders", partition)


def figures(produced: float | None, consumed: float | None = None, busy: bool = False) -> PartitionThroughput:
    return PartitionThroughput(production_rate=produced, consumption_rate=consumed, busy=busy)


def even_group(
    members: int, partitions_each: int, produced: float, consumed: float, busy: bool = True
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, PartitionThroughput]]:
    """`members` members holding `partitions_each` partitions each, all partitions alike."""
    assignment = {f"m{m}": [tp(m * partitions_each + i) for i in range(partitions_each)] for m in range(members)}
    figures_by_tp = {p: figures(produced, consumed, busy) for held in assignment.values() for p in held}
    return assignment, figures_by_tp


def saturated_group(rates: Sequence[float], produced: Sequence[float]) -> GroupThroughput:
    """One busy partition per member, consumed at `rates`, produced at `produced`."""
    assignment = {f"m{i}": [tp(i)] for i in range(len(rates))}
    return group_throughput(assignment, {tp(i): figures(produced[i], rates[i], busy=True) for i in range(len(rates))})


# production_rate


def test_steady_growth_is_measured_over_the_window() -> None:
    h = history((0, 0.0), (1000, 100.0), (2000, 200.0), (3000, 300.0), (4000, 400.0))
    assert production_rate(h, now=400.0, window=300.0) == pytest.approx(10.0)
    assert production_rate(h, now=400.0) == pytest.approx((4000 - 1000) / RATE_WINDOW)


def test_a_window_longer_than_the_history_starts_at_its_oldest_point() -> None:
    h = history((0, 0.0), (1000, 100.0), (4000, 200.0))
    assert production_rate(h, now=200.0, window=1000.0) == pytest.approx(20.0)


def test_the_rate_runs_to_the_newest_poll_not_to_now() -> None:
    h = history((0, 0.0), (1000, 100.0))
    assert production_rate(h, now=150.0, window=300.0) == pytest.approx(10.0)


def test_an_idle_partition_produces_nothing() -> None:
    h = history((5, 0.0), (5, 100.0), (5, 400.0))
    assert h.points == (EndOffsetPoint(5, 0.0), EndOffsetPoint(5, 400.0))
    assert production_rate(h, now=400.0) == 0.0


def test_a_burst_before_the_window_does_not_count() -> None:
    h = history((0, 0.0), (1000, 10.0), (1000, 200.0), (1000, 400.0))
    assert h.points == (EndOffsetPoint(0, 0.0), EndOffsetPoint(1000, 10.0), EndOffsetPoint(1000, 400.0))
    assert production_rate(h, now=400.0, window=300.0) == 0.0


def test_a_burst_inside_the_window_counts_over_the_whole_window() -> None:
    h = history((0, 0.0), (0, 200.0), (0, 300.0), (900, 310.0), (900, 400.0))
    assert h.points == (
        EndOffsetPoint(0, 0.0),
        EndOffsetPoint(0, 300.0),
        EndOffsetPoint(900, 310.0),
        EndOffsetPoint(900, 400.0),
    )
    assert production_rate(h, now=400.0, window=300.0) == pytest.approx(3.0)


def test_a_window_start_between_two_points_is_interpolated() -> None:
    # The start (50) lies between (0, 0) and (100, 100): the log end was at 50 then.
    h = history((0, 0.0), (100, 100.0), (1100, 200.0))
    assert production_rate(h, now=200.0, window=150.0) == pytest.approx((1100 - 50) / 150)
    # Half way along a single moving segment.
    assert production_rate(history((0, 0.0), (1000, 200.0)), now=200.0, window=100.0) == pytest.approx(5.0)


def test_a_flat_run_still_polled_keeps_its_last_movement_out_of_a_short_window() -> None:
    h = history((0, 0.0), (100, 10.0), (100, 20.0), (100, 300.0))
    assert h.points == (EndOffsetPoint(0, 0.0), EndOffsetPoint(100, 10.0), EndOffsetPoint(100, 300.0))
    assert production_rate(h, now=300.0, window=300.0) == pytest.approx(100 / 300)
    assert production_rate(h, now=300.0, window=100.0) == 0.0


def test_fewer_than_two_points_give_no_rate() -> None:
    assert production_rate(EndOffsetHistory(), now=100.0) is None
    assert production_rate(history((100, 10.0)), now=100.0) is None


def test_a_history_that_ends_before_the_window_gives_no_rate() -> None:
    h = history((0, 0.0), (100, 10.0))
    assert production_rate(h, now=1000.0, window=300.0) is None
    assert production_rate(h, now=310.0, window=300.0) is None  # the start is the newest point: no span


# partition_consumption

BACKLOG = history((0, -1000.0), (10_000, -999.0), (10_000, 1000.0))
"""Log ends under which every offset these tests commit was written long before: behind at every commit."""


def test_a_group_behind_at_every_commit_is_busy() -> None:
    # Written at 50/s since t=-20: at each commit the group had not read what was there at the one before.
    ends = history((0, -20.0), (2000, 20.0))
    w = window((0, 0.0, 500), (100, 10.0, 600), (250, 20.0, 700))
    assert partition_consumption(w, ends, now=20.0) == (pytest.approx(12.5), True)


def test_a_group_that_keeps_up_is_not_busy_though_it_has_lag_at_every_commit() -> None:
    """The hot-partition test's false positive: a member that reads 40/s of a partition written at 6/s,
    committing twice a second what it fetched 0.1 s before; kagent saw each commit 2 s late, and the log end
    polled then was 12 records past it."""
    ends = history(*((6 * second, float(second)) for second in range(31)))
    commits = [(6 * t // 10 - 1, t / 10, 6 * t // 10 + 12) for t in range(5, 300, 5)]
    w = CommitWindow(capacity=10, min_distance=0, commits=tuple(CommitObservation(*c) for c in commits[-10:]))
    assert all(commit.lag for commit in w.commits)
    rate, busy = partition_consumption(w, ends, now=30.0)
    assert rate == pytest.approx(6.0, rel=0.1) and busy is False


def test_one_commit_that_caught_up_makes_the_partition_not_busy() -> None:
    ends = history((0, -20.0), (2000, 20.0))
    # At t=10 the group had read all that was written by t=0 (offset 1000): it caught up once.
    w = window((0, 0.0, 500), (1000, 10.0, 1500), (1100, 20.0, 2000))
    assert partition_consumption(w, ends, now=20.0) == (pytest.approx(55.0), False)


def test_without_log_ends_no_commit_is_behind() -> None:
    w = window((0, 0.0, 500), (100, 10.0, 600))
    assert partition_consumption(w, None, now=10.0) == (pytest.approx(10.0), False)
    # One poll, or a log end that never moved, cannot place a record either.
    assert partition_consumption(w, history((1000, 0.0)), now=10.0) == (pytest.approx(10.0), False)
    assert partition_consumption(w, history((1000, 0.0), (1000, 10.0)), now=10.0) == (pytest.approx(10.0), False)


def test_a_commit_at_the_newest_log_end_is_not_behind() -> None:
    w = window((0, 0.0, 500), (100, 10.0, 600))
    assert partition_consumption(w, history((0, -20.0), (100, -10.0)), now=10.0) == (pytest.approx(10.0), False)


def test_commits_before_the_generation_began_are_ignored() -> None:
    w = window((0, 0.0, 1000), (500, 100.0, 1000), (600, 110.0, 1000))
    assert partition_consumption(w, BACKLOG, now=110.0) == (pytest.approx(600 / 110), True)
    assert partition_consumption(w, BACKLOG, now=110.0, since=50.0) == (pytest.approx(10.0), True)
    # A since before the span: the span decides.
    assert partition_consumption(w, BACKLOG, now=110.0, since=-100.0, span=50.0) == (pytest.approx(10.0), True)


def test_commits_older_than_the_span_are_ignored() -> None:
    w = window((0, 0.0, 1000), (500, 100.0, 1000), (600, 110.0, 1000))
    assert partition_consumption(w, BACKLOG, now=110.0, span=50.0) == (pytest.approx(10.0), True)
    # One commit left in the span: no rate, not busy.
    assert partition_consumption(w, BACKLOG, now=200.0, span=95.0) == (None, False)


def test_a_rewind_counts_as_no_progress() -> None:
    w = window((500, 0.0, 1000), (100, 10.0, 1000))
    assert partition_consumption(w, BACKLOG, now=10.0) == (0.0, True)


@pytest.mark.parametrize("measure", [partition_consumption, partition_throughput], ids=["python", "twin"])
def test_a_consumer_committing_more_often_than_the_min_distance_is_measured_at_its_pace(measure: object) -> None:
    # 40 records/s, a commit every 1/8 s, merged to an entry a second (Burrow's min-distance), 10 entries:
    # each complete entry holds the offset of its last commit, 7/8 s after its timestamp. Measured right after
    # each commit, as an evaluation may be, the newest entry still taking merges would make a saw-tooth of
    # 31-40/s (36-40/s once the window is full); it is left out until complete.
    commits: list[CommitObservation] = []
    rates = []
    for tick in range(1, 400):
        at = tick / 8
        add_commit(commits, CommitObservation(5 * tick, at, None), capacity=10, min_distance=1.0)
        w = CommitWindow(capacity=10, min_distance=1.0, commits=tuple(commits))
        for now in (at, at + 1 / 16):
            if measure is partition_consumption:
                rate, _ = partition_consumption(w, None, now, span=60.0)
            else:
                rate = partition_throughput(None, w, now, None, 60.0).consumption_rate
            if rate is not None:
                rates.append(rate)
    assert len(rates) > 600
    assert min(rates) == pytest.approx(40, rel=1e-9) and max(rates) == pytest.approx(40, rel=1e-9)


def test_too_few_commits_or_no_time_give_no_rate() -> None:
    assert partition_consumption(CommitWindow(), BACKLOG, now=10.0) == (None, False)
    assert partition_consumption(window((0, 5.0, 100)), BACKLOG, now=10.0) == (None, False)
    assert partition_consumption(window((0, 5.0, 100), (10, 5.0, 100)), BACKLOG, now=10.0) == (None, True)


def test_partition_throughput_combines_both_histories() -> None:
    h = history((0, -300.0), (6000, 300.0))  # 10/s; offset 1000 was written at -200 s, before the first commit
    w = window((0, 0.0, 100), (1000, 100.0, 1100))
    assert partition_throughput(h, w, now=300.0) == PartitionThroughput(10.0, 10.0, busy=True)
    # Over a 250 s window the commit at 0 s falls out: one commit left, no rate, not busy.
    assert partition_throughput(h, w, now=300.0, window=250.0) == PartitionThroughput(10.0, None, busy=False)
    assert partition_throughput(None, None, now=300.0) == PartitionThroughput(None, None, False)


# group_throughput


def test_members_without_lag_take_the_group_typical_capacity() -> None:
    assignment = {"b": [tp(1)], "a": [tp(0)], "c": [tp(2)]}
    partitions: Mapping[TopicPartition, PartitionThroughput] = {
        tp(0): figures(150.0, 100.0, busy=True),
        tp(1): figures(30.0, 30.0),
        tp(2): figures(120.0, 120.0),
    }
    group = group_throughput(assignment, partitions)
    assert group.members == (
        MemberThroughput("a", consumption_rate=100.0, saturated=True, capacity=100.0),
        MemberThroughput("b", consumption_rate=30.0, saturated=False, capacity=100.0),
        MemberThroughput("c", consumption_rate=120.0, saturated=False, capacity=120.0),
    )
    assert group.member_capacity == 100.0
    assert group.capacity == pytest.approx(320.0)
    assert group.production_rate == pytest.approx(300.0)
    assert group.unknown_partitions == 0
    assert group.headroom == pytest.approx(320 / 300 - 1)
    # 300/s with 20% to spare is 360/s, more than the 320/s "b" and "c" could give with "a": 4 members of 100/s.
    assert members_needed(group, partitions=10, headroom=0.2) == 4
    assert falls_behind(group, partitions=10, headroom=0.2) == 4
    assert members_needed(group, partitions=3, headroom=0.2) == 3  # capped: 3 partitions
    assert falls_behind(group, partitions=3, headroom=0.2) is None
    assert falls_behind(group, partitions=10, headroom=0.0) is None  # 300/s < 320/s: a rebalance would do


def test_member_capacity_is_the_median_of_the_saturated_members() -> None:
    group = saturated_group([80.0, 120.0], [100.0, 100.0])
    assert group.member_capacity == pytest.approx(100.0)
    assert saturated_group([10.0, 50.0, 400.0], [0.0, 0.0, 0.0]).member_capacity == 50.0


def test_a_member_rate_adds_up_its_partitions_and_one_not_measured_makes_it_no_measure_of_capacity() -> None:
    assignment = {"a": [tp(0), tp(1), tp(2)]}
    partitions = {tp(0): figures(10.0, 40.0, busy=True), tp(1): figures(5.0, 3.0), tp(2): figures(5.0, 5.0)}
    (member,) = group_throughput(assignment, partitions).members
    assert member == MemberThroughput("a", consumption_rate=48.0, saturated=True, capacity=48.0)
    # tp(1) not measured yet (too few commits since the rebalance): 45 is only part of its pace.
    partitions[tp(1)] = figures(5.0, None)
    group = group_throughput(assignment, partitions)
    assert group.members == (MemberThroughput("a", consumption_rate=45.0, saturated=False, capacity=45.0),)
    assert group.member_capacity is None


def test_production_counts_unheld_partitions_and_missing_ones_are_unknown() -> None:
    assignment = {"a": [tp(0), tp(9)]}
    partitions = {tp(0): figures(10.0, 40.0, busy=True), tp(1): figures(25.0), tp(2): figures(None)}
    group = group_throughput(assignment, partitions)
    assert group.production_rate == pytest.approx(35.0)
    assert group.unknown_partitions == 2  # tp(2): no rate; tp(9): held, no figures
    # tp(9) has no figures, so its consumption is not measured either: a is no measure of capacity.
    assert group.members == (MemberThroughput("a", consumption_rate=40.0, saturated=False, capacity=40.0),)
    assert members_needed(group, partitions=4, headroom=0.2) is None
    assert falls_behind(group, partitions=4, headroom=0.2) is None


def test_a_group_without_saturated_members_has_no_measured_capacity() -> None:
    assignment, partitions = even_group(members=2, partitions_each=2, produced=20.0, consumed=20.0, busy=False)
    group = group_throughput(assignment, partitions)
    assert group.member_capacity is None
    assert [m.capacity for m in group.members] == [40.0, 40.0]
    assert group.capacity == pytest.approx(80.0)
    assert group.headroom is None
    assert members_needed(group, partitions=4, headroom=0.2) is None
    assert falls_behind(group, partitions=4, headroom=0.2) is None


def test_a_group_without_members() -> None:
    group = group_throughput({}, {tp(0): figures(50.0)})
    assert group == GroupThroughput(
        members=(), production_rate=50.0, capacity=0.0, member_capacity=None, unknown_partitions=0
    )
    assert falls_behind(group, partitions=1, headroom=0.2) is None


# members_needed and falls_behind


def test_a_saturated_group_short_of_its_producers_falls_behind() -> None:
    # 3 members of 4 partitions; each partition gets 50/s and is read at 25/s: 600/s against 300/s.
    assignment, partitions = even_group(members=3, partitions_each=4, produced=50.0, consumed=25.0)
    group = group_throughput(assignment, partitions)
    assert group.member_capacity == pytest.approx(100.0)
    assert group.capacity == pytest.approx(300.0)
    assert group.production_rate == pytest.approx(600.0)
    assert group.headroom == pytest.approx(-0.5)
    assert members_needed(group, partitions=12, headroom=0.2) == 8  # ceil(600 * 1.2 / 100)
    assert falls_behind(group, partitions=12, headroom=0.2) == 8
    assert falls_behind(group, partitions=12, headroom=0.0) == 6


def test_the_members_needed_are_capped_at_the_partition_count() -> None:
    assignment, partitions = even_group(members=3, partitions_each=2, produced=100.0, consumed=50.0)
    group = group_throughput(assignment, partitions)
    assert members_needed(group, partitions=6, headroom=0.2) == 6  # ceil(7.2), but 6 partitions
    assert falls_behind(group, partitions=6, headroom=0.2) == 6


def test_no_more_members_than_partitions_is_not_falling_behind() -> None:
    # Short of producers, but every partition already has its own member: more would hold nothing.
    assignment, partitions = even_group(members=3, partitions_each=1, produced=100.0, consumed=50.0)
    group = group_throughput(assignment, partitions)
    assert members_needed(group, partitions=3, headroom=0.2) == 3
    assert falls_behind(group, partitions=3, headroom=0.2) is None


def test_a_group_catching_up_on_an_old_backlog_does_not_fall_behind() -> None:
    # Every member has lag and reads 100/s; producers write 60/s: the backlog shrinks at 240/s.
    assignment, partitions = even_group(members=3, partitions_each=2, produced=10.0, consumed=50.0)
    group = group_throughput(assignment, partitions)
    assert all(m.saturated for m in group.members)
    assert group.capacity == pytest.approx(300.0)
    assert group.production_rate == pytest.approx(60.0)
    assert members_needed(group, partitions=6, headroom=0.2) == 1
    assert falls_behind(group, partitions=6, headroom=0.2) is None


def test_a_backlog_worked_off_by_uneven_members_does_not_fall_behind() -> None:
    # All saturated, and the typical member (10/s) would need 24 of them for 200/s; but the members read
    # 420/s together, more than 200/s with 20% to spare: the lag shrinks, no assignment problem to scale for.
    group = saturated_group([10.0, 10.0, 400.0], [100.0, 50.0, 50.0])
    assert members_needed(group, partitions=30, headroom=0.2) == 24
    assert falls_behind(group, partitions=30, headroom=0.2) is None


def test_a_group_without_the_headroom_asked_for_falls_behind() -> None:
    # 270/s against 300/s: catching up, at 30/s, but short of 20% to spare.
    group = saturated_group([100.0, 100.0, 100.0], [90.0, 90.0, 90.0])
    assert falls_behind(group, partitions=6, headroom=0.2) == 4  # ceil(270 * 1.2 / 100)
    assert falls_behind(group, partitions=6, headroom=0.0) is None


def test_a_shortfall_from_one_slow_member_is_not_a_scale_out() -> None:
    # 210/s against 200/s * 1.2, but three typical members (100/s) would do: the slow one is the matter.
    group = saturated_group([10.0, 100.0, 100.0], [100.0, 50.0, 50.0])
    assert group.capacity == pytest.approx(210.0)
    assert members_needed(group, partitions=6, headroom=0.2) == 3
    assert falls_behind(group, partitions=6, headroom=0.2) is None


def test_idle_members_beside_saturated_ones_are_a_rebalance_not_a_scale_out() -> None:
    # "a" has lag on both its partitions (100/s); "b" reads its quiet partition and could take more.
    assignment = {"a": [tp(0), tp(1)], "b": [tp(2)]}
    partitions = {
        tp(0): figures(70.0, 50.0, busy=True),
        tp(1): figures(70.0, 50.0, busy=True),
        tp(2): figures(10.0, 10.0),
    }
    group = group_throughput(assignment, partitions)
    assert group.capacity == pytest.approx(200.0)
    assert falls_behind(group, partitions=3, headroom=0.2) is None
    # The same members with producers at 210/s: no assignment of two members of 100/s keeps 20% ahead.
    busier = {**partitions, tp(2): figures(70.0, 10.0)}
    group = group_throughput(assignment, busier)
    assert group.production_rate == pytest.approx(210.0)
    assert falls_behind(group, partitions=3, headroom=0.2) == 3  # ceil(2.52)


def test_an_idle_group_neither_needs_members_nor_falls_behind() -> None:
    assignment, partitions = even_group(members=2, partitions_each=2, produced=0.0, consumed=0.0, busy=False)
    group = group_throughput(assignment, partitions)
    assert group.production_rate == 0.0
    assert group.headroom is None
    assert members_needed(group, partitions=4, headroom=0.2) is None
    assert falls_behind(group, partitions=4, headroom=0.2) is None


def test_a_backlog_with_idle_producers_needs_one_member() -> None:
    group = saturated_group([100.0, 100.0], [0.0, 0.0])
    assert group.headroom is None
    assert members_needed(group, partitions=2, headroom=0.2) == 1
    assert falls_behind(group, partitions=2, headroom=0.2) is None


def test_members_needed_cannot_be_told() -> None:
    stuck = saturated_group([0.0, 0.0], [50.0, 50.0])  # lag and no progress: no capacity measured
    assert stuck.member_capacity == 0.0
    assert members_needed(stuck, partitions=2, headroom=0.2) is None
    assert falls_behind(stuck, partitions=2, headroom=0.2) is None
    unmeasured = group_throughput({"a": [tp(0)]}, {tp(0): figures(50.0, 50.0)})
    assert members_needed(unmeasured, partitions=1, headroom=0.2) is None
    unknown = group_throughput({"a": [tp(0)]}, {tp(0): figures(None, 50.0, busy=True)})
    assert unknown.unknown_partitions == 1
    assert members_needed(unknown, partitions=1, headroom=0.2) is None
    known = saturated_group([50.0], [100.0])
    assert members_needed(known, partitions=0, headroom=0.2) is None
    assert members_needed(known, partitions=5, headroom=0.2) == 3


def test_a_need_that_is_a_whole_number_is_not_rounded_up_by_float_error() -> None:
    group = saturated_group([10.0], [100.0])
    assert 100.0 * (1 + 0.1) / 10.0 > 11  # the float error the count guards against
    assert members_needed(group, partitions=20, headroom=0.1) == 11


def test_a_negative_headroom_is_refused() -> None:
    with pytest.raises(ValueError, match="headroom"):
        members_needed(saturated_group([10.0], [100.0]), partitions=20, headroom=-0.1)


def test_fewer_commits_than_half_the_window_holds_tell_nothing() -> None:
    """A rebalance just happened: 4 commits of a window of 10 measure batches, not a pace."""
    commits = [CommitObservation(50 * i, float(i), 1000) for i in range(5)]
    four = CommitWindow(capacity=10, min_distance=0, commits=tuple(commits[:4]))
    five = CommitWindow(capacity=10, min_distance=0, commits=tuple(commits))
    assert partition_consumption(four, BACKLOG, now=4.0) == (None, False)
    assert partition_consumption(five, BACKLOG, now=4.0) == (pytest.approx(50.0), True)
    # Counted since the generation began: the same five commits, but only three after it.
    assert partition_consumption(five, BACKLOG, now=4.0, since=2.0) == (None, False)
