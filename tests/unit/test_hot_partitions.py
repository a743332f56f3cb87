"""`kagent.core.hot_partitions`: a partition written faster than any member reads, at the rules' edges."""

from __future__ import annotations

from aiokafka.structs import TopicPartition

from kagent.core.hot_partitions import HotPartition, hot_partitions
from kagent.core.throughput import PartitionThroughput


def tp(partition: int) -> TopicPartition:
    return TopicPartition("orders", partition)


def rates(produced: float | None, consumed: float | None, busy: bool) -> PartitionThroughput:
    return PartitionThroughput(production_rate=produced, consumption_rate=consumed, busy=busy)


# Member a holds orders-0 (hot: 300/s written, a reads 100/s with lag throughout) and orders-1 (idle);
# b holds orders-2 and orders-3, written and read at 40/s each, keeping up: it shows 80/s.
ASSIGNMENT = {"a": [tp(0), tp(1)], "b": [tp(2), tp(3)]}


def figures(**changes: PartitionThroughput) -> dict[TopicPartition, PartitionThroughput]:
    base = {
        tp(0): rates(300.0, 100.0, True),
        tp(1): rates(0.0, 0.0, False),
        tp(2): rates(40.0, 40.0, False),
        tp(3): rates(40.0, 40.0, False),
    }
    return base | {tp(int(name[1:])): value for name, value in changes.items()}


def test_a_partition_written_faster_than_every_members_pace_is_hot() -> None:
    judged = hot_partitions(ASSIGNMENT, figures())
    assert judged is not None
    assert judged.best_capacity == 100.0
    assert judged.partitions == (HotPartition(tp(0), "a", 300.0, 100.0),)


def test_an_idle_partition_is_never_hot() -> None:
    judged = hot_partitions(ASSIGNMENT, figures(p0=rates(0.0, 100.0, True)))
    assert judged is not None and judged.partitions == ()
    # orders-1 is idle in every case above: never named.
    assert all(h.partition != tp(1) for h in hot_partitions(ASSIGNMENT, figures()).partitions)  # type: ignore[union-attr]


def test_exactly_at_capacity_is_not_hot_and_just_above_is() -> None:
    at = hot_partitions(ASSIGNMENT, figures(p0=rates(100.0, 100.0, True)))
    assert at is not None and at.partitions == ()
    above = hot_partitions(ASSIGNMENT, figures(p0=rates(100.5, 100.0, True)))
    assert above is not None and [h.partition for h in above.partitions] == [tp(0)]


def test_a_partition_another_member_could_read_faster_is_not_hot() -> None:
    # b shows 400/s (it read a backlog): a's 300/s partition is beyond a, not beyond b.
    judged = hot_partitions(ASSIGNMENT, figures(p2=rates(40.0, 360.0, True)))
    assert judged is not None and judged.best_capacity == 400.0 and judged.partitions == ()


def test_a_burst_the_member_caught_up_with_is_not_hot() -> None:
    # 300/s over the window, but the group reached the log end at some commit: not busy.
    judged = hot_partitions(ASSIGNMENT, figures(p0=rates(300.0, 100.0, False), p2=rates(40.0, 40.0, True)))
    assert judged is not None and judged.partitions == ()


def test_an_unknown_production_rate_is_never_judged_hot() -> None:
    judged = hot_partitions(ASSIGNMENT, figures(p0=rates(None, 100.0, True)))
    assert judged is not None and judged.partitions == ()
    missing = figures()
    del missing[tp(0)]
    assert hot_partitions(ASSIGNMENT, missing) is None  # a's pace is not measured, b is not saturated


def test_a_holder_with_no_measured_pace_is_not_judged() -> None:
    # a's other partition has no consumption measured yet (just after a rebalance): a is not saturated, so
    # its pace is unknown (its 100/s is a lower bound, counted in the best capacity); b is saturated, so the
    # group is judged, but orders-0 is not called hot.
    judged = hot_partitions(ASSIGNMENT, figures(p1=rates(0.0, None, False), p2=rates(40.0, 40.0, True)))
    assert judged is not None and judged.best_capacity == 100.0
    assert judged.partitions == ()


def test_a_group_with_no_saturated_member_cannot_be_judged() -> None:
    assert hot_partitions(ASSIGNMENT, figures(p0=rates(300.0, 100.0, False))) is None


def test_a_group_whose_members_read_nothing_cannot_be_judged() -> None:
    stuck = {tp(0): rates(300.0, 0.0, True)}
    assert hot_partitions({"a": [tp(0)]}, stuck) is None


def test_a_partition_no_member_holds_is_not_judged() -> None:
    unheld = figures() | {tp(4): rates(1000.0, None, False)}
    judged = hot_partitions(ASSIGNMENT, unheld)
    assert judged is not None and [h.partition for h in judged.partitions] == [tp(0)]


def test_several_hot_partitions_are_named_in_order() -> None:
    assignment = {"a": [tp(3)], "b": [tp(1)], "c": [tp(2)]}
    judged = hot_partitions(
        assignment,
        {tp(3): rates(500.0, 90.0, True), tp(1): rates(200.0, 100.0, True), tp(2): rates(10.0, 10.0, False)},
    )
    assert judged is not None
    assert [(h.partition, h.member_id, h.member_capacity) for h in judged.partitions] == [
        (tp(1), "b", 100.0),
        (tp(3), "a", 90.0),
    ]
