"""Random consumer groups for property tests, and the invariants every strategy is held to.

The other `test_assignors_*` modules import these; the tests here check the
checkers themselves.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka.structs import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from kagent.core.assignors import Assignment, Member

TOPICS = ("alpha", "beta", "gamma", "delta")


@dataclass(frozen=True)
class Case:
    """One input of `kagent.core.assignors.assign`."""

    partitions: dict[str, int]
    members: dict[str, Member]
    lag: dict[TopicPartition, int]


def all_partitions(partitions: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for topic, count in sorted(partitions.items()) for p in range(count)]


member_ids = st.text(alphabet="abcdef-0123", min_size=1, max_size=5)
lags = st.one_of(st.just(0), st.integers(0, 50), st.integers(0, 100_000))


@st.composite
def cases(
    draw: st.DrawFn,
    identical: bool | None = None,
    owned: bool = True,
    static: bool = False,
    max_members: int = 7,
    max_partitions: int = 9,
) -> Case:
    """A group of 1..`max_members` members on up to four topics.

    `identical`: every member subscribes to the same topics (True), not
    necessarily (None), or never all the same where possible (False is not
    enforced; use None for heterogeneous groups). Subscriptions may name a
    topic missing from `partitions`. With `owned`, members claim random
    partitions (overlapping, possibly stale) in random generations.
    """
    topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True))
    partitions = {topic: draw(st.integers(0, max_partitions)) for topic in topics}
    ids = draw(st.lists(member_ids, min_size=1, max_size=max_members, unique=True))
    universe = [*topics, "missing"]
    shared = draw(st.lists(st.sampled_from(universe), min_size=1, unique=True))
    existing = all_partitions(partitions)
    members = {}
    for member_id in ids:
        subscription = shared if identical else draw(st.lists(st.sampled_from(universe), min_size=1, unique=True))
        claims = draw(st.lists(st.sampled_from(existing), unique=True)) if owned and existing else []
        members[member_id] = Member(
            topics=subscription,
            owned=claims,
            generation=draw(st.integers(-1, 3)) if claims else -1,
            group_instance_id=draw(st.none() | st.text(alphabet="xyz", min_size=1, max_size=3)) if static else None,
        )
    lag = {tp: draw(lags) for tp in draw(st.lists(st.sampled_from(existing), unique=True))} if existing else {}
    return Case(partitions, members, lag)


def random_case(rng: random.Random, max_members: int = 7, max_partitions: int = 9) -> Case:
    """A group drawn as `cases()` draws one (heterogeneous subscriptions, some
    naming a missing topic; overlapping, possibly stale claims in random
    generations; random lags), from a seeded `random.Random`: for checks over
    thousands of groups that must draw the same groups on every run."""
    topics = rng.sample(TOPICS, rng.randint(1, len(TOPICS)))
    partitions = {topic: rng.randint(0, max_partitions) for topic in topics}
    existing = all_partitions(partitions)
    universe = [*topics, "missing"]
    ids = rng.sample([f"{a}{b}" for a in "abcdef-" for b in "0123-"], rng.randint(1, max_members))
    members = {}
    for member_id in ids:
        claims = rng.sample(existing, rng.randint(0, len(existing)))
        members[member_id] = Member(
            topics=rng.sample(universe, rng.randint(1, len(universe))),
            owned=claims,
            generation=rng.randint(-1, 3) if claims else -1,
        )
    lag = {tp: rng.choice((0, rng.randint(0, 50), rng.randint(0, 100_000))) for tp in existing if rng.random() < 0.5}
    return Case(partitions, members, lag)


def subscribed(case: Case) -> dict[str, set[str]]:
    return {m: {t for t in member.topics if t in case.partitions} for m, member in case.members.items()}


def assert_valid(case: Case, assignment: Assignment) -> None:
    """Every member present; every subscribed partition assigned exactly once,
    to a member subscribed to its topic; nothing else assigned; lists sorted."""
    assert set(assignment) == set(case.members)
    subscriptions = subscribed(case)
    wanted = {tp for tp in all_partitions(case.partitions) if any(tp.topic in s for s in subscriptions.values())}
    assigned = Counter(tp for tps in assignment.values() for tp in tps)
    assert set(assigned) == wanted
    assert all(n == 1 for n in assigned.values())
    for member_id, tps in assignment.items():
        assert all(tp.topic in subscriptions[member_id] for tp in tps)
        assert tps == sorted(tps)


def assert_locally_balanced(case: Case, assignment: Assignment) -> None:
    """Kafka's sticky balance: no member subscribed to a partition's topic holds
    two or more partitions fewer than the partition's member."""
    subscriptions = subscribed(case)
    count = {m: len(tps) for m, tps in assignment.items()}
    for holder, tps in assignment.items():
        for topic in {tp.topic for tp in tps}:
            for other, topics in subscriptions.items():
                if topic in topics:
                    assert count[other] >= count[holder] - 1, (holder, other, topic)


def assert_counts_within_one(assignment: Assignment) -> None:
    counts = [len(tps) for tps in assignment.values()]
    assert max(counts) - min(counts) <= 1


def reference_holders(case: Case) -> dict[TopicPartition, str]:
    """Claim resolution written out plainly (Kafka's rule): every claim on an
    existing partition counts, subscribed or not; the highest generation wins;
    a tie at the highest generation takes the partition from all claimants."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member_id, member in case.members.items():
        for tp in set(member.owned):
            if tp.partition < case.partitions.get(tp.topic, 0):
                claims.setdefault(tp, []).append((member.generation, member_id))
    holders = {}
    for tp, found in claims.items():
        top = max(generation for generation, _ in found)
        winners = [member_id for generation, member_id in found if generation == top]
        if len(winners) == 1:
            holders[tp] = winners[0]
    return holders


def reference_owners(case: Case) -> dict[TopicPartition, str]:
    """`reference_holders` whose member still subscribes to the partition's topic."""
    subscriptions = subscribed(case)
    return {tp: member_id for tp, member_id in reference_holders(case).items() if tp.topic in subscriptions[member_id]}


def kept(assignment: Assignment, owners: Mapping[TopicPartition, str]) -> int:
    return sum(owners.get(tp) == member_id for member_id, tps in assignment.items() for tp in tps)


@given(cases())
def test_generated_cases_are_well_formed(case: Case) -> None:
    assert case.members
    assert all(0 <= tp.partition < case.partitions[tp.topic] for tp in case.lag)
    assert all(value >= 0 for value in case.lag.values())


def test_checkers_reject_broken_assignments() -> None:
    case = Case({"alpha": 2}, {"a": Member(["alpha"]), "b": Member(["alpha"])}, {})
    t0, t1 = TopicPartition("alpha", 0), TopicPartition("alpha", 1)
    assert_valid(case, {"a": [t0], "b": [t1]})
    for broken in (
        {"a": [t0, t1], "b": [t1]},
        {"a": [t0], "b": []},
        {"a": [t0, t1]},
        {"a": [t1, t0], "b": []},
    ):
        try:
            assert_valid(case, broken)
        except AssertionError:
            continue
        raise AssertionError(f"accepted {broken}")
    three = Case({"alpha": 3}, {"a": Member(["alpha"]), "b": Member(["alpha"])}, {})
    try:
        assert_locally_balanced(three, {"a": all_partitions({"alpha": 3}), "b": []})
    except AssertionError:
        return
    raise AssertionError("accepted an unbalanced assignment")
