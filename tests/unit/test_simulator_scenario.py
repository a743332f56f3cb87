"""`kagent.tools.simulator.scenario`: scenarios validate themselves."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kagent.tools.simulator.scenario import (
    GroupSpec,
    MemberSpec,
    Scenario,
    ScenarioError,
    TopicSpec,
    TrafficSpec,
    default_scenario,
)


def _scenario(**changes: object) -> Scenario:
    base = Scenario(
        topics=(TopicSpec("t", 6),),
        traffic=(TrafficSpec("t", rate=10, keys=12, zipf_exponent=1.0, hot_partitions=(0, 1)),),
        groups=(GroupSpec("g", ("t",), "range", (MemberSpec("a"), MemberSpec("b", 5.0))),),
    )
    return replace(base, **changes)


def test_default_scenario_is_valid_and_has_a_skewed_and_a_balanced_group() -> None:
    scenario = default_scenario()
    assert {group.assignor for group in scenario.groups} == {"range", "roundrobin"}
    skewed = next(t for t in scenario.traffic if t.hot_partitions)
    assert skewed.zipf_exponent > 0
    assert any(t.zipf_exponent == 0 and not t.hot_partitions for t in scenario.traffic)
    assert any(m.processing_delay_ms > 0 for g in scenario.groups for m in g.members)
    assert scenario.partitions("orders") == 12


def test_client_ids_name_group_and_member() -> None:
    group = _scenario().groups[0]
    assert [group.client_id(member) for member in group.members] == ["g-a", "g-b"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: TopicSpec("t", 0), "partitions must be >= 1"),
        (lambda: TopicSpec("", 1), "needs a name"),
        (lambda: TopicSpec("__consumer_offsets", 50), "Kafka's own"),
        (lambda: TrafficSpec("t", rate=0, keys=1), "rate must be > 0"),
        (lambda: TrafficSpec("t", rate=1, keys=0), "keys must be >= 1"),
        (lambda: TrafficSpec("t", rate=1, keys=1, zipf_exponent=-1), "zipf_exponent"),
        (lambda: TrafficSpec("t", rate=1, keys=1, hot_partitions=(1, 1)), "repeat"),
        (lambda: MemberSpec("m", -1), "processing_delay_ms"),
        (lambda: GroupSpec("g", (), "range", (MemberSpec("a"),)), "no topic"),
        (
            lambda: GroupSpec("g", ("t",), "sticky", (MemberSpec("a"),)),  # type: ignore[arg-type]
            "assignor must be one of",
        ),
        (lambda: GroupSpec("g", ("t",), "range", ()), "no member"),
        (lambda: GroupSpec("g", ("t",), "range", (MemberSpec("a"), MemberSpec("a"))), "duplicate member names"),
        (lambda: GroupSpec("g", ("t",), "range", (MemberSpec("a"),), heartbeat_interval_ms=6000), "heartbeat"),
        (lambda: GroupSpec("g", ("t",), "range", (MemberSpec("a"),), commit_interval_ms=0), "commit_interval"),
        (lambda: _scenario(topics=()), "needs a topic"),
        (lambda: _scenario(topics=(TopicSpec("t", 6), TopicSpec("t", 3))), "duplicate topic names"),
        (lambda: _scenario(traffic=(TrafficSpec("u", rate=1, keys=1),)), "unknown topic 'u'"),
        (lambda: _scenario(traffic=(TrafficSpec("t", rate=1, keys=1, hot_partitions=(6,)),)), r"hot partitions \[6\]"),
        (lambda: _scenario(groups=(GroupSpec("g", ("u",), "range", (MemberSpec("a"),)),)), "unknown topics"),
        (
            lambda: _scenario(groups=_scenario().groups * 2),
            "duplicate group ids",
        ),
    ],
)
def test_invalid_parts_are_refused_naming_the_problem(build: object, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        build()  # type: ignore[operator]


def test_unknown_topic_has_no_partition_count() -> None:
    with pytest.raises(KeyError):
        _scenario().partitions("u")
