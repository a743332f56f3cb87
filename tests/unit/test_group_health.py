"""`kagent.core.group_health`: Burrow's status rules over a commit window, kagent's departures, the group's status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kagent.core.group_health import (
    DEFAULT_COMMITS,
    CommitObservation,
    CommitWindow,
    GroupStatus,
    PartitionHealth,
    PartitionStatus,
    group_status,
    judged_group,
    lag_always_not_zero,
    lag_not_decreasing,
    offsets_rewind_index,
    offsets_stalled,
    offsets_stopped,
    partition_status,
    recent_lag_zero,
    rewind_recovered,
    stop_possible_from,
)
from tests.support.commit_windows import append_commit

_UNKNOWN, OK, WARN, STOP, STALL, REWIND = PartitionStatus


def window(*commits: tuple[int, float, int | None], capacity: int | None = None) -> CommitWindow:
    """A window of (offset, timestamp, log end at the commit), oldest first; full unless `capacity` says otherwise."""
    observations = tuple(CommitObservation(*commit) for commit in commits)
    return CommitWindow(capacity=capacity or len(observations), commits=observations)


def every(seconds: float, offsets: Sequence[int], lags: Sequence[int], start: float = 1000.0) -> CommitWindow:
    """A full window of commits `seconds` apart, with the given offsets and lags at each commit."""
    return window(
        *(
            (offset, start + i * seconds, offset + lag)
            for i, (offset, lag) in enumerate(zip(offsets, lags, strict=True))
        )
    )


# --- One scenario per status ---------------------------------------------------------------------------------------


def test_a_consumer_that_keeps_up_is_ok() -> None:
    w = every(5, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000], [40, 60, 30, 50, 20, 70, 40, 30, 60, 20])
    health = partition_status(w, log_end_offset=1020, now=w.span + 1000 + 2)
    assert health.status is OK
    assert health.lag == 20
    assert "lag fell within the window" in health.reason


def test_lag_growing_at_every_commit_is_warn() -> None:
    lags = [120, 200, 290, 380, 470, 560, 650, 740, 850, 950]
    w = every(5, [1000 + 100 * i for i in range(10)], lags)
    health = partition_status(w, log_end_offset=1900 + 950, now=1000 + 45 + 3)
    assert health == PartitionHealth(
        WARN, "lag grew at every one of the last 10 commits: 120 -> 950", 950, 10, w.commits[0], w.commits[-1]
    )


def test_lag_that_never_falls_but_sometimes_holds_is_warn_too() -> None:
    w = every(5, [1000, 1100, 1200, 1300], [100, 100, 150, 150])
    health = partition_status(w, log_end_offset=1450, now=1016)
    assert health.status is WARN
    assert health.reason == "lag never fell over the last 4 commits: 100 -> 150"


def test_no_commit_for_longer_than_the_window_spans_with_records_waiting_is_stop() -> None:
    w = every(5, [1000 + 100 * i for i in range(10)], [50] * 10)  # 45 s from first to last commit
    assert partition_status(w, log_end_offset=1950, now=1045 + 45).status is not STOP  # silence == span
    health = partition_status(w, log_end_offset=1990, now=1045 + 46)
    assert health.status is STOP
    assert health.reason == "no commit for 46 s, longer than the 45 s the last 10 commits span; lag 90"


def test_the_same_offset_committed_over_the_window_with_records_waiting_is_stall() -> None:
    w = every(5, [700] * 10, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
    health = partition_status(w, log_end_offset=800, now=1047)
    assert health.status is STALL
    assert health.reason == "committed offset stuck at 700 over the last 10 commits; lag 10 -> 100"


def test_a_committed_offset_that_went_back_and_stayed_back_is_rewind() -> None:
    w = every(5, [1000, 2000, 3000, 500, 900, 1400], [0, 0, 0, 2500, 2100, 1600])
    health = partition_status(w, log_end_offset=3000, now=1026)
    assert health.status is REWIND
    assert health.reason == (
        "committed offset went back from 3000 to 500 (commit 4 of 6) and has not come back to 3000 (latest 1400); "
        "lag 1600"
    )


def test_a_rewind_the_consumer_has_read_past_again_is_no_rewind() -> None:
    w = every(5, [1000, 2000, 3000, 500, 2000, 3100], [0, 0, 0, 2500, 1000, 0])
    assert partition_status(w, log_end_offset=3100, now=1026).status is OK
    assert partition_status(w, log_end_offset=3300, now=1026).status is OK  # lag 0 at some commits


# --- Window boundaries ----------------------------------------------------------------------------------------------


def test_an_empty_window_is_ok() -> None:
    health = partition_status(CommitWindow(), log_end_offset=500, now=1e9)
    assert health == PartitionHealth(OK, "no commit in the window yet")


def test_a_single_commit_is_too_few_to_judge() -> None:
    # Burrow judges it: no span, so STOP as soon as the clock moves. Here it waits for a second commit.
    w = window((100, 1000.0, 300), capacity=10)
    assert offsets_stopped(w.commits, 1001.0)
    health = partition_status(w, log_end_offset=400, now=5000.0)
    assert health.status is OK
    assert health.reason == "1 commit of 10: too few to judge (needs 2); lag 300"
    assert partition_status(w, log_end_offset=400, now=5000.0, min_commits=1).status is STOP  # Burrow's way


def test_a_window_not_full_can_stop_or_rewind_but_not_stall_or_warn() -> None:
    stuck = window((700, 1000.0, 710), (700, 1005.0, 720), (700, 1010.0, 730), capacity=5)
    assert partition_status(stuck, log_end_offset=730, now=1012.0).status is OK
    assert "no trend to judge before a full window" in partition_status(stuck, log_end_offset=730, now=1012.0).reason
    assert partition_status(stuck, log_end_offset=730, now=1021.0).status is STOP  # 11 s silent > 10 s span
    back = window((700, 1000.0, 800), (650, 1005.0, 800), capacity=5)
    assert partition_status(back, log_end_offset=800, now=1006.0).status is REWIND


def test_the_commit_that_fills_the_window_lets_stall_be_judged() -> None:
    w = CommitWindow(capacity=4)
    statuses = []
    for i in range(5):
        w = append_commit(w, CommitObservation(700, 1000.0 + 5 * i, 710 + 10 * i))
        statuses.append(partition_status(w, log_end_offset=710 + 10 * i, now=1000.0 + 5 * i + 1).status)
    assert statuses == [OK, OK, OK, STALL, STALL]


def test_append_keeps_the_newest_commits_up_to_the_capacity() -> None:
    w = CommitWindow(capacity=3)
    for i in range(5):
        w = append_commit(w, CommitObservation(i * 10, float(i), i * 10 + 5))
    assert [c.offset for c in w.commits] == [20, 30, 40]
    assert w.full and w.complete == 1.0 and w.span == 2.0
    assert CommitWindow().capacity == DEFAULT_COMMITS and not CommitWindow().full


def test_append_returns_a_new_window_and_leaves_the_old_one() -> None:
    empty = CommitWindow(capacity=2)
    one = append_commit(empty, CommitObservation(5, 1.0, 9))
    assert empty.commits == () and one.commits == (CommitObservation(5, 1.0, 9),)
    assert one.latest == CommitObservation(5, 1.0, 9) and empty.latest is None


def test_a_replayed_or_older_commit_leaves_the_window_as_it_is() -> None:
    w = window((10, 1.0, 10), (20, 2.0, 25), capacity=5)
    assert append_commit(w, CommitObservation(20, 2.0, 30)) is w  # the newest again, seen with a later log end
    assert append_commit(w, CommitObservation(15, 1.5, 30)) is w


def test_a_commit_closer_than_min_distance_replaces_the_newest_and_keeps_its_time() -> None:
    w = CommitWindow(capacity=5, min_distance=10.0)
    for offset, at in [(100, 0.0), (110, 3.0), (120, 6.0), (130, 12.0)]:
        w = append_commit(w, CommitObservation(offset, at, offset + 5))
    assert w.commits == (CommitObservation(120, 0.0, 125), CommitObservation(130, 12.0, 135))


def test_a_window_checks_its_own_shape() -> None:
    with pytest.raises(ValidationError, match="do not fit"):
        window((1, 1.0, 1), (2, 2.0, 2), capacity=1)
    with pytest.raises(ValidationError, match="timestamp order"):
        window((1, 2.0, 1), (2, 1.0, 2))
    with pytest.raises(ValidationError):
        CommitWindow(capacity=0)


def test_a_window_survives_a_json_round_trip() -> None:
    w = window((10, 1.0, None), (20, 2.5, 25), capacity=4)
    assert CommitWindow.model_validate_json(w.model_dump_json()) == w


def test_a_commits_lag_is_what_it_left_unread_and_never_negative() -> None:
    assert CommitObservation(100, 0.0, 150).lag == 50
    assert CommitObservation(100, 0.0, 90).lag == 0  # the log end was polled before the commit
    assert CommitObservation(100, 0.0, None).lag is None


# --- Burrow's false alarms, which kagent does not raise ------------------------------------------------------------


def test_an_idle_partition_is_ok_however_long_since_the_last_commit() -> None:
    # Caught up, then the topic went quiet: no commits for a day (Faust commits only after reading something).
    w = every(5, [1000 + 10 * i for i in range(10)], [0] * 10)
    now = 1045 + 86_400
    assert offsets_stopped(w.commits, now)  # Burrow's Rule 3 alone would say stopped
    health = partition_status(w, log_end_offset=1090, now=now)
    assert health.status is OK
    assert health.reason == "idle: no record since the last commit (log end 1090)"


def test_a_record_arriving_after_a_long_idle_spell_is_not_stop_until_it_has_waited_the_window() -> None:
    # linkedin/Burrow#303: idle an hour, one record arrives. Burrow sees an hour without a commit and says STOP,
    # unless its last few broker-offset polls still show the consumer caught up (a grace of minutes, #338).
    w = every(5, [1000 + 10 * i for i in range(10)], [0] * 10)  # spans 45 s
    now = 1045 + 3600
    assert partition_status(w, log_end_offset=1091, now=now).status is STOP  # Burrow's rule, no time lag known
    assert partition_status(w, log_end_offset=1091, now=now, recent_log_end_offsets=[1090, 1091]).status is OK
    assert partition_status(w, log_end_offset=1091, now=now, time_lag=5.0).status is OK
    assert partition_status(w, log_end_offset=1091, now=now, time_lag=45.0).status is OK
    late = partition_status(w, log_end_offset=1091, now=now + 41, time_lag=46.0)
    assert late.status is STOP
    assert late.reason.endswith("lag 1, the oldest unread record has waited 46 s")


def test_no_commits_with_nothing_to_consume_is_fine_and_stop_needs_lag() -> None:
    w = every(5, [1000 + 100 * i for i in range(10)], [50] * 10)
    assert partition_status(w, log_end_offset=1900, now=1e9).status is OK  # caught up since: lag 0
    assert partition_status(w, log_end_offset=1905, now=1e9, allowed_lag=5).status is OK
    assert partition_status(w, log_end_offset=1905, now=1e9, allowed_lag=5).reason == "lag 5 within the allowed 5"
    assert partition_status(w, log_end_offset=1906, now=1e9, allowed_lag=5).status is STOP


def test_a_deleted_group_is_ok_so_its_incidents_resolve() -> None:
    stale = every(5, [1000 + 100 * i for i in range(10)], [50] * 10)
    partitions = {TopicPartition("orders", p): partition_status(stale, 5000, now=1e9) for p in range(3)}
    assert group_status(partitions, group_gone_or_empty=False).status is STOP
    gone = group_status(partitions, group_gone_or_empty=True)
    assert gone.status is OK and gone.culprits == () and gone.partitions == 0
    assert gone.reason == "group deleted: nothing to judge"
    assert group_status({}, group_gone_or_empty=True).status is OK


# --- The group's status: its worst partition's ----------------------------------------------------------------------


def test_burrows_severity_order() -> None:
    assert [s.severity for s in (_UNKNOWN, OK, WARN, STOP, STALL, REWIND)] == [0, 1, 2, 4, 5, 6]
    assert GroupStatus is PartitionStatus


@pytest.mark.parametrize(
    ("statuses", "worst"),
    [
        ([OK, OK], OK),
        ([OK, WARN], WARN),
        ([WARN, STOP, OK], STOP),
        ([STOP, STALL, WARN], STALL),
        ([STALL, REWIND, STOP], REWIND),
        ([REWIND, OK, OK, OK], REWIND),
    ],
)
def test_the_group_is_its_worst_partition(statuses: list[PartitionStatus], worst: PartitionStatus) -> None:
    partitions = {TopicPartition("t", p): status for p, status in enumerate(statuses)}
    health = group_status(partitions, group_gone_or_empty=False)
    assert health.status is worst
    assert health.partitions == len(statuses)
    expected = [TopicPartition("t", p) for p, s in enumerate(statuses) if s is worst] if worst is not OK else []
    assert [c.partition for c in health.culprits] == expected


def test_the_alert_names_the_worst_partitions_and_why() -> None:
    stalled = PartitionHealth(STALL, "committed offset stuck at 7 over the last 10 commits; lag 3 -> 9", 9)
    partitions = {
        TopicPartition("b", 0): stalled,
        TopicPartition("a", 4): PartitionHealth(WARN, "lag grew", 5),
        TopicPartition("a", 2): stalled,
        TopicPartition("a", 1): PartitionHealth(OK, "caught up: lag 0", 0),
    }
    health = group_status(partitions, group_gone_or_empty=False)
    assert health.status is STALL
    assert [c.partition for c in health.culprits] == [TopicPartition("a", 2), TopicPartition("b", 0)]
    assert health.reason == (
        "STALL on 2 of 4 partitions: a-2: committed offset stuck at 7 over the last 10 commits; lag 3 -> 9; "
        "b-0: committed offset stuck at 7 over the last 10 commits; lag 3 -> 9"
    )


def test_the_alert_counts_culprits_beyond_the_first_three() -> None:
    health = group_status({TopicPartition("t", p): STOP for p in range(5)}, group_gone_or_empty=False)
    assert health.reason == "STOP on 5 of 5 partitions: t-0; t-1; t-2; and 2 more"


def test_a_group_with_no_partition_judged_is_unknown_not_ok() -> None:
    health = group_status({}, group_gone_or_empty=False)
    assert health.status is _UNKNOWN and health.culprits == () and health.partitions == 0
    assert health.reason == "no partition with a measured lag and commits to judge"


def test_an_ok_group_says_so() -> None:
    health = group_status({TopicPartition("t", 0): OK, TopicPartition("t", 1): OK}, group_gone_or_empty=False)
    assert health.reason == "OK: all 2 partitions" and health.culprits == ()


# --- Burrow's own cases ---------------------------------------------------------------------------------------------
#
# TestCachingEvaluator_CheckRules's table from core/internal/evaluator/caching_test.go, as read at
# linkedin/Burrow commit ced55ba90f6b833a45a124d411fd5eef63a70933 (the file last changed in 2676759d7313), ported as
# data: every commit as (offset, timestamp in ms as Burrow has it, lag or None), the broker-offset ring, Burrow's
# current lag, its time (seconds), its allowed lag, what each rule function returns, and the status. Each window is
# full (Burrow calls calculatePartitionStatus on the offsets alone). kagent's lag at a commit is derived from the log
# end, so a commit's log end here is its offset plus Burrow's lag, and the current log end is the last offset plus
# Burrow's current lag. Burrow's tests state that lag apart from the ring: it is the ring's (first) broker offset
# minus the last commit in every case but 8 (current lag 0 against a ring at 5250: the case is about a lag of 0, so its
# log end is 5000) and 15 (300 against 4300: REWIND either way).

_T9 = (
    1512224618356, 1512224619362, 1512224620366, 1512224621367, 1512224622370,
    1512224623373, 1512224624378, 1512224625379, 1512224626383, 1512224627383,
    1512224628383, 1512224629388, 1512224630391, 1512224631394, 1512224632397,
)  # fmt: skip
_WINDOW_9 = tuple((792748079 + i, t, 0) for i, t in enumerate(_T9))


def _five(offsets: Sequence[int], lags: Sequence[int]) -> tuple[tuple[int, int, int | None], ...]:
    return tuple((offset, 100000 * (i + 1), lag) for i, (offset, lag) in enumerate(zip(offsets, lags, strict=True)))


_RISING = (1000, 2000, 3000, 4000, 5000)
_STUCK = (1000,) * 5
_BACK = (1000, 2000, 3000, 2000, 4000)


class BurrowCase(NamedTuple):
    commits: tuple[tuple[int, int, int | None], ...]
    broker_offsets: tuple[int, ...]
    current_lag: int
    time_now: int
    allowed_lag: int
    lag_always_not_zero: bool
    rewind: int  # Burrow's -1: none
    stopped: bool
    stalled: bool
    not_decreasing: bool
    recent_zero: bool
    status: PartitionStatus


BURROW_CASES = [
    # 0: OK, lag 0 at the first commit
    BurrowCase(_five(_RISING, (0, 50, 100, 150, 200)), (5200,), 200, 600, 0, False, -1, False, False, True, False, OK),
    # 1: OK, 400 s since the last commit equals the 400 s span: not greater
    BurrowCase(_five(_RISING, (0, 50, 100, 150, 200)), (5200,), 200, 900, 0, False, -1, False, False, True, False, OK),
    # 2: STOP once 500 s have passed, though lag was 0 at the start (Burrow#290)
    BurrowCase(
        _five(_RISING, (0, 50, 100, 150, 200)), (5200,), 200, 1000, 0, False, -1, True, False, True, False, STOP
    ),
    # 3: STOP with lag never 0 too
    BurrowCase(
        _five(_RISING, (50, 100, 150, 200, 250)), (5250,), 250, 1000, 0, True, -1, True, False, True, False, STOP
    ),
    # 4: OK: stalled offsets, but lag 0 at the first commit
    BurrowCase(_five(_STUCK, (0, 50, 100, 150, 200)), (1200,), 200, 600, 0, False, -1, False, True, True, False, OK),
    # 5: STALL: same offset, lag never 0
    BurrowCase(
        _five(_STUCK, (100, 150, 200, 250, 300)), (1300,), 300, 600, 0, True, -1, False, True, True, False, STALL
    ),
    # 6: STALL with a constant lag
    BurrowCase(_five(_STUCK, (100,) * 5), (1100,), 100, 600, 0, True, -1, False, True, True, False, STALL),
    # 7: OK: a rewind the consumer has since read past, and the lag fell
    BurrowCase(_five(_BACK, (100, 150, 200, 1250, 300)), (4300,), 300, 600, 0, True, 3, False, False, False, False, OK),
    # 8: OK: current lag 0, though the timestamps say stopped
    BurrowCase(_five(_RISING, (50, 100, 150, 200, 250)), (5250,), 0, 1000, 0, True, -1, True, False, True, False, OK),
    # 9: STOP: lag 0 at every commit, but new records and no commit for long enough (Burrow#290)
    BurrowCase(
        _WINDOW_9,
        (792749024, 792749000, 792748800, 792748600, 792748500),
        931,
        1512224650,
        0,
        False,
        -1,
        True,
        False,
        True,
        False,
        STOP,
    ),
    # 10: OK: stopped by timestamps, but a recent broker offset had the consumer caught up (Burrow#303)
    BurrowCase(
        _WINDOW_9,
        (792748094, 792748093, 792748093, 792748093),
        1,
        1512224650,
        0,
        False,
        -1,
        True,
        False,
        True,
        True,
        OK,
    ),
    # 11: case 0 with unknown lags in between, which change nothing
    BurrowCase(
        (
            (1000, 100000, 0),
            (1500, 150000, None),
            (2000, 200000, 50),
            (2500, 250000, None),
            (3000, 300000, 100),
            (3500, 350000, None),
            (4000, 400000, 150),
            (4500, 450000, None),
            (5000, 500000, 200),
            (5500, 550000, None),
        ),
        (5700,),
        200,
        600,
        0,
        False,
        -1,
        False,
        False,
        True,
        False,
        OK,
    ),
    # 12: OK: current lag 1 within an allowed lag of 1, though the timestamps say stopped
    BurrowCase(
        ((1000, 100000, 2), (2000, 200000, 1), (2000, 300000, 1)),
        (2001,),
        1,
        550,
        1,
        False,
        -1,
        True,
        False,
        False,
        False,
        OK,
    ),
    # 13: case 5 with an allowed lag of 99
    BurrowCase(
        _five(_STUCK, (100, 150, 200, 250, 300)), (1300,), 300, 600, 99, True, -1, False, True, True, False, STALL
    ),
    # 14: case 7 with an allowed lag of 99
    BurrowCase(
        _five(_BACK, (100, 150, 200, 1250, 300)), (4300,), 300, 600, 99, True, 3, False, False, False, False, OK
    ),
    # 15: REWIND: the consumer has not come back to where it was before the rewind
    BurrowCase(
        _five((1000, 2000, 3000, 2000, 2500), (100, 150, 200, 1250, 300)),
        (4300,),
        300,
        600,
        0,
        True,
        3,
        False,
        False,
        False,
        False,
        REWIND,
    ),
]


def _burrow_window(case: BurrowCase) -> CommitWindow:
    return window(*((offset, ms / 1000, None if lag is None else offset + lag) for offset, ms, lag in case.commits))


@pytest.mark.parametrize("case", BURROW_CASES, ids=[f"burrow-{i}" for i in range(len(BURROW_CASES))])
def test_burrows_rule_cases(case: BurrowCase) -> None:
    commits = _burrow_window(case).commits
    assert lag_always_not_zero(commits, case.allowed_lag) is case.lag_always_not_zero
    assert offsets_rewind_index(commits) == (None if case.rewind == -1 else case.rewind)
    assert offsets_stopped(commits, case.time_now) is case.stopped
    assert offsets_stalled(commits) is case.stalled
    assert lag_not_decreasing(commits) is case.not_decreasing
    assert recent_lag_zero(commits, case.broker_offsets) is case.recent_zero


@pytest.mark.parametrize("case", BURROW_CASES, ids=[f"burrow-{i}" for i in range(len(BURROW_CASES))])
def test_burrows_status_cases(case: BurrowCase) -> None:
    w = _burrow_window(case)
    health = partition_status(
        w,
        log_end_offset=w.commits[-1].offset + case.current_lag,
        now=case.time_now,
        allowed_lag=case.allowed_lag,
        recent_log_end_offsets=case.broker_offsets,
    )
    assert health.status is case.status, health.reason
    assert health.lag == case.current_lag


def test_burrows_rewind_recovery_rule() -> None:
    assert rewind_recovered(_burrow_window(BURROW_CASES[7]).commits, 3)
    assert not rewind_recovered(_burrow_window(BURROW_CASES[15]).commits, 3)


# Burrow's evaluator tests on its storage fixture (caching_test.go with storage/fixtures.go at the same commit):
# one partition, a broker offset of 4321, and commits 100 apart from offset 1000, 10 s apart from 100 s before the
# evaluation, in a ring of 10.


def _fixture_group(commits: int) -> CommitWindow:
    start = 1_000_000.0
    w = CommitWindow(capacity=10)
    for i in range(commits):
        w = append_commit(w, CommitObservation(1000 + 100 * i, start + 10 * i, 4321))
    return w


def test_burrows_single_request_group_is_ok() -> None:
    # TestCachingEvaluator_SingleRequest_*: "testgroup", a full ring, status OK, total lag 2421.
    health = partition_status(_fixture_group(10), log_end_offset=4321, now=1_000_100.0, recent_log_end_offsets=[4321])
    assert (health.status, health.lag) == (OK, 2421)
    assert group_status({TopicPartition("testtopic", 0): health}, group_gone_or_empty=False).status is OK


def test_burrows_incomplete_group_is_stop() -> None:
    # TestCachingEvaluator_SingleRequest_Incomplete: "testgroup2", half a ring, 60 s silent after a 40 s span: the
    # partition is STOP (Burrow's group is ERR; kagent's is the partition's own STOP), start 1000, end 1400.
    w = _fixture_group(5)
    assert w.complete == 0.5
    health = partition_status(w, log_end_offset=4321, now=1_000_100.0, recent_log_end_offsets=[4321])
    assert (health.status, health.lag) == (STOP, 2921)
    assert health.start is not None and health.start.offset == 1000
    assert health.end is not None and health.end.offset == 1400
    assert group_status({TopicPartition("testtopic", 0): health}, group_gone_or_empty=False).status is STOP


def test_burrows_group_whose_topic_was_deleted_is_unknown_unless_gone() -> None:
    # TestCachingEvaluator_TopicDeleted: no partitions left to evaluate, status OK in Burrow (its TODO: the
    # group should be gone). kagent says UNKNOWN: nothing judged is nothing known. A group the caller says is
    # gone is OK, as in Burrow.
    assert group_status({}, group_gone_or_empty=False).status is _UNKNOWN
    assert group_status({}, group_gone_or_empty=True).status is OK


# --- Properties -----------------------------------------------------------------------------------------------------


@st.composite
def rising_windows(draw: st.DrawFn) -> tuple[CommitWindow, float]:
    """A window whose committed offsets only ever increase, with any lags and commit spacing, and a later `now`."""
    count = draw(st.integers(1, 12))
    capacity = draw(st.integers(count, 12))
    steps = draw(st.lists(st.integers(1, 1000), min_size=count, max_size=count))
    gaps = draw(st.lists(st.floats(0, 60), min_size=count, max_size=count))
    lags = draw(st.lists(st.one_of(st.none(), st.integers(0, 10_000)), min_size=count, max_size=count))
    offset, at, commits = 0, 1000.0, []
    for step, gap, lag in zip(steps, gaps, lags, strict=True):
        offset, at = offset + step, at + gap
        commits.append(CommitObservation(offset, at, None if lag is None else offset + lag))
    now = at + draw(st.floats(0, 10_000))
    return CommitWindow(capacity=capacity, commits=tuple(commits)), now


@given(rising_windows(), st.integers(0, 5000))
def test_offsets_that_only_increase_are_never_rewind_or_stall(drawn: tuple[CommitWindow, float], extra: int) -> None:
    w, now = drawn
    last = w.commits[-1].offset
    assert partition_status(w, log_end_offset=last + extra, now=now).status not in {REWIND, STALL}


@given(rising_windows())
def test_offsets_that_only_increase_and_end_caught_up_are_ok(drawn: tuple[CommitWindow, float]) -> None:
    w, now = drawn
    health = partition_status(w, log_end_offset=w.commits[-1].offset, now=now)
    assert health.status is OK and health.lag == 0


@given(rising_windows(), st.integers(1, 5000), st.floats(0, 10_000))
def test_stop_never_comes_before_records_have_waited_the_window(
    drawn: tuple[CommitWindow, float], extra: int, waited: float
) -> None:
    w, now = drawn
    health = partition_status(w, log_end_offset=w.commits[-1].offset + extra, now=now, time_lag=waited)
    if health.status is STOP:
        assert waited > w.span and now - w.commits[-1].timestamp > w.span


@given(st.integers(1, 8), st.lists(st.tuples(st.integers(0, 10**6), st.floats(0, 100)), max_size=30))
def test_a_window_is_the_newest_commits_up_to_its_capacity(capacity: int, commits: list[tuple[int, float]]) -> None:
    w, at, seen = CommitWindow(capacity=capacity), 0.0, []
    for offset, gap in commits:
        at += gap + 0.001  # strictly later: no replays here
        observation = CommitObservation(offset, at, offset)
        w, seen = append_commit(w, observation), [*seen, observation]
    assert w.commits == tuple(seen[-capacity:])


@given(st.dictionaries(st.integers(0, 50), st.sampled_from(list(PartitionStatus)), max_size=20), st.booleans())
def test_a_group_is_its_worst_partition_unless_it_is_gone(
    statuses: dict[int, PartitionStatus], gone_or_empty: bool
) -> None:
    health = group_status({TopicPartition("t", p): s for p, s in statuses.items()}, gone_or_empty)
    if gone_or_empty or not statuses:
        assert health.status is (OK if gone_or_empty else _UNKNOWN) and health.culprits == ()
        return
    worst = max(s.severity for s in statuses.values())
    assert health.status.severity == worst
    culprits = {c.partition.partition for c in health.culprits}
    assert culprits == (set() if health.status is OK else {p for p, s in statuses.items() if s is health.status})


# --- When the status can next change without new input -------------------------------------------------------------


@given(
    offsets=st.lists(st.integers(min_value=0, max_value=1_000), min_size=1, max_size=10).map(sorted),
    lags=st.lists(st.integers(min_value=0, max_value=50), min_size=10, max_size=10),
    seconds=st.floats(min_value=0.5, max_value=60),
    lag_now=st.integers(min_value=0, max_value=100),
    later=st.floats(min_value=0, max_value=2_000),
)
def test_only_stop_reads_the_clock_and_not_before_stop_possible_from(
    offsets: list[int], lags: list[int], seconds: float, lag_now: int, later: float
) -> None:
    """What the evaluator leans on to skip unchanged groups: with the window and the log end fixed, the
    status at any time before stop_possible_from equals the status now; after it, only STOP can differ."""
    judged = every(seconds, offsets, lags[: len(offsets)])
    log_end = judged.commits[-1].offset + lag_now
    last = judged.commits[-1].timestamp
    from_ = stop_possible_from(judged, log_end)
    at_last_commit = partition_status(judged, log_end, last).status
    at_later = partition_status(judged, log_end, last + later).status
    if from_ is None or last + later <= from_:
        assert at_later == at_last_commit
    else:
        assert at_later in (at_last_commit, STOP)


def test_a_lagging_consumer_that_stopped_committing_turns_stop_at_stop_possible_from() -> None:
    stopped = every(10, [100, 110, 120], [50, 50, 50])  # commits at 1000, 1010, 1020: a 20 s span
    assert stop_possible_from(stopped, 170) == 1040.0
    assert partition_status(stopped, 170, 1040.0).status is not STOP
    assert partition_status(stopped, 170, 1040.5).status is STOP


def test_stop_cannot_come_without_lag_or_with_too_few_commits() -> None:
    assert stop_possible_from(every(10, [100, 110, 120], [5, 5, 0]), 120) is None  # caught up
    assert stop_possible_from(every(10, [100, 110, 120], [5, 5, 1]), 121, allowed_lag=1) is None
    assert stop_possible_from(window((100, 1000.0, 150)), 150) is None  # one commit: too few to judge
    assert stop_possible_from(CommitWindow(capacity=3), 10) is None


class _Judged(NamedTuple):
    """One partition as a group's judgement takes it, and the rest of the arguments."""

    window: CommitWindow
    log_end_offset: int
    time_lag: float | None
    recent: tuple[int, ...]


@st.composite
def any_windows(draw: st.DrawFn) -> _Judged:
    """Any window (offsets that go back, stay, or jump; log ends known or not, below or above the offset), a
    log end near its newest offset, a time lag and recent log ends: small figures, so every rule comes up."""
    capacity = draw(st.integers(1, 6))
    count = draw(st.integers(0, capacity))
    offsets = draw(st.lists(st.integers(0, 12), min_size=count, max_size=count))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 5.0, 30.0]), min_size=count, max_size=count))
    ends = draw(st.lists(st.one_of(st.none(), st.integers(0, 20)), min_size=count, max_size=count))
    at, commits = 1000.0, []
    for offset, gap, end in zip(offsets, gaps, ends, strict=True):
        at += gap
        commits.append(CommitObservation(offset, at, end))
    last = offsets[-1] if offsets else 0
    return _Judged(
        CommitWindow(capacity=capacity, commits=tuple(commits)),
        last + draw(st.integers(-2, 8)),
        draw(st.one_of(st.none(), st.sampled_from([0.0, 2.0, 40.0, 500.0]))),
        tuple(draw(st.lists(st.integers(0, 20), max_size=3))),
    )


@given(
    st.lists(any_windows(), max_size=8),
    st.sampled_from([1000.0, 1040.0, 1200.0, 5000.0]),
    st.integers(0, 3),
    st.integers(1, 3),
)
def test_a_groups_judgement_is_the_group_status_of_each_partitions_status(
    partitions: list[_Judged], now: float, allowed_lag: int, min_commits: int
) -> None:
    """judged_group writes only the culprits' reasons: the same GroupHealth as group_status of every
    partition_status, reasons, figures and order of the culprits included."""
    tps = [TopicPartition("t", index) for index in range(len(partitions))]
    recent = {tp: judged.recent for tp, judged in zip(tps, partitions, strict=True)}
    asked: list[tuple[TopicPartition, int]] = []

    def recent_log_end_offsets(tp: TopicPartition, count: int) -> tuple[int, ...]:
        asked.append((tp, count))
        return recent[tp][-count:]

    expected = group_status(
        {
            tp: partition_status(
                judged.window,
                judged.log_end_offset,
                now,
                allowed_lag=allowed_lag,
                time_lag=judged.time_lag,
                recent_log_end_offsets=judged.recent[-judged.window.capacity :],
                min_commits=min_commits,
            )
            for tp, judged in zip(tps, partitions, strict=True)
        },
        group_gone_or_empty=False,
    )
    given_partitions = [(tp, j.window, j.log_end_offset, j.time_lag) for tp, j in zip(tps, partitions, strict=True)]
    assert (
        judged_group(given_partitions, now, recent_log_end_offsets, allowed_lag=allowed_lag, min_commits=min_commits)
        == expected
    )
    capacities = {tp: judged.window.capacity for tp, judged in zip(tps, partitions, strict=True)}
    assert all(count == capacities[tp] for tp, count in asked)  # each asked for its window's many
