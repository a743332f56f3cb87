"""A hot partition through a real worker: a partition written faster than any member reads gets a
``hot-partition`` recommendation, and no rebalance (issue 38, "tested with real traffic" (1)); its remedies
compared say a rebalance would still fall behind.

Real parts: the embedded broker, a real worker, and the simulator's real aiokafka consumer group (its
coordinator records written to ``__consumer_offsets`` as Kafka's coordinator would) and its real producer
of key-skewed traffic: 80 records/s over 4 partitions, 16 keys of Zipf popularity (exponent 1.5) whose most
popular ones murmur2 places on partition 0, so partition 0 gets about 79 % of the records (about 63/s) and
each other about 6/s. Four members, one partition each (round robin); each takes 25 ms a record (at most
40/s). The member of partition 0 falls behind whatever kagent moves; the others keep up. The worker's
``/metrics`` shows the partition hot, with its rate and the fastest member's, until the group empties.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.simulator import GroupSpec, MemberSpec, Scenario, TopicSpec, TrafficSpec, run_simulation
from tests.support.member_pace import PACE_SETTINGS, fastest_read
from tests.support.waiting import wait_until_async
from tests.support.web import group_page, group_recommendations
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration

APP = "hot-e2e"
GROUP = "hot-orders"
TOPIC = "hot-topic"
PARTITIONS = 4
RATE = 80.0
HOT_SHARE = 0.79
"""Partition 0's share of the records: the Zipf weights of the 4 keys of each partition, the top 4 on it."""
DELAY_MS = 25.0
"""Per record: a member reads at most 1000 / 25 = 40 records/s."""
RATE_WINDOW = 30.0
SETTINGS = {
    **FAST,
    "rate_window": str(RATE_WINDOW),
    **PACE_SETTINGS,  # a member's rate measured over at least 14 s
    # No rebalance for the uneven lag of members joining one by one at the start.
    "min_total_lag": "1000",
}
DEADLINE = 150.0
"""Seconds for the recommendation to show up on a busy two-core machine (the worker's first join alone
has taken 30 s)."""


def scenario() -> Scenario:
    return Scenario(
        topics=(TopicSpec(TOPIC, PARTITIONS),),
        traffic=(TrafficSpec(TOPIC, rate=RATE, keys=16, zipf_exponent=1.5, hot_partitions=(0,)),),
        groups=(
            GroupSpec(
                GROUP,
                (TOPIC,),
                "roundrobin",
                tuple(MemberSpec(f"c{i}", DELAY_MS) for i in range(PARTITIONS)),
                commit_interval_ms=500,
            ),
        ),
    )


HOT_FAMILIES = (
    "kagent_group_partition_hot",
    "kagent_group_partition_hot_production_rate",
    "kagent_group_partition_hot_best_capacity",
)


def hot_series(worker: Worker) -> dict[str, float] | None:
    """The worker's hot-partition samples for the group (empty: none), None while /metrics does not answer."""
    samples = worker.metrics(*HOT_FAMILIES)
    if samples is None:
        return None
    return {name: value for name, value in samples.items() if f'group="{GROUP}"' in name}


async def _hot_partition_recommendation(worker: Worker) -> dict[str, Any] | None:
    found = await asyncio.to_thread(group_recommendations, worker.url, GROUP)  # not blocking the simulated group's loop
    return next((r for r in found if r.get("kind") == "hot-partition"), None)


async def test_a_partition_written_faster_than_any_member_reads_gets_a_hot_partition_recommendation_not_a_rebalance(
    kafka_broker: EmbeddedBroker, offsets_topic: str, start_worker: Callable[..., Worker], drill_figures: Any
) -> None:
    worker = start_worker(APP, **SETTINGS)
    await asyncio.to_thread(worker.wait_serving)

    stop = asyncio.Event()
    running = asyncio.create_task(run_simulation(kafka_broker.kafka, scenario(), stop))
    try:
        rec = await wait_until_async(
            lambda: _hot_partition_recommendation(worker),
            DEADLINE,
            "a hot-partition recommendation",
            interval=0.5,
            detail=lambda: f"recommendations: {group_recommendations(worker.url, GROUP)}",
        )
        detail = await asyncio.to_thread(group_page, worker.url, GROUP)
        # Prometheus' side: the worker exports the hot partition, its rate and the fastest member's.
        exported = await wait_until_async(
            lambda: asyncio.to_thread(hot_series, worker),
            30,
            "the hot partition's series at /metrics",
            interval=0.5,
        )
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)
    # The members left (the group is empty): nothing is hot any more, and its series go.
    await wait_until_async(
        lambda: asyncio.to_thread(lambda: hot_series(worker) == {}),
        60,
        "the hot partition's series to go once the group is empty",
        interval=0.5,
        detail=lambda: f"series: {hot_series(worker)}",
    )

    hot = rec["hot"]
    assert len(hot["partitions"]) == 1, f"one hot partition, partition 0, expected: {rec}"
    [partition] = hot["partitions"]
    assert (partition["topic"], partition["partition"]) == (TOPIC, 0)
    # Its member: c0 once all four have joined (round robin); whoever held it, if a generation on the way
    # lasted long enough to be judged.
    assert partition["member_id"].startswith(f"{GROUP}-c")
    # Its producers, as kagent measured them, beside what the traffic sends it; and faster than any member.
    assert partition["production_rate"] == pytest.approx(RATE * HOT_SHARE, rel=0.3)
    assert partition["production_rate"] > hot["best_capacity"] >= partition["member_capacity"] > 0
    assert hot["best_capacity"] <= fastest_read(DELAY_MS), "no member reads faster than its processing allows"
    assert hot["window"] == RATE_WINDOW and "more partitions" in hot["remedy"]
    # It moves nothing, and no rebalance (nor scale) was recommended for the group.
    assert rec["moves"] == [] and all(m["recommended"] == m["current"] for m in rec["members"])
    kinds = [r["kind"] for r in group_recommendations(worker.url, GROUP)]
    assert set(kinds) == {"hot-partition"}, kinds
    # The remedies compared: a rebalance leaves t-0's member falling behind, as the group does today; no
    # assignment helps, and that is what is chosen.
    rebalance, judged = rec["remedies"]
    assert (rebalance["kind"], rebalance["chosen"], judged["kind"], judged["chosen"]) == (
        "rebalance",
        False,
        "hot-partition",
        True,
    )
    assert judged["partitions"] == [{"topic": TOPIC, "partition": 0}]
    assert rebalance["drain"]["state"] == judged["drain"]["state"] == "falling-behind", rec["remedies"]
    assert judged["drain"]["falling_behind_rate"] > 0 and not judged["estimated"]
    # The group's page in the API shows it, with the partition and its rate, and the comparison.
    assert detail is not None and detail["recommendation"]["kind"] == "hot-partition"
    assert detail["recommendation"]["hot"]["partitions"][0]["partition"] == 0
    assert [r["kind"] for r in detail["recommendation"]["remedies"]] == ["rebalance", "hot-partition"]
    labels = f'cluster_name="default",group="{GROUP}",partition="0",topic="{TOPIC}"'
    assert set(exported) == {
        f"kagent_group_partition_hot{{{labels}}}",
        f"kagent_group_partition_hot_production_rate{{{labels}}}",
        f"kagent_group_partition_hot_best_capacity{{{labels}}}",
    }, exported
    assert exported[f"kagent_group_partition_hot{{{labels}}}"] == 1.0
    production = exported[f"kagent_group_partition_hot_production_rate{{{labels}}}"]
    best = exported[f"kagent_group_partition_hot_best_capacity{{{labels}}}"]
    assert production == pytest.approx(RATE * HOT_SHARE, rel=0.3) and production > best
    assert 0 < best <= fastest_read(DELAY_MS)
    drill_figures(
        f"hot partition: {TOPIC}-0 written at {partition['production_rate']:.0f}/s (traffic: about "
        f"{RATE * HOT_SHARE:.0f}/s); its member read {partition['member_capacity']:.0f}/s, the fastest member "
        f"{hot['best_capacity']:.0f}/s; recommendations: {kinds}; remedies: rebalance falling behind at "
        f"{rebalance['drain']['falling_behind_rate']:.0f}/s, "
        f"the group today at {judged['drain']['falling_behind_rate']:.0f}/s"
    )
