"""The committed-offsets table as storage writes it: a commit read again never undoes a newer one."""

from __future__ import annotations

from types import SimpleNamespace

from aiokafka.structs import TopicPartition

from kagent.core import committed_offset
from kagent.core.group_health import CommitObservation
from kagent.core.table_keys import partition_key
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.committed_offsets import CommittedOffsets

TP = TopicPartition("orders", 3)
KEY = partition_key("billing", "orders", 3)


def offsets() -> tuple[CommittedOffsets, dict[str, bytes], ChangelogWriter]:
    """Over a plain dict standing in for the table's store (the writer only sets and stages)."""
    held: dict[str, bytes] = {}
    table = SimpleNamespace(name="committed-offsets", data=held, stored=held)
    writer = ChangelogWriter(None)  # type: ignore[arg-type]  # never flushed here
    return CommittedOffsets(table, writer, capacity=3, min_distance=0.0), held, writer  # type: ignore[arg-type]


def test_a_commit_is_stored_with_its_window_and_an_older_one_read_again_is_refused() -> None:
    made, held, writer = offsets()

    assert made.commit("billing", TP, [10, 2_000, 1], 40).offset == 10
    assert made.commit("billing", TP, [12, 3_000, 1], None).offset == 12
    newest = held[KEY]
    refused = made.commit("billing", TP, [10, 2_000, 1], 40)  # the first commit, read again
    assert refused == (None, None, 1, False)

    assert held[KEY] is newest
    assert made.offset("billing", TP) == 12
    window = made.window("billing", TP)
    assert window is not None and window.commits == (
        CommitObservation(10, 2.0, 40),
        CommitObservation(12, 3.0, None),
    )
    assert writer.staged == 1  # one record for the key: the last value


def test_the_newest_commit_read_again_writes_nothing() -> None:
    made, held, _ = offsets()
    made.commit("billing", TP, [10, 2_000, None], 40)
    stored = held[KEY]

    assert made.commit("billing", TP, [10, 2_000, None], 55) == (None, 10, 0, False)

    assert held[KEY] is stored


def test_a_deleted_offset_leaves_nothing_and_stages_a_tombstone() -> None:
    made, held, writer = offsets()
    made.commit("billing", TP, [10, 2_000, None], 40)

    made.delete("billing", TP)

    assert KEY not in held and made.offset("billing", TP) is None and made.window("billing", TP) is None
    assert writer.staged == 1


def test_a_version_1_value_restored_from_an_older_worker_takes_new_commits() -> None:
    made, held, _ = offsets()
    held[KEY] = (
        b'{"kind":"offset-committed","group":"billing","topic":"orders","partition":3,"offset":7,"commit_timestamp":1000,"leader_epoch":null}'
    )

    assert made.commit("billing", TP, [9, 1_500, None], 20).offset == 9

    assert committed_offset.decode(held[KEY]).commits == [[7, 1.0, None], [9, 1.5, 20]]


def test_a_partitions_commits_in_one_record_write_one_value_that_a_commit_at_a_time_would() -> None:
    one_by_one, _, _ = offsets()
    together, _, writer = offsets()
    commits = [(offset, stamp, None) for offset, stamp in ((5, 1_000), (8, 2_000), (6, 1_500))]
    for commit in commits:
        one_by_one.commit("billing", TP, commit, 30)

    result = together.commit("billing", TP, [field for commit in commits for field in commit], 30)

    assert (result.offset, result.stale) == (8, 1)  # the last commit applied; the one older than it skipped
    assert together.window("billing", TP) == one_by_one.window("billing", TP)
    assert writer.staged == 1
