"""Which lag entries an end-offsets poll rewrites (kagent.worker.lag_figures.LagFigures.due), what is
published, and what the groups' assignments share."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import orjson
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.core import committed_offset
from kagent.core.assigned_json import plain_assigned
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.table_keys import partition_key
from kagent.worker.committed_offsets import CommittedOffsets
from kagent.worker.group_state import EndOffsetsPolled
from kagent.worker.lag_figures import REFRESH_AFTER_POLLS, GroupReads, LagFigures, refresh_phase
from kagent.worker.list_offsets import Reason

INTERVAL = 10.0
TOPIC = "orders"


class Published:
    """Stands in for the changelog writer: what was published, key -> value."""

    def __init__(self) -> None:
        self.records: dict[str, bytes | None] = {}

    def publish(self, table: Any, key: str, value: bytes | None) -> None:
        self.records[key] = value


def assignment(group: str, partitions: int) -> GroupAssigned:
    member = MemberAssignment(
        member_id="m",
        client_id="c",
        client_host="/h",
        topics=(TOPIC,),
        partitions=tuple(PartitionRef(topic=TOPIC, partition=p) for p in range(partitions)),
    )
    return GroupAssigned(group=group, generation=1, protocol="range", leader="m", members=(member,))


def poll(at: float, partitions: int, *, start: int = 0, end: int = 100) -> EndOffsetsPolled:
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    return EndOffsetsPolled(
        polled_at=at,
        log_start=dict.fromkeys(tps, start),
        log_end=dict.fromkeys(tps, end),
        partition_counts={TOPIC: partitions},
    )


def figures(committed: dict[str, bytes]) -> tuple[LagFigures, Published]:
    published = Published()
    offsets = CommittedOffsets(SimpleNamespace(stored=committed), None, capacity=10, min_distance=1.0)  # type: ignore[arg-type]
    made = LagFigures(offsets, None, published, poll_interval=INTERVAL, auto_offset_reset="earliest")  # type: ignore[arg-type]
    return made, published


def commit(committed: dict[str, bytes], group: str, partition: int, offset: int) -> None:
    value = committed_offset.applied(None, [offset, 1, None], None, capacity=10, min_distance=1.0).value
    assert value is not None
    committed[partition_key(group, TOPIC, partition)] = value


def sweep(made: LagFigures, groups: dict[str, GroupReads], at: float) -> set[tuple[str, int]]:
    due, _, _ = made.due(groups, at)
    made.swept()
    return {(group, tp.partition) for group, tp in due}


def test_a_group_is_rewritten_whole_when_first_seen_then_every_refresh_period() -> None:
    made, _ = figures({})
    groups = {"g": GroupReads.of(assignment("g", 2))}
    made.take(poll(0.0, 2))
    assert sweep(made, groups, 0.0) == {("g", 0), ("g", 1)}
    # The second whole rewrite comes its phase of the period early; then one every period.
    second = math.ceil(REFRESH_AFTER_POLLS * (1 - refresh_phase("g")))
    assert 1 <= second <= REFRESH_AFTER_POLLS
    rewritten = []
    for n in range(1, second + 2 * REFRESH_AFTER_POLLS + 1):
        made.take(poll(n * INTERVAL, 2, end=100 + n))
        due = sweep(made, groups, n * INTERVAL)
        assert due in (set(), {("g", 0), ("g", 1)}), n
        if due:
            rewritten.append(n)
    assert rewritten == [second, second + REFRESH_AFTER_POLLS, second + 2 * REFRESH_AFTER_POLLS]


def test_groups_first_written_at_one_poll_spread_their_next_whole_rewrites_over_the_period() -> None:
    """After a start or a failover every group is new at one poll: were they kept in step, every 12th poll
    would rewrite every entry held and the others none."""
    made, _ = figures({})
    count = 1_200
    groups = {f"group-{n}": GroupReads.of(assignment(f"group-{n}", 1)) for n in range(count)}
    made.take(poll(0.0, 1))
    assert len(sweep(made, groups, 0.0)) == count
    per_poll = []
    for n in range(1, REFRESH_AFTER_POLLS + 1):
        made.take(poll(n * INTERVAL, 1, end=100 + n))
        per_poll.append(len(sweep(made, groups, n * INTERVAL)))
    assert sum(per_poll) == count  # each once in the period
    share = count / REFRESH_AFTER_POLLS
    assert all(0.5 * share <= written <= 1.5 * share for written in per_poll), per_poll


def test_a_partition_first_polled_later_is_due_at_once_and_only_it() -> None:
    made, _ = figures({})
    groups = {"g": GroupReads.of(assignment("g", 3))}
    made.take(poll(0.0, 2))  # partition 2 is not answered yet
    assert sweep(made, groups, 0.0) == {("g", 0), ("g", 1)}
    made.take(poll(INTERVAL, 3))
    assert sweep(made, groups, INTERVAL) == {("g", 2)}
    made.take(poll(2 * INTERVAL, 3))
    assert sweep(made, groups, 2 * INTERVAL) == set()


def test_what_a_group_reads_is_looked_at_again_when_its_assignment_or_a_topic_changes() -> None:
    made, _ = figures({})
    reads = GroupReads.of(assignment("g", 2))
    made.take(poll(0.0, 2))
    due, tracked, touched = made.due({"g": reads}, 0.0, {TopicPartition(TOPIC, 1)})
    assert (len(due), tracked, touched) == (2, 2, ["g"])
    made.swept()
    made.take(poll(INTERVAL, 3))  # the topic grew a partition: the group subscribes to it
    due, tracked, touched = made.due({"g": reads}, INTERVAL, set())
    assert ({tp.partition for _, tp in due}, tracked, touched) == ({2}, 3, [])
    made.swept()
    other = GroupReads(2, frozenset({"payments"}), (TopicPartition("payments", 0),))
    made.take(poll(2 * INTERVAL, 3))  # nothing of payments polled yet
    _, tracked, _ = made.due({"g": other}, 2 * INTERVAL, set())
    assert tracked == 0


def test_a_log_start_moving_past_a_committed_offset_makes_that_entry_due() -> None:
    committed: dict[str, bytes] = {}
    commit(committed, "behind", 0, 5)
    commit(committed, "steady", 0, 90)
    made, _ = figures(committed)
    groups = {group: GroupReads.of(assignment(group, 1)) for group in ("behind", "steady")}
    assert all(refresh_phase(group) < 1 - 2 / REFRESH_AFTER_POLLS for group in groups)  # not whole in 2 polls
    made.take(poll(0.0, 1))
    sweep(made, groups, 0.0)
    made.take(poll(INTERVAL, 1, start=50))
    assert sweep(made, groups, INTERVAL) == {("behind", 0)}  # data loss: 5 < 50; 90 is not lost
    made.take(poll(2 * INTERVAL, 1, start=50))
    assert sweep(made, groups, 2 * INTERVAL) == set()


def test_a_group_no_longer_held_is_rewritten_whole_when_held_again() -> None:
    made, _ = figures({})
    groups = {group: GroupReads.of(assignment(group, 1)) for group in ("g", "kept-here")}
    assert refresh_phase("kept-here") < 1 - 1 / REFRESH_AFTER_POLLS  # not rewritten whole at the next poll
    made.take(poll(0.0, 1))
    sweep(made, groups, 0.0)
    asyncio.run(made.keep_only(["kept-here"]))
    made.take(poll(INTERVAL, 1))
    assert sweep(made, groups, INTERVAL) == {("g", 0)}  # "kept-here" was rewritten whole at 0.0: not due yet


def test_an_assignment_change_makes_all_the_groups_entries_due_at_the_next_poll() -> None:
    made, _ = figures({})
    groups = {"g": GroupReads.of(assignment("g", 2))}
    made.take(poll(0.0, 2))
    assert sweep(made, groups, 0.0) == {("g", 0), ("g", 1)}
    made.take(poll(INTERVAL, 2))
    assert sweep(made, groups, INTERVAL) == set()
    made.assignment_changed("g")
    made.take(poll(2 * INTERVAL, 2))
    assert sweep(made, groups, 2 * INTERVAL) == {("g", 0), ("g", 1)}


def test_refresh_and_forget_publish_the_entry_and_its_tombstone() -> None:
    committed: dict[str, bytes] = {}
    commit(committed, "g", 0, 40)
    made, published = figures(committed)
    made.take(poll(0.0, 1))
    made.refresh_partition("g", TopicPartition(TOPIC, 0), 0.0)
    key = partition_key("g", TOPIC, 0)
    assert b'"offset_lag":60' in (published.records[key] or b"")
    made.forget("g", TopicPartition(TOPIC, 0))
    assert published.records[key] is None


def write_committed(made: LagFigures, at: float, holds: Any = lambda group: True) -> None:
    groups = made.committed_groups()
    while groups:
        del groups[: made.write_committed(groups, 2, holds, at)]


def test_a_commit_is_published_at_the_next_poll_from_the_offset_applied_last() -> None:
    made, published = figures({})  # the offsets are given, not read back from the table
    tp, key = TopicPartition(TOPIC, 0), partition_key("g", TOPIC, 0)
    made.committed("g", tp, 40)
    assert made.committed_groups() == []  # never polled here: no figures yet (its first poll writes them all)
    made.take(poll(0.0, 1))
    made.committed("g", tp, 40)
    made.committed("g", tp, 70)
    assert key not in published.records  # not at the commit: at the poll
    made.take(poll(INTERVAL, 1, end=120))
    write_committed(made, INTERVAL)
    assert b'"committed":70' in (published.records[key] or b"")
    assert b'"offset_lag":50' in (published.records[key] or b"")
    published.records.clear()
    write_committed(made, 2 * INTERVAL)  # written once: nothing changed since
    assert published.records == {}


def test_the_commits_of_many_groups_are_written_in_chunks_in_order() -> None:
    made, published = figures({})
    made.take(poll(0.0, 3))
    for group in ("a", "b", "c"):
        for partition in range(3):
            made.committed(group, TopicPartition(TOPIC, partition), 10)
    groups = made.committed_groups()
    assert groups == ["a", "b", "c"]
    assert made.write_committed(groups, 4, lambda group: True, 0.0) == 2  # a's 3, then b's 3 reach 4
    assert {key.split(",")[0] for key in published.records} == {'["a"', '["b"'}
    assert made.committed_groups() == ["c"]


def test_writing_commits_stops_after_a_group_once_the_slice_is_over() -> None:
    made, published = figures({})
    made.take(poll(0.0, 3))
    for group in ("a", "b", "c"):
        made.committed(group, TopicPartition(TOPIC, 0), 10)
    groups = made.committed_groups()
    looks: list[str] = []

    def over() -> bool:
        looks.append("look")
        return len(looks) >= 2  # over when asked after the second group

    assert made.write_committed(groups, 100, lambda group: True, 0.0, over) == 2  # a, b; c waits
    assert {key.split(",")[0] for key in published.records} == {'["a"', '["b"'}
    assert made.committed_groups() == ["c"]


def test_a_commit_forgotten_or_no_longer_held_is_not_written() -> None:
    made, published = figures({})
    made.take(poll(0.0, 2))
    made.committed("deleted", TopicPartition(TOPIC, 0), 10)
    made.forget("deleted", TopicPartition(TOPIC, 0))
    made.committed("moved", TopicPartition(TOPIC, 1), 10)
    published.records.clear()
    write_committed(made, INTERVAL, holds=lambda group: group != "moved")
    assert published.records == {}
    assert made.committed_groups() == []


def test_a_group_rewritten_whole_at_a_poll_has_its_commits_written_once() -> None:
    made, published = figures({})
    groups = {"g": GroupReads.of(assignment("g", 2))}
    made.take(poll(0.0, 2))
    made.committed("g", TopicPartition(TOPIC, 0), 10)
    assert sweep(made, groups, 0.0) == {("g", 0), ("g", 1)}  # first seen: whole, from the table
    assert made.committed_groups() == ["g"]  # kept, but with nothing left to write
    write_committed(made, 0.0)
    assert published.records == {}


def test_assignments_share_one_topic_partition_object_per_partition() -> None:
    first, second = GroupReads.of(assignment("a", 2)), GroupReads.of(assignment("b", 2))
    assert all(x is y for x, y in zip(first.assigned, second.assigned, strict=True))


def test_the_plain_figures_are_the_models_for_every_kind_of_partition() -> None:
    """``lags_at`` (what the metrics render) gives each partition's offset lag and time lag as ``partition_lag``
    (the API's and the evaluation's model) does at the same time: measured, caught up, without a commit,
    never polled, unanswered at the latest poll, stale."""
    committed: dict[str, bytes] = {}
    made, _ = figures(committed)
    for partition, offset in ((0, 40), (1, 100), (3, 10), (4, 5)):
        commit(committed, "g", partition, offset)
    made.take(poll(0.0, 5, end=60))
    made.take(poll(INTERVAL, 5, end=100))
    tps = [TopicPartition(TOPIC, p) for p in range(6)]  # 5 was never polled
    answered = {tp: 100 for tp in tps[:3] + tps[4:5]}
    made.take(
        EndOffsetsPolled(
            2 * INTERVAL,
            log_start=dict.fromkeys(answered, 0),
            log_end=answered,
            partition_counts={TOPIC: 6},
            unavailable={tps[3]: Reason.NO_LEADER},
        )
    )

    offsets = CommittedOffsets(SimpleNamespace(stored=committed), None, capacity=10, min_distance=1.0)  # type: ignore[arg-type]
    for at in (2 * INTERVAL, 2 * INTERVAL + 1, 2 * INTERVAL + 10 * INTERVAL):  # the last: everything stale
        committed_offsets = offsets.offsets_at(offsets.entry_keys("g", tps))
        lags, times = made.lags_at(at)(tps, committed_offsets)
        models = {tp: made.partition_lag("g", tp, offsets.offset("g", tp), at) for tp in tps}
        assert dict(zip(tps, zip(lags, times, strict=True), strict=True)) == {
            tp: (m.offset_lag, m.time_lag) for tp, m in models.items()
        }, at
        assert committed_offsets == [m.committed for m in models.values()]
    assert made.lags_at(2 * INTERVAL)([tps[0]], [40]) == ([60], [30.0])  # extrapolated: 40 is below the history


def test_a_partition_answered_again_or_no_longer_counts_as_moved() -> None:
    made, _ = figures({})
    tp = TopicPartition(TOPIC, 0)
    made.take(poll(0.0, 1))
    gone = EndOffsetsPolled(INTERVAL, {}, {}, {TOPIC: 1}, unavailable={tp: Reason.NO_LEADER})
    assert made.take(gone) == {tp}
    assert made.take(poll(2 * INTERVAL, 1)) == {tp}  # the same offsets as before it went
    assert made.take(poll(3 * INTERVAL, 1)) == set()
    assert made.polls == 4 and made.last_poll == 3 * INTERVAL


def test_the_counts_version_follows_partition_counts_and_dropped_topics_not_first_polls() -> None:
    """What a group's layout is kept on (storage's shape of it): a partition first answering, or one no longer
    answering, leaves it; a topic growing, or dropped as gone, changes it."""
    made, _ = figures({})
    made.take(poll(0.0, 2))
    counted, polled = made.counts_version, made.polled_version
    first = EndOffsetsPolled(
        polled_at=INTERVAL,
        log_start={TopicPartition(TOPIC, 0): 0},  # partition 1 no longer answers
        log_end={TopicPartition(TOPIC, 0): 100},
        partition_counts={TOPIC: 2, "payments": 1},  # a new topic, of a group not reading it
    )
    made.take(first)
    assert made.counts_version == counted + 1  # payments' count is new
    counted = made.counts_version
    grown = poll(2 * INTERVAL, 2)
    grown.log_end[TopicPartition("payments", 0)] = 5  # payments' first answer; partition 1 answers again
    grown.log_start[TopicPartition("payments", 0)] = 0
    grown.partition_counts["payments"] = 1
    made.take(grown)
    assert made.polled_version > polled
    assert made.counts_version == counted
    made.take(poll(3 * INTERVAL, 3))
    assert made.counts_version == counted + 1  # orders grew a partition


def test_entries_written_unknown_are_rewritten_when_their_partition_is_answered_again() -> None:
    """A poll that got no offsets for a partition writes the entries due then unknown; the next poll that
    answers for it rewrites every entry on it, not only at the group's next refresh, 12 polls later."""
    made, published = figures({})
    groups = {"g": GroupReads.of(assignment("g", 2)), "h": GroupReads.of(assignment("h", 1))}  # h: all of TOPIC too
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    made.take(poll(0.0, 2))
    sweep(made, groups, 0.0)
    made.assignment_changed("g")
    failed = dict.fromkeys([tp0, tp1], Reason.REQUEST_FAILED)
    made.take(EndOffsetsPolled(INTERVAL, {}, {}, {TOPIC: 2}, unavailable=failed))
    assert sweep(made, groups, INTERVAL) == {("g", 0), ("g", 1)}
    for tp in (tp0, tp1):
        made.refresh_partition("g", tp, INTERVAL)
        assert b'"flags":["request-failed"' in (published.records[partition_key("g", TOPIC, tp.partition)] or b"")
    # Partition 0 answers again, partition 1 still does not.
    made.take(EndOffsetsPolled(2 * INTERVAL, {tp0: 0}, {tp0: 100}, {TOPIC: 2}, unavailable={tp1: Reason.NO_LEADER}))
    assert sweep(made, groups, 2 * INTERVAL) == {("g", 0), ("h", 0)}
    made.refresh_partition("g", tp0, 2 * INTERVAL)
    rewritten = published.records[partition_key("g", TOPIC, 0)] or b""
    assert b'"log_end":100,"offset_lag":null,"estimated_lag":100' in rewritten and b"request-failed" not in rewritten
    made.take(poll(3 * INTERVAL, 2))
    assert sweep(made, groups, 3 * INTERVAL) == {("g", 1), ("h", 1)}
    made.take(poll(4 * INTERVAL, 2))
    assert sweep(made, groups, 4 * INTERVAL) == set()


def test_a_groups_reads_name_its_members_and_how_many_partitions_each_holds_from_either_form() -> None:
    two = MemberAssignment(
        member_id="m-2",
        client_id="c-2",
        client_host="/10.0.0.2",
        topics=(TOPIC, "payments"),
        partitions=(PartitionRef(topic="payments", partition=0), PartitionRef(topic=TOPIC, partition=2)),
    )
    group = assignment("g", 2).model_copy(update={"members": (*assignment("g", 2).members, two)})
    reads = GroupReads.of(group)
    assert reads.members == (("m", "c", "/h", 2), ("m-2", "c-2", "/10.0.0.2", 2))
    assert reads.assigned[2:] == (TopicPartition("payments", 0), TopicPartition(TOPIC, 2))  # the second member's
    plain = orjson.loads(group.model_dump_json())
    assert plain_assigned(plain) and GroupReads.of_json(plain) == reads

    untold = group.model_copy(update={"members": (group.members[0].model_copy(update={"partitions": None}), two)})
    reads = GroupReads.of(untold)
    assert reads.members == (("m", "c", "/h", None), ("m-2", "c-2", "/10.0.0.2", 2))  # unknown, not none
    assert reads.assigned == (TopicPartition("payments", 0), TopicPartition(TOPIC, 2))


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, 5]), st.sampled_from([0, 10]), st.sets(st.integers(0, 4), max_size=2)), max_size=3
    ),
    st.lists(st.one_of(st.none(), st.tuples(st.integers(0, 20), st.sampled_from([1, 10**13]))), min_size=6, max_size=6),
    st.sampled_from([0.0, 1.0, 3 * INTERVAL, 100 * INTERVAL]),
)
def test_a_snapshots_partition_lags_are_each_partitions_lag(
    polls: list[tuple[int, int, set[int]]], commits: list[tuple[int, int] | None], late: float
) -> None:
    """partition_lags (a group's snapshot) makes the model partition_lag makes of each partition, whatever
    the latest poll said of it (answered, unanswered, never polled, stale by now) and wherever its commit is
    (none, below the log start, within the log, beyond the log end, made before the poll or after it)."""
    committed: dict[str, bytes] = {}
    made, _ = figures(committed)
    tps = [TopicPartition(TOPIC, p) for p in range(6)]  # 5 is never polled
    for partition, drawn in enumerate(commits):
        if drawn is not None:
            offset, stamp = drawn
            value = committed_offset.applied(None, [offset, stamp, None], None, capacity=10, min_distance=1.0).value
            assert value is not None
            committed[partition_key("g", TOPIC, partition)] = value
    for index, (start, length, unanswered) in enumerate(polls):
        answered = [tp for tp in tps[:5] if tp.partition not in unanswered]
        made.take(
            EndOffsetsPolled(
                index * INTERVAL,
                log_start=dict.fromkeys(answered, start),
                log_end=dict.fromkeys(answered, start + length + index),
                partition_counts={TOPIC: 5},
                unavailable={tps[p]: Reason.NO_LEADER for p in unanswered},
            )
        )
    now = max(len(polls) - 1, 0) * INTERVAL + late
    offsets = CommittedOffsets(SimpleNamespace(stored=committed), None, capacity=10, min_distance=1.0)  # type: ignore[arg-type]
    positions = [offsets.offset("g", tp) for tp in tps]
    expected = [made.partition_lag("g", tp, position, now) for tp, position in zip(tps, positions, strict=True)]
    lags = made.partition_lags("g", tps, positions, now)
    assert lags == expected
    assert [lag.model_dump() for lag in lags] == [lag.model_dump() for lag in expected]
