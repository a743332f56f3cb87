"""Kafka's own answers: every exact assignment that Kafka's sticky assignor tests
(AbstractStickyAssignorTest, StickyAssignorTest) assert, ported as data
(data/kafka_sticky_cases.json, which says how), run through kagent's `sticky`;
then a few of those tests that assert balance and stickiness rather than an
exact assignment. (Kafka's CooperativeStickyAssignor answers are its first
round, which kagent does not compute: its `cooperative-sticky` assigns as
`sticky` does.)

Order: kagent returns each member's partitions sorted (its contract), Kafka in
the order its builder added them. Where a Kafka test compares lists, kagent's
sorted list is compared with Kafka's partitions sorted: the same partitions,
in kagent's promised order. The data keeps Kafka's own order and says which
assertions were order-sensitive (`ordered`).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from test_assignors_invariants import Case, assert_locally_balanced, assert_valid

from kagent.core.assignors import Assignment, Member, assign

DATA = Path(__file__).parent / "data" / "kafka_sticky_cases.json"


def parse(text: str) -> TopicPartition:
    """A partition as Kafka prints it: `topic-partition`."""
    topic, _, partition = text.rpartition("-")
    return TopicPartition(topic, int(partition))


@dataclass(frozen=True)
class KafkaCase:
    """One exact assignment a Kafka test asserts, for one strategy."""

    file: str
    test: str
    step: str | None
    strategy: str
    ordered: bool
    partitions: dict[str, int]
    members: dict[str, Member]
    expected: dict[str, list[TopicPartition]]

    @property
    def id(self) -> str:
        step = "" if self.step is None else f"[{self.step}]"
        return f"{self.file}.{self.test}{step}:{self.strategy}"


def load() -> tuple[dict[str, Any], list[KafkaCase]]:
    data = json.loads(DATA.read_text())
    cases = []
    for raw in data["cases"]:
        members = {
            member_id: Member(
                spec["topics"], owned=[parse(p) for p in spec.get("owned", [])], generation=spec.get("generation", -1)
            )
            for member_id, spec in raw["members"].items()
        }
        for strategy in raw["assignors"]:
            cases.append(
                KafkaCase(
                    file=raw["file"],
                    test=raw["test"],
                    step=None if "step" not in raw else str(raw["step"]),
                    strategy=strategy,
                    ordered=raw["ordered"],
                    partitions=raw["partitions"],
                    members=members,
                    expected={m: [parse(p) for p in tps] for m, tps in raw["expected"].items()},
                )
            )
    return data, cases


SOURCE, CASES = load()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_kafka_answer(case: KafkaCase) -> None:
    assignment = assign(case.strategy, case.partitions, case.members)
    assert {m: assignment[m] for m in case.expected} == {m: sorted(tps) for m, tps in case.expected.items()}


def test_every_ported_case_is_here() -> None:
    """What was ported, per Kafka test file: (test steps, runs over the strategies)."""
    steps = Counter(raw["file"] for raw in SOURCE["cases"])
    runs = Counter(case.file for case in CASES)
    assert {file: (steps[file], runs[file]) for file in SOURCE["source"]["files"]} == {
        "AbstractStickyAssignorTest": (25, 25),
        "StickyAssignorTest": (3, 3),
    }


@pytest.mark.parametrize("raw", SOURCE["cases"], ids=lambda raw: f"{raw['test']}[{raw.get('step', '')}]")
def test_the_data_is_well_formed(raw: dict[str, Any]) -> None:
    """Each expected partition exists, goes to one member, and that member
    subscribes to its topic; a `sticky` assertion on every member covers every
    subscribed partition; `sticky` is the strategy."""
    assert raw["assignors"] == ["sticky"]
    assert set(raw["expected"]) <= set(raw["members"])
    given = Counter(p for tps in raw["expected"].values() for p in tps)
    assert all(n == 1 for n in given.values())
    for member_id, tps in raw["expected"].items():
        for tp in map(parse, tps):
            assert tp.topic in raw["members"][member_id]["topics"]
            assert 0 <= tp.partition < raw["partitions"][tp.topic]
    subscribed = {t for spec in raw["members"].values() for t in spec["topics"] if t in raw["partitions"]}
    everything = {f"{t}-{p}" for t in subscribed for p in range(raw["partitions"][t])}
    if set(raw["expected"]) == set(raw["members"]):
        assert set(given) == everything


# Kafka tests that assert balance and stickiness, not an exact assignment.


def per_topic(assignment: Assignment) -> dict[str, Counter[str]]:
    return {m: Counter(tp.topic for tp in tps) for m, tps in assignment.items()}


def test_topic_balance_after_reassignment() -> None:
    """AbstractStickyAssignorTest.testTopicBalanceAfterReassignment: 12 + 12
    partitions over 1, 2, 4, then 2 members, each member holding as many of
    one topic as of the other."""
    partitions = {"topic1": 12, "topic2": 12}
    topics = ["topic1", "topic2"]
    assignment = assign("sticky", partitions, {"consumer1": Member(topics)})
    for joined, left, each in (
        (["consumer2"], [], 6),
        (["consumer3", "consumer4"], [], 3),
        ([], ["consumer1", "consumer2"], 6),
    ):
        members = {m: Member(topics, owned=tps, generation=1) for m, tps in assignment.items() if m not in left}
        members.update({m: Member(topics, generation=1) for m in joined})
        assignment = assign("sticky", partitions, members)
        assert all(counts == {"topic1": each, "topic2": each} for counts in per_topic(assignment).values())


@pytest.mark.parametrize("generations", list(itertools.permutations((1, 2, 3))))
def test_subscription_not_equal_and_assign_same_partition_with_3_generation(generations: tuple[int, int, int]) -> None:
    """AbstractStickyAssignorTest.testSubscriptionNotEqualAndAssignSamePartitionWith3Generation:
    topic-2 claimed by three members in three generations, in every order."""
    partitions = {"topic": 6, "topic1": 1}
    claims = [[0, 2], [1, 2, 3], [2, 4, 5]]
    members = {
        f"consumer{i + 1}": Member(["topic"], owned=[TopicPartition("topic", p) for p in ps], generation=g)
        for i, (ps, g) in enumerate(zip(claims, generations, strict=True))
    }
    members["consumer4"] = Member(["topic1"], owned=[TopicPartition("topic1", 0)], generation=2)
    assignment = assign("sticky", partitions, members)
    given = [tp for tps in assignment.values() for tp in tps]
    assert len(given) == len(set(given))
    assert all(1 <= len(tps) <= 2 for tps in assignment.values())


@pytest.mark.parametrize("identical", [True, False])
def test_assignment_with_conflicting_previous_generations(identical: bool) -> None:
    """StickyAssignorTest.testAssignmentWithConflictingPreviousGenerations:
    consumer2 and consumer3 (generation 2) keep only partitions they claimed;
    consumer1's older claims give way."""
    topic, topic2, topic3 = ([TopicPartition(name, p) for p in range(4)] for name in ("topic", "topic2", "topic3"))
    every = ["topic", "topic2", "topic3"]
    c1 = [*topic[:3], topic2[2], topic2[3], topic3[0]] if identical else topic
    c2 = [topic[0], topic[1], *topic2]
    c3 = [topic[2], topic[3], *topic3]
    members = {
        "consumer1": Member(every if identical else ["topic"], owned=c1, generation=1),
        "consumer2": Member(every if identical else ["topic", "topic2"], owned=c2, generation=2),
        "consumer3": Member(every, owned=c3, generation=2),
    }
    partitions = {"topic": 4, "topic2": 4, "topic3": 4}
    assignment = assign("sticky", partitions, members)
    assert [len(tps) for tps in assignment.values()] == [4, 4, 4]
    assert set(assignment["consumer2"]) <= set(c2)
    assert set(assignment["consumer3"]) <= set(c3)
    case = Case(partitions, members, {})
    assert_valid(case, assignment)
    assert_locally_balanced(case, assignment)
