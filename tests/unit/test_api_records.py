"""The API's records: a group's summary and page from a snapshot, paging across workers, the skew history,
the recent-recommendations table value, and the OpenAPI description generated from them."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonschema
import pytest
from aiokafka.structs import TopicPartition

from kagent.core.api_records import (
    GroupSort,
    GroupSummary,
    group_detail,
    newest_recommendations,
    summarize,
)
from kagent.core.drain_time import Drain, DrainState
from kagent.core.evaluation import EvaluationState
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.group_listing import listed
from kagent.core.openapi import openapi_document
from kagent.core.policy import EvaluationPolicy, LagUnit, SkewMetric
from kagent.core.recommendation import MemberRecommendation, RecentRecommendations
from kagent.core.snapshot import GroupSnapshot, LagFlag, PartitionLag
from kagent.core.throughput import PartitionThroughput
from kagent.worker.group_overview import GroupOverview, SkewHistory
from tests.support.incidents import recommendation

NOW = 1_800_000_000.0
POLICY = EvaluationPolicy(
    lag_unit=LagUnit.MESSAGES,
    skew_metric=SkewMetric.PEAK_TO_MEAN,
    skew_threshold=1.5,
    min_total_lag=0,
    min_improvement=0.1,
    hold_evaluations=1,
    hysteresis=0.8,
    cooldown=0.0,
    strategy="lag-sticky",
)


def lag(partition: int, committed: int | None, log_end: int, time_lag: float | None) -> PartitionLag:
    """A measured partition; without a commit, records wait and its lag is unknown (an estimate)."""
    return PartitionLag(
        group="g",
        topic="t",
        partition=partition,
        committed=committed,
        log_start=0,
        log_end=log_end,
        offset_lag=None if committed is None else log_end - committed,
        estimated_lag=log_end if committed is None else None,
        time_lag=time_lag,
        flags=(LagFlag.NO_COMMIT,) if committed is None else (),
        polled_at=NOW - 1,
    )


def member(member_id: str, *partitions: int) -> MemberAssignment:
    return MemberAssignment(
        member_id=member_id,
        client_id=f"client-{member_id}",
        client_host="/10.0.0.1",
        topics=("t",),
        partitions=tuple(PartitionRef(topic="t", partition=p) for p in partitions),
    )


SNAPSHOT = GroupSnapshot(
    assignment=GroupAssigned(
        group="g", generation=4, protocol="range", leader="a", members=(member("a", 0, 1), member("b", 2, 3))
    ),
    partition_counts={"t": 4},
    lag={
        TopicPartition("t", 0): lag(0, 0, 1000, 20.0),
        TopicPartition("t", 1): lag(1, 100, 600, None),  # records wait, time lag unknown
        TopicPartition("t", 2): lag(2, 50, 50, None),  # nothing waits: 0 s
        TopicPartition("t", 3): lag(3, None, 70, None),  # no commit: left out of the aggregates
    },
    taken_at=NOW,
)


def summary_of(snapshot: GroupSnapshot = SNAPSHOT, **changes: object) -> GroupSummary:
    made = summarize(
        snapshot,
        status=GroupStatus.WARN,
        skew=1.5,
        skew_metric=SkewMetric.PEAK_TO_MEAN,
        lag_unit=LagUnit.MESSAGES,
        min_total_lag=1000,
        state=EvaluationState(group="g", last_recommendation_id="r1", last_recommendation_at=NOW - 5),
        incidents=(),
        worker="http://w1:6066",
    )
    return made.model_copy(update=changes)


def test_a_summary_adds_up_the_measured_partitions_as_kafka_lag_exporter_does() -> None:
    summary = summary_of()
    assert (summary.state, summary.generation, summary.protocol, summary.members) == ("Stable", 4, "range", 2)
    assert (summary.partitions, summary.partitions_unknown) == (4, 1)
    assert summary.total_lag == 1500 and summary.max_lag == 1000  # partition 3 has no commit: unknown
    assert summary.total_lag_seconds == 20.0 and summary.max_lag_seconds == 20.0  # unknown left out; idle is 0
    assert (summary.last_recommendation_id, summary.evaluated_at, summary.worker) == ("r1", NOW, "http://w1:6066")
    assert summary.min_total_lag == 1000  # the trigger's minimum, so a page can tell a skew over too little lag


def test_a_group_without_members_is_empty_and_one_with_nothing_measured_has_no_figures() -> None:
    empty = GroupSnapshot(
        assignment=GroupAssigned(group="g", generation=5, protocol=None, leader=None, members=()),
        partition_counts={"t": 4},
        lag={TopicPartition("t", 3): lag(3, None, 70, None)},
        taken_at=NOW,
    )
    summary = summary_of(empty)
    assert summary.state == "Empty" and summary.members == 0 and summary.generation == 5
    assert summary.total_lag is None and summary.max_lag is None and summary.max_lag_seconds is None
    assert summary.partitions_unknown == 1


def test_a_group_known_only_by_its_commits_has_an_unknown_state_and_generation() -> None:
    undescribed = GroupSnapshot(
        assignment=GroupAssigned(group="g", generation=-1, protocol=None, leader=None, members=()),
        partition_counts={},
        lag={TopicPartition("t", 0): lag(0, 10, 70, 3.0)},
        taken_at=NOW,
        described=False,
    )
    summary = summary_of(undescribed)
    assert (summary.state, summary.generation, summary.total_lag) == ("Unknown", None, 60)
    detail = group_detail(summary, undescribed, LagUnit.MESSAGES, None, [], {})
    assert detail.members == ()
    assert detail.unassigned is not None
    assert (detail.unassigned.member_id, detail.unassigned.offset_lag, detail.unassigned.lag) == ("unknown", 60, 60)
    assert [p.member_id for p in detail.partitions] == [None]


def test_members_whose_assignment_is_unknown_hold_no_known_partition_and_their_group_reads_on_unknown() -> None:
    """What the admin-api source knows of a group on a broker that describes no assignment (Tansu): its
    members, and their partitions unknown. Neither member is shown holding nothing with lag 0: their
    partitions and lag are null, and every partition with its lag is on the unknown member."""
    untold = SNAPSHOT.assignment.model_copy(
        update={"members": tuple(m.model_copy(update={"partitions": None}) for m in SNAPSHOT.assignment.members)}
    )
    snapshot = dataclasses.replace(SNAPSHOT, assignment=untold)
    summary = summary_of(snapshot, skew=None)
    detail = group_detail(summary, snapshot, LagUnit.MESSAGES, None, [], {})
    assert [(m.member_id, m.partitions, m.offset_lag, m.lag, m.time_lag) for m in detail.members] == [
        ("a", None, None, None, None),
        ("b", None, None, None, None),
    ]
    assert all(m.drain.state is DrainState.UNKNOWN for m in detail.members)
    assert detail.unassigned is not None
    assert [p.partition for p in detail.unassigned.partitions or ()] == [0, 1, 2, 3]
    assert detail.unassigned.offset_lag is None  # partition 3 has no commit: unknown, as anywhere
    assert [(p.partition, p.member_id, p.offset_lag) for p in detail.partitions] == [
        (0, None, 1000),
        (1, None, 500),
        (2, None, 0),
        (3, None, None),
    ]
    assert (summary.state, summary.members, summary.total_lag) == ("Stable", 2, 1500)


def test_the_detail_shows_each_members_lag_now_and_under_the_recommendation() -> None:
    latest = recommendation("r1", time=NOW - 5, group="g").model_copy(
        update={
            "generation": 4,
            "members": (
                MemberRecommendation(
                    member_id="a",
                    client_id="client-a",
                    client_host="/10.0.0.1",
                    current=(PartitionRef(topic="t", partition=0), PartitionRef(topic="t", partition=1)),
                    current_lag=1500,
                    recommended=(PartitionRef(topic="t", partition=0), PartitionRef(topic="t", partition=2)),
                    recommended_lag=1000,
                ),
            ),
        }
    )
    detail = group_detail(summary_of(), SNAPSHOT, LagUnit.MESSAGES, latest, [], {})
    a, b = detail.members
    assert (a.member_id, a.offset_lag, a.lag, a.time_lag) == ("a", 1500, 1500, None)  # partition 1's is unknown
    assert a.recommended_lag == 1000 and [p.partition for p in a.recommended_partitions or ()] == [0, 2]
    # 3: no commit, records wait: its lag is unknown, so b's is too (not the 0 of the others plus nothing)
    assert (b.member_id, b.offset_lag, b.lag, b.time_lag, b.partitions_unknown) == ("b", None, None, None, 1)
    assert detail.unassigned is None
    assert b.recommended_partitions is None and b.recommended_lag is None  # the recommendation does not name it
    assert [(p.partition, p.member_id, p.flags) for p in detail.partitions] == [
        (0, "a", ()),
        (1, "a", ()),
        (2, "b", ()),
        (3, "b", (LagFlag.NO_COMMIT,)),
    ]
    assert detail.recommendation is not None
    assert detail.recommendation.current and detail.recommendation.url == "/api/recommendations/r1"


def test_a_recommendation_for_an_older_generation_is_not_current() -> None:
    latest = recommendation("r0", group="g")  # generation 4 in the helper
    older = latest.model_copy(update={"generation": 2})
    detail = group_detail(summary_of(), SNAPSHOT, LagUnit.MESSAGES, older, [], {})
    assert detail.recommendation is not None and not detail.recommendation.current


def test_the_detail_gives_each_partition_member_and_the_group_a_drain_time_from_the_same_figures() -> None:
    throughput = {
        TopicPartition("t", 0): PartitionThroughput(production_rate=10.0, consumption_rate=60.0, busy=True),
        TopicPartition("t", 1): PartitionThroughput(production_rate=10.0, consumption_rate=10.0, busy=True),
        TopicPartition("t", 2): PartitionThroughput(production_rate=0.0, consumption_rate=0.0, busy=False),
    }
    detail = group_detail(summary_of(), SNAPSHOT, LagUnit.MESSAGES, None, [], throughput)
    drains = {p.partition: p.drain for p in detail.partitions}
    assert drains[0] == Drain(state=DrainState.CATCHING_UP, seconds=1000 / 50.0)
    assert drains[1] == Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=0.0)
    assert drains[2] == Drain(state=DrainState.CAUGHT_UP, seconds=0.0)
    assert drains[3] == Drain()  # no commit: its lag, and so its drain, is unknown
    a, b = detail.members
    # a reads 70/s of the 20/s its partitions get: its 1,500 records drain in 30 s.
    assert a.drain == Drain(state=DrainState.CATCHING_UP, seconds=30.0)
    assert b.drain == Drain()
    assert detail.drain == Drain()  # b's is unknown and no member falls behind
    as_json = detail.model_dump(mode="json")
    assert as_json["members"][0]["drain"] == {"state": "catching-up", "seconds": 30.0, "falling_behind_rate": None}
    assert as_json["drain"] == {"state": "unknown", "seconds": None, "falling_behind_rate": None}
    without_rates = group_detail(summary_of(), SNAPSHOT, LagUnit.MESSAGES, None, [], {})
    assert [p.drain.state for p in without_rates.partitions] == [
        DrainState.UNKNOWN,
        DrainState.UNKNOWN,
        DrainState.CAUGHT_UP,  # no lag: caught up, whatever the rates
        DrainState.UNKNOWN,
    ]


def named(group: str, skew: float | None, max_lag: float | None = None) -> GroupSummary:
    return summary_of(group=group, skew=skew, max_lag=max_lag)


def test_newest_recommendations_come_first_once_each() -> None:
    one, two, three = (recommendation(f"r{i}", time=float(i)) for i in (1, 2, 3))
    assert [r.id for r in newest_recommendations([[one, three], [two, three]], 2)] == ["r3", "r2"]


def test_the_table_keeps_the_latest_recommendations_newest_first_and_a_resend_once() -> None:
    kept = RecentRecommendations(group="g", recommendations=())
    for i in range(5):
        kept = kept.adding(recommendation(f"r{i}", time=float(i)), keep=3)
    assert [r.id for r in kept.recommendations] == ["r4", "r3", "r2"]
    kept = kept.adding(recommendation("r3", time=9.0), keep=3)
    assert [r.id for r in kept.recommendations] == ["r3", "r4", "r2"]


def test_the_skew_history_keeps_each_minutes_largest_skew_for_an_hour() -> None:
    history = SkewHistory()
    start = 1_800_000_000.0 - 1_800_000_000.0 % 60
    history.add(start + 1, 1.2)
    history.add(start + 30, 2.5)
    history.add(start + 59, 1.1)
    history.add(start + 61, 1.4)
    assert [(p.time - start, p.skew) for p in history.points(start + 61)] == [(0, 2.5), (60, 1.4)]
    for minute in range(2, 70):
        history.add(start + 60 * minute, float(minute))
    points = history.points(start + 60 * 69)
    assert len(points) == 60 and points[0].skew == 10.0 and points[-1].skew == 69.0


def _page(overview: GroupOverview, held: frozenset[int] = frozenset({0}), holds: set[str] | None = None) -> list:
    return overview.page(
        held=held,
        holding=lambda: lambda group: holds is None or group in holds,
        sort=GroupSort.SKEW,
        order="desc",
        offset=0,
        limit=None,
    )[0]


def test_the_overview_forgets_a_group_and_keeps_no_history_without_a_skew() -> None:
    overview = GroupOverview()
    overview.record(summary_of(skew=None))
    assert _page(overview) == [listed(summary_of(skew=None))]
    assert overview.history("g", NOW) == []
    overview.record(summary_of())
    assert [p.skew for p in overview.history("g", NOW)] == [1.5]
    assert _page(overview) == [listed(summary_of())]  # the newest summary, not the one listed before
    overview.forget("g")
    assert _page(overview) == [] and overview.history("g", NOW) == []


def test_the_overview_pages_the_groups_held_in_order_and_looks_at_what_is_held_only_when_it_may_differ() -> None:
    overview = GroupOverview()
    for group, skew in (("a", 1.0), ("b", 3.0), ("c", 2.0)):
        overview.record(summary_of(skew=skew).model_copy(update={"group": group}))
    asked = []

    def holding(holds: set[str]) -> object:
        asked.append(holds)
        return lambda group: group in holds

    def page(held: frozenset[int], holds: set[str], **query: object) -> tuple[list[str], int]:
        paging: dict[str, Any] = {"offset": 0, "limit": None, **query}
        found, total = overview.page(
            held=held, holding=lambda: holding(holds), sort=GroupSort.SKEW, order="desc", **paging
        )
        return [g.group for g in found], total

    assert page(frozenset({0}), {"a", "b", "c"}) == (["b", "c", "a"], 3)
    assert page(frozenset({0}), {"a", "b", "c"}, offset=1, limit=1) == (["c"], 3)
    assert len(asked) == 1  # the order kept: no look at what is held, no sort
    assert page(frozenset({1}), {"a", "c"}) == (["c", "a"], 2)  # partitions moved: b is no longer held
    assert page(frozenset({1}), {"a", "c"}, query="A") == (["a"], 1)
    assert len(asked) == 2
    overview.record(summary_of(skew=9.0).model_copy(update={"group": "a"}))
    assert page(frozenset({1}), {"a", "c"}) == (["a", "c"], 2)  # sorted again: a's figure changed
    assert len(asked) == 2  # the same groups: what is held is not looked at again
    overview.record(summary_of(skew=5.0).model_copy(update={"group": "d"}))
    assert page(frozenset({1}), {"a", "c", "d"}) == (["a", "d", "c"], 3) and len(asked) == 3
    overview.forget("a")
    assert page(frozenset({1}), {"a", "c", "d"}) == (["d", "c"], 2) and len(asked) == 3  # a group gone: no look
    overview.record(summary_of(skew=7.0).model_copy(update={"group": "e"}))  # evaluated, no longer held
    assert page(frozenset({1}), {"c", "d"}) == (["d", "c"], 2) and len(asked) == 4
    overview.record(summary_of(skew=8.0).model_copy(update={"group": "e"}))  # left out: looked at again
    assert page(frozenset({1}), {"c", "d"}) == (["d", "c"], 2) and len(asked) == 5
    overview.record(summary_of(skew=1.0).model_copy(update={"group": "d"}))  # listed: no look
    assert page(frozenset({1}), {"c", "d"}) == (["c", "d"], 2) and len(asked) == 5


def test_the_openapi_description_is_valid_and_every_reference_resolves() -> None:
    document = openapi_document()
    assert document["openapi"] == "3.1.0"
    assert set(document["paths"]) == {
        "/api/groups",
        "/api/groups/{group}",
        "/api/recommendations",
        "/api/recommendations/{id}",
        "/api/local/groups",
        "/healthz",
        "/readyz",
    }
    schemas = document["components"]["schemas"]
    text = repr(document)
    for name in {part.split("'")[0] for part in text.split("#/components/schemas/")[1:]}:
        assert name in schemas, name
    body = summary_of().model_dump(mode="json")
    page = {
        "groups": [body],
        "total": 1,
        "offset": 0,
        "limit": None,
        "sort": "skew",
        "order": "desc",
        "workers": [{"url": "http://w1:6066", "ok": True, "error": None}],
        "complete": True,
    }
    schema = {"$ref": "#/components/schemas/GroupsPage", "components": document["components"]}
    jsonschema.validate(page, schema, cls=jsonschema.Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**page, "total": -1}, schema, cls=jsonschema.Draft202012Validator)
