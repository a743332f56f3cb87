"""Drain time through a real worker: a group that cannot keep up is said to fall behind, and one that can is
given a time to catch up, close to the time it then takes.

Real parts: the embedded broker, a real worker, and the simulator's real aiokafka consumer group (its
coordinator records written to ``__consumer_offsets`` as Kafka's coordinator would). Producers write 80
records/s over 4 partitions; each member takes 33 ms a record (at most 30/s: the simulator's member pace).

1. One member reads 30/s of 80/s: the API says the group and its member fall behind (at about 50/s), and
   ``kagent_group_member_drain_seconds`` is ``+Inf`` for it. kagent recommends scaling, which opens a lag-skew
   incident: the worker's Alertmanager sink posts ``KagentLagSkew`` to a real Alertmanager, its description
   saying that the group, and its member, fall behind at about 50/s. Its backlog grows meanwhile.
2. Four members, 30/s each against 20/s a partition: each drains its partition's backlog at about 10/s. The
   API gives the group a time to catch up; the test then measures the time the group takes until every
   member's lag is back to what it holds while keeping up, and holds the prediction to within 30 % of it
   (issue 38's criterion 3).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.simulator import GroupSpec, MemberSpec, Scenario, TopicSpec, TrafficSpec, run_simulation
from tests.support.monitoring import Alertmanager
from tests.support.waiting import wait_until_async
from tests.support.web import get_answer
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration

APP = "drain-e2e"
GROUP = "drain-orders"
TOPIC = "drain-topic"
PARTITIONS = 4
RATE = 80.0
DELAY_MS = 33.0
"""Per record: a member reads at most about 30 records/s."""
RATE_WINDOW = 20.0
SETTINGS = {
    **FAST,
    "rate_window": str(RATE_WINDOW),
    # No rebalance here: the test is about what the group's page and its alert say. The one member's group
    # gets a scale recommendation (it moves nothing, and nobody applies it), which opens the alerted incident.
    "min_total_lag": "1000000",
}

BACKLOG = 2400
"""Records of lag the one member leaves before the group is scaled: about 600 a partition, which four
members then drain at about 10/s each (a minute)."""
KEEPING_UP_LAG = 60
"""A member's lag while it keeps up: what its partition gets between two of its commits and the worker's polls
(20/s x about 1.5 s in batches), counted as caught up. Small beside the 600 records it drains."""
DEADLINE = 180.0
"""Seconds for each phase to show on a busy two-core machine."""
SETTLE = 5.0
"""Seconds the scaled group is given, once kagent measures a drain time for it, before the prediction is read:
its members join one by one, and each rebalance starts its rates again."""
TOLERANCE = 0.3


def scenario(members: int) -> Scenario:
    return Scenario(
        topics=(TopicSpec(TOPIC, PARTITIONS),),
        traffic=(TrafficSpec(TOPIC, rate=RATE, keys=400),),
        groups=(
            GroupSpec(
                GROUP,
                (TOPIC,),
                "roundrobin",
                tuple(MemberSpec(f"c{i}", DELAY_MS) for i in range(members)),
                commit_interval_ms=500,
            ),
        ),
    )


@asynccontextmanager
async def simulating(broker: EmbeddedBroker, members: int) -> Any:
    """The scenario running in the background; on the way out its members commit and leave."""
    stop = asyncio.Event()
    running = asyncio.create_task(run_simulation(broker.kafka, scenario(members), stop))
    try:
        yield running
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)


def group_detail(worker: Worker) -> dict[str, Any] | None:
    status, body = get_answer(worker.url + f"api/groups/{quote(GROUP, safe='')}")
    return body if status == 200 else None


async def detail_where(worker: Worker, holds: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The group's page once ``holds`` of it (asked in a thread: the simulated group's loop runs meanwhile)."""
    detail = await asyncio.to_thread(group_detail, worker)
    return detail if detail is not None and holds(detail) else None


def falls_behind(detail: dict[str, Any]) -> bool:
    members = detail["members"]
    return (
        detail["summary"]["members"] == 1
        and detail["drain"]["state"] == "falling-behind"
        and members[0]["drain"]["state"] == "falling-behind"
    )


def scaled_and_catching_up(detail: dict[str, Any]) -> bool:
    return detail["summary"]["members"] == PARTITIONS and detail["drain"]["state"] == "catching-up"


def caught_up(detail: dict[str, Any]) -> bool:
    lags = [member["offset_lag"] for member in detail["members"]]
    return len(lags) == PARTITIONS and all(lag is not None and lag <= KEEPING_UP_LAG for lag in lags)


DRAIN_LINE = re.compile(
    r"^Drain time at today's rates: falling behind at ([\d.,]+)/s \(when its slowest member catches up\)$",
    re.MULTILINE,
)
"""The line of a lag alert's description that gives the group's drain time (kagent.core.alert_payloads)."""


def lag_alert(alertmanager: Alertmanager) -> dict[str, Any] | None:
    """The group's ``KagentLagSkew`` alert as Alertmanager holds it, once it has one."""
    return next(iter(alertmanager.alerts(alertname="KagentLagSkew", group=GROUP)), None)


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[Alertmanager]:
    """A real Alertmanager that keeps the alerts it is sent (and notifies nobody)."""
    with Alertmanager(workdir=tmp_path / "alertmanager") as server:
        yield server


async def test_a_group_falling_behind_is_said_to_and_one_catching_up_does_so_about_when_kagent_said(
    kafka_broker: EmbeddedBroker,
    offsets_topic: str,
    start_worker: Callable[..., Worker],
    drill_figures: Any,
    tmp_path: Path,
    alertmanager: Alertmanager,
) -> None:
    alerts = tmp_path / "alerts.yaml"
    alerts.write_text(f"sinks:\n  - name: am\n    type: alertmanager\n    url: {alertmanager.url}\n")
    worker = start_worker(APP, alerts_config=str(alerts), **SETTINGS)
    await asyncio.to_thread(worker.wait_serving)

    async with simulating(kafka_broker, members=1):
        behind = await wait_until_async(
            lambda: detail_where(worker, falls_behind),
            DEADLINE,
            "the group to be said to fall behind",
            interval=0.5,
            detail=lambda: f"group: {group_detail(worker)}",
        )
        [member] = behind["members"]
        # 30/s read of 80/s written: the lag grows by about 50/s, and the group, its only member, as fast.
        assert member["drain"]["falling_behind_rate"] == pytest.approx(RATE - 1000 / DELAY_MS, rel=0.35)
        assert behind["drain"] == member["drain"]
        assert member["drain"]["seconds"] is None
        # One consumer spreads its pace over its partitions unevenly from one fetch to the next: a partition can be
        # catching up while the member, whose figures add them all up, falls behind. Each has lag, and some
        # partition falls behind.
        partitions = [p["drain"] for p in behind["partitions"]]
        assert any(p["state"] == "falling-behind" for p in partitions), partitions
        assert not any(p["state"] == "caught-up" for p in partitions), partitions
        # The metric is the evaluator's, set at the group's next evaluation (every 0.5 s here).
        drained = await wait_until_async(
            lambda: _member_drain_series(worker, member["member_id"]),
            DEADLINE,
            "kagent_group_member_drain_seconds for the member",
            interval=0.5,
            detail=lambda: f"metrics: {worker.metrics('kagent_group_member_drain_seconds')}",
        )
        assert list(drained.values()) == [math.inf], drained
        # The lag alert says when the group catches up: never at today's rates; it falls behind, at about the
        # rate the API said.
        alert = await wait_until_async(
            lambda: asyncio.to_thread(lag_alert, alertmanager),
            DEADLINE,
            "the group's KagentLagSkew alert in Alertmanager",
            interval=0.5,
            detail=lambda: f"alerts: {alertmanager.alerts()}\n{worker.log_tail(30)}",
        )
        description = alert["annotations"]["description"]
        said = DRAIN_LINE.search(description)
        assert said, description
        alerted_rate = float(said[1].replace(",", ""))
        assert alerted_rate == pytest.approx(RATE - 1000 / DELAY_MS, rel=0.35), description
        # ... and beside its one member's lag, the member's own (the same, the group being that member).
        assert f"(falling behind at {said[1]}/s)" in description.splitlines()[0], description
        await wait_until_async(
            lambda: detail_where(worker, lambda d: (d["summary"]["total_lag"] or 0) >= BACKLOG),
            DEADLINE,
            f"a backlog of {BACKLOG} records",
            interval=0.5,
        )
    drill_figures(
        f"drain: 1 member falling behind at {member['drain']['falling_behind_rate']:.0f}/s by kagent's measure "
        f"({RATE - 1000 / DELAY_MS:.0f}/s by the scenario's rates); its KagentLagSkew alert said "
        f"'falling behind at {said[1]}/s'"
    )

    async with simulating(kafka_broker, members=PARTITIONS):
        first = await wait_until_async(
            lambda: detail_where(worker, scaled_and_catching_up),
            DEADLINE,
            f"a drain time for the group with {PARTITIONS} members",
            interval=0.5,
            detail=lambda: f"group: {group_detail(worker)}",
        )
        settled = time.monotonic() + SETTLE
        predicted = await wait_until_async(
            lambda: detail_where(worker, scaled_and_catching_up) if time.monotonic() >= settled else _none(),
            DEADLINE,
            "the scaled group to settle",
            interval=0.5,
        )
        said_at = time.monotonic()
        seconds = predicted["drain"]["seconds"]
        done = await wait_until_async(
            lambda: detail_where(worker, caught_up),
            DEADLINE,
            "the scaled group to catch up",
            interval=0.5,
            detail=lambda: f"group: {group_detail(worker)}",
        )
        took = time.monotonic() - said_at
    members = {m["member_id"][-8:]: round(m["drain"]["seconds"] or -1) for m in predicted["members"]}
    drill_figures(
        f"drain: {PARTITIONS} members, {predicted['summary']['total_lag']:.0f} records of lag; kagent said the group "
        f"catches up in {seconds:.0f} s (first said {first['drain']['seconds']:.0f} s; members {members}); it took "
        f"{took:.0f} s (every member's lag <= {KEEPING_UP_LAG}: {[m['offset_lag'] for m in done['members']]})"
    )
    assert seconds == pytest.approx(took, rel=TOLERANCE), f"predicted {seconds:.1f} s, took {took:.1f} s"


async def _none() -> None:
    return None


async def _member_drain_series(worker: Worker, member_id: str) -> dict[str, float] | None:
    """The member's ``kagent_group_member_drain_seconds`` samples, once it has one."""
    samples = await asyncio.to_thread(worker.metrics, "kagent_group_member_drain_seconds")
    mine = {key: value for key, value in (samples or {}).items() if f'consumer_id="{member_id}"' in key}
    return mine or None
