"""A worker restarted, and one taken over after a crash, with incidents open: what it does not know yet
reads as unknown, never as 0, and its open incidents neither resolve nor reopen with new ids (issue 35).

Real parts only: the embedded broker, ``__consumer_offsets`` records in Kafka's format, and ``kagent
worker`` processes. Two groups:

- ``skewed``: three members of two partitions each, one holding 900 records of lag and two 30 each:
  a rebalance recommendation, so a ``lag-skew`` incident;
- ``crashed``: one member committed twice and then the group went ``Empty`` (its consumer crashed)
  while 390 records wait: no member holds its partition, so its lag is the ``unknown`` member's, and
  Burrow's rules make it STOP, so a ``stop`` incident.

A worker that starts (or takes the groups over) measures nothing until its first end-offset poll
answers; the restarted worker here polls only every 5 s, so evaluations and API answers come before
that poll. Before the fix, its members read 0 records then, the skew 1.0 and the status OK, which
resolved both incidents and opened them again with new ids at the next poll.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.simulator.coordinator_records import empty_group_metadata
from tests.support.coordinator import group_metadata, offset_commit, produce, publish
from tests.support.topics import TopicReader
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.worker import FAST, Worker, metric_total

pytestmark = pytest.mark.integration

APP = "unknown-figures"
SKEWED, SKEWED_TOPIC = "unknown-figures-skewed", "unknown-figures-orders"
CRASHED, CRASHED_TOPIC = "unknown-figures-crashed", "unknown-figures-audit"
SETTINGS = {
    **FAST,
    "hold_evaluations": "1",
    "min_total_lag": "10",
    "cooldown": "3600",
    "health_min_distance": "0",
}
EXPECTED_MEMBER_LAG = {f"{SKEWED}-a": 900, f"{SKEWED}-b": 30, f"{SKEWED}-c": 30}
CRASHED_LAG = 390


def detail(worker: Worker, group: str) -> dict[str, Any] | None:
    return get_json(worker.url + "api/groups/" + quote(group, safe=""), timeout=5)


def member_lags(answer: dict[str, Any] | None) -> dict[str, Any] | None:
    if answer is None:
        return None
    return {member["member_id"]: member["offset_lag"] for member in answer["members"]}


def open_ids(answer: dict[str, Any] | None) -> dict[str, str]:
    return {} if answer is None else {i["kind"]: i["id"] for i in answer["summary"]["open_incidents"]}


class Watch:
    """Every answer for the skewed group's members seen while waiting: each must be right or unknown."""

    def __init__(self) -> None:
        self.unknown = 0
        self.wrong: list[dict[str, Any]] = []

    def look(self, worker: Worker) -> bool:
        """One look; whether the members' lag is measured (and right)."""
        lags = member_lags(detail(worker, SKEWED))
        if not lags:
            return False
        for member, lag in lags.items():
            if lag is None:
                self.unknown += 1
            elif lag != EXPECTED_MEMBER_LAG[member]:
                self.wrong.append(lags)
        return lags == EXPECTED_MEMBER_LAG


async def test_a_restart_and_a_failover_read_unknown_until_measured_and_keep_incidents_open(
    kafka_broker: EmbeddedBroker,
    offsets_topic: str,
    start_worker: Callable[..., Worker],
    drill_figures: Callable[[str], None],
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    await kafka_broker.create_topics({SKEWED_TOPIC: 6, CRASHED_TOPIC: 1})
    await produce(bootstrap, SKEWED_TOPIC, {0: 450, 1: 450, 2: 15, 3: 15, 4: 15, 5: 15})
    await produce(bootstrap, CRASHED_TOPIC, {0: 500})
    skewed = {
        f"{SKEWED}-{m}": [TopicPartition(SKEWED_TOPIC, 2 * i), TopicPartition(SKEWED_TOPIC, 2 * i + 1)]
        for i, m in enumerate("abc")
    }
    crashed_tp = TopicPartition(CRASHED_TOPIC, 0)
    await publish(
        bootstrap,
        [
            group_metadata(SKEWED, 1, skewed),
            *(offset_commit(SKEWED, SKEWED_TOPIC, p, 0) for p in range(6)),
            group_metadata(CRASHED, 1, {f"{CRASHED}-x": [crashed_tp]}),
            offset_commit(CRASHED, CRASHED_TOPIC, 0, 100),
        ],
    )
    await asyncio.sleep(1.0)  # pacing the scenario: the crashed consumer's two commits span a second
    await publish(
        bootstrap,
        [offset_commit(CRASHED, CRASHED_TOPIC, 0, 110), empty_group_metadata(CRASHED, 2, int(time.time() * 1000))],
    )

    first = start_worker(APP, **SETTINGS)
    async with TopicReader(bootstrap, f"{APP}-incidents") as reader:

        def transitions(group: str) -> list[dict[str, Any]]:
            return [json.loads(r.value) for r in reader.records if r.key == group.encode()]

        def opened(group: str, kind: str) -> list[str]:
            return [
                t["incident"]["id"]
                for t in transitions(group)
                if t["action"] == "open" and t["incident"]["kind"] == kind
            ]

        await reader.until(
            lambda: bool(opened(SKEWED, "lag-skew")) and bool(opened(CRASHED, "stop")),
            120,
            "a lag-skew incident for the skewed group and a stop incident for the crashed one",
            first.log_tail,
        )
        skew_id, stop_id = opened(SKEWED, "lag-skew")[0], opened(CRASHED, "stop")[0]

        # The crashed group: Empty, shown with its lag on the unknown member, and STOP; read once measured (an
        # end-offsets poll delayed past staleness on a busy machine rightly makes its status UNKNOWN meanwhile).
        crashed = await asyncio.to_thread(
            wait_until,
            lambda: (found := detail(first, CRASHED)) and found["summary"]["status"] != "UNKNOWN" and found,
            60,
            "the crashed group's figures measured",
            detail=first.log_tail,
        )
        summary = crashed["summary"]
        assert (summary["state"], summary["members"], summary["status"]) == ("Empty", 0, "STOP")
        assert summary["total_lag"] == CRASHED_LAG and crashed["members"] == []
        unassigned = crashed["unassigned"]
        assert (unassigned["member_id"], unassigned["offset_lag"]) == ("unknown", CRASHED_LAG)
        samples = first.metrics("kagent_group_member_lag") or {}
        unknown_member = (
            f'kagent_group_member_lag{{client_id="unknown",cluster_name="default",consumer_id="unknown",'
            f'group="{CRASHED}",member_host="unknown"}}'
        )
        assert samples.get(unknown_member) == CRASHED_LAG, samples

        async def survived(worker: Worker, what: str) -> None:
            """Both incidents stay open under their ids through ``worker``'s first measurements and 20
            evaluations after them; its answers meanwhile are right or unknown, never 0."""
            watch = Watch()
            await asyncio.to_thread(
                wait_until,
                lambda: watch.look(worker),
                120,
                f"{what}: the members' lag measured",
                interval=0.1,
                detail=worker.log_tail,
            )
            assert watch.wrong == [], f"{what}: a member's lag read wrong before it was measured: {watch.wrong[:3]}"
            evaluated = metric_total(worker.metrics("kagent_evaluations_total") or {}, "kagent_evaluations_total")
            await asyncio.to_thread(
                wait_until,
                lambda: (
                    metric_total(worker.metrics("kagent_evaluations_total") or {}, "kagent_evaluations_total")
                    >= evaluated + 20
                ),
                60,
                f"{what}: 20 more evaluations",
                detail=worker.log_tail,
            )
            await reader.drain()
            for group, kind, incident in ((SKEWED, "lag-skew", skew_id), (CRASHED, "stop", stop_id)):
                actions = [
                    (t["action"], t["incident"]["id"]) for t in transitions(group) if t["incident"]["kind"] == kind
                ]
                assert actions == [("open", incident)], f"{what}: {group}'s {kind} incident: {actions}"
            assert open_ids(detail(worker, SKEWED)) == {"lag-skew": skew_id}
            assert open_ids(detail(worker, CRASHED)) == {"stop": stop_id}
            drill_figures(
                f"{what}: {watch.unknown} member figures read unknown before the first measurement, none wrong; "
                f"incidents {skew_id[:8]} (lag-skew) and {stop_id[:8]} (stop) stayed open"
            )

        # A restart with the same app id; its first end-offset poll comes 5 s after it starts.
        assert first.stop() == 0
        second = start_worker(APP, **{**SETTINGS, "end_offset_interval": "5"})
        await survived(second, "restart")

        # A failover: a second worker joins, the one holding the skewed group is killed.
        third = start_worker(APP, **{**SETTINGS, "end_offset_interval": "5"})
        third.wait_ready()

        def both_serving() -> bool:
            page = get_json(third.url + "api/groups") or {}
            answered = [w for w in page.get("workers", []) if w["ok"]]
            return len(answered) == 2 and {g["group"] for g in page.get("groups", [])} >= {SKEWED, CRASHED}

        await asyncio.to_thread(wait_until, both_serving, 120, "both workers serving the groups", detail=third.log_tail)
        holder = (detail(third, SKEWED) or {})["summary"]["worker"]
        victim, survivor = (second, third) if holder.rstrip("/") == second.url.rstrip("/") else (third, second)
        victim.kill()
        await survived(survivor, "failover")
