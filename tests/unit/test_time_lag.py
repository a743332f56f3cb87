"""`kagent.core.time_lag`: the end-offset history, time lag by interpolation, and the partition-lag record."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kagent.core.json_bytes import kept
from kagent.core.snapshot import UNANSWERED_FLAGS, LagFlag, PartitionLag
from kagent.core.time_lag import EndOffsetHistory, EndOffsetPoint, partition_lag_values, time_lag


def history(*points: tuple[int, float], limit: int = 60) -> EndOffsetHistory:
    return EndOffsetHistory(limit, tuple(EndOffsetPoint(offset, time) for offset, time in points))


def test_add_returns_a_new_history_and_leaves_the_old_one() -> None:
    empty = EndOffsetHistory()
    one = empty.add(100, 10.0)
    assert len(empty) == 0
    assert one.points == (EndOffsetPoint(100, 10.0),)
    assert one.latest == EndOffsetPoint(100, 10.0)
    assert empty.latest is None


def test_a_poll_no_later_than_the_newest_is_ignored() -> None:
    assert history((100, 10.0)).add(200, 10.0) == history((100, 10.0))
    assert history((100, 10.0)).add(200, 5.0) == history((100, 10.0))


def test_a_log_end_that_goes_back_starts_the_history_afresh() -> None:
    assert history((100, 10.0), (200, 20.0)).add(50, 30.0).points == (EndOffsetPoint(50, 30.0),)


def test_a_flat_run_is_kept_as_its_first_and_latest_poll() -> None:
    h = history((50, 0.0), (100, 10.0), (100, 20.0), (100, 30.0), (100, 40.0))
    assert h.points == ((50, 0.0), (100, 10.0), (100, 40.0))
    assert h.add(180, 50.0).points == ((50, 0.0), (100, 10.0), (100, 40.0), (180, 50.0))


def test_the_oldest_point_goes_beyond_the_limit() -> None:
    h = history(*((offset, float(offset)) for offset in range(10)), limit=4)
    assert h.points == ((6, 6.0), (7, 7.0), (8, 8.0), (9, 9.0))


@given(st.lists(st.tuples(st.integers(0, 10**6), st.floats(0, 1e6)), max_size=12))
def test_the_offsets_and_times_are_the_points(polls: list[tuple[int, float]]) -> None:
    history = EndOffsetHistory(limit=5)
    for offset, at in polls:
        history = history.add(offset, at)
    assert list(history.offsets) == [point.offset for point in history.points]
    assert list(history.times) == [point.time for point in history.points]


def test_a_history_needs_room_for_two_points() -> None:
    with pytest.raises(ValueError, match="2 points"):
        EndOffsetHistory(1)


def test_time_lag_interpolates_between_the_points_around_the_offset() -> None:
    h = history((100, 10.0), (200, 20.0), (400, 30.0))
    assert h.time_at(150) == pytest.approx(15.0)
    assert h.time_at(300) == pytest.approx(25.0)
    assert h.time_at(200) == pytest.approx(20.0)
    assert time_lag(h, 150, now=40.0) == pytest.approx(25.0)


def test_after_a_flat_run_the_record_was_appended_after_the_runs_last_poll() -> None:
    h = history((100, 10.0), (100, 30.0), (200, 40.0))
    assert h.time_at(100) == pytest.approx(30.0)
    assert h.time_at(150) == pytest.approx(35.0)


def test_time_lag_extrapolates_older_offsets_along_the_historys_rate() -> None:
    h = history((100, 10.0), (150, 20.0), (300, 30.0))  # 200 records in 20 s overall
    assert h.time_at(50) == pytest.approx(10.0 - 50 / 10)
    assert time_lag(h, 50, now=30.0) == pytest.approx(25.0)


def test_time_lag_is_zero_at_or_beyond_the_log_end() -> None:
    h = history((100, 10.0), (200, 20.0))
    assert time_lag(h, 200, now=99.0) == 0.0
    assert time_lag(h, 250, now=99.0) == 0.0
    assert time_lag(history((100, 10.0)), 100, now=99.0) == 0.0


@pytest.mark.parametrize(
    "h",
    [
        EndOffsetHistory(),
        history((100, 10.0)),  # fewer than 2 points
        history((100, 10.0), (100, 20.0)),  # the log end never moved: no rate to go by
    ],
)
def test_time_lag_is_unknown_when_the_history_cannot_tell(h: EndOffsetHistory) -> None:
    assert time_lag(h, 50, now=30.0) is None


def test_time_lag_is_never_negative() -> None:
    assert time_lag(history((100, 10.0), (200, 20.0)), 150, now=12.0) == 0.0


@given(
    rate=st.integers(1, 1000),
    interval=st.floats(0.5, 30.0),
    polls=st.integers(2, 80),
    limit=st.integers(2, 60),
    data=st.data(),
)
def test_steady_production_gives_the_exact_age(
    rate: int, interval: float, polls: int, limit: int, data: st.DataObject
) -> None:
    """Records appended at a steady rate: any unread offset's age is exact to the millisecond it is stated
    in, inside the window or older."""
    h = EndOffsetHistory(limit)
    for i in range(polls):
        h = h.add(rate * i, i * interval)
    assert len(h) <= limit
    now = polls * interval
    log_end = rate * (polls - 1)
    position = data.draw(st.integers(0, log_end - 1))
    stated = time_lag(h, position, now)
    assert stated == pytest.approx(now - position / rate * interval, rel=1e-9, abs=0.0005 + 1e-9)
    assert stated is not None and repr(stated) == repr(round(stated * 1000) / 1000)  # whole milliseconds


def test_time_lag_is_stated_in_whole_milliseconds_rounded_half_up() -> None:
    h = history((0, 0.0), (1000, 1.0))  # a record a millisecond
    assert time_lag(h, 0, now=10.0004) == 10.0
    assert time_lag(h, 0, now=10.0005) == 10.001
    assert time_lag(h, 1, now=10.1234567) == 10.122
    assert repr(time_lag(h, 1, now=10.1234567)) == "10.122"


@given(st.lists(st.tuples(st.integers(0, 50), st.floats(0.1, 10.0)), max_size=100), st.integers(2, 10))
def test_histories_stay_bounded_and_ordered(steps: list[tuple[int, float]], limit: int) -> None:
    """Whatever the polls, at most `limit` points, offsets never decrease, times increase, ages are monotone."""
    h = EndOffsetHistory(limit)
    offset, time = 0, 0.0
    for grow, wait in steps:
        offset, time = offset + grow, time + wait
        h = h.add(offset, time)
    points = h.points
    assert len(points) <= limit
    assert all(a.offset <= b.offset and a.time < b.time for a, b in itertools.pairwise(points))
    assert all(not (a.offset == b.offset == c.offset) for a, b, c in zip(points, points[1:], points[2:], strict=False))
    known = [t for t in (h.time_at(o) for o in range(offset)) if t is not None]
    assert known == sorted(known)


def inputs(committed: int | None, **overrides: object) -> dict[str, Any]:
    """The arguments of :func:`partition_lag_values` for a partition polled at 40 s, looked at at 50 s."""
    return {
        "group": "g",
        "topic": "t",
        "partition": 3,
        "committed": committed,
        "log_start": 100,
        "log_end": 400,
        "history": history((100, 10.0), (400, 40.0)),
        "now": 50.0,
        "polled_at": 40.0,
        "auto_offset_reset": "latest",
        "stale_after": 15.0,
        **overrides,
    }


def record(committed: int | None, **overrides: object) -> PartitionLag:
    return PartitionLag(**partition_lag_values(**inputs(committed, **overrides)))


def test_record_of_a_committed_partition() -> None:
    lag = record(250)
    assert (lag.group, lag.topic, lag.partition, lag.committed) == ("g", "t", 3, 250)
    assert (lag.log_start, lag.log_end, lag.polled_at) == (100, 400, 40.0)
    assert lag.offset_lag == 150
    assert lag.time_lag == pytest.approx(25.0)  # offset 250 was appended at 25 s
    assert lag.flags == ()


def test_record_of_a_caught_up_partition_has_no_time_lag() -> None:
    lag = record(400, history=history((400, 40.0)))
    assert (lag.offset_lag, lag.time_lag) == (0, 0.0)


def test_record_without_a_commit_has_an_unknown_lag_and_auto_offset_resets_estimate() -> None:
    latest = record(None)
    assert (latest.offset_lag, latest.time_lag, latest.flags) == (None, None, (LagFlag.NO_COMMIT,))
    assert latest.estimated_lag == 0 and not latest.measured
    earliest = record(None, auto_offset_reset="earliest")
    assert (earliest.offset_lag, earliest.estimated_lag, earliest.time_lag) == (None, 300, None)
    assert earliest.flags == (LagFlag.NO_COMMIT,)


def test_record_without_a_commit_on_an_empty_partition_has_nothing_to_read() -> None:
    empty = record(None, log_start=400, history=history((400, 40.0)))
    assert (empty.offset_lag, empty.estimated_lag, empty.time_lag) == (0, None, 0.0)
    assert empty.flags == (LagFlag.NO_COMMIT,) and empty.measured


def test_record_flags_a_stale_end_offset_and_data_loss() -> None:
    stale = record(250, now=56.0)
    assert stale.flags == (LagFlag.STALE_END_OFFSET,)
    assert (stale.offset_lag, stale.time_lag, stale.committed, stale.log_end) == (None, None, 250, 400)
    assert record(250, now=55.0).flags == ()
    lost = record(40)
    assert lost.flags == (LagFlag.DATA_LOSS,)
    assert lost.offset_lag == 360


@pytest.mark.parametrize("flag", sorted(UNANSWERED_FLAGS - {LagFlag.NOT_POLLED}))
def test_record_whose_latest_poll_had_no_answer_is_unknown_and_says_why(flag: LagFlag) -> None:
    lag = record(250, unanswered=flag)
    assert (lag.offset_lag, lag.time_lag, lag.estimated_lag) == (None, None, None)
    assert lag.flags == (flag,)
    assert (lag.log_start, lag.log_end, lag.polled_at) == (100, 400, 40.0)  # the last answer, kept for reading


def test_a_commit_made_after_the_poll_raises_the_log_end_and_an_older_one_does_not() -> None:
    newer = record(450, committed_after_poll=True)
    assert (newer.log_end, newer.offset_lag) == (450, 0)
    older = record(450)  # a commit beyond the log end from before the poll (a topic re-created): as it is
    assert (older.log_end, older.offset_lag) == (400, 0)


def test_record_never_polled_is_unknown() -> None:
    lag = record(250, log_start=None, log_end=None, polled_at=None)
    assert (lag.offset_lag, lag.time_lag, lag.log_end, lag.polled_at) == (None, None, None, None)
    assert lag.flags == (LagFlag.NOT_POLLED,)


def test_record_with_too_short_a_history_has_an_unknown_time_lag() -> None:
    lag = record(250, history=history((400, 40.0)))
    assert lag.offset_lag == 150
    assert lag.time_lag is None


@pytest.mark.parametrize(
    "committed, overrides",
    [
        (250, {}),
        (None, {}),
        (None, {"auto_offset_reset": "earliest"}),
        (50, {"now": 70.0}),
        (400, {}),
        (250, {"unanswered": LagFlag.NO_LEADER}),
        (250, {"log_start": None, "log_end": None, "polled_at": None}),
    ],
)
def test_the_published_json_is_the_models_json(committed: int | None, overrides: dict[str, object]) -> None:
    """What a worker publishes for a commit (plain values, orjson) reads as the model's own JSON."""
    published = kept(partition_lag_values(**inputs(committed, **overrides)))
    model = record(committed, **overrides)
    assert json.loads(published) == json.loads(model.model_dump_json())
    assert PartitionLag.model_validate_json(published) == model
