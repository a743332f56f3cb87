"""`lag`: KAFKA-5337's example and equality with its rule written out plainly."""

from __future__ import annotations

from aiokafka.structs import TopicPartition
from hypothesis import given
from test_assignors_invariants import Case, assert_valid, cases, subscribed

from kagent.core.assignors import Assignment, Member, assign


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def kafka_5337(case: Case) -> Assignment:
    """Per topic, partitions in decreasing lag (ties: lower partition first), each
    to the subscriber with the fewest partitions of the topic, ties by the least
    lag of the topic, then by member id. Scans every subscriber per partition."""
    subscriptions = subscribed(case)
    result: Assignment = {m: [] for m in case.members}
    for topic, count in case.partitions.items():
        subscribers = sorted(m for m in case.members if topic in subscriptions[m])
        if not subscribers:
            continue
        taken: dict[str, list[TopicPartition]] = {m: [] for m in subscribers}
        for partition in sorted(range(count), key=lambda p: (-case.lag.get(tp(topic, p), 0), p)):
            member_id = min(
                subscribers,
                key=lambda m: (len(taken[m]), sum(case.lag.get(x, 0) for x in taken[m]), m),
            )
            taken[member_id].append(tp(topic, partition))
        for member_id, tps in taken.items():
            result[member_id] += tps
    return {m: sorted(tps) for m, tps in result.items()}


def test_kafka_5337_example() -> None:
    lag = {tp("t0", 0): 100_000, tp("t0", 1): 50_000, tp("t0", 2): 60_000}
    result = assign("lag", {"t0": 3}, {"C0": Member(["t0"]), "C1": Member(["t0"])}, lag)
    assert result == {"C0": [tp("t0", 0)], "C1": [tp("t0", 1), tp("t0", 2)]}


def test_counts_come_before_lag() -> None:
    lag = {tp("t0", 0): 1_000_000}
    result = assign("lag", {"t0": 4}, {"C0": Member(["t0"]), "C1": Member(["t0"])}, lag)
    assert result == {"C0": [tp("t0", 0), tp("t0", 3)], "C1": [tp("t0", 1), tp("t0", 2)]}


def test_each_topic_on_its_own() -> None:
    """The known gap: per-topic balancing lets totals drift across topics."""
    lag = {tp("a", 0): 10, tp("a", 1): 1, tp("b", 0): 10, tp("b", 1): 1}
    result = assign("lag", {"a": 2, "b": 2}, {"C0": Member(["a", "b"]), "C1": Member(["a", "b"])}, lag)
    assert result == {"C0": [tp("a", 0), tp("b", 0)], "C1": [tp("a", 1), tp("b", 1)]}


@given(cases(owned=False))
def test_lag_is_kafka_5337(case: Case) -> None:
    result = assign("lag", case.partitions, case.members, case.lag)
    assert_valid(case, result)
    assert result == kafka_5337(case)
