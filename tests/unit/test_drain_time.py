"""`kagent.core.drain_time`: when a partition, a member and a group catch up at today's rates, at the rules' edges."""

from __future__ import annotations

import math

import pytest
from aiokafka.structs import TopicPartition

from kagent.core.drain_time import (
    Drain,
    DrainState,
    drain_text,
    duration_text,
    group_drain,
    member_drain,
    partition_drain,
    rate_text,
    slowest,
)
from kagent.core.group_health import CommitObservation, CommitWindow
from kagent.core.member_lag import MemberLag
from kagent.core.throughput import PartitionThroughput, partition_throughput
from kagent.core.time_lag import EndOffsetHistory


def rates(produced: float | None, consumed: float | None, busy: bool = False) -> PartitionThroughput:
    return PartitionThroughput(production_rate=produced, consumption_rate=consumed, busy=busy)


def catching_up(seconds: float) -> Drain:
    return Drain(state=DrainState.CATCHING_UP, seconds=seconds)


def falling_behind(rate: float) -> Drain:
    return Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=rate)


CAUGHT_UP = Drain(state=DrainState.CAUGHT_UP, seconds=0.0)
UNKNOWN = Drain()


# -- a partition -----------------------------------------------------------------------------------------


def test_a_partition_catching_up_drains_its_lag_at_consumption_less_production() -> None:
    assert partition_drain(1200, rates(100.0, 140.0, busy=True)) == catching_up(30.0)


def test_a_partition_without_lag_is_caught_up_whatever_its_rates_even_unknown_ones() -> None:
    assert partition_drain(0, rates(100.0, 90.0, busy=False)) == CAUGHT_UP
    assert partition_drain(0, rates(None, None)) == CAUGHT_UP
    assert partition_drain(0, None) == CAUGHT_UP


def test_an_idle_partition_read_to_its_end_is_caught_up_and_an_idle_one_with_lag_nobody_reads_is_not() -> None:
    assert partition_drain(0, rates(0.0, 0.0)) == CAUGHT_UP
    # Producers stopped, the consumer committed the same offset over the whole window with lag: STALL.
    stalled = partition_drain(500, rates(0.0, 0.0, busy=True))
    assert stalled == falling_behind(0.0)
    assert drain_text(stalled) == "not catching up"


def test_a_busy_partition_that_reads_slower_than_its_producers_falls_behind_by_the_difference() -> None:
    assert partition_drain(5000, rates(120.0, 40.0, busy=True)) == falling_behind(80.0)


def test_consumption_equal_to_production_with_lag_never_catches_up() -> None:
    drain = partition_drain(300, rates(50.0, 50.0, busy=True))
    assert drain.state is DrainState.FALLING_BEHIND and drain.falling_behind_rate == 0.0
    assert drain.seconds is None and drain.metric_value == math.inf


def test_a_partition_keeping_pace_is_not_called_falling_behind_for_the_noise_between_two_rates() -> None:
    # Not busy: the group reached the log end at a commit of the window. 119 of 120/s is measurement noise;
    # the 60 records waiting are read at its pace.
    assert partition_drain(60, rates(120.0, 119.0, busy=False)) == catching_up(60 / 119.0)
    # One that read nothing in the window cannot be said to catch up (its health says STOP).
    assert partition_drain(60, rates(0.0, 0.0, busy=False)) == UNKNOWN


def test_an_unknown_lag_or_rate_is_unknown_never_zero() -> None:
    assert partition_drain(None, rates(100.0, 200.0, busy=True)) == UNKNOWN
    assert partition_drain(1000, rates(None, 200.0, busy=True)) == UNKNOWN
    assert partition_drain(1000, rates(100.0, None)) == UNKNOWN
    assert partition_drain(1000, None) == UNKNOWN
    assert UNKNOWN.seconds is None and UNKNOWN.falling_behind_rate is None and UNKNOWN.metric_value is None


def history(*polls: tuple[int, float]) -> EndOffsetHistory:
    h = EndOffsetHistory()
    for offset, time in polls:
        h = h.add(offset, time)
    return h


def commits(*observed: tuple[int, float, int]) -> CommitWindow:
    return CommitWindow(
        capacity=len(observed),
        min_distance=0,
        commits=tuple(CommitObservation(offset, at, log_end) for offset, at, log_end in observed),
    )


def test_a_burst_inside_the_window_counts_in_the_production_rate_and_one_before_it_does_not() -> None:
    # 10,000 records written at once at t=50, then nothing; the consumer reads 100/s with lag at every commit.
    burst = history((0, 0.0), (0, 49.0), (10_000, 50.0), (10_000, 300.0))
    reading = commits((0, 100.0, 10_000), (10_000, 200.0, 10_000), (20_000, 300.0, 30_000))
    now = 300.0
    inside = partition_throughput(burst, reading, now, window=300.0)
    assert inside.production_rate == pytest.approx(10_000 / 300.0)
    lag = 2_000
    drain = partition_drain(lag, inside)
    assert drain.state is DrainState.CATCHING_UP
    assert drain.seconds == pytest.approx(lag / (100.0 - 10_000 / 300.0))
    # The same burst before a 200 s window: the producers are idle over it, the lag drains at the consumer's pace.
    before = partition_throughput(burst, reading, now, window=200.0)
    assert before.production_rate == 0.0
    assert partition_drain(lag, before) == catching_up(lag / 100.0)


def test_rates_measured_from_too_few_commits_after_a_rebalance_give_an_unknown_drain() -> None:
    window = CommitWindow(capacity=10, min_distance=0, commits=(CommitObservation(100, 299.0, 500),))
    figures = partition_throughput(history((0, 0.0), (3000, 300.0)), window, 300.0)
    assert figures.consumption_rate is None
    assert partition_drain(400, figures) == UNKNOWN


# -- a member --------------------------------------------------------------------------------------------


def test_a_member_drains_its_whole_lag_at_its_whole_pace_less_the_production_of_all_it_holds() -> None:
    # One partition would catch up in 10 s alone, the other in 100 s: the member's pace is shared, so
    # its 2,000 records drain at (60 + 30) - (40 + 30) = 20/s.
    held = [rates(40.0, 60.0, busy=True), rates(30.0, 30.0, busy=True)]
    assert member_drain(2_000, held) == catching_up(100.0)


def test_a_member_with_no_measured_pace_has_an_unknown_drain() -> None:
    assert member_drain(2_000, [rates(40.0, 60.0, busy=True), rates(30.0, None)]) == UNKNOWN
    assert member_drain(2_000, [rates(40.0, 60.0, busy=True), None]) == UNKNOWN
    assert member_drain(2_000, [rates(None, 60.0, busy=True)]) == UNKNOWN
    assert member_drain(None, [rates(40.0, 60.0, busy=True)]) == UNKNOWN


def test_a_member_falls_behind_when_one_of_its_partitions_is_busy_and_its_pace_is_short_of_its_producers() -> None:
    assert member_drain(9_000, [rates(60.0, 20.0, busy=True), rates(60.0, 20.0, busy=False)]) == falling_behind(80.0)


def test_a_member_without_lag_is_caught_up_and_one_without_partitions_too() -> None:
    assert member_drain(0, [rates(None, None)]) == CAUGHT_UP
    assert member_drain(0, []) == CAUGHT_UP


# -- the group -------------------------------------------------------------------------------------------


def test_the_group_catches_up_when_its_slowest_member_does() -> None:
    assert slowest([catching_up(30.0), CAUGHT_UP, catching_up(240.0)]) == catching_up(240.0)
    assert slowest([CAUGHT_UP, CAUGHT_UP]) == CAUGHT_UP
    assert slowest([]) == CAUGHT_UP


def test_a_group_with_a_member_falling_behind_falls_behind_at_those_members_rates_whatever_the_unknown_ones() -> None:
    assert slowest([falling_behind(20.0), UNKNOWN, catching_up(5.0), falling_behind(15.0)]) == falling_behind(35.0)


def test_a_group_with_an_unknown_member_and_none_falling_behind_is_unknown_not_its_known_members_time() -> None:
    assert slowest([catching_up(30.0), UNKNOWN]) == UNKNOWN


def tp(partition: int) -> TopicPartition:
    return TopicPartition("orders", partition)


def row(member_id: str, partitions: list[int], lag: int | None) -> MemberLag:
    return MemberLag(member_id, member_id, "/10.0.0.1", True, tuple(tp(p) for p in partitions), lag, None, 0)


def test_group_drain_gives_every_partition_member_and_the_group_from_the_same_figures() -> None:
    lags = {tp(0): 1000, tp(1): 0, tp(2): 4000, tp(3): None}
    throughput = {
        tp(0): rates(50.0, 100.0, busy=True),
        tp(1): rates(50.0, 50.0),
        tp(2): rates(100.0, 60.0, busy=True),
    }
    rows = [row("a", [0, 1], 1000), row("b", [2], 4000), row("c", [3], None)]
    drains = group_drain(rows, lags, throughput)
    assert drains.partitions == {
        tp(0): catching_up(20.0),
        tp(1): CAUGHT_UP,
        tp(2): falling_behind(40.0),
        tp(3): UNKNOWN,
    }
    assert drains.members == {"a": catching_up(1000 / (150.0 - 100.0)), "b": falling_behind(40.0), "c": UNKNOWN}
    assert drains.group == falling_behind(40.0)
    assert group_drain(rows[:1], lags, throughput).group == catching_up(20.0)


# -- how it reads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.2, "1 s"), (45, "45 s"), (59.4, "59 s"), (59.6, "1 min"), (240, "4 min"), (3599, "1 h"), (7500, "2 h 5 min")],
)
def test_durations_read_in_the_unit_a_person_would_use(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_long_durations_read_in_days_and_rates_with_a_decimal_only_when_small() -> None:
    assert duration_text(3 * 86400 + 4 * 3600) == "3 d 4 h"
    assert duration_text(2 * 86400) == "2 d"
    assert rate_text(120.0) == "120/s" and rate_text(1250.4) == "1,250/s" and rate_text(4.54) == "4.5/s"


def test_every_state_reads_as_the_issue_words_it() -> None:
    assert drain_text(catching_up(240.0)) == "catches up in 4 min"
    assert drain_text(falling_behind(120.0)) == "falling behind at 120/s"
    assert drain_text(CAUGHT_UP) == "caught up"
    assert drain_text(UNKNOWN) == "unknown"
