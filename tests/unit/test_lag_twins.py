"""The scrape's compiled twins (kagent/core/_lag_twins.pyx): built, in use, and returning exactly what their
Python functions return for the same arguments (kagent.core.lag_twins' contract).

Every other test of the lag series and the time lag runs on whichever is in use, which after the README's
install are the twins; here the same generated arguments go through both.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core import (
    _lag_twins,
    committed_offset,
    group_health,
    group_listing,
    lag_series,
    lag_twins,
    member_lag,
    throughput,
    time_lag,
)
from kagent.core.group_health import CommitObservation, CommitWindow
from kagent.core.time_lag import Answered, EndOffsetHistory

INT64 = st.integers(-(2**63), 2**63 - 1)
OFFSETS = st.one_of(st.integers(0, 400), st.integers(0, 2**63 - 1))
NOW = 1_700_000_000.0
BEYOND = st.integers(2**63, 2**70)  # past Kafka's offsets: the text goes to go_int as in the Python


def test_both_loops_run_their_compiled_twins() -> None:
    twins = {
        "applied",
        "judged",
        "lag_sums",
        "measured_lags",
        "member_pieces",
        "merged_body",
        "offsets_of",
        "partition_pieces",
        "partition_rows",
        "partition_throughput",
        "read_lags",
        "window_of",
    }
    assert twins <= lag_twins.IN_USE, "run the README's install to build them"  # and ingest's twin, once imported
    assert committed_offset.applied is _lag_twins.applied
    assert lag_series.lag_sums is _lag_twins.lag_sums
    assert committed_offset.offsets_of is _lag_twins.offsets_of
    assert time_lag.measured_lags is _lag_twins.measured_lags
    assert lag_series.partition_pieces is _lag_twins.partition_pieces
    assert lag_series.member_pieces is _lag_twins.member_pieces
    assert member_lag.read_lags is _lag_twins.read_lags
    assert member_lag.partition_rows is _lag_twins.partition_rows
    assert group_listing.merged_body is _lag_twins.merged_body
    assert throughput.partition_throughput is _lag_twins.partition_throughput
    assert group_health.judge is _lag_twins.judged
    assert committed_offset.window_of is _lag_twins.window_of


def test_the_twins_follow_the_decoders_variable() -> None:
    from kagent.core.consumer_offsets import _native

    assert lag_twins.CODEC_VARIABLE == _native.CODEC_VARIABLE


@st.composite
def histories(draw: st.DrawFn) -> EndOffsetHistory | None:
    if draw(st.booleans()):
        return None
    history = EndOffsetHistory(limit=draw(st.integers(2, 8)))
    offset, at = draw(st.integers(0, 300)), NOW - 600
    for _ in range(draw(st.integers(0, 12))):  # moves, flat runs, late polls and a log end going back
        offset = max(0, offset + draw(st.integers(-20, 60)))
        at += draw(st.floats(-5, 60, allow_nan=False))
        history = history.add(offset, at)
    return history


@st.composite
def answers(draw: st.DrawFn) -> Answered | None:
    if draw(st.integers(0, 5)) == 0:
        return None
    history = draw(histories())
    latest = history.latest if history is not None else None
    log_end = latest.offset if latest is not None and draw(st.booleans()) else draw(st.integers(0, 400))
    return Answered(draw(st.integers(0, log_end)), log_end, NOW - draw(st.floats(0, 120)), history)


@settings(max_examples=400)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 450), OFFSETS), answers()), max_size=40),
    st.floats(0, 120),
)
def test_measured_lags_twin_measures_as_the_python(
    rows: list[tuple[int | None, Answered | None]], stale: float
) -> None:
    committed = [position for position, _ in rows]
    answered = [answer for _, answer in rows]
    python = time_lag._measured_lags(committed, answered, NOW, stale)
    compiled = _lag_twins.measured_lags(iter(committed), iter(answered), NOW, stale)
    assert repr(compiled) == repr(python)  # the same types too: 0 and 0.0 differ here


@st.composite
def commit_windows(draw: st.DrawFn) -> CommitWindow | None:
    """None, or a window of commits in timestamp order around the histories' span, offsets rising mostly
    (a rewind now and then), some past what the twin takes itself (2**62 and beyond, below 0), with a
    min-distance of none, 1 s or 30 s (its newest commit left out of the rate while younger)."""
    if draw(st.integers(0, 5)) == 0:
        return None
    capacity = draw(st.integers(1, 12))
    at, offset = NOW - draw(st.floats(0, 700)), draw(st.integers(0, 300))
    commits = []
    for _ in range(draw(st.integers(0, capacity))):
        at += draw(st.sampled_from([0.0, 0.5, 5.0])) + draw(st.floats(0, 40))
        offset = draw(st.one_of(st.integers(offset - 10, offset + 80), st.sampled_from([-1, 2**62, 2**63 - 1])))
        commits.append(CommitObservation(offset, at, None))
    min_distance = draw(st.sampled_from([0.0, 1.0, 30.0]))
    return CommitWindow(capacity=capacity, min_distance=min_distance, commits=tuple(commits))


@settings(max_examples=800)
@given(
    histories(),
    commit_windows(),
    st.floats(-30, 30),
    st.one_of(st.none(), st.floats(NOW - 800, NOW + 10)),
    st.one_of(st.none(), st.floats(0.5, 900)),
)
def test_partition_throughput_twin_measures_as_the_python(
    history: EndOffsetHistory | None, window: CommitWindow | None, late: float, since: float | None, span: float | None
) -> None:
    """The same rates and busy flag to the bit, whatever the history (none, too short, flat, moving), the window
    (none, too few commits, a rewind, no time between them, offsets the twin hands to the Python) and the span."""
    now = NOW + late
    rate = throughput.RATE_WINDOW if span is None else span
    python = throughput._partition_throughput(history, window, now, since, rate)
    compiled = _lag_twins.partition_throughput(history, window, now, since, span)
    assert repr(compiled) == repr(python)


def test_partition_throughput_twin_hands_arguments_not_its_own_to_the_python() -> None:
    history = EndOffsetHistory().add(0, NOW - 20).add(100, NOW)
    window = CommitWindow(capacity=2, commits=(CommitObservation(0, NOW - 10, None), CommitObservation(50, NOW, None)))
    for now in (NOW, int(NOW)):  # an int now: the Python computes with it
        assert _lag_twins.partition_throughput(history, window, now) == throughput._partition_throughput(
            history, window, now
        )
    assert throughput.partition_throughput(history, window, NOW) == throughput.PartitionThroughput(5.0, 5.0, False)


ODD_NUMBERS = st.sampled_from([-(2**62), 2**62, 2**63 - 1, 2**64, True])
"""Past what the health twin judges itself (or a bool): handed to the Python."""


@st.composite
def judged_windows(draw: st.DrawFn) -> tuple[CommitWindow, int, float, float | None, int, int, tuple[int, ...]]:
    """A window as storage keeps them (offsets that rise, stay, go back; log ends known or not) or, now and
    then, one the twin hands to the Python (a figure past 2**62 or a bool, an int timestamp, more than 64
    commits), built without validation; a log end, the time (before, just after or long after the newest
    commit; now and then an int), a time lag, allowed lag, min_commits and recent log ends."""
    odd = draw(st.integers(0, 9)) == 0
    many = odd and draw(st.booleans())
    trend = draw(st.booleans())  # a full window of rising offsets, lags that rise, hold or fall: WARN's cases
    capacity = draw(st.integers(65, 70)) if many else draw(st.integers(1, 8))
    count = capacity if many or trend else draw(st.integers(0, capacity))
    lags = sorted(
        draw(st.lists(st.integers(1, 4), min_size=count, max_size=count)), reverse=draw(st.integers(0, 5)) == 0
    )
    at, offset, commits = NOW - 300, 0, []
    for index in range(count):
        at += draw(st.sampled_from([0.0, 0.5, 5.0, 30.0]))
        if trend:
            offset += draw(st.integers(1, 5))
            end: int | None = offset + lags[index] if draw(st.integers(0, 7)) else None
        else:
            offset = draw(st.integers(0, 12))
            end = draw(st.one_of(st.none(), st.integers(0, 20)))
        stamp: float = at
        if odd and draw(st.integers(0, 3)) == 0:
            offset, end, stamp = draw(
                st.sampled_from([(draw(ODD_NUMBERS), end, at), (offset, draw(ODD_NUMBERS), at), (offset, end, int(at))])
            )
        commits.append(CommitObservation(offset, stamp, end))
    last = commits[-1].offset if commits and type(commits[-1].offset) is int else 0
    log_end = draw(ODD_NUMBERS) if odd and draw(st.integers(0, 3)) == 0 else last + draw(st.integers(-2, 8))
    now = at + draw(st.sampled_from([-50.0, 0.5, 5.0, 1000.0]))
    return (
        CommitWindow.model_construct(capacity=capacity, min_distance=0.0, commits=tuple(commits)),
        log_end,
        int(now) if odd and draw(st.booleans()) else now,
        draw(st.one_of(st.none(), st.sampled_from([0.0, 2.0, 40.0, 500.0, 40]))),
        draw(st.one_of(st.integers(0, 3), ODD_NUMBERS)) if odd else draw(st.integers(0, 3)),
        draw(st.integers(1, 3)),
        tuple(draw(st.lists(st.integers(0, 20), max_size=3))),
    )


@settings(max_examples=800)
@given(judged_windows())
def test_the_health_twin_judges_as_the_python(
    drawn: tuple[CommitWindow, int, float, float | None, int, int, tuple[int, ...]],
) -> None:
    """The same status and rule, and the recent log ends asked for exactly when the Python asks, whatever the
    window (empty, not full, rewound and recovered or not, stalled, lags rising, flat or falling) and whatever
    it hands to the Python."""
    window, log_end, now, waited, allowed, least, recent = drawn
    asked = {"python": 0, "twin": 0}

    def recent_for(name: str) -> Callable[[], tuple[int, ...]]:
        def ends() -> tuple[int, ...]:
            asked[name] += 1
            return recent

        return ends

    python = group_health._judged(window, log_end, now, allowed, waited, recent_for("python"), least)
    compiled = _lag_twins.judged(window, log_end, now, allowed, waited, recent_for("twin"), least)
    assert compiled == python
    assert asked["twin"] == asked["python"]


def test_measured_lags_twin_refuses_mismatched_lengths_as_the_python() -> None:
    for measure in (time_lag._measured_lags, _lag_twins.measured_lags):
        try:
            measure([1, 2], [None], NOW, 60.0)
        except ValueError as exc:
            assert "shorter" in str(exc)
        else:
            raise AssertionError(f"{measure} took two committed offsets for one partition")


def _outcome(read: object, values: list[bytes | None]) -> tuple[object, ...]:
    try:
        return ("read", read(values))  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - an exception is an outcome to compare
        return ("raised", type(exc).__name__, str(exc))


NUMBERS = st.one_of(
    st.integers(-5, 10**6).map(str),
    INT64.map(str),
    st.integers(10**17, 10**21).map(str),  # past what the twin reads itself: offset_of reads those
    st.text("0123456789-", max_size=22),  # leading zeros, no digits, stray signs
)
STORED = st.one_of(
    st.none(),
    st.tuples(NUMBERS, st.sampled_from([b",", b"}", b"", b'"', b",x"]), st.binary(max_size=30)).map(
        lambda parts: b'{"offset":' + parts[0].encode() + parts[1] + parts[2]
    ),
    st.sampled_from(
        [
            b'{"offset":-1,"commit_timestamp":5,"leader_epoch":null,"commits":[[-1,0.005,null]]}',
            b'{"commit_timestamp":5,"offset":8,"leader_epoch":null,"commits":[]}',  # not first: decoded
            b'{"offset":12345678901234567890,"commit_timestamp":5,"leader_epoch":null,"commits":[]}',
        ]
    ),
    st.binary(max_size=40),
)


@settings(max_examples=600)
@given(st.lists(STORED, max_size=6))
def test_offsets_of_twin_reads_what_the_python_reads(values: list[bytes | None]) -> None:
    """The same offsets, or the same exception from the same value (a value it cannot read itself goes to
    offset_of in both)."""
    assert _outcome(_lag_twins.offsets_of, values) == _outcome(committed_offset._offsets_of, values)


LABELS = st.text(min_size=0, max_size=12).map(lambda text: f'{{partition="{text}"}} ')
TIME_LAGS = st.one_of(
    st.none(),
    st.integers(0, 2 * 10**9).map(lambda ms: ms / 1000),  # whole milliseconds, as time_lag states them
    st.floats(0, 1e6, allow_nan=False),
    st.floats(1e6, 1e300),
    st.sampled_from([0.0, 999_999.9999999, 1e6, math.inf, math.nan]),
)


TOPIC_NAMES = st.sampled_from(["t", "u", "\u00e9v\u00e9nements", 'q"uoted'])


@st.composite
def partition_labels(draw: st.DrawFn) -> tuple[lag_series.PartitionLabels, list[Any]]:
    """Pieces of a group's partition labels, and for each partition its committed offset, offset lag and time
    lag: mostly the twin's own, now and then what it hands to the Python (a member's labels that do not end in
    two ASCII characters, a holder out of range or not an int, a number past int32 or below 0, a partition
    that is not a TopicPartition)."""
    odd = st.integers(0, 30).map(lambda n: n == 0)  # one in 31: what the twin hands to the Python
    labels = st.text(max_size=12).map(lambda text: f'{{m="{text}"}} ')
    members = tuple(draw(st.lists(st.text(max_size=3) if draw(odd) else labels, max_size=4)))  # "", "é"...
    sizes = draw(st.lists(st.integers(0, 6), max_size=4))
    topics = tuple((f'",topic="{draw(TOPIC_NAMES)}"}} ', size) for size in sizes)
    count = sum(sizes)
    places = len(members)
    holders, partitions = [], []
    for _ in range(count):
        holder = (
            draw(st.sampled_from([-1, places, True])) if draw(odd) or not places else draw(st.integers(0, places - 1))
        )
        holders.append(holder)
        number = draw(st.sampled_from([2**31, -1])) if draw(odd) else draw(st.integers(0, 300) | st.just(2**31 - 1))
        topic = draw(TOPIC_NAMES)
        partitions.append((topic, number) if draw(odd) else TopicPartition(topic, number))
    figures = draw(
        st.lists(
            st.tuples(st.one_of(st.none(), INT64, BEYOND), st.one_of(st.none(), OFFSETS), TIME_LAGS),
            min_size=count,
            max_size=count,
        )
    )
    return lag_series.PartitionLabels(members, holders, tuple(partitions), topics), [
        list(column) for column in zip(*figures, strict=True)
    ] if figures else [[], [], []]


@settings(max_examples=600)
@given(partition_labels())
def test_partition_pieces_twin_writes_the_python_text(labels_and_figures: tuple[Any, list[Any]]) -> None:
    """The same text, from its labels' pieces, or the same error (a holder out of range: IndexError, a
    partition that is not a TopicPartition: AttributeError), with its figures as lists and as tuples."""
    labels, columns = labels_and_figures
    python = _outcome(lambda columns: lag_series._partition_pieces(labels, *columns), columns)
    assert _outcome(lambda columns: _lag_twins.partition_pieces(labels, *columns), columns) == python
    assert _outcome(lambda columns: _lag_twins.partition_pieces(labels, *map(tuple, columns)), columns) == python


def _writes_the_same(python: Callable[..., object], twin: Callable[..., object], rows: list[Any], width: int) -> None:
    """``twin`` writes what ``python`` writes of the columns of ``rows`` (of ``width``), as lists and tuples."""
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]
    text = python(*columns)
    assert twin(*columns) == text
    assert twin(*map(tuple, columns)) == text


@pytest.mark.parametrize(
    ("python", "twin", "arguments"),
    [
        (
            lag_series._partition_pieces,
            _lag_twins.partition_pieces,
            (lag_series.PartitionLabels(("{} ",), [0], (TopicPartition("t", 0),), (("} ", 1),)), [1], [1, 2], [None]),
        ),
        (
            lag_series._partition_pieces,
            _lag_twins.partition_pieces,
            (
                lag_series.PartitionLabels(("{",), [0], (TopicPartition("t", 0),), (("} ", 2), ("} ", -1))),
                [1],
                [1],
                [None],
            ),
        ),
        (lag_series._member_pieces, _lag_twins.member_pieces, (["{} "], [1, 2], [None])),
    ],
)
def test_the_pieces_twins_refuse_mismatched_lengths_as_the_python(
    python: Callable[..., object], twin: Callable[..., object], arguments: tuple[list[Any], ...]
) -> None:
    messages = []
    for write in (python, twin):
        with pytest.raises(ValueError) as raised:
            write(*arguments)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


@settings(max_examples=400)
@given(st.lists(st.tuples(LABELS, st.one_of(st.none(), INT64, BEYOND), TIME_LAGS), max_size=12))
def test_member_pieces_twin_writes_the_python_text(rows: list[tuple[str, int | None, float | None]]) -> None:
    _writes_the_same(lag_series._member_pieces, _lag_twins.member_pieces, rows, 3)


@st.composite
def rows_read(
    draw: st.DrawFn,
) -> tuple[list[tuple[int, ...]], list[int | None], list[float | None], list[int | None]]:
    """A group's partitions read, each adding to some of its rows (members, the row of no member last)."""
    rows = draw(st.integers(0, 5))
    owner = st.integers(-1, rows - 1) if rows else st.nothing()
    count = draw(st.integers(0, 20))
    owners = [tuple(draw(st.lists(owner, max_size=3 if rows else 0))) for _ in range(count)]
    lags = st.one_of(st.none(), st.integers(0, 3), OFFSETS, st.just(2**63 - 1), BEYOND)
    offset_lags = draw(st.lists(lags, min_size=count, max_size=count))
    seconds = st.one_of(TIME_LAGS, st.sampled_from([0.0005, 0.0015, 0.0025, 2.5e-4, -0.0005, 1e13, -math.inf]))
    time_lags = draw(st.lists(seconds, min_size=count, max_size=count))
    expected = draw(st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=rows, max_size=rows))
    return owners, offset_lags, time_lags, expected


@settings(max_examples=800)
@given(rows_read())
def test_read_lags_twin_adds_up_as_the_python(
    read: tuple[list[tuple[int, ...]], list[int | None], list[float | None], list[int | None]],
) -> None:
    """The same figures (halves of a millisecond rounded to even, as Python's round), and whatever the
    twin does not take (past int64, a time lag NaN or too large) the Python's way, its errors too."""
    outcomes = []
    for add_up in (member_lag._read_lags, _lag_twins.read_lags):
        try:
            outcomes.append(repr(add_up(*read)))
        except (ValueError, OverflowError) as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
    assert outcomes[0] == outcomes[1]


def test_read_lags_twin_hands_what_it_does_not_take_to_the_python() -> None:
    owners = [(0,), (0, 1), [1]]  # an owner in a list, not a tuple
    expected = [2, 2]
    python = member_lag._read_lags(owners, [3, 4, 5], [1.5, 0.25, None], expected)
    assert python == ([7, 9], [1.75, None])
    assert _lag_twins.read_lags(owners, [3, 4, 5], [1.5, 0.25, None], expected) == python
    with pytest.raises(IndexError):
        _lag_twins.read_lags([(2,)], [1], [1.0], [None, None])
    with pytest.raises(ValueError, match="zip"):
        _lag_twins.read_lags([(0,)], [1, 2], [1.0], [None])


POOL = [TopicPartition(topic, partition) for topic in ("t", "u", "w") for partition in range(4)]


@st.composite
def groups_held(draw: st.DrawFn) -> tuple[list[Any], list[Any], Any, list[Any]]:
    """Each row's partitions (None: unknown; a partition held twice, by one member or two; beyond its topic's
    count or of a topic of unknown count), the rows as the assignment lists them, the counts and the partitions
    read; now and then what the twin hands to the Python (a row listed that is not one, counts not in a dict, a
    partition that is not a TopicPartition)."""
    rows = draw(st.integers(0, 4))
    held = [draw(st.none() | st.lists(st.sampled_from(POOL), max_size=6)) for _ in range(rows)]
    listed = draw(st.permutations(range(rows)))
    if draw(st.integers(0, 10)) == 0:
        listed = [*listed, draw(st.sampled_from([rows, -1]))]
    counts: Any = {topic: draw(st.integers(0, 5)) for topic in draw(st.sets(st.sampled_from(["t", "u", "w"])))}
    if draw(st.integers(0, 10)) == 0:
        counts = MappingProxyType(counts)
    read: list[Any] = sorted(draw(st.sets(st.sampled_from(POOL))))
    if read and draw(st.integers(0, 10)) == 0:
        read[0] = tuple(read[0])
    return held, list(listed), counts, read


@settings(max_examples=800)
@given(groups_held())
def test_partition_rows_twin_lays_out_as_the_python(group: tuple[list[Any], list[Any], Any, list[Any]]) -> None:
    """The same owners, expected counts and holders, or the same error, whatever the twin hands to the Python."""
    assert _outcome(lambda group: _lag_twins.partition_rows(*group), group) == _outcome(
        lambda group: member_lag._partition_rows(*group), group
    )


@st.composite
def group_figures(draw: st.DrawFn) -> tuple[list[int | None], list[float | None], list[tuple[str, int, int]]]:
    lags = draw(st.lists(st.one_of(st.none(), st.integers(0, 3), OFFSETS, st.just(2**63 - 1), BEYOND), max_size=30))
    seconds = draw(st.lists(TIME_LAGS, min_size=len(lags), max_size=len(lags)))
    cuts = sorted(draw(st.lists(st.integers(0, len(lags)), max_size=4)))
    bounds = [0, *cuts, len(lags)]
    topics = [(f"topic-{index}", start, end) for index, (start, end) in enumerate(itertools.pairwise(bounds))]
    return lags, seconds, topics


@settings(max_examples=600)
@given(group_figures())
def test_lag_sums_twin_adds_up_as_the_python(
    figures: tuple[list[int | None], list[float | None], list[tuple[str, int, int]]],
) -> None:
    """The same figures, NaN where the Python has NaN, and sums past int64 (left to the Python) alike."""
    python = lag_series._lag_sums(*figures)
    assert repr(_lag_twins.lag_sums(*figures)) == repr(python)


def test_lag_sums_twin_refuses_mismatched_lengths_as_the_python() -> None:
    messages = []
    for add_up in (lag_series._lag_sums, _lag_twins.lag_sums):
        try:
            add_up([1, 2], [None], [])
        except ValueError as exc:
            messages.append(str(exc))
    assert len(messages) == 2
    assert messages[0] == messages[1]


def _applied_outcome(
    apply: object, raw: object, commits: list[object], log_end: object, capacity: object, distance: object
) -> tuple[object, ...]:
    try:
        return ("applied", repr(apply(raw, commits, log_end, capacity=capacity, min_distance=distance)))  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - an exception is an outcome to compare
        return ("raised", type(exc).__name__, str(exc))


STAMPS = st.one_of(
    st.integers(1_700_000_000_000, 1_700_000_100_000),  # a cluster's clock, in ms
    st.integers(-3_000, 3_000),  # near the epoch, either side: 0.0, 0.001, -0.5...
    st.integers(-(10**15) + 1, 10**15 - 1),  # the most the twin writes itself
    st.integers(10**15, 2**62),  # past it: the Python's way
    st.just(1_700_000_000_000),
)
SMALL_OR_NOT = st.one_of(st.integers(-3, 500), INT64, st.integers(10**18 - 2, 10**18 + 2), BEYOND)
COMMIT = st.tuples(SMALL_OR_NOT, STAMPS, st.one_of(st.none(), SMALL_OR_NOT))
DISTANCES = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 5.0, 0, 2, True, -1.0, math.inf]), st.floats(0, 100))


@settings(max_examples=500)
@given(
    st.lists(
        st.tuples(
            st.lists(COMMIT, min_size=0, max_size=4),
            st.one_of(st.none(), SMALL_OR_NOT),
            st.one_of(st.integers(1, 6), st.sampled_from([0, -1, 1001, 2**70, True])),
            DISTANCES,
        ),
        min_size=1,
        max_size=12,
    )
)
def test_applied_twin_applies_as_the_python(
    steps: list[tuple[list[tuple[int, int, int | None]], int | None, int, float]],
) -> None:
    """A partition's commits applied batch after batch, each batch to what the Python stored after the one
    before: the same value byte for byte, the same offset, stale count and move (or the same exception)."""
    raw = None
    for commits, log_end, capacity, distance in steps:
        flat = [field for commit in commits for field in commit]
        python = _applied_outcome(committed_offset._applied, raw, flat, log_end, capacity, distance)
        assert _applied_outcome(_lag_twins.applied, raw, flat, log_end, capacity, distance) == python
        assert _applied_outcome(_lag_twins.applied, raw, tuple(flat), log_end, capacity, distance) == python
        if python[0] == "applied":
            raw = committed_offset._applied(raw, flat, log_end, capacity=capacity, min_distance=distance).value or raw


WRITTEN_OTHERWISE = [
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null}',  # version 1: the event itself
    b'{"offset": 7,"commit_timestamp":1000,"leader_epoch":null,"commits":[]}',
    b'{"commit_timestamp":1000,"offset":7,"leader_epoch":null,"commits":[]}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[],"more":1}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1.50,null]]}',  # a trailing zero
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1e+16,null]]}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1234567890.1234567,null]]}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,0.00001,null]]}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1,null]]}',  # an int time
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[-0,1.0,null]]}',
    b'{"offset":07,"commit_timestamp":1000,"leader_epoch":null,"commits":[]}',
    b'{"offset":1234567890123456789,"commit_timestamp":1000,"leader_epoch":null,"commits":[]}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1.0,null],]}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1.0]]}',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1.0,null]]',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[[7,1.0,null]]} ',
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":"x","commits":[]}',
    b"not json",
    b"",
]
KEPT_AS_WRITTEN = [  # as the Python writes them: the twin reads these itself
    b'{"offset":7,"commit_timestamp":1000,"leader_epoch":null,"commits":[]}',
    b'{"offset":-1,"commit_timestamp":-5,"leader_epoch":-3,"commits":[[-1,-0.005,-2],[0,0.0,null],[3,0.0001,0]]}',
    b'{"offset":9,"commit_timestamp":1700000009000,"leader_epoch":4,"commits":['
    + b",".join(b"[%d,17000000%02d.123,%d]" % (n, n, n + 40) for n in range(9))  # more than a window of 3
    + b"]}",
]


@pytest.mark.parametrize("raw", WRITTEN_OTHERWISE + KEPT_AS_WRITTEN)
def test_applied_twin_takes_any_stored_value_as_the_python(raw: bytes) -> None:
    """A value as another writer might have written it goes to the Python, which reads (or refuses) it: a
    commit applied to it, one older, one within the window's distance of the newest, and one read again."""
    for commits in (
        [8, 1_700_000_020_000, 1],
        [8, 500, None],
        [10, 1_700_000_009_500, None],
        [9, 1_700_000_009_000, 4],
    ):
        for capacity, distance in ((3, 1.0), (10, 0.0)):
            python = _applied_outcome(committed_offset._applied, raw, commits, 90, capacity, distance)
            assert _applied_outcome(_lag_twins.applied, raw, commits, 90, capacity, distance) == python


def test_applied_twin_reads_values_as_written_itself_and_hands_the_others_to_the_python() -> None:
    """Which path each value takes, seen in a fresh interpreter whose Python function refuses every call
    (the twin looks it up at its first call): the values as written are applied without it."""
    script = f"""
from kagent.core import _lag_twins, committed_offset

def refuse(*args, **kwargs):
    raise LookupError("handed to the Python")

committed_offset._applied = refuse
for raw in [None, *{KEPT_AS_WRITTEN!r}]:
    assert _lag_twins.applied(raw, [8, 1_700_000_020_000, 1], 90, capacity=3, min_distance=1.0).value
for raw in {WRITTEN_OTHERWISE!r}:
    try:
        _lag_twins.applied(raw, [8, 1_700_000_020_000, 1], 90, capacity=3, min_distance=1.0)
    except LookupError:
        continue
    raise AssertionError(f"the twin read {{raw!r}} itself")
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def _window_outcome(read: object, raw: object, capacity: object, distance: object) -> tuple[object, ...]:
    try:
        window = read(raw, capacity, distance)  # type: ignore[operator]
        commits = [(repr(tuple(commit)), tuple(map(type, commit))) for commit in window.commits]
        return ("read", window.capacity, window.min_distance, window.model_fields_set, commits)
    except Exception as exc:  # noqa: BLE001 - an exception is an outcome to compare
        return ("raised", type(exc).__name__, str(exc))


@settings(max_examples=500)
@given(
    st.lists(
        st.tuples(st.lists(COMMIT, min_size=0, max_size=4), st.one_of(st.none(), SMALL_OR_NOT)),
        min_size=1,
        max_size=12,
    ),
    st.one_of(st.integers(1, 12), st.sampled_from([0, -1, 1000, 1001, 2**70, True])),
    DISTANCES,
)
def test_window_of_twin_reads_as_the_python(
    steps: list[tuple[list[tuple[int, int, int | None]], int | None]], capacity: int, distance: float
) -> None:
    """The window of every value the Python writes as a partition's commits come (times of any number of
    digits, log ends known or not, offsets past what the twin reads itself), at any capacity: the same
    commits of the same types, to the bit, and the same fields (or the same exception)."""
    raw = None
    for commits, log_end in steps:
        flat = [field for commit in commits for field in commit]
        try:
            raw = committed_offset._applied(raw, flat, log_end, capacity=12, min_distance=0.5).value or raw
        except (OverflowError, ValueError, TypeError):
            continue  # a figure the value cannot hold: nothing written
        if raw is not None:
            python = _window_outcome(committed_offset._window_of, raw, capacity, distance)
            assert _window_outcome(_lag_twins.window_of, raw, capacity, distance) == python


@pytest.mark.parametrize("raw", WRITTEN_OTHERWISE + KEPT_AS_WRITTEN)
def test_window_of_twin_takes_any_stored_value_as_the_python(raw: bytes) -> None:
    """A value written otherwise goes to the Python, which reads (or refuses) it; one as written is read alike."""
    for capacity, distance in ((3, 1.0), (10, 0.0)):
        python = _window_outcome(committed_offset._window_of, raw, capacity, distance)
        assert _window_outcome(_lag_twins.window_of, raw, capacity, distance) == python
