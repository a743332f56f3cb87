"""A heavy partition through a real worker: a partition within one member's pace that overloads any member it
shares gets a rebalance that leaves it alone on its member (issue 38, "tested with real traffic" (2)).

Real parts: the embedded broker, a real worker, and the simulator's real aiokafka consumer group (its
coordinator records written to ``__consumer_offsets`` as Kafka's coordinator would) and its real producer of
key-skewed traffic: 80 records/s over 4 partitions, 40 keys of Zipf popularity (exponent 0.3) whose 10 most
popular ones murmur2 places on partition 0, so partition 0 gets about 35.8 % of the records (about 28.6/s, 72 %
of a member's pace) and the others about 21.5 % each (about 17/s). Three members on round robin: c0 holds
partitions 0 and 3 (about 45.5/s), c1 partition 1 and c2 partition 2. Each member takes 25 ms a record (at
most 40/s), so c0 falls behind by about 5/s while c1 and c2 keep up; the members' capacity (about 120/s) is
well above the producers' 80/s with the 20 % headroom, so no scale. Partition 0 beside even the lightest
other (about 45/s) is beyond a member: heavy, and crowded on c0.

The skew trigger is set out of reach (threshold 50) so that what recommends here is the heavy-partition rule
alone, whatever the lag; a short cooldown lets a group re-arm after a recommendation made for a generation on
the way (members joining one by one), so the test waits for the one of the group's final generation.
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

APP = "heavy-e2e"
GROUP = "heavy-orders"
TOPIC = "heavy-topic"
PARTITIONS = 4
MEMBERS = 3
RATE = 80.0
HEAVY_SHARE = 0.358
"""Partition 0's share of the records: the Zipf weights of the 10 most popular of 40 keys, all on it."""
OTHER_SHARE = 0.211
"""The least written other partition's share (partition 3's: the others have 0.217 and 0.214)."""
DELAY_MS = 25.0
"""Per record: a member reads at most 1000 / 25 = 40 records/s."""
RATE_WINDOW = 30.0
SETTINGS = {
    **FAST,
    "rate_window": str(RATE_WINDOW),
    **PACE_SETTINGS,  # a member's rate measured over at least 14 s
    "skew_threshold": "50",
    "cooldown": "5",
}
DEADLINE = 150.0
"""Seconds for the recommendation to show up on a busy two-core machine (the worker's first join alone
has taken 30 s)."""


def scenario() -> Scenario:
    return Scenario(
        topics=(TopicSpec(TOPIC, PARTITIONS),),
        traffic=(TrafficSpec(TOPIC, rate=RATE, keys=40, zipf_exponent=0.3, hot_partitions=(0,)),),
        groups=(
            GroupSpec(
                GROUP,
                (TOPIC,),
                "roundrobin",
                tuple(MemberSpec(f"c{i}", DELAY_MS) for i in range(MEMBERS)),
                commit_interval_ms=500,
            ),
        ),
    )


def _isolating(rec: dict[str, Any]) -> bool:
    """A rebalance of the whole group (every member joined) that isolates a partition."""
    return rec.get("kind") == "rebalance" and rec.get("isolated") is not None and len(rec["members"]) == MEMBERS


async def _isolating_recommendation(worker: Worker) -> dict[str, Any] | None:
    found = await asyncio.to_thread(group_recommendations, worker.url, GROUP)  # not blocking the simulated group's loop
    return next((r for r in found if _isolating(r)), None)


def partitions(refs: list[dict[str, Any]]) -> list[int]:
    return sorted(ref["partition"] for ref in refs)


async def test_a_heavy_partition_sharing_a_member_that_falls_behind_gets_a_rebalance_that_isolates_it(
    kafka_broker: EmbeddedBroker, offsets_topic: str, start_worker: Callable[..., Worker], drill_figures: Any
) -> None:
    worker = start_worker(APP, **SETTINGS)
    await asyncio.to_thread(worker.wait_serving)

    stop = asyncio.Event()
    running = asyncio.create_task(run_simulation(kafka_broker.kafka, scenario(), stop))
    try:
        rec = await wait_until_async(
            lambda: _isolating_recommendation(worker),
            DEADLINE,
            "a rebalance that isolates a heavy partition",
            interval=0.5,
            detail=lambda: f"recommendations: {group_recommendations(worker.url, GROUP)}",
        )
        detail = await asyncio.to_thread(group_page, worker.url, GROUP)
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)

    [heavy] = rec["isolated"]["partitions"]
    assert (heavy["topic"], heavy["partition"]) == (TOPIC, 0)
    members = {m["member_id"]: m for m in rec["members"]}
    holder = members[heavy["member_id"]]
    # It stays with the member that holds it now (c0, with partition 3, on round robin), which keeps nothing
    # else: its other partition goes to another member (the strategy may move others between them to
    # balance their lag), and nothing moves onto it.
    assert holder["client_id"] == f"{GROUP}-c0"
    assert partitions(holder["current"]) == [0, 3]
    assert partitions(holder["recommended"]) == [0]
    moved = {m["partition"]: m for m in rec["moves"]}
    assert 0 not in moved and moved[3]["from_member"] == heavy["member_id"]
    assert all(m["to_member"] != heavy["member_id"] for m in rec["moves"])
    assert sorted(p for m in rec["members"] for p in partitions(m["recommended"])) == list(range(PARTITIONS))
    # The rates kagent measured, beside what the traffic sends: within the member's pace, but not beside the
    # lightest other partition.
    assert heavy["production_rate"] == pytest.approx(RATE * HEAVY_SHARE, rel=0.3)
    assert heavy["lightest_other_rate"] == pytest.approx(RATE * OTHER_SHARE, rel=0.3)
    assert (
        heavy["production_rate"] <= heavy["member_capacity"] < heavy["production_rate"] + heavy["lightest_other_rate"]
    )
    assert heavy["member_capacity"] <= fastest_read(DELAY_MS), "no member reads faster than its processing allows"
    assert rec["isolated"]["window"] == RATE_WINDOW
    assert rec["scale"] is None and rec["hot"] is None
    # The skew trigger was out of reach: the heavy partition's rule made this recommendation.
    assert rec["trigger"]["value"] < rec["trigger"]["threshold"]
    # The group's page in the API names it.
    assert detail is not None and detail["recommendation"] is not None
    drain = {m["member_id"]: m["drain"] for m in detail["members"]}.get(heavy["member_id"], {})
    client = {m["member_id"]: m["client_id"].removeprefix(f"{GROUP}-") for m in rec["members"]}
    drill_figures(
        f"heavy partition: {TOPIC}-0 written at {heavy['production_rate']:.1f}/s (traffic: about "
        f"{RATE * HEAVY_SHARE:.1f}/s), the lightest other partition at {heavy['lightest_other_rate']:.1f}/s "
        f"(traffic: about {RATE * OTHER_SHARE:.1f}/s); its member c0 reads {heavy['member_capacity']:.1f}/s and "
        f"was {drain.get('state')} at {drain.get('falling_behind_rate') or 0:.1f}/s; recommended: "
        + ", ".join(
            f"{client[m['member_id']]} {partitions(m['current'])} -> {partitions(m['recommended'])}"
            for m in rec["members"]
        )
        + "; moves: "
        + ", ".join(
            f"{TOPIC}-{m['partition']} {client[m['from_member']]} -> {client[m['to_member']]}" for m in rec["moves"]
        )
    )
