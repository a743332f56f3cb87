"""`kagent.worker.lag_exporter` and `kagent.core.lag_series`: kafka-lag-exporter's series and kagent's member
figures at each granularity, rendered once per change, byte for byte what prometheus_client writes for the same
figures (`tests.support.lag_oracle`); and `kagent.worker.metrics`' per-group gauges."""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Iterator, Mapping, Sequence

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kagent.core.evaluation import evaluate
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.incidents import IncidentKind
from kagent.core.lag_series import FAMILIES, NO_MEMBER, GroupLag, GroupLayout, PartitionOffsets
from kagent.core.member_lag import current_skew
from kagent.core.policy import EvaluationPolicy, LagUnit, SkewMetric
from kagent.core.snapshot import GroupSnapshot, LagFlag, PartitionLag
from kagent.settings import MetricsGranularity
from kagent.worker.garbage_collection import CollectorPauses
from kagent.worker.group_state import LagClock
from kagent.worker.lag_exporter import LagExporter
from kagent.worker.loop_slices import LoopSlices
from kagent.worker.metrics import HotPartitionFigures, MemberDrain, Metrics
from kagent.worker.scrape import (
    BLOCK,
    STRIDE,
    LoopHold,
    RenderedSeries,
    drop_pieces,
    family_blocks,
    let_go_of,
    scrape_body,
)
from tests.support.lag_oracle import group_lag_of, oracle_exposition, partition_offsets_of
from tests.support.metric_names import exported_metric_names

NOW = 1_700_000_000.0
CLUSTER = "prod"


def policy(unit: LagUnit = LagUnit.MESSAGES, metric: SkewMetric = SkewMetric.PEAK_TO_MEAN) -> EvaluationPolicy:
    return EvaluationPolicy(
        lag_unit=unit,
        skew_metric=metric,
        skew_threshold=1.5,
        min_total_lag=0,
        min_improvement=0.1,
        hold_evaluations=1,
        hysteresis=0.8,
        cooldown=0.0,
        strategy="lag-sticky",
    )


def figures(
    group: str,
    topic: str,
    partition: int,
    *,
    committed: int | None,
    log_end: int,
    time_lag: float | None,
    offset_lag: int | None = None,
    log_start: int = 0,
    polled_at: float = NOW - 1,
) -> PartitionLag:
    """A partition's lag figures; the offset lag is ``log_end - committed`` unless given, unknown without a
    commit while records wait (``auto.offset.reset``'s estimate then)."""
    estimated_lag = None
    if offset_lag is None and committed is not None:
        offset_lag = log_end - committed
    elif offset_lag is None and log_end > log_start:
        estimated_lag = log_end - log_start
    elif offset_lag is None:
        offset_lag = 0
    return PartitionLag(
        group=group,
        topic=topic,
        partition=partition,
        committed=committed,
        log_start=log_start,
        log_end=log_end,
        offset_lag=offset_lag,
        estimated_lag=estimated_lag,
        time_lag=time_lag,
        flags=(LagFlag.NO_COMMIT,) if committed is None else (),
        polled_at=polled_at,
    )


def member(member_id: str, host: str, *partitions: tuple[str, int], topics: Sequence[str] = ()) -> MemberAssignment:
    return MemberAssignment(
        member_id=member_id,
        client_id=f"client-{member_id}",
        client_host=host,
        topics=tuple(topics),
        partitions=tuple(PartitionRef(topic=topic, partition=partition) for topic, partition in partitions),
    )


def snapshot(
    group: str,
    members: Sequence[MemberAssignment],
    lags: Sequence[PartitionLag],
    partition_counts: Mapping[str, int],
) -> GroupSnapshot:
    return GroupSnapshot(
        assignment=GroupAssigned(group=group, generation=3, protocol="range", leader=None, members=tuple(members)),
        partition_counts=dict(partition_counts),
        lag={lag.topic_partition: lag for lag in lags},
        taken_at=NOW,
    )


ORDERS = snapshot(
    "orders",
    [
        member("m1", "/10.0.0.1", ("t", 0), ("t", 1), topics=("t", "u")),
        member("m2", "/10.0.0.2", ("t", 2), ("u", 0), topics=("t", "u")),
    ],
    [
        figures("orders", "t", 0, committed=90, log_end=100, time_lag=2.5),
        # Caught up, time lag unknown: 0 seconds (kafka-lag-exporter's LagIsZero).
        figures("orders", "t", 1, committed=200, log_end=200, time_lag=None),
        # No committed offset while records wait: unknown (auto.offset.reset's estimate is 50), NaN as in
        # kafka-lag-exporter.
        figures("orders", "t", 2, committed=None, log_start=10, log_end=60, time_lag=None),
        # Held by no member; records wait but the time lag is unknown.
        figures("orders", "t", 3, committed=5, log_end=8, time_lag=None),
        figures("orders", "u", 0, committed=0, log_end=7, time_lag=1.0),
    ],
    {"t": 4, "u": 1},
)
"""Two members over two topics, with every kind of partition the exporter tells apart."""

AUDIT = snapshot(
    "audit",
    [member("a1", "/10.0.0.3", ("t", 0), topics=("t",))],
    # The same partition as orders' t/0, from a newer poll.
    [figures("audit", "t", 0, committed=100, log_end=110, log_start=4, time_lag=0.5, polled_at=NOW)],
    {"t": 4},
)

EMPTY = snapshot("empty", [member("e1", "/10.0.0.4", topics=("t",))], [], {"t": 4})
"""A group with a member but no lag figures yet."""


class FakeGroups:
    """A stand-in for the storage stage: the reads the exporter makes
    (:class:`~kagent.worker.group_state.GroupStateReader`), over snapshots.

    ``broken`` groups raise from :meth:`group_lag`; ``versions`` are what :meth:`lag_version` says (bump one
    to say a group changed); ``shapes`` the figures' :attr:`~GroupLag.shape` (None where not given); ``polls``
    and ``stale`` make the clock; ``calls`` records each read.
    """

    def __init__(self, snapshots: Mapping[str, GroupSnapshot | None], broken: Sequence[str] = ()) -> None:
        self.snapshots = dict(snapshots)
        self.broken = set(broken)
        self.versions: dict[str, int] = {}
        self.shapes: dict[str, Hashable] = {}
        self.polls = 1
        self.stale = False
        self.calls: list[str] = []

    def held_group_runs(self) -> Iterator[list[str]]:
        """Runs of two, an empty run between each two (a run may hold none of the groups it looked at)."""
        self.calls.append("held_groups")
        groups = sorted({*self.snapshots, *self.broken})
        for start in range(0, len(groups), 2):
            yield groups[start : start + 2]
            yield []

    def lag_clock(self, now: float) -> LagClock:
        assert now == NOW
        return LagClock(now, self.polls, self.stale)

    def lag_version(self, group: str) -> Hashable:
        return self.versions.get(group, 0)

    def group_lag(self, group: str, clock: LagClock) -> GroupLag | None:
        self.calls.append(f"group_lag {group}")
        if group in self.broken:
            raise ValueError(f"corrupt state of {group}")
        found = self.snapshots.get(group)
        return group_lag_of(found)._replace(shape=self.shapes.get(group)) if found is not None else None

    def partition_offsets(self, partitions: Iterable[TopicPartition], clock: LagClock) -> list[PartitionOffsets]:
        wanted = set(partitions)
        known = [found for _, found in sorted(self.snapshots.items()) if found is not None]
        return [row for row in partition_offsets_of(known) if TopicPartition(row.topic, row.partition) in wanted]


Labels = frozenset[tuple[str, str]]
Series = dict[str, dict[Labels, float]]


def exporter(
    reader: FakeGroups,
    granularity: MetricsGranularity = MetricsGranularity.PARTITION,
    evaluation: EvaluationPolicy | None = None,
) -> LagExporter:
    return LagExporter(
        reader,  # type: ignore[arg-type]  # only the reads the exporter makes
        cluster_name=CLUSTER,
        granularity=granularity.value,
        policy=evaluation or policy(),
        clock=lambda: NOW,
    )


def body(
    series: Sequence[RenderedSeries], registry: CollectorRegistry | None = None, names: Sequence[str] = ()
) -> bytes:
    """A scrape's body: the registry's text (an empty one's when None), then each of ``series``."""

    async def collect() -> bytes:
        hold = LoopHold()
        return b"".join([block async for block in scrape_body(registry or CollectorRegistry(), series, hold, names)])

    return asyncio.run(collect())


def parse(text: bytes) -> Series:
    """Every sample of a text exposition, parsed back: sample name -> labels -> value."""
    series: Series = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            series.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return series


def scrape_exporter(collector: LagExporter) -> Series:
    return parse(body([collector]))


def labels(**values: str) -> Labels:
    return frozenset({"cluster_name": CLUSTER, **values}.items())


def gp(group: str, topic: str, partition: int, host: str, consumer: str, client: str) -> Labels:
    """Labels of a group-partition series."""
    return labels(
        group=group,
        topic=topic,
        partition=str(partition),
        member_host=host,
        consumer_id=consumer,
        client_id=client,
    )


def m1(partition: int, topic: str = "t") -> Labels:
    return gp("orders", topic, partition, "/10.0.0.1", "m1", "client-m1")


def m2(partition: int, topic: str = "t") -> Labels:
    return gp("orders", topic, partition, "/10.0.0.2", "m2", "client-m2")


UNHELD_T3 = gp("orders", "t", 3, NO_MEMBER, NO_MEMBER, NO_MEMBER)


def same(actual: Mapping[Labels, float], expected: Mapping[Labels, float]) -> bool:
    """Equal series, NaN equal to NaN."""
    return actual.keys() == expected.keys() and all(
        (math.isnan(value) and math.isnan(actual[key])) or actual[key] == value for key, value in expected.items()
    )


PER_GROUP = {
    "kafka_consumergroup_group_max_lag",
    "kafka_consumergroup_group_max_lag_seconds",
    "kafka_consumergroup_group_sum_lag",
}
KAGENT = {"kagent_group_member_lag", "kagent_group_member_lag_seconds", "kagent_group_skew", "kagent_group_members"}
PER_TOPIC = {"kafka_consumergroup_group_topic_sum_lag"}
PER_PARTITION = {
    "kafka_consumergroup_group_offset",
    "kafka_consumergroup_group_lag",
    "kafka_consumergroup_group_lag_seconds",
    "kafka_partition_latest_offset",
    "kafka_partition_earliest_offset",
}


# --------------------------------------------------------------------------------------------------------------------
# kafka-lag-exporter's series


def test_partition_granularity_exports_every_series_with_kafka_lag_exporters_labels() -> None:
    series = scrape_exporter(exporter(FakeGroups({"orders": ORDERS})))

    # m2's t/2 has no measured lag, so neither has m2, nor the members' skew: no series for them.
    assert set(series) == PER_PARTITION | PER_TOPIC | PER_GROUP | KAGENT - {"kagent_group_skew"}
    assert series["kafka_consumergroup_group_offset"] == {
        m1(0): 90.0,
        m1(1): 200.0,
        UNHELD_T3: 5.0,
        m2(0, "u"): 0.0,
    }
    assert same(
        series["kafka_consumergroup_group_lag"],
        {m1(0): 10.0, m1(1): 0.0, m2(2): math.nan, UNHELD_T3: 3.0, m2(0, "u"): 7.0},
    )
    assert same(
        series["kafka_consumergroup_group_lag_seconds"],
        {m1(0): 2.5, m1(1): 0.0, m2(2): math.nan, UNHELD_T3: math.nan, m2(0, "u"): 1.0},
    )
    assert series["kafka_partition_latest_offset"] == {
        labels(topic="t", partition="0"): 100.0,
        labels(topic="t", partition="1"): 200.0,
        labels(topic="t", partition="2"): 60.0,
        labels(topic="t", partition="3"): 8.0,
        labels(topic="u", partition="0"): 7.0,
    }
    assert series["kafka_partition_earliest_offset"] == {
        labels(topic="t", partition="0"): 0.0,
        labels(topic="t", partition="1"): 0.0,
        labels(topic="t", partition="2"): 10.0,
        labels(topic="t", partition="3"): 0.0,
        labels(topic="u", partition="0"): 0.0,
    }
    # NaN (no committed offset) is left out of sums and maxima.
    assert series["kafka_consumergroup_group_topic_sum_lag"] == {
        labels(group="orders", topic="t"): 13.0,
        labels(group="orders", topic="u"): 7.0,
    }
    assert series["kafka_consumergroup_group_sum_lag"] == {labels(group="orders"): 20.0}
    assert series["kafka_consumergroup_group_max_lag"] == {labels(group="orders"): 10.0}
    assert series["kafka_consumergroup_group_max_lag_seconds"] == {labels(group="orders"): 2.5}


def test_the_per_group_series_carry_no_is_simple_consumer_label() -> None:
    """kafka-lag-exporter removed it (and ``state``) in 0.4.1; its README still lists it."""
    series = scrape_exporter(exporter(FakeGroups({"orders": ORDERS})))

    for name in PER_GROUP:
        assert [dict(key) for key in series[name]] == [{"cluster_name": CLUSTER, "group": "orders"}]


def test_a_partition_no_member_holds_carries_kafka_lag_exporters_no_member_labels() -> None:
    series = scrape_exporter(exporter(FakeGroups({"orders": ORDERS})))["kafka_consumergroup_group_lag"]

    assert UNHELD_T3 in series and dict(UNHELD_T3)["consumer_id"] == "unknown"
    assert m2(0, "u") in series


def test_a_partition_without_a_committed_offset_has_no_offset_and_nan_lag() -> None:
    series = scrape_exporter(exporter(FakeGroups({"orders": ORDERS})))

    assert m2(2) not in series["kafka_consumergroup_group_offset"]
    assert math.isnan(series["kafka_consumergroup_group_lag"][m2(2)])
    assert math.isnan(series["kafka_consumergroup_group_lag_seconds"][m2(2)])


def test_maxima_and_sums_are_nan_when_no_partition_lag_is_known() -> None:
    unknown = snapshot(
        "new",
        [member("n1", "/h", ("t", 0), topics=("t",))],
        [figures("new", "t", 0, committed=None, log_end=9, time_lag=None)],
        {"t": 1},
    )
    series = scrape_exporter(exporter(FakeGroups({"new": unknown})))

    assert math.isnan(series["kafka_consumergroup_group_max_lag"][labels(group="new")])
    assert math.isnan(series["kafka_consumergroup_group_max_lag_seconds"][labels(group="new")])
    assert math.isnan(series["kafka_consumergroup_group_sum_lag"][labels(group="new")])
    assert math.isnan(series["kafka_consumergroup_group_topic_sum_lag"][labels(group="new", topic="t")])
    assert "kagent_group_member_lag" not in series and "kagent_group_skew" not in series


def test_a_partition_read_by_several_groups_has_one_offsets_series_from_the_newest_poll() -> None:
    series = scrape_exporter(exporter(FakeGroups({"orders": ORDERS, "audit": AUDIT})))

    assert series["kafka_partition_latest_offset"][labels(topic="t", partition="0")] == 110.0
    assert series["kafka_partition_earliest_offset"][labels(topic="t", partition="0")] == 4.0
    assert len(series["kafka_partition_latest_offset"]) == 5
    assert series["kafka_consumergroup_group_offset"][gp("audit", "t", 0, "/10.0.0.3", "a1", "client-a1")] == 100.0


def test_a_group_without_lag_figures_has_only_kagents_member_series() -> None:
    series = scrape_exporter(exporter(FakeGroups({"empty": EMPTY, "gone": None})))

    assert set(series) == KAGENT
    assert series["kagent_group_members"] == {labels(group="empty"): 1.0}
    # No lag is an even spread, as the evaluation measures it.
    assert series["kagent_group_skew"] == {labels(group="empty"): evaluate(EMPTY, None, policy(), NOW).skew}


@pytest.mark.parametrize(
    ("granularity", "names"),
    [
        (MetricsGranularity.PARTITION, PER_PARTITION | PER_TOPIC | PER_GROUP | KAGENT),
        (MetricsGranularity.TOPIC, PER_TOPIC | PER_GROUP | KAGENT),
        (MetricsGranularity.GROUP, PER_GROUP | KAGENT),
    ],
)
def test_each_granularity_exports_its_series_and_names_the_same_families(
    granularity: MetricsGranularity, names: set[str]
) -> None:
    collector = exporter(FakeGroups({"orders": ORDERS, "audit": AUDIT}), granularity)
    full = scrape_exporter(exporter(FakeGroups({"orders": ORDERS, "audit": AUDIT})))

    series = scrape_exporter(collector)

    assert set(series) == names
    assert {family.name for family in collector.families} == names
    for name in names:
        assert same(series[name], full[name]), name


# --------------------------------------------------------------------------------------------------------------------
# kagent's own figures


def test_member_lag_in_records_and_seconds() -> None:
    series = scrape_exporter(exporter(FakeGroups({"orders": ORDERS})))

    member_1 = labels(group="orders", member_host="/10.0.0.1", consumer_id="m1", client_id="client-m1")
    no_member = labels(group="orders", member_host="unknown", consumer_id="unknown", client_id="unknown")
    # m2's t/2 has no committed offset while records wait: its lag is unknown (auto.offset.reset's 50 is an
    # estimate), so m2's is too: no series, rather than 7 records that read as all it has. t/3, held by no
    # member, is the unknown member's: 3 records, its time lag unknown.
    assert series["kagent_group_member_lag"] == {member_1: 10.0, no_member: 3.0}
    assert series["kagent_group_member_lag_seconds"] == {member_1: 2.5}
    assert series["kagent_group_members"] == {labels(group="orders"): 2.0}


def test_skew_is_the_evaluations_in_messages() -> None:
    measured = snapshot(
        "measured",
        [member("a", "/h1", ("t", 0), topics=("t",)), member("b", "/h2", ("t", 1), topics=("t",))],
        [
            figures("measured", "t", 0, committed=90, log_end=100, time_lag=2.5),
            figures("measured", "t", 1, committed=0, log_end=30, time_lag=1.0),
        ],
        {"t": 2},
    )
    evaluation = evaluate(measured, None, policy(), NOW)

    assert evaluation.skew == pytest.approx(30 * 2 / 40)
    assert current_skew(measured, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN) == pytest.approx(evaluation.skew)
    series = scrape_exporter(exporter(FakeGroups({"measured": measured})))
    assert series["kagent_group_skew"] == {labels(group="measured"): pytest.approx(evaluation.skew)}


def test_skew_is_unknown_while_a_member_holds_a_partition_of_unknown_lag() -> None:
    assert evaluate(ORDERS, None, policy(), NOW).skew is None
    assert "kagent_group_skew" not in scrape_exporter(exporter(FakeGroups({"orders": ORDERS})))


@pytest.mark.parametrize("metric", list(SkewMetric))
def test_skew_is_the_evaluations_in_seconds_when_every_time_lag_is_known(metric: SkewMetric) -> None:
    known = snapshot(
        "known",
        [
            member("k1", "/h1", ("t", 0), ("t", 1), topics=("t",)),
            member("k2", "/h2", ("t", 2), topics=("t",)),
            member("k3", "/h3", topics=("t",)),
        ],
        [
            figures("known", "t", 0, committed=0, log_end=10, time_lag=1.25),
            figures("known", "t", 1, committed=0, log_end=10, time_lag=0.3),
            figures("known", "t", 2, committed=0, log_end=10, time_lag=4.0),
        ],
        {"t": 3},
    )
    seconds = policy(LagUnit.SECONDS, metric)

    series = scrape_exporter(exporter(FakeGroups({"known": known}), evaluation=seconds))
    assert series["kagent_group_skew"] == {
        labels(group="known"): pytest.approx(evaluate(known, None, seconds, NOW).skew)
    }
    assert sorted(series["kagent_group_member_lag_seconds"].values()) == [0.0, 1.55, 4.0]


def test_skew_in_seconds_is_unmeasured_with_an_unknown_time_lag() -> None:
    seconds = policy(LagUnit.SECONDS)

    assert evaluate(ORDERS, None, seconds, NOW).skew is None
    series = scrape_exporter(exporter(FakeGroups({"orders": ORDERS}), evaluation=seconds))
    assert "kagent_group_skew" not in series


def test_a_group_without_members_has_no_skew_and_its_lag_on_the_unknown_member() -> None:
    memberless = snapshot("idle", [], [figures("idle", "t", 0, committed=3, log_end=5, time_lag=1.0)], {"t": 1})

    series = scrape_exporter(exporter(FakeGroups({"idle": memberless})))
    assert series["kagent_group_members"] == {labels(group="idle"): 0.0}
    assert "kagent_group_skew" not in series
    no_member = labels(group="idle", member_host=NO_MEMBER, consumer_id=NO_MEMBER, client_id=NO_MEMBER)
    assert series["kagent_group_member_lag"] == {no_member: 2.0}
    assert series["kagent_group_member_lag_seconds"] == {no_member: 1.0}
    assert series["kafka_consumergroup_group_lag"] == {gp("idle", "t", 0, NO_MEMBER, NO_MEMBER, NO_MEMBER): 2.0}


def test_partitions_outside_the_subscribed_topics_count_for_kafka_series_but_not_for_kagents() -> None:
    """Like ``propose``: a partition beyond the topic's partition count, or of a topic no member subscribes
    to, is left out of member lag and skew; kafka-lag-exporter's series still show it."""
    stray = snapshot(
        "stray",
        [member("s1", "/h", ("t", 0), ("t", 5), topics=("t",))],
        [
            figures("stray", "t", 0, committed=0, log_end=4, time_lag=1.0),
            figures("stray", "t", 5, committed=0, log_end=100, time_lag=9.0),
            figures("stray", "x", 0, committed=0, log_end=1000, time_lag=9.0),
        ],
        {"t": 1, "x": 1},
    )

    series = scrape_exporter(exporter(FakeGroups({"stray": stray})))

    # s1's t/5 does not exist (t has 1 partition): counted nowhere. x/0 is no member's: the unknown member's.
    assert {dict(key)["consumer_id"]: value for key, value in series["kagent_group_member_lag"].items()} == {
        "s1": 4.0,
        NO_MEMBER: 1000.0,
    }
    assert series["kafka_consumergroup_group_sum_lag"] == {labels(group="stray"): 1104.0}


# --------------------------------------------------------------------------------------------------------------------
# Byte for byte what prometheus_client writes for the same figures


@pytest.mark.parametrize("granularity", list(MetricsGranularity))
def test_the_exposition_is_prometheus_clients_for_the_same_figures_byte_for_byte(
    granularity: MetricsGranularity,
) -> None:
    groups = {"audit": AUDIT, "orders": ORDERS, "empty": EMPTY}

    rendered = body([exporter(FakeGroups(groups), granularity)])

    ordered = [groups[name] for name in sorted(groups)]
    assert rendered == oracle_exposition(ordered, CLUSTER, granularity.value, policy())


def test_a_groups_layout_is_made_once_per_shape_and_its_series_are_the_figures_of_each_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Figures of the same shape are written with the layout made for the first of them (labels and owners
    are not made again), yet every scrape is prometheus_client's text of its own figures; figures of
    another shape (a member joined) get a layout of their own."""
    made: list[str] = []
    layout_init = GroupLayout.__init__

    def counted(self: GroupLayout, figures: GroupLag, *args: object) -> None:
        made.append(figures.group)
        layout_init(self, figures, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(GroupLayout, "__init__", counted)
    reader = FakeGroups({"orders": ORDERS})
    reader.shapes["orders"] = "first"
    collector = exporter(reader)
    assert body([collector]) == oracle_exposition([ORDERS], CLUSTER, "partition", policy())

    moved = snapshot(
        "orders",
        ORDERS.assignment.members,
        [
            *(lag for tp, lag in ORDERS.lag.items() if tp not in (TopicPartition("t", 0), TopicPartition("u", 0))),
            figures("orders", "t", 0, committed=95, log_end=130, time_lag=7.25),
            figures("orders", "u", 0, committed=7, log_end=7, time_lag=None),
        ],
        {"t": 4, "u": 1},
    )
    reader.snapshots["orders"] = moved
    reader.versions["orders"] = 1
    assert body([collector]) == oracle_exposition([moved], CLUSTER, "partition", policy())
    assert made == ["orders"]

    joined = snapshot(
        "orders",
        [*ORDERS.assignment.members, member("m3", "/10.0.0.9", ("t", 3), topics=("t", "u"))],
        list(moved.lag.values()),
        {"t": 4, "u": 1},
    )
    reader.snapshots["orders"] = joined
    reader.versions["orders"] = 2
    reader.shapes["orders"] = "second"
    assert body([collector]) == oracle_exposition([joined], CLUSTER, "partition", policy())
    assert made == ["orders", "orders"]


def _escaping_snapshot() -> GroupSnapshot:
    """Names that need escaping, offsets past 1e6 (Go's exponent), a time lag with many digits."""
    group, topic = 'pay"ments\\n\nteam', "ördérs\\"
    return snapshot(
        group,
        [member('c-"1"', "/10.0.0.9\n", (topic, 0), topics=(topic,))],
        [
            figures(group, topic, 0, committed=1_234_567, log_end=12_345_678_901, time_lag=1 / 3),
            figures(group, topic, 1, committed=10_000_000, log_end=10_000_000, time_lag=None),
            figures(group, topic, 2, committed=2**60, log_end=2**60 + 5, time_lag=1e7),
        ],
        {topic: 3},
    )


@pytest.mark.parametrize("unit", list(LagUnit))
def test_escaped_names_and_large_figures_are_written_as_prometheus_client_writes_them(unit: LagUnit) -> None:
    weird = _escaping_snapshot()

    rendered = body([exporter(FakeGroups({weird.group: weird}), evaluation=policy(unit))])

    assert rendered == oracle_exposition([weird], CLUSTER, "partition", policy(unit))
    assert b"1.2345678901e+10" in rendered and b'group="pay\\"ments\\\\n\\nteam"' in rendered


# --------------------------------------------------------------------------------------------------------------------
# Rendered once per change


def _caught_up(group: str) -> GroupSnapshot:
    """A group read to the end of its one partition: no lag, so its series stay until its figures change."""
    return snapshot(
        group,
        [member(f"{group}-1", "/h", ("t", 0), topics=("t",))],
        [figures(group, "t", 0, committed=100, log_end=100, time_lag=None)],
        {"t": 1},
    )


def _rendered(reader: FakeGroups) -> list[str]:
    return [call.removeprefix("group_lag ") for call in reader.calls if call.startswith("group_lag")]


def test_a_scrape_renders_again_only_the_groups_whose_figures_changed_and_those_with_lag() -> None:
    reader = FakeGroups({"a": _caught_up("a"), "b": _caught_up("b"), "empty": EMPTY, "orders": ORDERS})
    collector = exporter(reader)
    first = body([collector])
    assert _rendered(reader) == ["a", "b", "empty", "orders"]

    assert body([collector]) == first
    assert _rendered(reader)[4:] == ["orders"]  # its time lag changes with every poll: never kept

    reader.versions["b"] = 1  # a commit that moved its position, say
    body([collector])
    assert _rendered(reader)[5:] == ["b", "orders"]


async def test_what_a_render_gathers_and_keeps_is_out_of_the_collectors_watch() -> None:
    """A scrape's render gathers every held group's pieces (and the names, partitions and lagging pieces with
    them) over many turns of the loop: watched, each young collection meanwhile went over all of them (43-46
    ms at 50,000 groups in process). Text, names and partitions alone, none can be in a cycle."""
    collector = exporter(FakeGroups({"a": _caught_up("a"), "orders": ORDERS}))
    found, lagging, partitions = await collector._render(LoopHold())
    assert len(found) == 2 and len(lagging) == 1  # "orders" has lag
    gathered = [found, lagging, partitions, *found, *lagging]
    assert [each for each in gathered if gc.is_tracked(each)] == []


def test_a_stale_clock_renders_every_group_again() -> None:
    reader = FakeGroups({"a": _caught_up("a"), "orders": ORDERS})
    collector = exporter(reader)
    body([collector])
    reader.polls += 1
    body([collector])
    assert _rendered(reader) == ["a", "orders", "orders"]

    reader.stale = True
    body([collector])
    assert _rendered(reader)[3:] == ["a", "orders"]


def test_groups_no_longer_held_are_dropped_from_the_scrape_and_forgotten() -> None:
    reader = FakeGroups({"a": _caught_up("a"), "b": _caught_up("b")})
    collector = exporter(reader)
    body([collector])

    del reader.snapshots["a"]
    series = scrape_exporter(collector)

    assert {dict(key)["group"] for key in series["kagent_group_members"]} == {"b"}
    reader.snapshots["a"] = _caught_up("a")  # held again: rendered again, not served from an old text
    scrape_exporter(collector)
    assert _rendered(reader) == ["a", "b", "a"]


async def turns_while(write: Callable[[LoopHold], AsyncIterator[bytes]]) -> tuple[bytes, int]:
    """The body ``write`` makes on a scrape's hold, and how many times the event loop ran another task
    meanwhile (one that only counts its turns)."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    started = ticks
    hold = LoopHold()
    hold.take()
    try:
        blocks = [block async for block in write(hold)]
    finally:
        hold.let_go()
        ticker.cancel()
    return b"".join(blocks), ticks - started


async def test_a_long_render_lets_the_event_loop_run_between_slices() -> None:
    groups = {
        f"g{n:03d}": snapshot(f"g{n:03d}", ORDERS.assignment.members, list(ORDERS.lag.values()), {"t": 4, "u": 1})
        for n in range(50)
    }
    collector = LagExporter(
        FakeGroups(groups),  # type: ignore[arg-type]
        cluster_name=CLUSTER,
        granularity="partition",
        policy=policy(),
        clock=lambda: NOW,
        slice_seconds=0.0,
    )
    body, turns = await turns_while(lambda hold: collector.exposition(None, hold))

    assert turns >= 50, "the render never let the event loop run"
    assert len(parse(body)["kagent_group_members"]) == 50


async def test_joining_a_family_of_many_empty_pieces_lets_the_event_loop_run() -> None:
    """At 50,000 groups a family whose pieces are mostly empty made no block for 60-70 ms of one stretch."""
    pieces_looked_at = 0

    class SlowRow:
        """A group's pieces whose look takes as long as a cache miss at scale."""

        def __init__(self, piece: bytes) -> None:
            self.piece = piece

        def __getitem__(self, index: int) -> bytes:
            nonlocal pieces_looked_at
            assert index == 1
            pieces_looked_at += 1
            until = time.perf_counter() + 5e-6
            while time.perf_counter() < until:
                pass
            return self.piece

    rows = [SlowRow(b"") for _ in range(4 * STRIDE)] + [SlowRow(b"x 1.0\n")]
    body, turns = await turns_while(lambda hold: family_blocks(b"# header\n", rows, 1, hold))  # type: ignore[arg-type]

    assert body == b"# header\nx 1.0\n"
    assert pieces_looked_at >= 4 * STRIDE + 1  # every row looked at (measured, then joined)
    assert turns >= 2, "the join never let the event loop run"


@pytest.mark.parametrize("sizes", [[0], [1], [3, 0, 5], [100] * 5000, [400_000, 0, 1, 900_000, 70] * 4, [2_000_000]])
async def test_a_family_is_every_rows_piece_in_order_in_blocks_of_about_a_megabyte(sizes: list[int]) -> None:
    rows = [(b"other\n", bytes([65 + n % 26]) * size) for n, size in enumerate(sizes)]

    blocks = [block async for block in family_blocks(b"# header\n", rows, 1, LoopHold())]

    assert b"".join(blocks) == b"# header\n" + b"".join(piece for _, piece in rows)
    assert all(len(block) >= BLOCK for block in blocks[:-1]), [len(block) for block in blocks]
    assert all(len(block) <= 2 * BLOCK + max(sizes) for block in blocks), [len(block) for block in blocks]


# --------------------------------------------------------------------------------------------------------------------
# Failures


def test_a_group_that_cannot_be_read_is_skipped_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    reader = FakeGroups({"orders": ORDERS, "audit": AUDIT}, broken=["broken"])
    collector = exporter(reader)

    with caplog.at_level(logging.ERROR, logger="kagent.worker.lag_exporter"):
        first = scrape_exporter(collector)
        second = scrape_exporter(collector)

    assert {dict(key)["group"] for key in first["kagent_group_members"]} == {"orders", "audit"}
    assert set(second) == set(first) and all(same(second[name], first[name]) for name in first)
    failures = [record for record in caplog.records if "broken" in record.getMessage()]
    assert len(failures) == 1
    assert failures[0].exc_info is not None


def test_a_group_that_recovers_is_logged_again_when_it_breaks_again(caplog: pytest.LogCaptureFixture) -> None:
    reader = FakeGroups({"orders": ORDERS}, broken=["orders"])
    collector = exporter(reader)

    with caplog.at_level(logging.ERROR, logger="kagent.worker.lag_exporter"):
        scrape_exporter(collector)
        reader.broken.clear()
        assert "kagent_group_members" in scrape_exporter(collector)
        reader.broken.add("orders")
        reader.versions["orders"] = 1
        assert "kagent_group_members" not in scrape_exporter(collector)

    assert len([record for record in caplog.records if record.levelno == logging.ERROR]) == 2


def test_a_reader_that_cannot_list_its_groups_leaves_the_rest_of_the_scrape_whole() -> None:
    class Failing(FakeGroups):
        def held_group_runs(self) -> Iterator[list[str]]:
            raise RuntimeError("storage not ready")

    metrics = Metrics()
    metrics.groups.set(3)

    series = parse(body([exporter(Failing({}))], metrics.registry))

    assert series["kagent_groups"] == {frozenset(): 3.0}
    assert not PER_PARTITION & set(series)


def test_a_scrape_of_names_renders_only_what_is_asked() -> None:
    reader = FakeGroups({"orders": ORDERS})
    collector = exporter(reader)
    metrics = Metrics()
    metrics.groups.set(1)

    counters = parse(body([metrics.group_gauges, collector], metrics.registry, ["kagent_groups"]))
    assert set(counters) == {"kagent_groups"} and collector.renders == 0

    lag = parse(body([collector], metrics.registry, ["kafka_consumergroup_group_lag"]))
    assert set(lag) == {"kafka_consumergroup_group_lag"} and collector.renders == 1


def test_an_unknown_granularity_is_refused() -> None:
    with pytest.raises(ValueError, match="granularity"):
        LagExporter(FakeGroups({}), cluster_name=CLUSTER, granularity="partitions", policy=policy())  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------------------------
# kagent.worker.metrics


def test_exported_metric_names_has_every_sample_name_a_scrape_can_show() -> None:
    names = exported_metric_names()

    assert names >= PER_PARTITION | PER_TOPIC | PER_GROUP | KAGENT
    assert names >= {
        "kagent_group_recommended_skew",
        "kagent_group_status",
        "kagent_group_open_incidents",
        "kagent_incident_transitions_total",
        "kagent_incident_transitions_created",
        "kagent_alert_deliveries_total",
        "kagent_alert_delivery_seconds_bucket",
        "kagent_alert_delivery_seconds_sum",
        "kagent_alert_delivery_seconds_count",
        "kagent_alert_resends_total",
        "kagent_alerting_backlog_records",
        "kagent_evaluation_seconds_bucket",
        "kagent_source_records_total",
    }
    assert "kagent_incident_transitions" not in names
    assert {family.name for family in FAMILIES} <= names


def test_exported_metric_names_covers_a_scrape_with_every_metric_set() -> None:
    metrics = Metrics()
    metrics.group_gauges.set_recommended_skew(CLUSTER, "orders", 1.2)
    metrics.group_gauges.set_recommended_members(CLUSTER, "orders", 3)
    metrics.group_gauges.set_status(CLUSTER, "orders", 4)
    metrics.group_gauges.set_open_incidents(CLUSTER, "orders", [IncidentKind.STOP])
    metrics.group_gauges.set_member_drain(CLUSTER, "orders", [MemberDrain("h", "a", "c", math.inf)])
    metrics.group_gauges.set_hot_partitions(CLUSTER, "orders", [HotPartitionFigures("t", 0, 63.0, 40.0)])
    metrics.incident_transitions.labels("stop", "open").inc()
    metrics.alert_deliveries.labels("slack", "accepted").inc()
    metrics.alert_delivery_seconds.labels("slack").observe(0.3)
    metrics.alert_resends.labels("slack", "accepted").inc()
    metrics.alerting_backlog.set(2)

    scraped = parse(body([metrics.group_gauges, exporter(FakeGroups({"orders": ORDERS}))], metrics.registry))

    assert set(scraped) <= exported_metric_names()


def scrape_gauges(metrics: Metrics) -> Series:
    return parse(body([metrics.group_gauges], metrics.registry))


def test_forget_group_removes_the_groups_series_only() -> None:
    metrics = Metrics()
    for group in ("orders", "audit"):
        metrics.group_gauges.set_recommended_skew(CLUSTER, group, 1.1)
        metrics.group_gauges.set_status(CLUSTER, group, 1)
        metrics.group_gauges.set_open_incidents(CLUSTER, group, [IncidentKind.STOP])

    metrics.forget_group(CLUSTER, "orders")
    metrics.forget_group(CLUSTER, "never-held")

    series = scrape_gauges(metrics)
    for name in ("kagent_group_recommended_skew", "kagent_group_status", "kagent_group_open_incidents"):
        assert {dict(key)["group"] for key in series[name]} == {"audit"}, name
    assert "kagent_group_recommended_members" not in series  # never set: no series
    assert {dict(key)["kind"]: value for key, value in series["kagent_group_open_incidents"].items()} == {
        kind.value: (1.0 if kind is IncidentKind.STOP else 0.0) for kind in IncidentKind
    }


def test_a_group_gauge_set_again_keeps_one_series_with_the_new_value() -> None:
    metrics = Metrics()
    metrics.group_gauges.set_status(CLUSTER, "orders", 4)
    scrape_gauges(metrics)  # rendered once with 4
    metrics.group_gauges.set_status(CLUSTER, "orders", 1)
    metrics.group_gauges.set_open_incidents(CLUSTER, "orders", [IncidentKind.STOP, IncidentKind.LAG_SKEW])
    metrics.group_gauges.set_open_incidents(CLUSTER, "orders", [])

    series = scrape_gauges(metrics)
    assert list(series["kagent_group_status"].values()) == [1.0]
    assert set(series["kagent_group_open_incidents"].values()) == {0.0}


def test_the_group_gauges_are_written_as_prometheus_client_writes_labelled_gauges() -> None:
    metrics = Metrics()
    gauges = metrics.group_gauges
    gauges.set_status(CLUSTER, 'a"b', 4)
    gauges.set_recommended_skew(CLUSTER, 'a"b', 1 / 3)
    gauges.set_recommended_members(CLUSTER, "c\\d", 12_000_000)
    gauges.set_open_incidents(CLUSTER, 'a"b', [IncidentKind.STOP])
    gauges.set_open_incidents(CLUSTER, "c\\d", [])
    gauges.set_member_drain(
        CLUSTER,
        'a"b',
        [MemberDrain("/10.0.0.1\\", 'm"1\n', 'c"1', 240.0), MemberDrain("unknown", "unknown", "unknown", math.inf)],
    )
    gauges.set_hot_partitions(
        CLUSTER, 'a"b', [HotPartitionFigures('t"0', 0, 63.25, 40.0), HotPartitionFigures('t"0', 11, 2_500_000.5, 1 / 3)]
    )

    oracle = CollectorRegistry()
    made = {family.name: Gauge(family.name, family.help, family.labels, registry=oracle) for family in gauges.families}
    made["kagent_group_status"].labels(CLUSTER, 'a"b').set(4)
    made["kagent_group_recommended_skew"].labels(CLUSTER, 'a"b').set(1 / 3)
    made["kagent_group_recommended_members"].labels(CLUSTER, "c\\d").set(12_000_000)
    for group, open_kinds in (('a"b', {"stop"}), ("c\\d", set())):
        for kind in IncidentKind:
            made["kagent_group_open_incidents"].labels(CLUSTER, group, kind.value).set(kind.value in open_kinds)
    made["kagent_group_member_drain_seconds"].labels(CLUSTER, 'a"b', "/10.0.0.1\\", 'm"1\n', 'c"1').set(240.0)
    made["kagent_group_member_drain_seconds"].labels(CLUSTER, 'a"b', "unknown", "unknown", "unknown").set(math.inf)
    for partition, rate, best in ((0, 63.25, 40.0), (11, 2_500_000.5, 1 / 3)):
        made["kagent_group_partition_hot"].labels(CLUSTER, 'a"b', 't"0', str(partition)).set(1)
        made["kagent_group_partition_hot_production_rate"].labels(CLUSTER, 'a"b', 't"0', str(partition)).set(rate)
        made["kagent_group_partition_hot_best_capacity"].labels(CLUSTER, 'a"b', 't"0', str(partition)).set(best)

    assert body([gauges]) == generate_latest(oracle)
    assert b'consumer_id="unknown",group="a\\"b",member_host="unknown"} +Inf\n' in body([gauges])


def test_a_member_drain_set_again_replaces_the_groups_series_and_an_unknown_one_has_none() -> None:
    metrics = Metrics()
    gauges = metrics.group_gauges
    gauges.set_member_drain(CLUSTER, "orders", [MemberDrain("h", "a", "c", 30.0), MemberDrain("h", "b", "c", 60.0)])
    assert sorted(scrape_gauges(metrics)["kagent_group_member_drain_seconds"].values()) == [30.0, 60.0]
    gauges.set_member_drain(CLUSTER, "orders", [MemberDrain("h", "b", "c", math.inf)])  # a's drain now unknown
    series = scrape_gauges(metrics)["kagent_group_member_drain_seconds"]
    assert [(dict(key)["consumer_id"], value) for key, value in series.items()] == [("b", math.inf)]
    metrics.forget_group(CLUSTER, "orders")
    assert "kagent_group_member_drain_seconds" not in scrape_gauges(metrics)


def test_a_partition_no_longer_hot_loses_its_series_and_forgetting_the_group_drops_them_all() -> None:
    metrics = Metrics()
    gauges = metrics.group_gauges
    gauges.set_hot_partitions(
        CLUSTER, "orders", [HotPartitionFigures("t", 0, 63.0, 40.0), HotPartitionFigures("t", 2, 50.0, 40.0)]
    )
    series = scrape_gauges(metrics)
    assert {dict(key)["partition"]: value for key, value in series["kagent_group_partition_hot"].items()} == {
        "0": 1.0,
        "2": 1.0,
    }
    assert sorted(series["kagent_group_partition_hot_production_rate"].values()) == [50.0, 63.0]
    assert set(series["kagent_group_partition_hot_best_capacity"].values()) == {40.0}
    gauges.set_hot_partitions(CLUSTER, "orders", [HotPartitionFigures("t", 2, 45.0, 41.0)])  # partition 0 cooled
    series = scrape_gauges(metrics)
    for name, value in (
        ("kagent_group_partition_hot", 1.0),
        ("kagent_group_partition_hot_production_rate", 45.0),
        ("kagent_group_partition_hot_best_capacity", 41.0),
    ):
        assert [(dict(key)["partition"], v) for key, v in series[name].items()] == [("2", value)], name
    gauges.set_hot_partitions(CLUSTER, "orders", [])  # none hot, or not judged: no series
    assert not {name for name in scrape_gauges(metrics) if name.startswith("kagent_group_partition_hot")}
    gauges.set_hot_partitions(CLUSTER, "orders", [HotPartitionFigures("t", 0, 63.0, 40.0)])
    metrics.forget_group(CLUSTER, "orders")
    assert not {name for name in scrape_gauges(metrics) if name.startswith("kagent_group_partition_hot")}


_names = st.text(alphabet=st.sampled_from('ab-_."\\\n\u00e9'), min_size=1, max_size=6)


@st.composite
def _snapshots(draw: st.DrawFn) -> GroupSnapshot:
    """A group of random members over random partitions of two topics, each partition's figures random:
    measured or not, committed or not, time lag known or not, offsets small or past 2**53."""
    group = draw(_names)
    topics = draw(st.lists(_names, min_size=1, max_size=2, unique=True))
    counts = {topic: draw(st.integers(1, 4)) for topic in topics}
    partitions = [(topic, p) for topic, count in counts.items() for p in range(count + draw(st.integers(0, 1)))]
    lags = []
    for topic, partition in partitions:
        committed = draw(st.none() | st.integers(0, 2**62))
        log_end = (committed or 0) + draw(st.integers(0, 10**7))
        measured = draw(st.booleans())
        offset_lag = (log_end - committed if committed is not None else 0) if measured else None
        lags.append(
            PartitionLag(
                group=group,
                topic=topic,
                partition=partition,
                committed=committed,
                log_start=0,
                log_end=log_end,
                offset_lag=offset_lag,
                time_lag=draw(st.none() | st.floats(0, 1e8)) if offset_lag else (0.0 if measured else None),
                flags=() if measured else (LagFlag.NOT_POLLED,),
                polled_at=NOW - 1,
            )
        )
    members = [
        member(draw(_names) + str(n), draw(_names), *draw(st.lists(st.sampled_from(partitions), max_size=3)))
        for n in range(draw(st.integers(0, 3)))
    ]
    return snapshot(group, members, lags, counts)


@given(st.lists(_snapshots(), min_size=1, max_size=3, unique_by=lambda s: s.group), st.sampled_from(list(LagUnit)))
@settings(max_examples=150)
def test_any_groups_figures_are_written_as_prometheus_client_writes_them(
    snapshots: list[GroupSnapshot], unit: LagUnit
) -> None:
    by_name = {found.group: found for found in snapshots}

    rendered = body([exporter(FakeGroups(by_name), evaluation=policy(unit))])

    ordered = [by_name[name] for name in sorted(by_name)]
    assert rendered == oracle_exposition(ordered, CLUSTER, "partition", policy(unit))


def test_a_scrapes_hold_leaves_the_collectors_pauses_out() -> None:
    """A collection that runs in the middle of a scrape's stretch is the collector's hold, not the scrape's:
    timed by the collector's own callbacks, it is taken off the stretch."""
    pauses = CollectorPauses()
    pauses.time_collections(lambda generation, seconds: None)
    hold = LoopHold(pauses)
    try:
        hold.take()
        garbage = [[] for _ in range(200_000)]
        for item in garbage:
            item.append(item)  # cycles: a full collection has work to do
        del garbage, item
        gc.collect()
        hold.let_go()
    finally:
        gc.callbacks.remove(pauses._collected)
    assert pauses.seconds > 0.005
    assert hold.longest < pauses.seconds, (hold.longest, pauses.seconds)


class LoopTurns:
    """How many times the event loop ran another task (one that only counts its turns) while ``work`` ran
    on a scrape's hold (:meth:`run`): :attr:`count` read as things happen tells in which turn they did."""

    def __init__(self) -> None:
        self.count = 0

    async def run(self, work: Callable[[LoopHold], Awaitable[None]]) -> None:
        async def tick() -> None:
            while True:
                self.count += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        hold = LoopHold()
        hold.take()
        try:
            await work(hold)
        finally:
            hold.let_go()
            ticker.cancel()


async def test_a_written_familys_pieces_are_let_go_of_a_run_at_a_time() -> None:
    """One family's text of the groups with lag, freed at once after it was written, held the event loop
    21-28 ms at a million group-partitions: it is let go of a run of groups at a time."""
    turns = LoopTurns()
    freed: list[tuple[int, int]] = []

    class Text:
        def __init__(self, index: int) -> None:
            self.index = index

        def __del__(self) -> None:
            freed.append((self.index, turns.count))

    rows = [[Text(0), Text(1)] for _ in range(3 * STRIDE)]
    await turns.run(lambda hold: drop_pieces(rows, 0, hold, LoopSlices(0.0)))  # type: ignore[arg-type]

    assert [index for index, _ in freed] == [0] * 3 * STRIDE  # the other family's pieces are kept
    assert all(row[0] == b"" and isinstance(row[1], Text) for row in rows)
    assert len({turn for _, turn in freed}) == 3, "the family's pieces were freed in one stretch of the loop"


async def test_a_scrape_lets_go_of_what_it_alone_keeps_a_run_at_a_time() -> None:
    """At a million group-partitions, freeing a scrape's groups with lag all at its end held the event loop
    24-86 ms: they are let go of a run at a time, the loop let go between runs."""
    turns = LoopTurns()
    freed_at: list[int] = []

    class Text:
        def __del__(self) -> None:
            freed_at.append(turns.count)

    items = [Text() for _ in range(3 * STRIDE)]
    kept = items[:STRIDE]  # kept elsewhere too (a group without lag): not freed
    await turns.run(lambda hold: let_go_of(items, hold, LoopSlices(0.0)))

    assert items == []
    assert len(freed_at) == 2 * STRIDE
    assert len(set(freed_at)) == 2, "everything was freed in one stretch of the loop"
    assert len(kept) == STRIDE
