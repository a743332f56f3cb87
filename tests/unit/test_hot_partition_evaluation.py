"""Hot partitions in `kagent.core.evaluation`: a ``hot-partition`` recommendation, or a rebalance of the rest.

Groups hold partitions of topic `t` (see `tests.unit.test_evaluation.group`), members holding consecutive
partitions; throughput figures are (production rate, consumption rate, busy) per partition, as storage
hands them to the evaluation.
"""

from __future__ import annotations

import json

from aiokafka.structs import TopicPartition
from jsonschema import Draft202012Validator

from kagent.core.contracts import schemas
from kagent.core.evaluation import evaluate
from kagent.core.recommendation import HOT_PARTITION_REMEDY, Recommendation, RecommendationKind
from kagent.core.throughput import PartitionThroughput
from tests.unit.test_evaluation import POLICY, group
from tests.unit.test_rebalance_or_scale import figures, run

# a holds t-0 alone: written at 300/s, a reads it at 100/s with lag throughout. b and c hold t-1..t-4, each
# written and read at 10/s, keeping up. Before hot partitions were judged, this group was told to scale (it
# reads 300/s of 340/s written), which would only add idle members: t-0 outruns any one of them.
HOT_ALONE = group({"a": [5000], "b": [10, 10], "c": [10, 10]})
HOT_ALONE_RATES = figures([(300.0, 100.0, True)] + [(10.0, 10.0, False)] * 4)

# a holds t-0 (hot: 300/s written, 60/s read) and t-1, t-2, starved behind it (3,000 lag each, 20/s read);
# b and c keep up with theirs. The rest of the group is skewed: a rebalance of it helps, t-0 stays on a.
HOT_AND_SKEW = group({"a": [5000, 3000, 3000], "b": [100, 100], "c": [100, 100]})
HOT_AND_SKEW_RATES = figures([(300.0, 60.0, True), (10.0, 20.0, True), (10.0, 20.0, True)] + [(10.0, 10.0, False)] * 4)


def test_a_group_whose_lag_is_a_hot_partitions_alone_is_told_so_and_nothing_moves() -> None:
    results = run(HOT_ALONE, HOT_ALONE_RATES)
    assert [r is not None for r in results] == [False, False, True]
    rec = results[2]
    assert rec is not None and rec.kind is RecommendationKind.HOT_PARTITION
    assert rec.scale is None
    assert rec.moves == () and all(m.recommended == m.current for m in rec.members)
    assert rec.hot is not None
    [hot] = rec.hot.partitions
    assert (hot.topic, hot.partition, hot.member_id) == ("t", 0, "a")
    assert (hot.production_rate, hot.member_capacity, rec.hot.best_capacity) == (300.0, 100.0, 100.0)
    assert rec.hot.window == POLICY.rate_window
    assert rec.hot.remedy == HOT_PARTITION_REMEDY and "more partitions" in rec.hot.remedy


def test_the_hot_partition_is_reported_on_every_evaluation_and_is_not_a_scale() -> None:
    evaluation = evaluate(HOT_ALONE, None, POLICY, 0.0, HOT_ALONE_RATES)
    assert evaluation.recommendation is None
    assert evaluation.hot is not None and [p.partition for p in evaluation.hot.partitions] == [0]
    assert evaluation.scale is None


def test_a_skew_with_other_causes_gets_a_rebalance_of_the_rest_that_never_moves_the_hot_partition() -> None:
    rec = run(HOT_AND_SKEW, HOT_AND_SKEW_RATES)[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE
    assert rec.hot is not None and [(p.partition, p.member_id) for p in rec.hot.partitions] == [(0, "a")]
    assert rec.moves, "the starved partitions are moved off a"
    assert all(move.partition != 0 for move in rec.moves)
    a = next(m for m in rec.members if m.member_id == "a")
    assert any(ref.partition == 0 for ref in a.recommended)
    # The figures are of the rest: t-0's 5,000 records are left out of every member's lag.
    assert a.current_lag == 6000.0
    assert rec.trigger.total_lag == 6400.0
    assert rec.skew_after < rec.skew_before


def test_a_partition_within_the_best_members_capacity_is_not_hot() -> None:
    # t-0 written at 90/s: a reads 100/s, so one member can keep up with it.
    within = figures([(90.0, 100.0, True)] + [(10.0, 10.0, False)] * 4)
    assert evaluate(HOT_ALONE, None, POLICY, 0.0, within).hot is None
    assert all(r is None or r.kind is not RecommendationKind.HOT_PARTITION for r in run(HOT_ALONE, within))


def test_unknown_rates_never_make_a_partition_hot() -> None:
    unknown = {**HOT_ALONE_RATES, TopicPartition("t", 0): PartitionThroughput(None, 100.0, True)}
    assert evaluate(HOT_ALONE, None, POLICY, 0.0, unknown).hot is None
    assert run(HOT_ALONE, unknown) == [None, None, None]


def test_without_throughput_no_partition_is_judged_hot() -> None:
    assert evaluate(HOT_ALONE, None, POLICY, 0.0).hot is None
    assert run(HOT_ALONE, None) == [None, None, None]


def test_hot_partition_ids_differ_from_the_others_and_stay_the_same_for_the_same_partitions() -> None:
    first = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    later = run(HOT_ALONE, HOT_ALONE_RATES, times=(100, 105, 110))[2]
    assert first is not None and later is not None and first.id == later.id
    skewed = run(HOT_AND_SKEW, HOT_AND_SKEW_RATES)[2]
    assert skewed is not None and skewed.id != first.id


def test_hot_partition_recommendations_validate_and_read_back_without_the_new_field() -> None:
    rec = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    assert rec is not None
    validator = Draft202012Validator(schemas()["recommendation.schema.json"])
    record = json.loads(rec.model_dump_json())
    assert not list(validator.iter_errors(record))
    assert Recommendation.model_validate(record) == rec
    rebalance = run(HOT_AND_SKEW, HOT_AND_SKEW_RATES)[2]
    assert rebalance is not None
    earlier = json.loads(rebalance.model_dump_json())
    del earlier["hot"]
    assert Recommendation.model_validate(earlier).hot is None
    assert not list(validator.iter_errors(earlier))


def test_the_api_the_terminal_and_every_text_name_the_partition_its_rate_and_the_fastest_members() -> None:
    from kagent.core.api_records import group_detail, summarize
    from kagent.core.group_health import GroupStatus
    from kagent.core.hot_partitions import hot_partition_text
    from kagent.core.policy import LagUnit, SkewMetric
    from kagent.tools.terminal_views import recommendation_line

    rec = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    assert rec is not None and rec.hot is not None
    text = hot_partition_text(rec.hot)
    assert text == "hot partition t-0 written at 300/s (its member a reads 100/s); the fastest member reads 100/s"
    assert f"no moves: {text}" in recommendation_line(rec)
    rebalance = run(HOT_AND_SKEW, HOT_AND_SKEW_RATES)[2]
    assert rebalance is not None
    line = recommendation_line(rebalance)
    assert f"{len(rebalance.moves)} move" in line and "t-0 written at 300/s" in line and "(left where it is)" in line

    summary = summarize(
        HOT_ALONE,
        status=GroupStatus.WARN,
        skew=None,
        skew_metric=SkewMetric.PEAK_TO_MEAN,
        lag_unit=LagUnit.MESSAGES,
        min_total_lag=1000,
        state=None,
        incidents=(),
        worker="http://w1:6066",
    )
    detail = group_detail(summary, HOT_ALONE, LagUnit.MESSAGES, rec, [], HOT_ALONE_RATES)
    assert detail.recommendation is not None
    assert detail.recommendation.kind is RecommendationKind.HOT_PARTITION
    assert detail.recommendation.hot == rec.hot and detail.recommendation.moves == ()


def test_a_hot_partition_recommendation_opens_a_hot_partition_incident_alerted_as_kagent_hot_partition() -> None:
    from kagent.core.alert_payloads import alertmanager_alert, description, incident_summary
    from kagent.core.group_health import group_status
    from kagent.core.incidents import IncidentAction, IncidentKind, IncidentObservation, IncidentsState, step
    from kagent.core.policy import LagUnit

    rec = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    assert rec is not None

    def observe(recommendation: Recommendation | None, hot: bool, skew: float | None = 2.9) -> IncidentObservation:
        return IncidentObservation(
            group="g",
            lag_unit=LagUnit.MESSAGES,
            member_lag={"a": 5000.0, "b": 20.0, "c": 20.0},
            gone=False,
            skew=skew,
            rearm_below=1.2,
            recommendation=recommendation,
            health=group_status({}, group_gone_or_empty=False),
            hot=hot,
        )

    state, [opened] = step(IncidentsState(group="g"), observe(rec, True), 10.0)
    incident = opened.incident
    assert opened.action is IncidentAction.OPEN and incident.kind is IncidentKind.HOT_PARTITION
    assert incident.skew is not None and incident.skew.hot == rec.hot
    assert "hot partition t-0 written at 300/s" in opened.reason and "moves nothing" in opened.reason
    alert = alertmanager_alert(opened, cluster="c", web_url="http://kagent", now=10.0, ends_after=300.0)
    assert alert["labels"]["alertname"] == "KagentHotPartition"
    assert alert["labels"]["kind"] == "hot-partition" and alert["labels"]["severity"] == "warning"
    assert "the fastest member reads 100/s" in alert["annotations"]["hot_partitions"]
    assert HOT_PARTITION_REMEDY in description(incident)
    assert "t-0 written at 300/s" in incident_summary(incident)
    # Open while the partition is hot, or while the lag is not measured; resolved once no partition is hot.
    assert step(state, observe(None, True), 20.0) == (state, [])
    assert step(state, observe(None, False, skew=None), 20.0) == (state, [])
    _, [resolved] = step(state, observe(None, False), 30.0)
    assert resolved.action is IncidentAction.RESOLVE and resolved.incident.id == incident.id


def test_a_rest_that_falls_behind_too_gets_scale_judged_without_the_hot_partition() -> None:
    # t-0 hot as above; b and c read 80/s each over t-1..t-4, written at 60/s each: 240/s with 20 % headroom
    # is 288/s against 240/s of capacity (a, holding only the hot partition, counts the typical 80/s).
    snapshot = group({"a": [5000], "b": [3000, 3000], "c": [3000, 3000]})
    rates = figures([(300.0, 100.0, True)] + [(60.0, 40.0, True)] * 4)
    rec = run(snapshot, rates)[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE
    assert rec.hot is not None and [p.partition for p in rec.hot.partitions] == [0]
    assert rec.scale is not None
    assert (rec.scale.partitions, rec.scale.production_rate, rec.scale.capacity) == (4, 240.0, 240.0)
    assert rec.scale.members_needed == 4 and rec.moves == ()


def test_kagent_recommendations_show_says_what_it_asks_for_and_the_remedy() -> None:
    from rich.console import Console

    from kagent.tools.terminal_views import recommendation_view

    rec = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    assert rec is not None
    console = Console(width=400, record=True)
    console.print(recommendation_view(rec, 20.0))
    shown = console.export_text()
    assert "no moves: hot partition t-0 written at 300/s" in shown
    assert HOT_PARTITION_REMEDY in shown
