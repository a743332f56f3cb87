"""`kagent.core.heavy_partitions`: a partition within a member's pace that cannot share one, at the rules' edges."""

from __future__ import annotations

from aiokafka.structs import TopicPartition

from kagent.core.heavy_partitions import HeavyPartition, heavy_partitions
from kagent.core.throughput import PartitionThroughput


def tp(partition: int) -> TopicPartition:
    return TopicPartition("orders", partition)


def rates(produced: float | None, consumed: float | None, busy: bool) -> PartitionThroughput:
    return PartitionThroughput(production_rate=produced, consumption_rate=consumed, busy=busy)


# Member a holds orders-0 (written at 28/s) and orders-3 (17/s): 45/s, more than the 40/s a reads with lag
# throughout (its pace). b holds orders-1 (18/s) and c orders-2 (17/s), keeping up: not saturated, taken at
# the typical pace (a's 40/s). orders-0 with the lightest other partition (17/s) is 45/s: beyond a member.
ASSIGNMENT = {"a": [tp(0), tp(3)], "b": [tp(1)], "c": [tp(2)]}


def figures(**changes: PartitionThroughput) -> dict[TopicPartition, PartitionThroughput]:
    base = {
        tp(0): rates(28.0, 24.0, True),
        tp(1): rates(18.0, 18.0, False),
        tp(2): rates(17.0, 17.0, False),
        tp(3): rates(17.0, 16.0, True),
    }
    return base | {tp(int(name[1:])): value for name, value in changes.items()}


def test_a_partition_that_would_overload_any_member_it_shares_is_heavy_and_crowded_on_a_member_falling_behind() -> None:
    assert heavy_partitions(ASSIGNMENT, figures()) == (HeavyPartition(tp(0), "a", 28.0, 40.0, 17.0, crowded=True),)


def test_a_partition_that_fits_beside_the_lightest_other_is_not_heavy_exactly_at_capacity_included() -> None:
    # 23 + 17 = 40: a member just keeps up with both. 23.5 + 17 = 40.5: it does not.
    assert heavy_partitions(ASSIGNMENT, figures(p0=rates(23.0, 24.0, True))) == ()
    above = heavy_partitions(ASSIGNMENT, figures(p0=rates(23.5, 24.0, True)))
    assert above is not None and [(h.partition, h.lightest_other_rate) for h in above] == [(tp(0), 17.0)]


def test_a_partition_written_exactly_at_its_members_pace_is_heavy_and_just_above_is_not() -> None:
    # a holds orders-0 alone, written and read at 40/s with lag throughout: within its pace, heavy beside any
    # other, alone so not crowded. At 40.5/s it is beyond its member (hot, or beyond it): not heavy.
    alone = {"a": [tp(0)], "b": [tp(1), tp(3)], "c": [tp(2)]}
    keeping_up = rates(17.0, 17.0, False)
    at = heavy_partitions(alone, figures(p0=rates(40.0, 40.0, True), p3=keeping_up))
    assert at == (HeavyPartition(tp(0), "a", 40.0, 40.0, 17.0, crowded=False),)
    assert heavy_partitions(alone, figures(p0=rates(40.5, 40.0, True), p3=keeping_up)) == ()


def test_idle_partitions_are_never_heavy_and_do_not_count_as_others() -> None:
    # Every other partition idle: orders-0 can share a member with any of them.
    idle = figures(p1=rates(0.0, 0.0, False), p2=rates(0.0, 0.0, False), p3=rates(0.0, 0.0, False))
    assert heavy_partitions(ASSIGNMENT, idle) == ()
    # One idle among them: the lightest other producing partition is still 17/s.
    one_idle = heavy_partitions(ASSIGNMENT, figures(p1=rates(0.0, 0.0, False)))
    assert one_idle is not None and [(h.partition, h.lightest_other_rate) for h in one_idle] == [(tp(0), 17.0)]
    # orders-0 beside an idle partition only (a works off a backlog at its 40/s): heavy, not crowded.
    beside_idle = heavy_partitions(ASSIGNMENT, figures(p0=rates(28.0, 40.0, True), p3=rates(0.0, 0.0, False)))
    assert beside_idle is not None and [(h.partition, h.crowded) for h in beside_idle] == [(tp(0), False)]
    # An idle partition itself: never heavy, whatever the others.
    assert all(h.partition != tp(3) for h in beside_idle)


def test_an_unknown_rate_anywhere_in_the_group_leaves_it_unjudged() -> None:
    assert heavy_partitions(ASSIGNMENT, figures(p0=rates(None, 24.0, True))) is None
    # The lightest other partition is unknown: it might be idle, and orders-0 could share with it.
    assert heavy_partitions(ASSIGNMENT, figures(p2=rates(None, 17.0, False))) is None
    missing = figures()
    del missing[tp(2)]
    assert heavy_partitions(ASSIGNMENT, missing) is None


def test_a_group_with_no_measured_pace_is_not_judged() -> None:
    nobody_saturated = figures(p0=rates(28.0, 24.0, False), p3=rates(17.0, 16.0, False))
    assert heavy_partitions(ASSIGNMENT, nobody_saturated) is None


def test_a_holder_with_no_measured_pace_is_taken_at_the_typical_one_and_is_never_crowded() -> None:
    # a's orders-3 has no consumption measured yet (too few commits since the rebalance): a is not saturated.
    # b is, at 40/s: a is taken at 40/s, so orders-0 is heavy; but a's shortfall is not measured, so it is
    # not crowded (no trigger of its own; a rebalance made for other reasons would still isolate it).
    judged = heavy_partitions(ASSIGNMENT, figures(p3=rates(17.0, None, False), p1=rates(18.0, 40.0, True)))
    assert judged == (HeavyPartition(tp(0), "a", 28.0, 40.0, 17.0, crowded=False),)


def test_a_member_that_keeps_up_with_the_partition_and_another_shows_it_is_not_heavy() -> None:
    # a reads all of its 45/s without lag (not saturated); b is saturated at 40/s. a's capacity is at least
    # the 45/s it shows: orders-0 and orders-3 fit.
    keeping_up = figures(p0=rates(28.0, 28.0, False), p3=rates(17.0, 17.0, False), p1=rates(18.0, 40.0, True))
    assert heavy_partitions(ASSIGNMENT, keeping_up) == ()


def test_a_partition_no_member_holds_is_not_judged_but_counts_as_another() -> None:
    # orders-4, written at 30/s, is held by no member: not heavy itself; orders-3 at 17/s stays the lightest.
    unheld = figures() | {tp(4): rates(30.0, None, False)}
    judged = heavy_partitions(ASSIGNMENT, unheld)
    assert judged is not None and [h.partition for h in judged] == [tp(0)]
    # Alone beside an unheld 5/s partition, orders-0 (28 + 5 <= 40) would fit.
    light = figures() | {tp(4): rates(5.0, None, False)}
    assert heavy_partitions(ASSIGNMENT, light) == ()


def test_the_only_producing_partition_is_not_heavy() -> None:
    assert (
        heavy_partitions({"a": [tp(0)], "b": [tp(1)]}, {tp(0): rates(30.0, 40.0, True), tp(1): rates(0.0, 0.0, False)})
        == ()
    )


def test_several_heavy_partitions_are_named_in_order_with_their_members() -> None:
    # Two heavy partitions on a (orders-0 at 28/s, orders-3 at 26/s) and one on b (orders-1 at 30/s, alone);
    # c holds orders-2 at 15/s, which with the lightest of the others (26/s) is beyond a member too: every
    # partition here needs a member of its own.
    assignment = {"a": [tp(3), tp(0)], "b": [tp(1)], "c": [tp(2)]}
    judged = heavy_partitions(
        assignment,
        {
            tp(0): rates(28.0, 21.0, True),
            tp(1): rates(30.0, 30.0, False),
            tp(2): rates(15.0, 15.0, False),
            tp(3): rates(26.0, 19.0, True),
        },
    )
    assert judged is not None
    assert [(h.partition, h.member_id, h.lightest_other_rate, h.crowded) for h in judged] == [
        (tp(0), "a", 15.0, True),
        (tp(1), "b", 15.0, False),
        (tp(2), "c", 26.0, False),
        (tp(3), "a", 15.0, True),
    ]
