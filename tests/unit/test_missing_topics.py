"""Topics gone from the cluster (kagent.worker.missing_topics) and what the lag figures keep of partitions
without offsets (kagent.worker.lag_figures.LagFigures): dropped after DROP_AFTER_POLLS intervals, asked
for again every RECHECK_AFTER_POLLS, back at once when re-created; an impossible partition of a real topic
is never dropped; figures beyond a topic's partition count are forgotten."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from aiokafka.structs import TopicPartition as TP

from kagent.core.snapshot import LagFlag
from kagent.worker.committed_offsets import CommittedOffsets
from kagent.worker.group_state import EndOffsetsPolled
from kagent.worker.lag_figures import GroupReads, LagFigures
from kagent.worker.list_offsets import Reason
from kagent.worker.missing_topics import DROP_AFTER_POLLS, RECHECK_AFTER_POLLS, MissingTopics, missing_topics

INTERVAL = 5.0
DROP = DROP_AFTER_POLLS * INTERVAL
RECHECK = RECHECK_AFTER_POLLS * INTERVAL


def test_missing_topics_are_those_answered_unknown_and_absent_from_the_metadata() -> None:
    unavailable = {
        TP("gone", 0): Reason.UNKNOWN_PARTITION,
        TP("orders", 5): Reason.UNKNOWN_PARTITION,  # partition 5 of a 2-partition topic: the topic is there
        TP("slow", 0): Reason.REQUEST_FAILED,
    }
    assert missing_topics(unavailable, {"orders": 2}) == {"gone"}


def test_a_topic_missing_at_every_poll_for_the_bound_is_dropped_then_rechecked_and_back_when_found() -> None:
    topics = MissingTopics(INTERVAL)
    at = 0.0
    while at < DROP:
        assert topics.observe([], ["gone"], at) == (set(), set()), at
        at += INTERVAL
    assert topics.observe([], ["gone"], at) == ({"gone"}, set())
    assert set(topics.dropped) == {"gone"}

    assert topics.recheck(["gone", "orders"], at + RECHECK - 1) == set()
    assert topics.recheck(["gone", "orders"], at + RECHECK) == {"gone"}
    assert topics.recheck(["gone"], at + RECHECK + 1) == set()  # counted as asked: not again at the next poll
    assert topics.observe([], ["gone"], at + RECHECK + INTERVAL) == (set(), set())  # still gone: stays dropped
    assert topics.observe(["gone"], [], at + RECHECK + 2 * INTERVAL) == (set(), {"gone"})  # re-created
    assert not topics.dropped


def test_a_poll_that_finds_the_topic_or_does_not_ask_for_it_starts_its_count_again() -> None:
    topics = MissingTopics(INTERVAL)
    topics.observe([], ["flaky"], 0.0)
    topics.observe(["flaky"], [], DROP - INTERVAL)  # back in the metadata
    assert topics.observe([], ["flaky"], DROP) == (set(), set())
    topics.observe([], [], DROP + INTERVAL)  # not asked for: no group read it then
    assert topics.observe([], ["flaky"], 2 * DROP) == (set(), set())
    assert topics.observe([], ["flaky"], 3 * DROP) == ({"flaky"}, set())


def test_a_dropped_topic_no_group_reads_any_more_is_forgotten() -> None:
    topics = MissingTopics(INTERVAL)
    topics.observe([], ["gone"], 0.0)
    topics.observe([], ["gone"], DROP)
    assert set(topics.dropped) == {"gone"}
    topics.observe([], [], DROP + 2 * RECHECK)
    assert set(topics.dropped) == {"gone"}
    topics.observe([], [], DROP + 2 * RECHECK + INTERVAL)  # never re-checked: nobody asks for it
    assert not topics.dropped


# -- what LagFigures keeps ----------------------------------------------------------------------------------


class Published:
    def publish(self, table: Any, key: str, value: bytes | None) -> None:
        pass


def lag_figures() -> LagFigures:
    offsets = CommittedOffsets(SimpleNamespace(stored={}), None, capacity=10, min_distance=1.0)  # type: ignore[arg-type]
    return LagFigures(offsets, None, Published(), poll_interval=INTERVAL, auto_offset_reset="earliest")  # type: ignore[arg-type]


def polled(
    at: float,
    answered: dict[TP, int],
    counts: dict[str, int],
    unavailable: dict[TP, Reason] | None = None,
) -> EndOffsetsPolled:
    return EndOffsetsPolled(
        polled_at=at,
        log_start=dict.fromkeys(answered, 0),
        log_end=answered,
        partition_counts=counts,
        unavailable=unavailable or {},
    )


def test_the_latest_poll_says_which_partitions_have_no_offsets_and_why() -> None:
    made = lag_figures()
    made.take(polled(0.0, {TP("orders", 0): 10}, {"orders": 2}, {TP("orders", 1): Reason.REQUEST_FAILED}))
    assert made.unavailable(TP("orders", 1)) is Reason.REQUEST_FAILED
    assert made.unavailable(TP("orders", 0)) is None
    made.take(polled(INTERVAL, {TP("orders", 0): 11, TP("orders", 1): 4}, {"orders": 2}))
    assert made.unavailable(TP("orders", 1)) is None
    assert made.log_end(TP("orders", 1)) == 4
    assert made.unavailable_partitions() == {}


def test_a_partition_beyond_its_topics_count_stays_read_and_flagged_never_dropped() -> None:
    made = lag_figures()
    reads = GroupReads(1, frozenset({"orders"}), (TP("orders", 0), TP("orders", 5)))
    at = 0.0
    while at <= 2 * DROP:
        made.take(
            polled(
                at,
                {TP("orders", 0): 10, TP("orders", 1): 3},
                {"orders": 2},
                {TP("orders", 5): Reason.UNKNOWN_PARTITION},
            )
        )
        at += INTERVAL
    assert made.unavailable(TP("orders", 5)) is Reason.UNKNOWN_PARTITION
    assert not made.dropped_topics()
    assert made.group_partitions(reads) == [TP("orders", 0), TP("orders", 1), TP("orders", 5)]
    assert made.partitions_to_poll(made.group_partitions(reads), at) == [
        TP("orders", 0),
        TP("orders", 1),
        TP("orders", 5),
    ]


def test_a_deleted_topic_is_dropped_from_the_figures_after_the_bound_and_comes_back_when_re_created() -> None:
    made = lag_figures()
    reads = GroupReads(1, frozenset({"gone", "orders"}), (TP("gone", 0), TP("gone", 1), TP("orders", 0)))
    made.take(polled(0.0, {TP("gone", 0): 7, TP("gone", 1): 9, TP("orders", 0): 10}, {"gone": 2, "orders": 1}))
    assert made.partition_lag("g", TP("gone", 0), None, 0.0).log_end == 7

    deleted = {TP("gone", 0): Reason.UNKNOWN_PARTITION, TP("gone", 1): Reason.UNKNOWN_PARTITION}
    at = INTERVAL
    while at < INTERVAL + DROP:  # missing, not yet dropped: the figures stay (they go stale)
        made.take(polled(at, {TP("orders", 0): 10}, {"orders": 1}, deleted))
        missing = made.partition_lag("g", TP("gone", 0), None, at)  # shown, unknown, with why
        assert (missing.log_end, missing.offset_lag, missing.flags[0]) == (7, None, LagFlag.UNKNOWN_PARTITION), at
        at += INTERVAL
    made.take(polled(at, {TP("orders", 0): 10}, {"orders": 1}, deleted))
    assert set(made.dropped_topics()) == {"gone"}
    assert made.partition_lag("g", TP("gone", 0), None, at).log_end is None  # its figures forgotten (storage drops it)
    assert made.log_end(TP("gone", 0)) is None
    assert made.partition_counts(["gone", "orders"]) == {"orders": 1}
    assert made.group_partitions(reads) == [TP("orders", 0)]
    read = [TP("gone", 0), TP("gone", 1), TP("orders", 0)]
    assert made.partitions_to_poll(read, at + INTERVAL) == [TP("orders", 0)]

    recheck = at + RECHECK
    assert made.partitions_to_poll(read, recheck) == read  # asked for again
    made.take(
        polled(
            recheck,
            {TP("gone", 0): 1, TP("orders", 0): 10},
            {"gone": 1, "orders": 1},
            {TP("gone", 1): Reason.UNKNOWN_PARTITION},
        )
    )
    assert not made.dropped_topics()  # re-created, with one partition
    assert made.log_end(TP("gone", 0)) == 1
    assert made.group_partitions(reads) == read  # gone-1 is assigned: shown, unknown
    assert made.unavailable(TP("gone", 1)) is Reason.UNKNOWN_PARTITION


def test_the_figures_of_partitions_beyond_a_topics_new_count_are_forgotten() -> None:
    made = lag_figures()
    made.take(polled(0.0, {TP("orders", 0): 10, TP("orders", 1): 3, TP("orders", 2): 5}, {"orders": 3}))
    made.committed("g", TP("orders", 2), 4)  # waiting to be written at the next poll
    made.take(polled(INTERVAL, {TP("orders", 0): 1}, {"orders": 1}))  # re-created with 1 partition
    assert made.log_end(TP("orders", 1)) is None
    assert made.log_end(TP("orders", 2)) is None
    assert made.log_end_history(TP("orders", 2)) is None
    assert made.write_committed(["g"], 100, lambda group: True, INTERVAL) == 1  # nothing left to write, no error
    assert made.partition_counts(["orders"]) == {"orders": 1}
