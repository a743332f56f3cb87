"""Incidents end to end: a real worker judges a group's health from its commits and opens and resolves
incidents on its incidents topic (the pure rules are tested in tests/unit/test_group_health.py and
tests/unit/test_incidents.py; here, that the worker feeds them what they need)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import (
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.topics import TopicReader
from tests.support.worker import FAST, Worker, metric_total

pytestmark = pytest.mark.integration

SETTINGS = {**FAST, "health_min_distance": "0"}
SPAN = 4.0
"""Seconds between a group's two commits: the span its silence must outlast before STOP."""


async def test_a_quiet_group_is_skipped_until_its_silence_can_mean_stop_and_then_turns_stop(
    kafka_broker: EmbeddedBroker, offsets_topic: str, start_worker: Callable[..., Worker]
) -> None:
    """The evaluator skips a group that is quiet (OK, armed, nothing open) while nothing it reads
    changes. A consumer that stops committing with records waiting, while its producers are idle too,
    changes nothing: the STOP must still come, as soon as the silence outlasts the window's span."""
    bootstrap = kafka_broker.bootstrap_servers
    group, topic = "quietly-stopping-app", "incident-quiet-stop"
    await kafka_broker.create_topics({topic: 1})
    await produce(bootstrap, topic, {0: 500})
    worker = start_worker("incident-quiet", **SETTINGS)
    worker.wait_ready()
    members = {f"{group}-0": [TopicPartition(topic, 0)]}

    async with TopicReader(bootstrap, "incident-quiet-incidents") as reader:
        await publish(bootstrap, [group_metadata(group, 1, members), offset_commit(group, topic, 0, 100)])
        await asyncio.sleep(SPAN)  # pacing the scenario's commits in time, not waiting for anything
        last_commit_at = time.time()
        await publish(bootstrap, [offset_commit(group, topic, 0, 110)])  # then silence, 390 records waiting

        def opened() -> list[dict[str, Any]]:
            return [
                json.loads(record.value)["incident"]
                for record in reader.records
                if record.key == group.encode() and json.loads(record.value)["action"] == "open"
            ]

        await reader.until(lambda: bool(opened()), 60, "a STOP incident", worker.log_tail)
    incident = opened()[0]
    assert (incident["kind"], incident["group"]) == ("stop", group)
    # Not before the silence outlasted the span of the two commits (at least SPAN seconds) ...
    assert incident["opened_at"] >= last_commit_at + SPAN - 0.1, (incident["opened_at"], last_commit_at)
    # ... and in between, the group came due and was skipped as quiet: nothing it reads had changed.
    assert (
        metric_total(worker.metrics("kagent_evaluations_skipped_total") or {}, "kagent_evaluations_skipped_total") >= 1
    )
    assert worker.stop() == 0


async def test_a_consumer_that_stops_committing_opens_a_stop_incident_that_resolves_when_it_catches_up(
    kafka_broker: EmbeddedBroker, offsets_topic: str, start_worker: Callable[..., Worker]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    group, topic = "stopping-app", "incident-stop"
    await kafka_broker.create_topics({topic: 2})
    await produce(bootstrap, topic, {0: 500, 1: 500})
    members = {f"{group}-0": [TopicPartition(topic, 0), TopicPartition(topic, 1)]}
    await publish(bootstrap, [group_metadata(group, 1, members), offset_commit(group, topic, 0, 100)])
    # A second commit a second later: two commits span a second; then silence, with 400 records waiting.
    # (Pacing the scenario's commits in time, not waiting for anything.)
    await asyncio.sleep(1.0)
    await publish(bootstrap, [offset_commit(group, topic, 0, 100), offset_commit(group, topic, 1, 500)])
    worker = start_worker("incident-e2e", **SETTINGS)

    async with TopicReader(bootstrap, "incident-e2e-incidents") as reader:

        def transitions() -> list[dict[str, Any]]:
            return [json.loads(record.value) for record in reader.records if record.key == group.encode()]

        await reader.until(lambda: bool(transitions()), 90, "a STOP incident", worker.log_tail)
        opened = transitions()[0]
        assert opened["action"] == "open"
        incident = opened["incident"]
        assert (incident["kind"], incident["severity"], incident["group"]) == ("stop", "critical", group)
        assert [(c["topic"], c["partition"], c["lag"]) for c in incident["culprits"]] == [(topic, 0, 400)]
        assert incident["member_lag"] == {f"{group}-0": 400}
        assert "no commit for" in incident["culprits"][0]["reason"]

        # The consumer catches up: the partition's lag is 0, the incident resolves, with the same id.
        await publish(bootstrap, [offset_commit(group, topic, 0, 500)])
        await reader.until(
            lambda: any(t["action"] == "resolve" for t in transitions()), 60, "the resolve", worker.log_tail
        )
        resolved = next(t for t in transitions() if t["action"] == "resolve")
        assert resolved["incident"]["id"] == incident["id"]
        assert resolved["incident"]["resolved_at"] >= incident["opened_at"]
        assert [t["action"] for t in transitions()] == ["open", "resolve"]
    samples = worker.metrics() or {}
    assert samples[f'kagent_group_status{{cluster_name="default",group="{group}"}}'] == 1  # OK again
    assert samples[f'kagent_group_open_incidents{{cluster_name="default",group="{group}",kind="stop"}}'] == 0
    assert samples['kagent_incident_transitions_total{action="open",kind="stop"}'] >= 1  # other tests' groups too
    assert worker.stop() == 0
