"""`range` and `roundrobin`: Kafka's RangeAssignorTest and RoundRobinAssignorTest
examples, and equality with Kafka's algorithms written out plainly."""

from __future__ import annotations

from itertools import cycle

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given
from test_assignors_invariants import Case, all_partitions, assert_valid, cases, subscribed

from kagent.core.assignors import Assignment, Member, assign


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def parse(text: str) -> list[TopicPartition]:
    """'t1-0, t2-3' as partitions, the notation of Kafka's rack-aware tests."""
    result = []
    for item in text.split(","):
        topic, partition = item.strip().rsplit("-", 1)
        result.append(tp(topic, int(partition)))
    return sorted(result)


def dynamic(*topics: str) -> Member:
    return Member(list(topics))


def static(instance_id: str, *topics: str) -> Member:
    return Member(list(topics), group_instance_id=instance_id)


# Kafka's order of members (AbstractPartitionAssignor.MemberInfo.compareTo), written out.
def kafka_order(case: Case) -> list[str]:
    def key(member_id: str) -> tuple[int, str, str]:
        instance_id = case.members[member_id].group_instance_id
        return (1, "", member_id) if instance_id is None else (0, instance_id, member_id)

    return sorted(case.members, key=key)


def kafka_range(case: Case) -> Assignment:
    """RangeAssignor.assign, transcribed."""
    result: Assignment = {m: [] for m in case.members}
    subscriptions = subscribed(case)
    for topic, count in case.partitions.items():
        consumers = [m for m in kafka_order(case) if topic in subscriptions[m]]
        if not consumers:
            continue
        per_consumer, with_extra = divmod(count, len(consumers))
        for i, member_id in enumerate(consumers):
            start = per_consumer * i + min(i, with_extra)
            length = per_consumer + (1 if i + 1 <= with_extra else 0)
            result[member_id] += [tp(topic, p) for p in range(start, start + length)]
    return {m: sorted(tps) for m, tps in result.items()}


def kafka_roundrobin(case: Case) -> Assignment:
    """RoundRobinAssignor.assign, transcribed."""
    result: Assignment = {m: [] for m in case.members}
    subscriptions = subscribed(case)
    topics = sorted(set().union(*subscriptions.values()))
    assigner = cycle(kafka_order(case))
    current = next(assigner)
    for partition in all_partitions({t: case.partitions[t] for t in topics}):
        while partition.topic not in subscriptions[current]:
            current = next(assigner)
        result[current].append(partition)
        current = next(assigner)
    return {m: sorted(tps) for m, tps in result.items()}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
class TestBothKafkaExamples:
    """Examples RangeAssignorTest and RoundRobinAssignorTest share."""

    def test_one_consumer_no_topic(self, strategy: str) -> None:
        assert assign(strategy, {}, {"consumer": dynamic()}) == {"consumer": []}

    def test_one_consumer_nonexistent_topic(self, strategy: str) -> None:
        assert assign(strategy, {}, {"consumer": dynamic("topic")}) == {"consumer": []}

    def test_one_consumer_one_topic(self, strategy: str) -> None:
        result = assign(strategy, {"topic": 3}, {"consumer": dynamic("topic")})
        assert result == {"consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}

    def test_only_assigns_partitions_from_subscribed_topics(self, strategy: str) -> None:
        result = assign(strategy, {"topic": 3, "other": 3}, {"consumer": dynamic("topic")})
        assert result == {"consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}

    def test_one_consumer_multiple_topics(self, strategy: str) -> None:
        result = assign(strategy, {"topic1": 1, "topic2": 2}, {"consumer": dynamic("topic1", "topic2")})
        assert result == {"consumer": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}

    def test_two_consumers_one_topic_one_partition(self, strategy: str) -> None:
        result = assign(strategy, {"topic": 1}, {"consumer1": dynamic("topic"), "consumer2": dynamic("topic")})
        assert result == {"consumer1": [tp("topic", 0)], "consumer2": []}

    def test_two_consumers_one_topic_two_partitions(self, strategy: str) -> None:
        result = assign(strategy, {"topic": 2}, {"consumer1": dynamic("topic"), "consumer2": dynamic("topic")})
        assert result == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}

    def test_multiple_consumers_mixed_topics(self, strategy: str) -> None:
        members = {
            "consumer1": dynamic("topic1"),
            "consumer2": dynamic("topic1", "topic2"),
            "consumer3": dynamic("topic1"),
        }
        result = assign(strategy, {"topic1": 3, "topic2": 2}, members)
        assert result == {
            "consumer1": [tp("topic1", 0)],
            "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
            "consumer3": [tp("topic1", 2)],
        }


class TestRangeKafkaExamples:
    def test_javadoc_example(self) -> None:
        members = {"C0": dynamic("t0", "t1"), "C1": dynamic("t0", "t1")}
        assert assign("range", {"t0": 3, "t1": 3}, members) == {
            "C0": [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)],
            "C1": [tp("t0", 2), tp("t1", 2)],
        }

    def test_two_static_consumers_compare_instance_ids_not_member_ids(self) -> None:
        members = {
            "consumer-b": static("instance1", "topic1", "topic2"),
            "consumer-a": static("instance2", "topic1", "topic2"),
        }
        assert assign("range", {"topic1": 3, "topic2": 3}, members) == {
            "consumer-b": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
            "consumer-a": [tp("topic1", 2), tp("topic2", 2)],
        }

    def test_static_consumer_comes_before_dynamic_one(self) -> None:
        members = {
            "consumer-b": static("instance1", "topic1", "topic2"),
            "consumer-a": dynamic("topic1", "topic2"),
        }
        assert assign("range", {"topic1": 3, "topic2": 3}, members) == {
            "consumer-b": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
            "consumer-a": [tp("topic1", 2), tp("topic2", 2)],
        }

    def test_static_member_range_assignment_persistent(self) -> None:
        members = {f"consumer{i}": static(f"instance{i}", "topic1", "topic2") for i in (1, 2, 3)}
        expected = {
            "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0)],
            "consumer2": [tp("topic1", 2), tp("topic2", 1)],
            "consumer3": [tp("topic1", 3), tp("topic2", 2)],
        }
        result = assign("range", {"topic1": 5, "topic2": 4}, {**members, "consumer4": dynamic("topic1", "topic2")})
        assert result == {**expected, "consumer4": [tp("topic1", 4), tp("topic2", 3)]}
        # Replace dynamic member 4 with a new dynamic member 5.
        result = assign("range", {"topic1": 5, "topic2": 4}, {**members, "consumer5": dynamic("topic1", "topic2")})
        assert result == {**expected, "consumer5": [tp("topic1", 4), tp("topic2", 3)]}

    def test_static_member_assignment_persistent_after_member_id_changes(self) -> None:
        partitions = {"topic1": 5, "topic2": 5}
        before = {f"consumer{i}": static(f"instance{i}", "topic1", "topic2") for i in (1, 2, 3)}
        after = {
            "consumer1": before["consumer1"],
            "consumer5": before["consumer2"],
            "consumer4": before["consumer3"],
        }

        def by_instance(members: dict[str, Member]) -> dict[str | None, list[TopicPartition]]:
            result = assign("range", partitions, members)
            return {members[m].group_instance_id: tps for m, tps in result.items()}

        assert by_instance(before) == {
            "instance1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
            "instance2": [tp("topic1", 2), tp("topic1", 3), tp("topic2", 2), tp("topic2", 3)],
            "instance3": [tp("topic1", 4), tp("topic2", 4)],
        }
        assert by_instance(after) == by_instance(before)

    @pytest.mark.parametrize(
        ("partitions", "subscriptions", "expected"),
        [
            (  # testRackAwareAssignmentWithUniformSubscription, without racks
                {"t1": 6, "t2": 7, "t3": 2},
                [("t1", "t2", "t3")] * 3,
                [
                    "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
                    "t1-2, t1-3, t2-3, t2-4, t3-1",
                    "t1-4, t1-5, t2-5, t2-6",
                ],
            ),
            (  # testRackAwareAssignmentWithNonEqualSubscription, without racks
                {"t1": 6, "t2": 7, "t3": 2},
                [("t1", "t2", "t3"), ("t1", "t2", "t3"), ("t1", "t3")],
                [
                    "t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
                    "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
                    "t1-4, t1-5",
                ],
            ),
            (  # testRackAwareAssignmentWithUniformPartitions, without racks
                {"t1": 5, "t2": 5, "t3": 5},
                [("t1", "t2", "t3")] * 3,
                [
                    "t1-0, t1-1, t2-0, t2-1, t3-0, t3-1",
                    "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
                    "t1-4, t2-4, t3-4",
                ],
            ),
            (  # testCoPartitionedAssignmentWithSameSubscription, without racks; t7..t9 do not exist
                {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4},
                [tuple(f"t{i}" for i in range(1, 10))] * 3,
                [
                    "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
                    "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
                    "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
                ],
            ),
        ],
    )
    def test_non_rack_aware_examples(
        self, partitions: dict[str, int], subscriptions: list[tuple[str, ...]], expected: list[str]
    ) -> None:
        members = {f"consumer{i}": dynamic(*topics) for i, topics in enumerate(subscriptions)}
        result = assign("range", partitions, members)
        assert result == {f"consumer{i}": parse(text) for i, text in enumerate(expected)}


class TestRoundRobinKafkaExamples:
    def test_javadoc_examples(self) -> None:
        members = {"C0": dynamic("t0", "t1"), "C1": dynamic("t0", "t1")}
        assert assign("roundrobin", {"t0": 3, "t1": 3}, members) == {
            "C0": [tp("t0", 0), tp("t0", 2), tp("t1", 1)],
            "C1": [tp("t0", 1), tp("t1", 0), tp("t1", 2)],
        }
        members = {"C0": dynamic("t0"), "C1": dynamic("t0", "t1"), "C2": dynamic("t0", "t1", "t2")}
        assert assign("roundrobin", {"t0": 1, "t1": 2, "t2": 3}, members) == {
            "C0": [tp("t0", 0)],
            "C1": [tp("t1", 0)],
            "C2": [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)],
        }

    @pytest.mark.parametrize(
        "members",
        [
            {
                "consumer-b": static("instance1", "topic1", "topic2"),
                "consumer-a": static("instance2", "topic1", "topic2"),
            },
            {
                "consumer-b": static("instance1", "topic1", "topic2"),
                "consumer-a": dynamic("topic1", "topic2"),
            },
        ],
        ids=["two-static", "static-before-dynamic"],
    )
    def test_static_members_ordered_by_instance_id(self, members: dict[str, Member]) -> None:
        assert assign("roundrobin", {"topic1": 3, "topic2": 3}, members) == {
            "consumer-b": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
            "consumer-a": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
        }

    def test_static_member_assignment_persistent(self) -> None:
        members = {f"consumer{i}": static(f"instance{i}", "topic1", "topic2") for i in (1, 2, 3)}
        expected = {
            "consumer1": [tp("topic1", 0), tp("topic2", 1)],
            "consumer2": [tp("topic1", 1), tp("topic2", 2)],
            "consumer3": [tp("topic1", 2)],
        }
        result = assign("roundrobin", {"topic1": 3, "topic2": 3}, {**members, "consumer4": dynamic("topic1", "topic2")})
        assert result == {**expected, "consumer4": [tp("topic2", 0)]}
        result = assign("roundrobin", {"topic1": 3, "topic2": 3}, {**members, "consumer5": dynamic("topic1", "topic2")})
        assert result == {**expected, "consumer5": [tp("topic2", 0)]}

    def test_static_member_assignment_persistent_after_member_id_changes(self) -> None:
        partitions = {"topic1": 3, "topic2": 3}
        instances = {"consumer4": "instance1", "consumer5": "instance2", "consumer1": "instance3"}
        members = {m: static(i, "topic1", "topic2") for m, i in instances.items()}
        result = assign("roundrobin", partitions, members)
        by_instance = {instances[m]: tps for m, tps in result.items()}
        assert by_instance == {f"instance{i + 1}": [tp("topic1", i), tp("topic2", i)] for i in range(3)}


@given(cases(owned=False, static=True))
def test_range_is_kafkas_range(case: Case) -> None:
    result = assign("range", case.partitions, case.members, case.lag)
    assert_valid(case, result)
    assert result == kafka_range(case)


@given(cases(owned=False, static=True))
def test_roundrobin_is_kafkas_roundrobin(case: Case) -> None:
    result = assign("roundrobin", case.partitions, case.members, case.lag)
    assert_valid(case, result)
    assert result == kafka_roundrobin(case)


@given(cases(identical=True, owned=False))
def test_roundrobin_balances_identical_subscriptions(case: Case) -> None:
    counts = [len(tps) for tps in assign("roundrobin", case.partitions, case.members).values()]
    assert max(counts) - min(counts) <= 1
