"""`sticky` and `cooperative-sticky`: the StickyAssignor javadoc examples, Kafka's
AbstractStickyAssignorTest scenarios, and property tests of Kafka's guarantees."""

from __future__ import annotations

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from test_assignors_invariants import (
    Case,
    assert_counts_within_one,
    assert_locally_balanced,
    assert_valid,
    cases,
    kept,
    reference_owners,
)

from kagent.core.assignors import Assignment, Group, Member, assign, assign_cooperative


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def t(*partitions: int, topic: str = "topic") -> list[TopicPartition]:
    return [tp(topic, p) for p in partitions]


def owning(assignment: Assignment, topics: dict[str, list[str]], generation: int = 1) -> dict[str, Member]:
    """The members of `topics` (member to subscription), owning what `assignment` gave them."""
    return {
        m: Member(subscription, owned=assignment.get(m, []), generation=generation)
        for m, subscription in topics.items()
    }


class TestJavadocExamples:
    def test_example_1_starts_like_roundrobin_and_keeps_everything_when_a_consumer_leaves(self) -> None:
        partitions = {f"t{i}": 2 for i in range(4)}
        all_topics = list(partitions)
        first = assign("sticky", partitions, {c: Member(all_topics) for c in ("C0", "C1", "C2")})
        assert first == {
            "C0": [tp("t0", 0), tp("t1", 1), tp("t3", 0)],
            "C1": [tp("t0", 1), tp("t2", 0), tp("t3", 1)],
            "C2": [tp("t1", 0), tp("t2", 1)],
        }
        second = assign("sticky", partitions, owning(first, {"C0": all_topics, "C2": all_topics}))
        assert set(first["C0"]) <= set(second["C0"])
        assert set(first["C2"]) <= set(second["C2"])
        assert [len(tps) for tps in second.values()] == [4, 4]

    def test_example_2_balances_unequal_subscriptions_and_keeps_five(self) -> None:
        partitions = {"t0": 1, "t1": 2, "t2": 3}
        topics = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
        first = assign("sticky", partitions, {m: Member(s) for m, s in topics.items()})
        assert first == {"C0": [tp("t0", 0)], "C1": t(0, 1, topic="t1"), "C2": t(0, 1, 2, topic="t2")}
        del topics["C0"]
        second = assign("sticky", partitions, owning(first, topics))
        assert second == {"C1": [tp("t0", 0), tp("t1", 0), tp("t1", 1)], "C2": t(0, 1, 2, topic="t2")}


class TestAbstractStickyAssignorTestScenarios:
    def test_multiple_consumers_mixed_topic_subscriptions(self) -> None:
        members = {
            "consumer1": Member(["topic1"]),
            "consumer2": Member(["topic1", "topic2"]),
            "consumer3": Member(["topic1"]),
        }
        assert assign("sticky", {"topic1": 3, "topic2": 2}, members) == {
            "consumer1": t(0, 2, topic="topic1"),
            "consumer2": t(0, 1, topic="topic2"),
            "consumer3": t(1, topic="topic1"),
        }

    def test_two_consumers_two_topics_six_partitions(self) -> None:
        members = {c: Member(["topic1", "topic2"]) for c in ("consumer1", "consumer2")}
        assert assign("sticky", {"topic1": 3, "topic2": 3}, members) == {
            "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
            "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
        }

    def test_consumer_owning_min_quota_expected_max_quota(self) -> None:
        topics = ["topic1", "topic2"]
        members = {
            "consumer1": Member(topics, owned=[tp("topic1", 0), tp("topic2", 1)], generation=1),
            "consumer2": Member(topics, owned=[tp("topic1", 1), tp("topic2", 2)], generation=1),
        }
        result = assign_cooperative({"topic1": 2, "topic2": 3}, members)
        assert result.target == {
            "consumer1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)],
            "consumer2": [tp("topic1", 1), tp("topic2", 2)],
        }
        assert result.first_round == result.target

    def test_max_quota_consumers_more_than_expected(self) -> None:
        topics = ["topic1", "topic2"]
        members = {
            "consumer1": Member(topics, owned=[tp("topic1", 0), tp("topic2", 0)], generation=1),
            "consumer2": Member(topics, owned=[tp("topic1", 1), tp("topic2", 1)], generation=1),
            "consumer3": Member(topics, generation=1),
        }
        result = assign_cooperative({"topic1": 2, "topic2": 2}, members)
        assert sorted(len(tps) for tps in result.target.values()) == [1, 1, 2]
        assert kept(result.target, Group({"topic1": 2, "topic2": 2}, members).owners) == 3
        transferring = [p for m, tps in result.target.items() for p in tps if p not in result.first_round[m]]
        assert len(transferring) == 1
        assert transferring[0] in result.target["consumer3"]

    def test_all_consumers_under_min_quota(self) -> None:
        topics = ["topic1", "topic2"]
        members = {
            "consumer1": Member(topics, owned=[tp("topic1", 0)], generation=1),
            "consumer2": Member(topics, owned=[tp("topic1", 1)], generation=1),
            "consumer3": Member(topics, generation=1),
        }
        result = assign_cooperative({"topic1": 2, "topic2": 3}, members)
        assert tp("topic1", 0) in result.target["consumer1"]
        assert tp("topic1", 1) in result.target["consumer2"]
        assert sorted(len(tps) for tps in result.target.values()) == [1, 2, 2]
        assert result.first_round == result.target

    def test_add_remove_consumer_one_topic(self) -> None:
        first = assign("sticky", {"topic": 3}, {"consumer1": Member(["topic"])})
        assert first == {"consumer1": t(0, 1, 2)}
        members = owning(first, {"consumer1": ["topic"], "consumer2": ["topic"]})
        second = assign_cooperative({"topic": 3}, members)
        assert second.target == {"consumer1": t(0, 1), "consumer2": t(2)}
        assert second.first_round == {"consumer1": t(0, 1), "consumer2": []}
        assert second.revoked == {"consumer1": t(2), "consumer2": []}
        third = assign("sticky", {"topic": 3}, owning(second.target, {"consumer2": ["topic"]}))
        assert third == {"consumer2": t(0, 1, 2)}

    def test_add_remove_two_consumers_two_topics(self) -> None:
        partitions = {"topic1": 3, "topic2": 4}
        topics = ["topic1", "topic2"]
        first = assign("sticky", partitions, {c: Member(topics) for c in ("consumer1", "consumer2")})
        assert first == {
            "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1), tp("topic2", 3)],
            "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
        }
        members = owning(first, {c: topics for c in ("consumer1", "consumer2", "consumer3", "consumer4")})
        second = assign_cooperative(partitions, members)
        assert second.target == {
            "consumer1": [tp("topic1", 0), tp("topic1", 2)],
            "consumer2": [tp("topic1", 1), tp("topic2", 0)],
            "consumer3": [tp("topic2", 1), tp("topic2", 3)],
            "consumer4": [tp("topic2", 2)],
        }
        assert second.first_round == {**second.target, "consumer3": [], "consumer4": []}
        third = assign("sticky", partitions, owning(second.target, {"consumer3": topics, "consumer4": topics}))
        assert set(second.target["consumer3"]) <= set(third["consumer3"])
        assert set(second.target["consumer4"]) <= set(third["consumer4"])
        assert sorted(len(tps) for tps in third.values()) == [3, 4]

    def test_poor_roundrobin_scenario_is_balanced(self) -> None:
        partitions = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
        every, odd = list(partitions), ["topic1", "topic3", "topic5"]
        case = Case(
            partitions,
            {
                "consumer1": Member(every),
                "consumer2": Member(odd),
                "consumer3": Member(odd),
                "consumer4": Member(every),
            },
            {},
        )
        result = assign("sticky", case.partitions, case.members)
        assert_valid(case, result)
        assert_locally_balanced(case, result)
        assert sorted(len(tps) for tps in result.values()) == [2, 2, 2, 2]

    def test_reassignment_after_one_consumer_leaves(self) -> None:
        partitions = {f"topic{i:02d}": i for i in range(1, 20)}
        topics = {f"consumer{i:02d}": [f"topic{j:02d}" for j in range(1, i + 1)] for i in range(1, 20)}
        first = assign("sticky", partitions, {m: Member(s) for m, s in topics.items()})
        del topics["consumer10"]
        members = owning(first, topics)
        case = Case(partitions, members, {})
        second = assign("sticky", partitions, members)
        assert_valid(case, second)
        assert_locally_balanced(case, second)

    def test_owned_partitions_invalidated_for_stale_generation(self) -> None:
        claims = [tp("topic", 0), tp("topic", 2), tp("topic2", 1)]
        for stale in (9, -1):  # an older generation, or none at all
            members = {
                "consumer1": Member(["topic", "topic2"], owned=claims, generation=10),
                "consumer2": Member(["topic", "topic2"], owned=claims, generation=stale),
            }
            result = assign_cooperative({"topic": 3, "topic2": 3}, members)
            assert result.target == {
                "consumer1": sorted(claims),
                "consumer2": [tp("topic", 1), tp("topic2", 0), tp("topic2", 2)],
            }
            assert result.first_round == result.target
            assert result.revoked == {"consumer1": [], "consumer2": sorted(claims)}

    def test_partition_claimed_by_two_consumers_in_one_generation_is_transferring(self) -> None:
        members = {
            "consumer1": Member(["topic"], owned=t(0, 1), generation=1),
            "consumer2": Member(["topic"], owned=t(0, 2), generation=1),
            "consumer3": Member(["topic"], generation=1),
        }
        result = assign_cooperative({"topic": 3}, members)
        assert result.target == {"consumer1": t(1), "consumer2": t(2), "consumer3": t(0)}
        assert result.first_round == {"consumer1": t(1), "consumer2": t(2), "consumer3": []}

    def test_partitions_go_to_the_highest_generation(self) -> None:
        topics = ["topic", "topic2", "topic3"]
        members = {
            "consumer1": Member(topics, owned=[tp("topic", 0), tp("topic2", 0), tp("topic3", 0)], generation=10),
            "consumer2": Member(topics, owned=[tp("topic", 1), tp("topic2", 1), tp("topic3", 1)], generation=9),
            "consumer3": Member(topics, owned=[tp("topic2", 1), tp("topic3", 0), tp("topic3", 2)], generation=8),
        }
        result = assign_cooperative({topic: 3 for topic in topics}, members)
        assert result.target == {m: [tp(topic, i) for topic in topics] for i, m in enumerate(members)}
        assert result.first_round == result.target

    def test_no_reassignment_on_current_members(self) -> None:
        topics = ["topic", "topic1", "topic2", "topic3"]
        members = {
            "consumer1": Member(topics),
            "consumer2": Member(topics, owned=[tp("topic", 0), tp("topic2", 0), tp("topic1", 0)], generation=9),
            "consumer3": Member(topics, owned=[tp("topic3", 2), tp("topic2", 2), tp("topic1", 1)], generation=8),
            "consumer4": Member(topics, owned=[tp("topic3", 1), tp("topic", 1), tp("topic", 2)], generation=7),
        }
        result = assign_cooperative({topic: 3 for topic in topics}, members)
        assert result.target["consumer1"] == [tp("topic1", 2), tp("topic2", 1), tp("topic3", 0)]
        assert all(result.target[m] == sorted(members[m].owned) for m in ("consumer2", "consumer3", "consumer4"))
        assert result.first_round == result.target

    def test_all_consumers_reach_expected_quota(self) -> None:
        members = {
            "consumer1": Member(["topic"], owned=t(0, 1), generation=1),
            "consumer2": Member(["topic"], owned=t(2), generation=1),
            "consumer3": Member(["topic"], generation=1),
        }
        assert assign("sticky", {"topic": 4}, members) == {
            "consumer1": t(0, 1),
            "consumer2": t(2),
            "consumer3": t(3),
        }

    def test_assignment_updated_for_deleted_topic(self) -> None:
        result = assign("sticky", {"topic1": 1, "topic3": 100}, {"consumer": Member(["topic1", "topic2", "topic3"])})
        assert len(result["consumer"]) == 101

    def test_no_exception_when_only_subscribed_topic_deleted(self) -> None:
        members = {"consumer": Member(["topic"], owned=t(0, 1, 2), generation=1)}
        assert assign_cooperative({}, members).target == {"consumer": []}


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky"])
@settings(max_examples=150)
@given(case=cases())
def test_valid_and_balanced(strategy: str, case: Case) -> None:
    result = assign(strategy, case.partitions, case.members, case.lag)
    assert_valid(case, result)
    assert_locally_balanced(case, result)


@settings(max_examples=150)
@given(cases(identical=True))
def test_identical_subscriptions_keep_the_most_owned_partitions_balance_allows(case: Case) -> None:
    result = assign("sticky", case.partitions, case.members)
    assert_valid(case, result)
    assert_counts_within_one(result)
    owners = reference_owners(case)
    claims = [sum(owner == m for owner in owners.values()) for m in case.members]
    total = sum(len(tps) for tps in result.values())
    quota, extra = divmod(total, len(case.members))
    best = sum(min(c, quota) for c in claims) + min(extra, sum(c > quota for c in claims))
    assert kept(result, owners) == best


@given(cases())
def test_claims_resolve_by_generation(case: Case) -> None:
    group = Group(case.partitions, case.members, case.lag)
    assert group.owners == reference_owners(case)


@given(cases(owned=False))
def test_a_balanced_complete_ownership_is_kept(case: Case) -> None:
    first = assign("sticky", case.partitions, case.members)
    again = {m: Member(member.topics, owned=first[m], generation=1) for m, member in case.members.items()}
    assert assign("sticky", case.partitions, again) == first


@given(cases())
def test_deterministic_whatever_the_member_order(case: Case) -> None:
    reordered = dict(reversed(list(case.members.items())))
    assert assign("sticky", case.partitions, case.members) == assign("sticky", case.partitions, reordered)


@settings(max_examples=150)
@given(cases())
def test_cooperative_first_round_is_safe(case: Case) -> None:
    group = Group(case.partitions, case.members, case.lag)
    result = assign_cooperative(case.partitions, case.members, case.lag)
    assert result.target == assign("sticky", case.partitions, case.members, case.lag)
    for member_id, tps in result.first_round.items():
        assert set(tps) <= set(result.target[member_id])
        assert all(group.owners.get(p, member_id) == member_id and p not in group.contested for p in tps)
        assert result.revoked[member_id] == sorted(set(case.members[member_id].owned) - set(tps))


@settings(max_examples=150)
@given(cases(identical=True))
def test_cooperative_follow_up_completes_identical_subscriptions(case: Case) -> None:
    result = assign_cooperative(case.partitions, case.members, case.lag)
    follow_up = {
        m: Member(member.topics, owned=result.first_round[m], generation=member.generation + 5)
        for m, member in case.members.items()
    }
    second = assign_cooperative(case.partitions, follow_up, case.lag)
    assert second.first_round == second.target
    assert all(set(result.first_round[m]) <= set(tps) for m, tps in second.target.items())
    assert_valid(case, second.target)
    assert_counts_within_one(second.target)
