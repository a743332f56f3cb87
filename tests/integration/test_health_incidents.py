"""Incidents end to end: a real worker judges a group's health from its commits and opens and resolves
incidents on its incidents topic (the pure rules are tested in tests/unit/test_group_health.py and
tests/unit/test_incidents.py; here, that the worker feeds them what they need)."""

from __future__ import annotations

import asyncio
import json
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
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration

SETTINGS = {**FAST, "health_min_distance": "0"}


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
