"""The alerting stage of a real worker delivering incident transitions to a real HTTP sink, under faults.

The transitions are written to the worker's incidents topic by the test, as the evaluator writes
them (``tests.support.incidents``), so that each test controls exactly what there is to deliver;
the sink is a real HTTP server on loopback (``tests.support.receiver``) that is down, rejects, or
accepts as the test says. What must hold: every transition reaches the sink, in order per group,
whatever the sink or the worker went through; a permanent rejection goes to the dead letters.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kagent.core.incidents import IncidentTransition
from kagent.tools.embedded import EmbeddedBroker
from tests.support.incidents import delivered_keys, lifecycle, publish_transitions, transition_key
from tests.support.receiver import Answer, Posted, Receiver
from tests.support.topics import TopicReader
from tests.support.waiting import wait_until_async
from tests.support.worker import Worker, metric_total

pytestmark = pytest.mark.integration

DOWN_FOR = 150.0
"""Seconds the sink stays down while incidents keep coming."""
WAVES = 6
"""Incidents come in this many waves over that time, the first at once."""


def webhook_config(path: Path, url: str) -> Path:
    """An alerting file with one webhook sink (the default ``json`` template) and quick retries."""
    path.write_text(
        "retry:\n"
        "  initial_backoff: 0.2\n"
        "  max_backoff: 2\n"
        "  timeout: 5\n"
        "sinks:\n"
        "  - name: hook\n"
        "    type: webhook\n"
        f"    url: {url}/hook\n"
    )
    return path


def accepted(posted: list[Posted]) -> list[Posted]:
    return [p for p in posted if 200 <= p.status < 300]


def in_group_order(transitions: list[IncidentTransition]) -> dict[str, list[tuple[str, str, float]]]:
    """Each group's transition keys, in the order given."""
    by_group: dict[str, list[tuple[str, str, float]]] = {}
    for transition in transitions:
        by_group.setdefault(transition.incident.group, []).append(transition_key(transition))
    return by_group


def first_deliveries(posted: list[Posted], groups: set[str]) -> dict[str, list[tuple[str, str, float]]]:
    """Each of ``groups``' transitions in the order the sink first accepted them (a re-delivery after a
    crash repeats some: the sink dedups by incident id, and so does this). Other groups' are left out:
    the worker also evaluates the groups other tests wrote to the session broker's ``__consumer_offsets``,
    and delivers their incidents too."""
    seen: set[tuple[str, str, float]] = set()
    by_group: dict[str, list[tuple[str, str, float]]] = {}
    for post in accepted(posted):
        transition = IncidentTransition.model_validate_json(post.body)
        key = transition_key(transition)
        if transition.incident.group in groups and key not in seen:
            seen.add(key)
            by_group.setdefault(transition.incident.group, []).append(key)
    return by_group


async def wait_delivered(
    receiver: Receiver, expected: list[IncidentTransition], timeout: float, worker: Worker
) -> dict[str, list[tuple[str, str, float]]]:
    want = {transition_key(t) for t in expected}
    groups = {t.incident.group for t in expected}

    async def all_there() -> dict[str, list[tuple[str, str, float]]] | None:
        worker.check_alive()
        got = first_deliveries(receiver.posted, groups)
        return got if want <= {key for keys in got.values() for key in keys} else None

    def missing() -> str:
        got = {key for keys in first_deliveries(receiver.posted, groups).values() for key in keys}
        return f"{len(want - got)} of {len(want)} transitions not delivered\n{worker.log_tail()}"

    return await wait_until_async(all_there, timeout, "every transition at the sink", interval=0.5, detail=missing)


async def test_a_sink_down_for_minutes_gets_every_transition_afterwards_in_order_per_group(
    kafka_broker: EmbeddedBroker,
    start_worker: Callable[..., Worker],
    tmp_path: Path,
    drill_figures: Callable[[str], None],
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    down = True
    with Receiver(lambda path, body: Answer(503 if down else 202)) as receiver:
        worker = start_worker(
            "alert-down",
            topic_partitions="4",
            alerts_config=str(webhook_config(tmp_path / "alerts.yaml", receiver.url)),
        )
        worker.wait_serving()
        topic = "alert-down-incidents"
        sent: list[IncidentTransition] = []
        started = time.monotonic()
        for wave in range(WAVES):  # incidents keep coming while the sink is down
            batch = [t for g in range(8) for t in lifecycle(f"down-{g}", 1_000_000.0 + wave * 100, updates=2)]
            await publish_transitions(bootstrap, topic, batch)
            sent += batch
            # Pacing the scenario (the next wave is due later), not waiting for anything to happen.
            await asyncio.sleep(max(0.0, started + (wave + 1) * DOWN_FOR / WAVES - time.monotonic()))
        assert not accepted(receiver.posted), "the sink accepted something while it was down"
        refused = len(receiver.posted)
        down = False
        delivered = await wait_delivered(receiver, sent, 120, worker)
        assert delivered == in_group_order(sent)
        samples = worker.metrics() or {}
        assert metric_total(samples, "kagent_alert_deliveries_total") >= len(sent)
        retried = samples.get('kagent_alert_deliveries_total{outcome="retried",sink="hook"}', 0)
        assert retried >= 1
        drill_figures(
            f"alert sink down {DOWN_FOR:.0f} s: {len(sent)} transitions of 8 groups sent meanwhile, "
            f"{refused} attempts refused (503), all {len(sent)} delivered afterwards in order per group"
        )
        assert worker.stop() == 0


async def test_a_worker_killed_mid_delivery_loses_no_transition(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    accept_first = 12
    taken = 0

    def answer(path: str, body: bytes) -> Answer:
        nonlocal taken
        if taken < accept_first:
            taken += 1
            return Answer(202)
        return Answer(503)  # the rest wait in the worker's retries when it is killed

    with Receiver(answer) as receiver:
        config = str(webhook_config(tmp_path / "alerts.yaml", receiver.url))
        first = start_worker("alert-kill", topic_partitions="4", alerts_config=config)
        first.wait_serving()
        sent = [t for g in range(10) for t in lifecycle(f"kill-{g}", 2_000_000.0, updates=2)]
        await publish_transitions(bootstrap, "alert-kill-incidents", sent)

        async def mid_delivery() -> bool:
            first.check_alive()
            return len(accepted(receiver.posted)) >= accept_first and len(receiver.posted) > accept_first

        await wait_until_async(mid_delivery, 90, "the worker to be mid-delivery", interval=0.2, detail=first.log_tail)
        first.kill()  # SIGKILL: nothing flushed, nothing committed after this
        receiver.answer = lambda path, body: Answer(202)
        second = start_worker("alert-kill", topic_partitions="4", alerts_config=config)
        delivered = await wait_delivered(receiver, sent, 120, second)
        assert delivered == in_group_order(sent)
        assert second.stop() == 0


async def test_a_rejected_transition_goes_to_the_dead_letters_and_delivery_goes_on(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    bad = lifecycle("reject-bad", 3_000_000.0, updates=1)
    bad_open = bad[0]

    def answer(path: str, body: bytes) -> Answer:
        if transition_key(IncidentTransition.model_validate_json(body)) == transition_key(bad_open):
            return Answer(400, body='{"error": "invalid payload"}')
        return Answer(202)

    with Receiver(answer) as receiver:
        worker = start_worker(
            "alert-reject",
            topic_partitions="4",
            alerts_config=str(webhook_config(tmp_path / "alerts.yaml", receiver.url)),
        )
        worker.wait_serving()
        good = [t for g in range(3) for t in lifecycle(f"reject-good-{g}", 3_000_000.0)]
        sent = bad + good
        await publish_transitions(bootstrap, "alert-reject-incidents", sent)
        expected = [t for t in sent if t is not bad_open]
        delivered = await wait_delivered(receiver, expected, 90, worker)
        assert delivered == in_group_order(expected)  # the bad group's later transitions too
        rejected = [p for p in receiver.posted if p.status == 400]
        assert len(rejected) == 1, "a 400 is never retried"

        async with TopicReader(bootstrap, "alert-reject-dead-letters") as reader:

            def letters() -> list[dict[str, Any]]:  # not the malformed __consumer_offsets records of other tests
                values = [json.loads(record.value) for record in reader.records]
                return [value for value in values if value["topic"] == "alert-reject-incidents"]

            await reader.until(lambda: bool(letters()), 60, "the dead letter", worker.log_tail)
            [letter] = letters()
        assert "hook" in letter["error"] and "400" in letter["error"] and "invalid payload" in letter["error"]
        assert delivered_keys([base64.b64decode(letter["value"])]) == [transition_key(bad_open)]
        samples = worker.metrics() or {}
        assert samples.get('kagent_alert_deliveries_total{outcome="rejected",sink="hook"}') == 1
        assert worker.stop() == 0
