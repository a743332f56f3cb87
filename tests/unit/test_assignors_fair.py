"""`fair`: KIP-49's examples (its FairAssignor javadoc and FairAssignorTest) and
equality with KIP-49's rule written out plainly."""

from __future__ import annotations

from aiokafka.structs import TopicPartition
from hypothesis import given
from test_assignors_invariants import Case, assert_counts_within_one, assert_valid, cases, subscribed

from kagent.core.assignors import Assignment, Member, assign


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def kip49_fair(case: Case) -> Assignment:
    """KIP-49: topics with the fewest subscribers first, ties by more partitions
    then name; each partition to the subscriber with the fewest partitions so
    far, ties by member id. Scans every subscriber for every partition."""
    subscriptions = subscribed(case)
    subscribers = {t: sorted(m for m in case.members if t in subscriptions[m]) for t in case.partitions}
    topics = sorted(
        (t for t in case.partitions if subscribers[t]),
        key=lambda t: (len(subscribers[t]), -case.partitions[t], t),
    )
    result: Assignment = {m: [] for m in case.members}
    for topic in topics:
        for partition in range(case.partitions[topic]):
            member_id = min(subscribers[topic], key=lambda m: (len(result[m]), m))
            result[member_id].append(tp(topic, partition))
    return {m: sorted(tps) for m, tps in result.items()}


def test_javadoc_example() -> None:
    members = {"C0": Member(["t0"]), "C1": Member(["t0", "t1"])}
    assert assign("fair", {"t0": 3, "t1": 3}, members) == {
        "C0": [tp("t0", 0), tp("t0", 1), tp("t0", 2)],
        "C1": [tp("t1", 0), tp("t1", 1), tp("t1", 2)],
    }


def test_one_consumer_cases() -> None:
    assert assign("fair", {}, {"consumer": Member([])}) == {"consumer": []}
    assert assign("fair", {"topic": 0}, {"consumer": Member(["topic"])}) == {"consumer": []}
    assert assign("fair", {"topic": 3, "other": 3}, {"consumer": Member(["topic"])}) == {
        "consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]
    }
    assert assign("fair", {"topic1": 1, "topic2": 2}, {"consumer": Member(["topic1", "topic2"])}) == {
        "consumer": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]
    }


def test_two_consumers_one_topic() -> None:
    members = {"consumer1": Member(["topic"]), "consumer2": Member(["topic"])}
    assert assign("fair", {"topic": 1}, members) == {"consumer1": [tp("topic", 0)], "consumer2": []}
    assert assign("fair", {"topic": 2}, members) == {
        "consumer1": [tp("topic", 0)],
        "consumer2": [tp("topic", 1)],
    }


def test_multiple_consumers_mixed_topics() -> None:
    members = {
        "consumer1": Member(["topic1"]),
        "consumer2": Member(["topic1", "topic2"]),
        "consumer3": Member(["topic1"]),
    }
    assert assign("fair", {"topic1": 3, "topic2": 2}, members) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2)],
        "consumer2": [tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 1)],
    }


def test_two_consumers_two_topics_six_partitions() -> None:
    members = {"consumer1": Member(["topic1", "topic2"]), "consumer2": Member(["topic1", "topic2"])}
    assert assign("fair", {"topic1": 3, "topic2": 3}, members) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }


def test_multiple_consumers_unbalanced_subscriptions() -> None:
    partitions = {"topic1": 2, "topic2": 1, "topic3": 2, "topic4": 1, "topic5": 2}
    every, odd = list(partitions), ["topic1", "topic3", "topic5"]
    members = {
        "consumer1": Member(every),
        "consumer2": Member(odd),
        "consumer3": Member(odd),
        "consumer4": Member(every),
    }
    assert assign("fair", partitions, members) == {
        "consumer1": [tp("topic2", 0), tp("topic3", 0)],
        "consumer2": [tp("topic1", 0), tp("topic3", 1)],
        "consumer3": [tp("topic1", 1), tp("topic5", 0)],
        "consumer4": [tp("topic4", 0), tp("topic5", 1)],
    }


@given(cases(owned=False))
def test_fair_is_kip49(case: Case) -> None:
    result = assign("fair", case.partitions, case.members, case.lag)
    assert_valid(case, result)
    assert result == kip49_fair(case)


@given(cases(identical=True, owned=False))
def test_identical_subscriptions_balance_counts(case: Case) -> None:
    assert_counts_within_one(assign("fair", case.partitions, case.members))
