"""Rebalance or scale (`kagent.core.evaluation` with throughput), and the advice for KIP-848 groups.

Each group here holds partitions of topic `t` (see `tests.unit.test_evaluation.group`); the
throughput figures are what storage would hand the evaluation: per partition, the production rate,
the consumption rate and whether the group had lag at every commit of the window.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from aiokafka.structs import TopicPartition
from jsonschema import Draft202012Validator

from kagent.core.contracts import schemas
from kagent.core.evaluation import evaluate
from kagent.core.events import PartitionRef
from kagent.core.policy import EvaluationPolicy
from kagent.core.recommendation import Recommendation, RecommendationKind, propose
from kagent.core.snapshot import GroupSnapshot
from kagent.core.throughput import PartitionThroughput
from tests.unit.test_evaluation import BALANCED, POLICY, SKEWED, group


def figures(rates: Sequence[tuple[float, float, bool]]) -> dict[TopicPartition, PartitionThroughput]:
    """Partition i of `t`: (production rate, consumption rate, busy)."""
    return {TopicPartition("t", i): PartitionThroughput(p, c, busy) for i, (p, c, busy) in enumerate(rates)}


def every(snapshot: GroupSnapshot, rate: tuple[float, float, bool]) -> dict[TopicPartition, PartitionThroughput]:
    return figures([rate] * sum(snapshot.partition_counts.values()))


def run(
    snapshot: GroupSnapshot,
    throughput: Mapping[TopicPartition, PartitionThroughput] | None,
    policy: EvaluationPolicy = POLICY,
    times: Sequence[float] = (0, 5, 10),
) -> list[Recommendation | None]:
    state, results = None, []
    for now in times:
        state, recommendation, *_ = evaluate(snapshot, state, policy, now, throughput)
        results.append(recommendation)
    return results


def test_a_balanced_group_whose_producers_outrun_every_member_is_told_to_scale_after_the_hold() -> None:
    # 6 partitions each written at 100/s; 3 members, each reading 2 partitions at 50/s with lag throughout:
    # capacity 300/s against 600/s. Its skew is 1: no rebalance would ever be recommended.
    results = run(BALANCED, every(BALANCED, (100.0, 50.0, True)))
    assert [r is not None for r in results] == [False, False, True]
    rec = results[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE and rec.client_side
    assert rec.scale is not None
    # 600/s x 1.2 over a member's 100/s: 8 members, capped at the 6 partitions.
    assert (rec.scale.members, rec.scale.members_needed, rec.scale.partitions) == (3, 6, 6)
    assert (rec.scale.production_rate, rec.scale.capacity, rec.scale.member_capacity) == (600.0, 300.0, 100.0)
    assert rec.scale.headroom == -0.5
    assert rec.scale.window == POLICY.rate_window
    assert [m.member_id for m in rec.scale.member_rates] == ["a", "b", "c"]
    assert all(m.saturated and m.consumption_rate == 100.0 for m in rec.scale.member_rates)
    assert len(rec.scale.partition_rates) == 6
    # Nothing moves: each member keeps what it holds.
    assert rec.moves == () and all(m.recommended == m.current for m in rec.members)
    assert rec.skew_after == rec.skew_before


def test_a_skewed_group_that_cannot_keep_up_anyway_gets_scale_not_rebalance() -> None:
    # Each member reads 90/s over its 3 partitions; each partition is written at 50/s: one member could keep
    # up with any one of them (none is hot), but 450/s outruns the 270/s of all three.
    results = run(SKEWED, every(SKEWED, (50.0, 30.0, True)))
    rec = results[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE
    assert rec.scale is not None and rec.scale.members_needed > rec.scale.members


def test_a_skewed_group_with_capacity_to_spare_gets_the_rebalance() -> None:
    # Producers write 10/s per partition; one member works off a backlog at 200/s: no shortage of capacity.
    rates = figures([(10.0, 200.0, True)] * 3 + [(10.0, 10.0, False)] * 6)
    results = run(SKEWED, rates)
    rec = results[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE and rec.scale is None
    assert rec.moves


def test_the_scale_evidence_is_reported_on_every_evaluation_whether_or_not_it_sends() -> None:
    evaluation = evaluate(BALANCED, None, POLICY, 0.0, every(BALANCED, (100.0, 50.0, True)))
    assert evaluation.recommendation is None
    assert evaluation.scale is not None and evaluation.scale.members_needed == 6
    assert evaluate(BALANCED, None, POLICY, 0.0, every(BALANCED, (10.0, 50.0, True))).scale is None


def test_without_throughput_or_with_scale_off_only_the_skew_trigger_counts() -> None:
    falling_behind = every(BALANCED, (100.0, 50.0, True))
    assert run(BALANCED, None) == [None, None, None]
    off = dataclasses.replace(POLICY, scale_headroom=None)
    assert run(BALANCED, falling_behind, off) == [None, None, None]
    rec = run(SKEWED, every(SKEWED, (50.0, 30.0, True)), off)[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE


def test_unknown_rates_never_scale() -> None:
    unknown = every(BALANCED, (100.0, 50.0, True))
    unknown[TopicPartition("t", 0)] = PartitionThroughput(None, 50.0, True)
    assert run(BALANCED, unknown) == [None, None, None]


def test_a_scale_recommendation_disarms_the_group_like_a_rebalance() -> None:
    results = run(BALANCED, every(BALANCED, (100.0, 50.0, True)), times=(0, 5, 10, 15, 20))
    assert [r is not None for r in results] == [False, False, True, False, False]


def test_scale_ids_differ_from_rebalance_ids_and_name_the_count() -> None:
    proposal = propose(BALANCED, POLICY)
    scale = evaluate(BALANCED, None, POLICY, 0.0, every(BALANCED, (100.0, 50.0, True))).scale
    assert scale is not None
    fewer = scale.model_copy(update={"members_needed": 5})
    ids = {
        proposal.id,
        proposal.scale_recommendation(scale, 1.5, 3, 0.0).id,
        proposal.scale_recommendation(fewer, 1.5, 3, 0.0).id,
    }
    assert len(ids) == 3
    assert proposal.scale_recommendation(scale, 1.5, 3, 9.0).id == proposal.scale_recommendation(scale, 1.5, 3, 0.0).id


def kip_848(snapshot: GroupSnapshot, server_assignor: str | None) -> GroupSnapshot:
    assignment = snapshot.assignment.model_copy(
        update={"group_protocol": "consumer", "protocol": server_assignor, "leader": None}
    )
    return dataclasses.replace(snapshot, assignment=assignment)


def test_a_kip_848_groups_recommendation_is_not_client_side_and_names_the_better_server_assignor() -> None:
    # Members hold consecutive partitions, as range does: a, b, c hold t-0..2, t-3..5, t-6..8.
    rec = run(kip_848(SKEWED, "range"), None)[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE
    assert rec.client_side is False
    advice = rec.server_assignor
    assert advice is not None and advice.current == "range"
    assert set(advice.skew) == set(advice.largest_lag) == {"uniform", "range"}
    # Both balance counts, not lag: range hands each member its 3 consecutive partitions again, and uniform,
    # sticky, keeps them where they are (peak-to-mean 2.8 either way); on a tie, the broker's default.
    assert advice.skew == {"uniform": rec.skew_before, "range": rec.skew_before}
    assert advice.recommended == "uniform"


def test_range_is_recommended_when_it_gives_the_lower_skew_and_uniform_on_a_tie() -> None:
    # Lag on t-0..5: 1000, 10, 1000, 10, 10, 10. The members hold t-0 and t-2 (a), t-1 and t-3 (b), t-4 and
    # t-5 (c): counts are even, so uniform keeps that (a: 2000 of 2040); range's consecutive split gives
    # a and b one hot partition each.
    snapshot = kip_848(group({"a": [1000, 10], "b": [1000, 10], "c": [10, 10]}), None)
    a, b, c = snapshot.assignment.members
    a = a.model_copy(
        update={"partitions": (PartitionRef(topic="t", partition=0), PartitionRef(topic="t", partition=2))}
    )
    b = b.model_copy(
        update={"partitions": (PartitionRef(topic="t", partition=1), PartitionRef(topic="t", partition=3))}
    )
    interleaved = dataclasses.replace(
        snapshot, assignment=snapshot.assignment.model_copy(update={"members": (a, b, c)})
    )
    advice = propose(interleaved, POLICY).server_assignor_advice()
    assert advice.current is None
    assert advice.largest_lag == {"uniform": 2000.0, "range": 1010.0}
    assert advice.skew["range"] < advice.skew["uniform"]
    assert advice.recommended == "range"
    even = propose(kip_848(BALANCED, "uniform"), POLICY).server_assignor_advice()
    assert even.skew["range"] == even.skew["uniform"] and even.recommended == "uniform"


def test_classic_groups_have_no_server_assignor_advice() -> None:
    rec = run(SKEWED, None)[2]
    assert rec is not None and rec.client_side and rec.server_assignor is None


def test_a_recommendation_of_the_earlier_shape_reads_as_a_client_side_rebalance() -> None:
    rec = run(SKEWED, None)[2]
    assert rec is not None
    earlier = json.loads(rec.model_dump_json())
    for added in ("kind", "scale", "client_side", "server_assignor"):
        del earlier[added]
    read = Recommendation.model_validate(earlier)
    assert (read.kind, read.scale, read.client_side, read.server_assignor) == (
        RecommendationKind.REBALANCE,
        None,
        True,
        None,
    )
    validator = Draft202012Validator(schemas()["recommendation.schema.json"])
    assert not list(validator.iter_errors(earlier))
    # A later version's extra field is read past, and the schema accepts it.
    later = {**json.loads(rec.model_dump_json()), "added_in_a_later_version": 1}
    assert Recommendation.model_validate(later).id == rec.id
    assert not list(validator.iter_errors(later))


def test_scale_recommendations_validate_against_the_schema() -> None:
    rec = run(BALANCED, every(BALANCED, (100.0, 50.0, True)))[2]
    assert rec is not None
    validator = Draft202012Validator(schemas()["recommendation.schema.json"])
    assert not list(validator.iter_errors(json.loads(rec.model_dump_json())))


def test_a_scale_recommendation_says_so_in_its_incident_and_on_the_terminal() -> None:
    from kagent.core.incidents import SkewDetail, _skew_summary
    from kagent.tools.terminal_views import recommendation_line

    rec = run(BALANCED, every(BALANCED, (100.0, 50.0, True)))[2]
    assert rec is not None
    assert SkewDetail.of(rec).members_needed == 6
    assert _skew_summary(SkewDetail.of(rec), rec).endswith("asks for 6 members instead of 3")
    assert "scale 3 -> 6 members" in recommendation_line(rec)
    rebalance = run(SKEWED, None)[2]
    assert rebalance is not None and SkewDetail.of(rebalance).members_needed is None
    assert "moves" in recommendation_line(rebalance)
