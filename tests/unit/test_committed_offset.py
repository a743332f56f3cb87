"""The committed-offsets table's value: versions 1 and 2 read, and the window follows the health check's rules."""

from __future__ import annotations

import tracemalloc

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kagent.core import committed_offset
from kagent.core.committed_offset import StoredCommit, applied
from kagent.core.events import OffsetCommitted
from kagent.core.group_health import CommitObservation, CommitWindow
from kagent.core.json_bytes import kept
from tests.support.commit_windows import append_commit


def _encoded(value: StoredCommit) -> bytes:
    """The stored bytes of ``value``, as storage keeps them (version 2)."""
    return kept(value._asdict())


def test_a_version_1_value_reads_as_its_commit_with_a_window_of_it_alone() -> None:
    old = OffsetCommitted(
        group="g", topic="t", partition=3, offset=42, commit_timestamp=1_700_000_000_500, leader_epoch=2
    )
    stored = committed_offset.decode(old.model_dump_json().encode())
    assert stored == StoredCommit(42, 1_700_000_000_500, 2, [[42, 1_700_000_000.5, None]])
    assert stored.window(10, 1.0).commits == (CommitObservation(42, 1_700_000_000.5, None),)
    after = applied(old.model_dump_json().encode(), [50, 1_700_000_010_000, 2], 80, capacity=10, min_distance=1.0)
    assert after.value is not None
    assert committed_offset.decode(after.value) == StoredCommit(
        50, 1_700_000_010_000, 2, [[42, 1_700_000_000.5, None], [50, 1_700_000_010.0, 80]]
    )


def test_the_value_names_no_group_topic_or_partition_and_round_trips() -> None:
    raw = applied(None, [7, 1_000, None], None, capacity=3, min_distance=0.0).value
    assert raw is not None
    assert orjson.loads(raw) == {
        "offset": 7,
        "commit_timestamp": 1_000,
        "leader_epoch": None,
        "commits": [[7, 1.0, None]],
    }
    assert committed_offset.decode(raw) == StoredCommit(7, 1_000, None, [[7, 1.0, None]])


def test_a_commit_read_again_leaves_the_bytes_as_they_were() -> None:
    first = applied(None, [7, 1_000, 1], 9, capacity=3, min_distance=0.0).value
    assert applied(first, [7, 1_000, 1], 12, capacity=3, min_distance=0.0) == (None, 7, 0, False)


def test_a_commit_older_than_the_newest_is_stale_and_the_rest_apply_in_order() -> None:
    first = applied(None, [7, 1_000, None], None, capacity=3, min_distance=0.0).value

    after = applied(
        first, [5, 900, None, 9, 2_000, None, 8, 1_500, None, 10, 2_500, None], 30, capacity=3, min_distance=0.0
    )

    assert (after.offset, after.stale) == (10, 2)
    assert after.value is not None
    assert committed_offset.decode(after.value).commits == [[7, 1.0, None], [9, 2.0, 30], [10, 2.5, 30]]
    assert applied(after.value, [6, 800, 1], 40, capacity=3, min_distance=0.0) == (None, None, 1, False)


def test_a_window_stored_longer_than_the_capacity_keeps_its_newest_commits() -> None:
    stored = StoredCommit(4, 4_000, None, [[1, 1.0, None], [2, 2.0, None], [3, 3.0, None], [4, 4.0, None]])
    after = applied(_encoded(stored), [5, 5_000, None], None, capacity=2, min_distance=0.0).value
    assert after is not None
    assert [commit[0] for commit in committed_offset.decode(after).commits] == [4, 5]
    assert [c.offset for c in stored.window(3, 0.0).commits] == [2, 3, 4]


def test_the_offset_is_read_from_the_bytes_before_the_window_and_from_any_version() -> None:
    version_1 = OffsetCommitted(group="g", topic="t", partition=0, offset=42, commit_timestamp=1)
    assert committed_offset.offset_of(version_1.model_dump_json().encode()) == 42
    version_2 = b'{"offset":-1,"commit_timestamp":5,"leader_epoch":null,"commits":[[-1,0.005,null]]}'
    reordered = b'{"commit_timestamp":5,"offset":8,"leader_epoch":null,"commits":[]}'
    assert [committed_offset.offset_of(raw) for raw in (version_2, reordered)] == [-1, 8]
    values = [version_2, None, reordered, version_1.model_dump_json().encode()]
    assert committed_offset.offsets_of(values) == [-1, None, 8, 42]


commits = st.lists(
    st.tuples(st.integers(0, 1_000), st.integers(0, 60_000), st.one_of(st.none(), st.integers(0, 2_000))),
    max_size=30,
)


@given(commits, st.integers(1, 6), st.sampled_from([0.0, 1.0, 5.0]))
def test_the_stored_window_is_the_health_checks_window_after_the_same_commits(
    seen: list[tuple[int, int, int | None]], capacity: int, min_distance: float
) -> None:
    """Each commit applied as storage applies it (through the bytes, refusing one older than the newest)
    gives the window :func:`append_commit` builds from the same commits."""
    raw: bytes | None = None
    model = CommitWindow(capacity=capacity, min_distance=min_distance)
    for offset, stamp, log_end in seen:
        result = applied(raw, [offset, stamp, None], log_end, capacity=capacity, min_distance=min_distance)
        if result.offset is None:  # older than the newest: refused
            continue
        raw = result.value or raw
        model = append_commit(model, CommitObservation(offset, stamp / 1000, log_end))
    if raw is None:
        assert not model.commits
    else:
        assert committed_offset.decode(raw).window(capacity, min_distance) == model
        assert committed_offset.offset_of(raw) == committed_offset.decode(raw).offset
        assert committed_offset.offsets_of([raw]) == [committed_offset.decode(raw).offset]


def test_a_stored_value_takes_the_memory_of_its_bytes_not_orjsons_working_buffer() -> None:
    """A million values live in a worker's memory: each must cost about its length (orjson's own bytes
    keep a 4 KiB allocation, which took a worker to 1 GB at 200,000 group-partitions)."""
    value = committed_offset.decode(
        applied(None, [7, 1_700_000_000_000, 3], 120, capacity=10, min_distance=1.0).value or b""
    )
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [_encoded(value) for _ in range(1_000)]
        per_value = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per_value < 4 * len(kept[0]), f"{per_value:.0f} bytes per stored value of {len(kept[0])}"


def test_a_commit_moves_the_position_only_when_its_offset_differs_from_the_one_stored() -> None:
    """Java's auto-commit commits the same position every 5 s: its lag did not change, nor its series."""
    first = applied(None, [7, 1_000, None], 12, capacity=3, min_distance=0.0)
    assert first.moved
    again = applied(first.value, [7, 6_000, None], 12, capacity=3, min_distance=0.0)
    assert again.value is not None and not again.moved  # stored (its timestamp is newer), not moved
    assert applied(again.value, [7, 11_000, None, 9, 16_000, None], 12, capacity=3, min_distance=0.0).moved
