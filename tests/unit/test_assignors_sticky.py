"""`sticky` and `cooperative-sticky`: the StickyAssignor javadoc examples, Kafka's
AbstractStickyAssignorTest scenarios, claims contested in one generation, Kafka's
member order, and property tests of Kafka's guarantees. Every exact assignment
Kafka's own tests assert is checked in test_assignors_kafka_cases."""

from __future__ import annotations

from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from test_assignors_invariants import (
    Case,
    assert_counts_within_one,
    assert_locally_balanced,
    assert_valid,
    cases,
    kept,
    reference_holders,
    reference_owners,
)

from kagent.core.assignors import Assignment, Group, Member, assign
from kagent.core.assignors.problem import java_hash_code, java_hash_map_order


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
        result = assign("sticky", {"topic1": 2, "topic2": 3}, members)
        assert result == {
            "consumer1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)],
            "consumer2": [tp("topic1", 1), tp("topic2", 2)],
        }

    def test_max_quota_consumers_more_than_expected(self) -> None:
        """Kafka meets consumer2 before consumer1 (its HashMap order), so
        consumer2 keeps the one larger quota and consumer1 gives up topic2-0."""
        topics = ["topic1", "topic2"]
        members = {
            "consumer1": Member(topics, owned=[tp("topic1", 0), tp("topic2", 0)], generation=1),
            "consumer2": Member(topics, owned=[tp("topic1", 1), tp("topic2", 1)], generation=1),
            "consumer3": Member(topics, generation=1),
        }
        result = assign("sticky", {"topic1": 2, "topic2": 2}, members)
        assert result == {
            "consumer1": [tp("topic1", 0)],
            "consumer2": [tp("topic1", 1), tp("topic2", 1)],
            "consumer3": [tp("topic2", 0)],
        }

    def test_all_consumers_under_min_quota(self) -> None:
        """The member under the minimum is filled first; the larger quotas then
        go to the members at the minimum in member id order."""
        topics = ["topic1", "topic2"]
        members = {
            "consumer1": Member(topics, owned=[tp("topic1", 0)], generation=1),
            "consumer2": Member(topics, owned=[tp("topic1", 1)], generation=1),
            "consumer3": Member(topics, generation=1),
        }
        result = assign("sticky", {"topic1": 2, "topic2": 3}, members)
        assert result == {
            "consumer1": [tp("topic1", 0), tp("topic2", 1)],
            "consumer2": [tp("topic1", 1), tp("topic2", 2)],
            "consumer3": [tp("topic2", 0)],
        }

    def test_add_remove_consumer_one_topic(self) -> None:
        first = assign("sticky", {"topic": 3}, {"consumer1": Member(["topic"])})
        assert first == {"consumer1": t(0, 1, 2)}
        members = owning(first, {"consumer1": ["topic"], "consumer2": ["topic"]})
        second = assign("sticky", {"topic": 3}, members)
        assert second == {"consumer1": t(0, 1), "consumer2": t(2)}
        third = assign("sticky", {"topic": 3}, owning(second, {"consumer2": ["topic"]}))
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
        second = assign("sticky", partitions, members)
        assert second == {
            "consumer1": [tp("topic1", 0), tp("topic2", 1)],
            "consumer2": [tp("topic1", 1), tp("topic2", 0)],
            "consumer3": [tp("topic1", 2), tp("topic2", 3)],
            "consumer4": [tp("topic2", 2)],
        }
        third = assign("sticky", partitions, owning(second, {"consumer3": topics, "consumer4": topics}))
        assert third == {
            "consumer3": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1), tp("topic2", 3)],
            "consumer4": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
        }

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
            result = assign("sticky", {"topic": 3, "topic2": 3}, members)
            assert result == {
                "consumer1": sorted(claims),
                "consumer2": [tp("topic", 1), tp("topic2", 0), tp("topic2", 2)],
            }

    def test_partition_claimed_by_two_consumers_in_one_generation_is_transferring(self) -> None:
        members = {
            "consumer1": Member(["topic"], owned=t(0, 1), generation=1),
            "consumer2": Member(["topic"], owned=t(0, 2), generation=1),
            "consumer3": Member(["topic"], generation=1),
        }
        result = assign("sticky", {"topic": 3}, members)
        assert result == {"consumer1": t(1), "consumer2": t(2), "consumer3": t(0)}

    def test_partitions_go_to_the_highest_generation(self) -> None:
        topics = ["topic", "topic2", "topic3"]
        members = {
            "consumer1": Member(topics, owned=[tp("topic", 0), tp("topic2", 0), tp("topic3", 0)], generation=10),
            "consumer2": Member(topics, owned=[tp("topic", 1), tp("topic2", 1), tp("topic3", 1)], generation=9),
            "consumer3": Member(topics, owned=[tp("topic2", 1), tp("topic3", 0), tp("topic3", 2)], generation=8),
        }
        result = assign("sticky", {topic: 3 for topic in topics}, members)
        assert result == {m: [tp(topic, i) for topic in topics] for i, m in enumerate(members)}

    def test_no_reassignment_on_current_members(self) -> None:
        topics = ["topic", "topic1", "topic2", "topic3"]
        members = {
            "consumer1": Member(topics),
            "consumer2": Member(topics, owned=[tp("topic", 0), tp("topic2", 0), tp("topic1", 0)], generation=9),
            "consumer3": Member(topics, owned=[tp("topic3", 2), tp("topic2", 2), tp("topic1", 1)], generation=8),
            "consumer4": Member(topics, owned=[tp("topic3", 1), tp("topic", 1), tp("topic", 2)], generation=7),
        }
        result = assign("sticky", {topic: 3 for topic in topics}, members)
        assert result["consumer1"] == [tp("topic1", 2), tp("topic2", 1), tp("topic3", 0)]
        assert all(result[m] == sorted(members[m].owned) for m in ("consumer2", "consumer3", "consumer4"))

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
        assert assign("sticky", {}, members) == {"consumer": []}


@settings(max_examples=150)
@given(case=cases())
def test_valid_and_balanced(case: Case) -> None:
    result = assign("sticky", case.partitions, case.members, case.lag)
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
    assert group.holders == reference_holders(case)
    assert group.owners == reference_owners(case)


@given(cases(owned=False))
def test_a_balanced_complete_ownership_is_kept(case: Case) -> None:
    first = assign("sticky", case.partitions, case.members)
    again = {m: Member(member.topics, owned=first[m], generation=1) for m, member in case.members.items()}
    assert assign("sticky", case.partitions, again) == first


@given(cases())
def test_cooperative_sticky_assigns_as_sticky(case: Case) -> None:
    """Kafka's CooperativeStickyAssignor hands out the sticky assignment in two rebalances (KIP-429);
    kagent's `cooperative-sticky` is that assignment."""
    assert assign("cooperative-sticky", case.partitions, case.members, case.lag) == assign(
        "sticky", case.partitions, case.members, case.lag
    )


@given(cases())
def test_deterministic_whatever_the_member_order(case: Case) -> None:
    reordered = dict(reversed(list(case.members.items())))
    assert assign("sticky", case.partitions, case.members) == assign("sticky", case.partitions, reordered)


class TestContestedClaims:
    """A partition claimed by several members in the highest generation is
    taken from all of them (Kafka's AbstractStickyAssignor); a claim counts
    whether or not its member still subscribes to the topic."""

    def test_sticky_gives_a_contested_partition_to_the_least_loaded(self) -> None:
        members = {
            "consumer1": Member(["topic"], owned=t(0, 1), generation=3),
            "consumer2": Member(["topic"], owned=t(0, 2), generation=3),
            "consumer3": Member(["topic"], owned=t(0), generation=3),
            "consumer4": Member(["topic"], generation=3),
        }
        group = Group({"topic": 4}, members)
        assert group.contested == {tp("topic", 0)}
        assert tp("topic", 0) not in group.owners
        assert assign("sticky", {"topic": 4}, members) == {
            "consumer1": t(1),
            "consumer2": t(2),
            "consumer3": t(0),
            "consumer4": t(3),
        }

    def test_a_partition_every_member_contests_goes_to_the_one_with_room(self) -> None:
        members = {
            "consumer1": Member(["topic"], owned=t(0, 1), generation=3),
            "consumer2": Member(["topic"], owned=t(0, 2), generation=3),
            "consumer3": Member(["topic"], owned=t(0), generation=3),
        }
        result = assign("sticky", {"topic": 3}, members)
        assert result == {"consumer1": t(1), "consumer2": t(2), "consumer3": t(0)}

    def test_a_newer_claim_settles_an_older_tie(self) -> None:
        members = {
            "consumer1": Member(["topic"], owned=t(0), generation=1),
            "consumer2": Member(["topic"], owned=t(0), generation=1),
            "consumer3": Member(["topic"], owned=t(0), generation=2),
        }
        group = Group({"topic": 1}, members)
        assert group.contested == frozenset()
        assert group.owners == {tp("topic", 0): "consumer3"}
        assert assign("sticky", {"topic": 1}, members) == {"consumer1": [], "consumer2": [], "consumer3": t(0)}

    def test_a_claim_on_a_topic_no_longer_subscribed_still_contests(self) -> None:
        """consumer2 left `topic` for `other` but still claims topic-0 in the
        same generation: neither keeps it."""
        members = {
            "consumer1": Member(["topic"], owned=t(0, 1), generation=2),
            "consumer2": Member(["other"], owned=[tp("topic", 0), tp("other", 0)], generation=2),
            "consumer3": Member(["topic"], generation=2),
        }
        partitions = {"topic": 3, "other": 1}
        group = Group(partitions, members)
        assert group.contested == {tp("topic", 0)}
        assert group.owners == {tp("topic", 1): "consumer1", tp("other", 0): "consumer2"}
        result = assign("sticky", partitions, members)
        assert result == {"consumer1": t(1, 2), "consumer2": [tp("other", 0)], "consumer3": t(0)}

    def test_a_newer_claim_on_a_topic_no_longer_subscribed_leaves_no_owner(self) -> None:
        """consumer2's claim is newer, so consumer1's is stale; consumer2 no
        longer subscribes to the topic, so topic-0 has no owner to stick to."""
        members = {
            "consumer1": Member(["topic"], owned=t(0), generation=1),
            "consumer2": Member(["other"], owned=[tp("topic", 0)], generation=2),
        }
        partitions = {"topic": 1, "other": 1}
        group = Group(partitions, members)
        assert group.holders == {tp("topic", 0): "consumer2"}
        assert group.owners == {}
        result = assign("sticky", partitions, members)
        assert result == {"consumer1": t(0), "consumer2": [tp("other", 0)]}


class TestKafkaMemberOrder:
    """Kafka's constrained assignment meets members in its HashMap's order;
    these facts were read off Java 17 (`String.hashCode`, `HashMap.keySet`)."""

    def test_java_hash_code(self) -> None:
        assert java_hash_code("consumer1") == -421004549 & 0xFFFFFFFF
        assert java_hash_code("c\u00e9") == 3302
        assert java_hash_code("\U0001f600x") == 54959989  # a surrogate pair: two UTF-16 code units

    def test_java_hash_map_order(self) -> None:
        assert java_hash_map_order(["consumer1", "consumer2", "consumer3", "consumer4"]) == [
            "consumer4",
            "consumer3",
            "consumer2",
            "consumer1",
        ]
        thirteen = [f"c{i}" for i in range(13)]  # past 12 keys the table doubles to 32 buckets
        assert java_hash_map_order(thirteen) == ["c11", "c10", "c12", *(f"c{i}" for i in range(10))]
