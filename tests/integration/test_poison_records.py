"""Poison records in ``__consumer_offsets`` reach a running worker, which dead-letters them, counts them, stays
up and applies the records after them (issue 17, item 1; issue 35): one that does not decode, and one that
decodes but breaks a rule of :mod:`kagent.core.record_checks`.

The module runs its own embedded broker: the poison record it writes to ``__consumer_offsets`` must
not reach the workers of other tests, which read that topic from its start and count what they
dead-letter.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import OffsetCommit, encode
from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.simulator.coordinator_records import OffsetsTopicMessage
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.topics import TopicReader
from tests.support.web import wait_json
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """A broker of this module's own (overrides the session's, for ``start_worker`` too)."""
    with EmbeddedBroker() as broker:
        yield broker


async def _letter_for(bootstrap: str, topic: str, key: bytes, worker: Worker, timeout: float) -> dict[str, Any]:
    """The first letter of ``topic`` whose record key is ``key``; fails at once if ``worker`` exits."""

    def letters() -> list[dict[str, Any]]:
        return [json.loads(r.value) for r in reader.records if r.value is not None]

    def found() -> bool:
        worker.check_alive()
        return any(base64.b64decode(letter["key"]) == key for letter in letters())

    async with TopicReader(bootstrap, topic) as reader:
        await reader.until(found, timeout, "a dead letter for the poison record", detail=worker.log_tail)
    return next(letter for letter in letters() if base64.b64decode(letter["key"]) == key)


async def test_poison_records_are_dead_lettered_and_counted_and_the_commits_after_them_applied(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, "poison-skewed": 6})
    await produce(bootstrap, "poison-skewed", {0: 300, 1: 300, 2: 100, 3: 100, 4: 100, 5: 100})
    worker = start_worker("poison-test", **FAST)
    await asyncio.to_thread(worker.wait_ready)

    undecodable_key, undecodable_value = b"\x00\x01\x00\xff", b"\x00\x03garbage"  # a group length past the end
    rule_key, rule_value = encode(
        OffsetCommit("poison-app", "poison-skewed", -1, 5, "", 1_700_000_000_000, None, None, 3)
    )
    members = {
        f"skewed-app-{m}": [TopicPartition("poison-skewed", 2 * m), TopicPartition("poison-skewed", 2 * m + 1)]
        for m in range(3)
    }
    await publish(
        bootstrap,
        [
            OffsetsTopicMessage(0, undecodable_key, undecodable_value),
            OffsetsTopicMessage(0, rule_key, rule_value),
            group_metadata("skewed-app", 4, members),
            *(offset_commit("skewed-app", "poison-skewed", p, 0) for p in range(6)),
        ],
    )

    letter = await _letter_for(bootstrap, "poison-test-dead-letters", undecodable_key, worker, 90)
    assert (letter["topic"], letter["partition"], letter["offset"]) == (OFFSETS_TOPIC, 0, 0)
    assert base64.b64decode(letter["value"]) == undecodable_value
    assert "record type 1" in letter["error"] and "byte" in letter["error"], letter["error"]
    letter = await _letter_for(bootstrap, "poison-test-dead-letters", rule_key, worker, 30)
    assert (letter["topic"], letter["partition"], letter["offset"]) == (OFFSETS_TOPIC, 0, 1)
    assert base64.b64decode(letter["value"]) == rule_value
    assert "partition" in letter["error"] and "-1" in letter["error"], letter["error"]

    # The records behind the poison ones were applied: the hot partitions 0 and 1 sit on one member.
    body = await wait_json(
        worker.url + "api/local/groups",
        lambda b: (
            b["groups"].get("skewed-app", {}).get("member_lag")
            == {"skewed-app-0": 600, "skewed-app-1": 200, "skewed-app-2": 200}
        ),
        60,
    )
    assert body["groups"]["skewed-app"]["generation"] == 4
    assert "poison-app" not in body["groups"]
    # And the next commit, written after the worker met the poison, is what the API measures.
    await publish(bootstrap, [offset_commit("skewed-app", "poison-skewed", 0, 250)])
    detail = await wait_json(
        worker.url + "api/groups/skewed-app",
        # its lag read once known: a busy machine may delay an end-offsets poll past staleness
        lambda b: any(
            p["partition"] == 0 and p["committed"] == 250 and p["offset_lag"] is not None for p in b["partitions"]
        ),
        60,
        "the commit after the poison records in the API, its lag known",
    )
    assert next(p for p in detail["partitions"] if p["partition"] == 0)["offset_lag"] == 50, detail["partitions"]
    assert (worker.metrics() or {}).get('kagent_malformed_records_total{topic="__consumer_offsets"}') == 2.0
    assert "malformed record at __consumer_offsets partition 0 offset 0" in worker.log()
    assert worker.stop() == 0
