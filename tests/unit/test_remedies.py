"""`kagent.core.remedies`: what each option a recommendation weighed would give, at the edges of what is known.

Direct calls name partitions of topic `t` by number; throughput figures are (production rate, consumption
rate, busy) per partition, as storage hands them to the evaluation. The evaluation's cases reuse the groups of
`tests.unit.test_evaluation` and `tests.unit.test_hot_partition_evaluation`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from jsonschema import Draft202012Validator
from rich.console import Console

from kagent.core.api_records import group_detail, summarize
from kagent.core.contracts import schemas
from kagent.core.drain_time import Drain, DrainState, member_drain, slowest
from kagent.core.events import PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.recommendation import Recommendation, RecommendationKind
from kagent.core.remedies import Remedy, RemedyKind, remedies, remedy_drain_text, remedy_text
from kagent.core.throughput import PartitionThroughput
from kagent.tools.terminal_views import group_view, recommendation_view
from tests.unit.test_evaluation import BALANCED, POLICY, SKEWED, group
from tests.unit.test_hot_partition_evaluation import HOT_ALONE, HOT_ALONE_RATES, HOT_AND_SKEW, HOT_AND_SKEW_RATES
from tests.unit.test_rebalance_or_scale import every, figures, run


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition("t", p) for p in partitions]


def lags(*values: int | None) -> dict[TopicPartition, int | None]:
    return {TopicPartition("t", p): lag for p, lag in enumerate(values)}


def catching_up(seconds: float) -> Drain:
    return Drain(state=DrainState.CATCHING_UP, seconds=seconds)


def falling_behind(rate: float) -> Drain:
    return Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=rate)


UNKNOWN = Drain()

# a holds t-0 and t-1 (3,000 records behind each), b holds t-2 (none behind); the rebalance gives t-1 to b.
CURRENT = {"a": tps(0, 1), "b": tps(2)}
MOVED = {"a": tps(0), "b": tps(1, 2)}


def rebalance_of(
    throughput: dict[TopicPartition, PartitionThroughput] | None,
    offset_lags: dict[TopicPartition, int | None] | None = None,
    recommended: dict[str, list[TopicPartition]] | None = None,
) -> Remedy:
    [only] = remedies(
        current=CURRENT,
        recommended=MOVED if recommended is None else recommended,
        offset_lags=lags(3000, 3000, 0) if offset_lags is None else offset_lags,
        throughput=throughput,
        skew_now=2.0,
        skew_after=1.0,
        chosen=RemedyKind.REBALANCE,
    )
    return only


def test_a_rebalance_between_measured_members_drains_at_their_paces_less_what_they_would_hold() -> None:
    # a reads 100/s with lag throughout (50/s on each of its two); b reads t-2 at 50/s, 1,000 behind throughout.
    rates = figures([(10.0, 50.0, True), (10.0, 50.0, True), (10.0, 50.0, True)])
    remedy = rebalance_of(rates, lags(3000, 3000, 1000))
    assert (remedy.kind, remedy.chosen, remedy.members, remedy.skew) == (RemedyKind.REBALANCE, True, 2, 1.0)
    # a: 3,000 at 100 - 10 = 33 s; b: 3,000 + 1,000 at 50 - 20 = 133 s. The group catches up with b.
    assert remedy.drain == catching_up(4000 / 30)
    assert not remedy.estimated
    assert remedy.partitions == ()


def test_a_member_not_saturated_is_taken_at_the_typical_members_pace_and_its_time_marked_estimated() -> None:
    # b keeps up with t-2 (10/s of 10/s, no lag): its pace is only shown to be at least 10/s. The group's one
    # saturated member reads 100/s, so b is taken at 100/s: t-1's 3,000 at 100 - 20 = 37.5 s, an estimate.
    rates = figures([(10.0, 50.0, True), (10.0, 50.0, True), (10.0, 10.0, False)])
    remedy = rebalance_of(rates)
    assert remedy.drain == catching_up(3000 / 80)
    assert remedy.estimated


def test_with_no_member_saturated_a_pace_is_a_lower_bound_a_time_from_it_the_most_and_a_shortfall_unknown() -> None:
    # Nobody had lag throughout: no pace is measured and there is no typical one. b reads t-2 at 40/s: given
    # t-1 too (20/s written), it catches up on 3,000 in at most 3,000 / 20 = 150 s.
    fast = figures([(10.0, 60.0, False), (10.0, 60.0, False), (10.0, 40.0, False)])
    remedy = rebalance_of(fast)
    assert remedy.drain == catching_up(150.0) and remedy.estimated
    # b reads 10/s, written 20/s under the rebalance: it may read faster than it had to. Unknown, never
    # "falling behind" and never 0.
    slow = figures([(10.0, 60.0, False), (10.0, 60.0, False), (10.0, 10.0, False)])
    remedy = rebalance_of(slow)
    assert remedy.drain == UNKNOWN and not remedy.estimated


def test_unknown_rates_or_lags_give_an_unknown_drain_and_the_skew_still_stands() -> None:
    rates = {**figures([(10.0, 50.0, True)] * 3), TopicPartition("t", 1): PartitionThroughput(None, 50.0, True)}
    remedy = rebalance_of(rates, lags(3000, 3000, 1000))
    assert remedy.drain == UNKNOWN and remedy.skew == 1.0 and not remedy.estimated
    measured = figures([(10.0, 50.0, True)] * 3)
    assert rebalance_of(measured, lags(3000, None, 1000)).drain == UNKNOWN
    assert rebalance_of({tp: f for tp, f in measured.items() if tp.partition != 1}, lags(3000, 3000, 1000)).drain == (
        UNKNOWN
    )


def test_without_throughput_the_rebalance_says_its_skew_and_an_unknown_drain_unless_nothing_lags() -> None:
    remedy = rebalance_of(None)
    assert (remedy.skew, remedy.drain, remedy.estimated) == (1.0, UNKNOWN, False)
    assert rebalance_of(None, lags(0, 0, 0)).drain == Drain(state=DrainState.CAUGHT_UP, seconds=0.0)
    [only] = next(r for r in run(SKEWED, None) if r is not None).remedies
    assert only.kind is RemedyKind.REBALANCE and only.chosen and only.skew is not None and only.drain == UNKNOWN


def test_a_member_whose_partitions_do_not_change_drains_as_it_does_today() -> None:
    # b keeps up with t-2 and is not saturated: today it works off its 30 records in flight at its 10/s (the
    # drain_time module's rule 5), which a prediction at a pace it never showed could not say.
    rates = figures([(10.0, 50.0, True), (10.0, 50.0, True), (10.0, 10.0, False)])
    remedy = rebalance_of(rates, lags(3000, 3000, 30), recommended=CURRENT)
    today = slowest(
        [
            member_drain(6000, [rates[TopicPartition("t", 0)], rates[TopicPartition("t", 1)]]),
            member_drain(30, [rates[TopicPartition("t", 2)]]),
        ]
    )
    assert remedy.drain == today == catching_up(6000 / 80)
    assert not remedy.estimated


def test_a_hot_partitions_group_is_told_no_assignment_helps_and_the_rebalance_falls_behind_on_it() -> None:
    rec = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    assert rec is not None and rec.kind is RecommendationKind.HOT_PARTITION
    rebalance, hot = rec.remedies
    assert (rebalance.kind, rebalance.chosen, hot.kind, hot.chosen) == (
        RemedyKind.REBALANCE,
        False,
        RemedyKind.HOT_PARTITION,
        True,
    )
    # a holds t-0 whatever is moved, written at 300/s and read at 100/s: the rebalance falls behind at 200/s,
    # as the group does today (nothing moves).
    assert rebalance.drain == hot.drain == falling_behind(200.0)
    assert not rebalance.estimated and not hot.estimated
    assert hot.partitions == (PartitionRef(topic="t", partition=0),)
    assert hot.skew == rec.skew_before and rebalance.skew is not None
    assert remedy_text(hot) == "no assignment helps: partition t-0 is hot"


def test_a_rebalance_of_the_rest_is_chosen_beside_the_hot_partition_it_leaves_falling_behind() -> None:
    rec = run(HOT_AND_SKEW, HOT_AND_SKEW_RATES)[2]
    assert rec is not None and rec.kind is RecommendationKind.REBALANCE
    rebalance, hot = rec.remedies
    assert rebalance.chosen and not hot.chosen and rebalance.skew == rec.skew_after
    # The member that keeps t-0 (300/s) reads 100/s, a measured pace: it falls behind whatever else it holds.
    assert rebalance.drain.state is DrainState.FALLING_BEHIND
    assert (rebalance.drain.falling_behind_rate or 0.0) >= 200.0
    assert not rebalance.estimated, "the shortfall is the measured member's"


def test_a_scale_drains_at_the_members_needed_pooled_at_the_typical_capacity() -> None:
    # Each member reads 90/s of the 150/s written to its three partitions: 6 members needed (450/s x 1.2 over
    # 90/s). The 3 it has at 90/s and 3 more at 90/s read 540/s: 9,600 records in 9,600 / 90 = 107 s.
    rec = run(SKEWED, every(SKEWED, (50.0, 30.0, True)))[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE and rec.scale is not None
    rebalance, scale = rec.remedies
    assert (scale.kind, scale.chosen, scale.members, scale.skew) == (RemedyKind.SCALE, True, 6, None)
    assert scale.members == rec.scale.members_needed
    assert scale.drain == catching_up(9600 / 90) and scale.estimated
    assert not rebalance.chosen and rebalance.drain.state is DrainState.FALLING_BEHIND
    assert remedy_text(scale) == "scale to 6 members" and remedy_drain_text(scale) == "catches up in 2 min (estimated)"


def test_a_scale_capped_at_one_member_a_partition_can_still_only_keep_pace() -> None:
    # Six partitions each written at 100/s, each member reads 100/s: even one member a partition only keeps
    # pace (600/s of 600/s), so the lag never closes. The rebalance of the three members falls behind at 300/s.
    rec = run(BALANCED, every(BALANCED, (100.0, 50.0, True)))[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE
    rebalance, scale = rec.remedies
    assert scale.members == 6 and scale.drain == falling_behind(0.0) and scale.estimated
    assert remedy_drain_text(scale) == "not catching up (estimated)"
    assert rebalance.drain == falling_behind(300.0) and not rebalance.estimated


def test_a_scale_beside_a_hot_partition_falls_behind_on_it_whatever_the_count() -> None:
    # t-0 hot (300/s, its member reads 100/s); the rest (4 x 60/s) falls behind too: scale to 4.
    snapshot = group({"a": [5000], "b": [3000, 3000], "c": [3000, 3000]})
    rates = figures([(300.0, 100.0, True)] + [(60.0, 40.0, True)] * 4)
    rec = run(snapshot, rates)[2]
    assert rec is not None and rec.kind is RecommendationKind.SCALE
    assert [r.kind for r in rec.remedies] == [RemedyKind.REBALANCE, RemedyKind.SCALE, RemedyKind.HOT_PARTITION]
    assert [r.chosen for r in rec.remedies] == [False, True, False]
    scale = rec.remedies[1]
    # The rest alone would catch up (12,000 records at 320/s of capacity less 240/s: 150 s); t-0 alone on its
    # member still falls 200/s behind, measured.
    assert scale.members == 4 and scale.drain == falling_behind(200.0) and not scale.estimated
    assert rec.remedies[2].partitions == (PartitionRef(topic="t", partition=0),)


def test_a_chosen_option_missing_from_the_options_is_an_error() -> None:
    arguments: dict[str, Any] = {
        "current": CURRENT,
        "recommended": MOVED,
        "offset_lags": lags(3000, 3000, 0),
        "throughput": None,
        "skew_now": 2.0,
        "skew_after": 1.0,
    }
    with pytest.raises(ValueError, match="'scale' is not among the options"):
        remedies(**arguments, chosen=RemedyKind.SCALE)
    with pytest.raises(ValueError, match="'hot-partition' is not among the options"):
        remedies(**arguments, chosen=RemedyKind.HOT_PARTITION)


def test_remedies_validate_against_the_schema_and_a_record_without_them_still_reads() -> None:
    rec = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    assert rec is not None
    record = json.loads(rec.model_dump_json())
    assert [r["kind"] for r in record["remedies"]] == ["rebalance", "hot-partition"]
    assert record["remedies"][0]["drain"] == {"state": "falling-behind", "seconds": None, "falling_behind_rate": 200.0}
    validator = Draft202012Validator(schemas()["recommendation.schema.json"])
    assert not list(validator.iter_errors(record))
    assert Recommendation.model_validate(record) == rec
    del record["remedies"]
    assert not list(validator.iter_errors(record))
    assert Recommendation.model_validate(record).remedies == ()


def test_the_api_and_the_terminal_show_the_comparison() -> None:
    rec = run(HOT_ALONE, HOT_ALONE_RATES)[2]
    assert rec is not None
    summary = summarize(
        HOT_ALONE,
        status=GroupStatus.WARN,
        skew=rec.skew_before,
        skew_metric=POLICY.skew_metric,
        lag_unit=POLICY.lag_unit,
        min_total_lag=POLICY.min_total_lag,
        state=None,
        incidents=(),
        worker="http://w1:6066",
    )
    detail = group_detail(summary, HOT_ALONE, POLICY.lag_unit, rec, [], HOT_ALONE_RATES)
    assert detail.recommendation is not None and detail.recommendation.remedies == rec.remedies

    def shown(renderable: object) -> list[str]:
        console = Console(width=300, record=True)
        console.print(renderable)
        return [line.rstrip() for line in console.export_text().splitlines()]

    for lines, title in (
        (shown(recommendation_view(rec, rec.time + 5)), "remedies compared"),
        (shown(group_view(detail, rec.time + 5)), "remedies of the latest recommendation"),
    ):
        start = lines.index(title)
        [rebalance] = [line for line in lines[start:] if "rebalance the 3 members" in line]
        [hot] = [line for line in lines[start:] if "no assignment helps: partition t-0 is hot" in line]
        assert "1.50" in rebalance and "falling behind at 200/s" in rebalance and "chosen" not in rebalance
        assert "2.98" in hot and "falling behind at 200/s" in hot and hot.rstrip(" │").endswith("chosen")
