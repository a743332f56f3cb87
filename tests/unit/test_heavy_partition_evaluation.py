"""Heavy partitions in `kagent.core.evaluation` and `propose_isolating`: a rebalance that gives each a member of
its own.

Groups hold partitions of topic `t` (see `tests.unit.test_evaluation.group`), members holding consecutive
partitions; throughput figures are (production rate, consumption rate, busy) per partition, as storage hands
them to the evaluation. Members read at most 40 records/s.
"""

from __future__ import annotations

import dataclasses
import json

from aiokafka.structs import TopicPartition
from jsonschema import Draft202012Validator

from kagent.core.contracts import schemas
from kagent.core.events import PartitionRef
from kagent.core.recommendation import Recommendation, RecommendationKind, propose, propose_isolating
from kagent.core.throughput import PartitionThroughput
from tests.unit.test_evaluation import POLICY, group
from tests.unit.test_rebalance_or_scale import figures, run


def t(partition: int) -> TopicPartition:
    return TopicPartition("t", partition)


def held(rec: Recommendation) -> dict[str, list[int]]:
    return {m.member_id: [ref.partition for ref in m.recommended] for m in rec.members}


# a holds t-0 (written at 28/s) and t-1 (17/s), reads 40/s with lag throughout: it falls behind at 5/s. b and c
# hold t-2 (18/s) and t-3 (17/s), keeping up. t-0 beside the lightest other partition (17/s) is 45/s: heavy.
CROWDED = group({"a": [2000, 2000], "b": [10], "c": [10]})
CROWDED_RATES = figures([(28.0, 22.0, True), (17.0, 18.0, True), (18.0, 18.0, False), (17.0, 17.0, False)])


def test_a_crowded_heavy_partition_gets_a_rebalance_that_leaves_it_alone_on_its_member() -> None:
    results = run(CROWDED, CROWDED_RATES)
    assert [r is not None for r in results] == [False, False, True]
    rec = results[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE
    assert rec.scale is None and rec.hot is None
    assert held(rec)["a"] == [0], "t-0 stays with a, alone"
    assert [(m.partition, m.from_member) for m in rec.moves] == [(1, "a")]
    assert all(m.to_member != "a" for m in rec.moves)
    assert rec.isolated is not None and rec.isolated.window == POLICY.rate_window
    [heavy] = rec.isolated.partitions
    assert (heavy.topic, heavy.partition, heavy.member_id) == ("t", 0, "a")
    assert (heavy.production_rate, heavy.member_capacity, heavy.lightest_other_rate) == (28.0, 40.0, 17.0)


def test_the_lag_balancing_strategy_alone_would_put_the_heavy_partition_beside_another() -> None:
    # With equal lag on a's two partitions, lag-sticky moves t-0 to c, beside t-3: 45/s on c, which falls
    # behind in turn. This is what the isolation is for.
    plain = propose(CROWDED, POLICY)
    assert [tp for tp in plain.recommended["c"]] == [t(0), t(3)]


def test_a_crowded_heavy_partition_holds_whatever_the_skew_and_the_lag_floor() -> None:
    # Peak-to-mean 1.2 (threshold 1.5), 500 records in all (floor 1,000): the skew trigger never holds, but
    # a falls behind on t-0 and t-1 whatever their lag now.
    mild = group({"a": [100, 100], "b": [150], "c": [150]})
    rec = run(mild, CROWDED_RATES)[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE and rec.isolated is not None
    assert rec.trigger.value < rec.trigger.threshold
    assert held(rec)["a"] == [0]
    assert run(mild, None) == [None, None, None]


def test_a_heavy_partition_already_alone_is_kept_alone_by_a_rebalance_made_for_other_reasons() -> None:
    # a holds t-0 alone (28/s, working off a backlog at 40/s); b is skewed with 4 partitions of 13/s and
    # 16,000 records of lag. Lag-sticky alone gives a t-2 beside t-0 (41/s); the isolating rebalance does not.
    snapshot = group({"a": [100], "b": [4000, 4000, 4000, 4000], "c": [0]})
    rates = figures([(28.0, 40.0, True)] + [(13.0, 10.0, True)] * 4 + [(13.0, 13.0, False)])
    assert propose(snapshot, POLICY).recommended["a"] == [t(0), t(2)]
    rec = run(snapshot, rates)[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE
    assert held(rec)["a"] == [0] and all(m.to_member != "a" for m in rec.moves)
    assert rec.isolated is not None and [p.partition for p in rec.isolated.partitions] == [0]


def test_a_heavy_partition_alone_on_a_group_without_skew_is_left_alone() -> None:
    alone = group({"a": [100], "b": [100], "c": [100]})
    rates = figures([(28.0, 40.0, True), (17.0, 17.0, False), (17.0, 17.0, False)])
    assert run(alone, rates) == [None, None, None]


def test_unknown_rates_or_no_throughput_isolate_nothing() -> None:
    # One rate unknown: no partition is judged heavy; the skew trigger gives the plain rebalance.
    unknown = {**CROWDED_RATES, t(3): PartitionThroughput(None, 17.0, False)}
    rec = run(CROWDED, unknown)[2]
    assert rec is not None and rec.isolated is None
    assert rec.members == run(CROWDED, None)[2].members  # type: ignore[union-attr]
    assert held(rec)["c"] == [0, 3]


def test_a_group_too_small_to_isolate_is_told_to_scale_instead() -> None:
    # One member holding both: no member left for the rest; it reads 40/s of 45/s.
    single = group({"a": [2000, 2000]})
    rec = run(single, figures([(28.0, 22.0, True), (17.0, 18.0, True)]))[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE and rec.isolated is None
    assert propose_isolating(single, POLICY, (), [t(0)]) is None


def test_a_rest_that_falls_behind_gets_scale_not_the_isolation() -> None:
    # t-0 is heavy on a; t-2 and t-3 are written at 38/s each: 121/s against 120/s of capacity.
    rates = figures([(28.0, 22.0, True), (17.0, 18.0, True), (38.0, 38.0, False), (38.0, 38.0, False)])
    rec = run(CROWDED, rates)[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE and rec.isolated is None and rec.moves == ()


def test_more_heavy_partitions_than_members_can_take_isolate_none() -> None:
    # a holds t-0 and t-1, b holds t-2: each is heavy beside any other, and 2 members cannot give 3 their own.
    snapshot = group({"a": [2000, 2000], "b": [10]})
    assert propose_isolating(snapshot, POLICY, (), [t(0), t(1), t(2)]) is None
    assert propose_isolating(snapshot, POLICY, (), [t(0), t(1)]) is None  # none left for t-2


def test_a_second_heavy_partition_of_one_member_goes_to_the_free_member_with_the_least_lag() -> None:
    snapshot = group({"a": [2000, 2000, 10], "b": [500], "c": [100], "d": [300]})
    proposal = propose_isolating(snapshot, POLICY, (), [t(1), t(0)])
    assert proposal is not None
    assert proposal.recommended["a"] == [t(0)]
    assert proposal.recommended["c"] == [t(1)], "c holds the least lag of the members holding no heavy partition"
    assert t(0) not in {move.partition for move in proposal.moves}
    assert sorted(proposal.recommended["b"] + proposal.recommended["d"]) == [t(2), t(3), t(4), t(5)]


def test_a_heavy_partition_on_a_hot_partitions_member_goes_elsewhere_and_the_hot_one_stays() -> None:
    snapshot = group({"a": [5000, 2000], "b": [10], "c": [10]})
    proposal = propose_isolating(snapshot, POLICY, [t(0)], [t(1)])
    assert proposal is not None
    assert t(0) in proposal.recommended["a"] and t(1) not in proposal.recommended["a"]
    [own] = [m for m, tps in proposal.recommended.items() if t(1) in tps]
    assert proposal.recommended[own] == [t(1)]
    assert all(move.partition != t(0) for move in proposal.moves)


def test_no_isolation_when_only_the_isolated_partitions_member_reads_a_topic() -> None:
    # a also reads topic `u`, which b and c do not subscribe to: its partition would have no member left.
    snapshot = group({"a": [2000, 2000], "b": [10], "c": [10]})
    a, *others = snapshot.assignment.members
    u0 = PartitionRef(topic="u", partition=0)
    a = a.model_copy(update={"topics": ("t", "u"), "partitions": (*a.partitions, u0)})
    two_topics = dataclasses.replace(
        snapshot,
        assignment=snapshot.assignment.model_copy(update={"members": (a, *others)}),
        partition_counts={"t": 4, "u": 1},
        lag={**snapshot.lag, u0.topic_partition: snapshot.lag[t(0)].model_copy(update={"topic": "u"})},
    )
    assert propose_isolating(two_topics, POLICY, (), [t(0)]) is None
    # Without `u`, the same group isolates t-0.
    assert propose_isolating(snapshot, POLICY, (), [t(0)]) is not None


def test_isolating_records_validate_read_back_without_the_new_field_and_have_their_own_id() -> None:
    rec = run(CROWDED, CROWDED_RATES)[2]
    plain = run(CROWDED, None)[2]
    assert rec is not None and plain is not None and rec.id != plain.id
    validator = Draft202012Validator(schemas()["recommendation.schema.json"])
    record = json.loads(rec.model_dump_json())
    assert not list(validator.iter_errors(record))
    assert Recommendation.model_validate(record) == rec
    earlier = json.loads(plain.model_dump_json())
    del earlier["isolated"]
    assert Recommendation.model_validate(earlier).isolated is None
    assert not list(validator.iter_errors(earlier))


def test_the_api_and_the_terminal_name_the_isolated_partition_its_rate_and_its_member() -> None:
    from rich.console import Console

    from kagent.core.api_records import group_detail, summarize
    from kagent.core.group_health import GroupStatus
    from kagent.core.heavy_partitions import heavy_partition_text
    from kagent.core.policy import LagUnit, SkewMetric
    from kagent.tools.terminal_views import recommendation_line, recommendation_view

    rec = run(CROWDED, CROWDED_RATES)[2]
    assert rec is not None and rec.isolated is not None
    text = heavy_partition_text(rec.isolated)
    assert text == (
        "heavy partition t-0 written at 28/s, alone on a "
        "(a member reads 40/s, less than 28/s plus the lightest other partition's 17/s)"
    )
    assert f"1 move, {text}" in recommendation_line(rec)
    console = Console(width=400, record=True)
    console.print(recommendation_view(rec, 20.0))
    assert text in console.export_text()

    summary = summarize(
        CROWDED,
        status=GroupStatus.WARN,
        skew=None,
        skew_metric=SkewMetric.PEAK_TO_MEAN,
        lag_unit=LagUnit.MESSAGES,
        min_total_lag=1000,
        state=None,
        incidents=(),
        worker="http://w1:6066",
    )
    detail = group_detail(summary, CROWDED, LagUnit.MESSAGES, rec, [], CROWDED_RATES)
    assert detail.recommendation is not None and detail.recommendation.isolated == rec.isolated


def test_the_incident_it_opens_says_it_isolates_the_partition_not_that_the_skew_crossed_the_threshold() -> None:
    from kagent.core.alert_payloads import incident_summary
    from kagent.core.group_health import group_status
    from kagent.core.incidents import IncidentAction, IncidentKind, IncidentObservation, IncidentsState, step
    from kagent.core.policy import LagUnit

    mild = group({"a": [100, 100], "b": [150], "c": [150]})
    rec = run(mild, CROWDED_RATES)[2]
    assert rec is not None and rec.isolated is not None
    observation = IncidentObservation(
        group="g",
        lag_unit=LagUnit.MESSAGES,
        member_lag={"a": 200.0, "b": 150.0, "c": 150.0},
        gone=False,
        skew=rec.skew_before,
        rearm_below=1.2,
        recommendation=rec,
        health=group_status({}, group_gone_or_empty=False),
    )
    _, [opened] = step(IncidentsState(group="g"), observation, 10.0)
    assert opened.action is IncidentAction.OPEN and opened.incident.kind is IncidentKind.LAG_SKEW
    assert opened.reason.startswith("heavy partition t-0 written at 28/s, alone on a")
    assert "moves 1 partitions to give it a member of its own" in opened.reason
    assert "at or above" not in opened.reason
    assert "skew 1.2 (peak-to-mean) below 1.5" in incident_summary(opened.incident)
