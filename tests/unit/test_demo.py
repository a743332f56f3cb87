"""The demo's rendering of recommendations."""

from __future__ import annotations

from kagent.core.events import PartitionRef
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import MemberRecommendation, PartitionMove, Recommendation, Trigger
from kagent.tools.demo import render, summary


def _recommendation(group: str, skew_before: float, skew_after: float, time: float) -> Recommendation:
    hot, cold = PartitionRef(topic="t", partition=0), PartitionRef(topic="t", partition=1)
    return Recommendation(
        id="0" * 32,
        time=time,
        group=group,
        generation=4,
        protocol="range",
        strategy="lag-sticky",
        lag_unit=LagUnit.MESSAGES,
        trigger=Trigger(
            metric=SkewMetric.PEAK_TO_MEAN,
            value=skew_before,
            threshold=1.5,
            evaluations_held=3,
            total_lag=1200,
            improvement=0.5,
        ),
        members=(
            MemberRecommendation(
                member_id="a",
                client_id="a",
                client_host="/h",
                current=(hot, cold),
                current_lag=1200,
                recommended=(hot,),
                recommended_lag=1000,
            ),
            MemberRecommendation(
                member_id="b",
                client_id="b",
                client_host="/h",
                current=(),
                current_lag=0,
                recommended=(cold,),
                recommended_lag=200,
            ),
        ),
        skew_before=skew_before,
        skew_after=skew_after,
        lower_bound=1000,
        moves=(PartitionMove(topic="t", partition=1, from_member="a", to_member="b", lag=200),),
        alternatives=(),
    )


def test_summary_says_what_changes() -> None:
    assert summary(_recommendation("billing", 2.0, 1.67, 100.0)) == (
        "recommendation for billing (generation 4, range -> lag-sticky): peak-to-mean 2.00 -> 1.67, "
        "1 moves, largest member lag 1200 -> 1000 messages"
    )


def test_render_lists_groups_by_name_with_aligned_columns() -> None:
    table = render(
        {"zeta": _recommendation("zeta", 2.0, 1.67, 100.0), "alpha": _recommendation("alpha", 3.0, 1.1, 90.0)}, 130.0
    )
    lines = table.splitlines()
    assert lines[0].split() == [
        "group",
        "gen",
        "skew",
        "now",
        "->",
        "after",
        "moves",
        "largest",
        "lag",
        "now",
        "->",
        "after",
        "age",
    ]
    assert [line.split()[0] for line in lines[2:]] == ["alpha", "zeta"]
    assert "3.00 -> 1.10" in lines[2] and lines[2].rstrip().endswith("40 s")
    assert len({line.index("->") for line in lines[2:]}) == 1


def test_render_says_when_nothing_arrived_yet() -> None:
    assert render({}, 0.0).splitlines()[-1] == "(no recommendation yet)"
