"""A record that decodes but breaks a rule of :mod:`kagent.core.record_checks` is dead-lettered by a real
worker, which stays up and applies the records after it (issue 17, item 1).

The module runs its own embedded broker: the poison record it writes to ``__consumer_offsets`` must
not reach the workers of other tests, which read that topic from its start and count what they
dead-letter.
"""

from __future__ import annotations

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


async def test_a_partition_minus_one_commit_is_dead_lettered_and_the_group_after_it_applied(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, "poison-skewed": 6})
    await produce(bootstrap, "poison-skewed", {0: 300, 1: 300, 2: 100, 3: 100, 4: 100, 5: 100})
    poison_key, poison_value = encode(
        OffsetCommit("poison-app", "poison-skewed", -1, 5, "", 1_700_000_000_000, None, None, 3)
    )
    members = {
        f"skewed-app-{m}": [TopicPartition("poison-skewed", 2 * m), TopicPartition("poison-skewed", 2 * m + 1)]
        for m in range(3)
    }
    await publish(
        bootstrap,
        [
            OffsetsTopicMessage(0, poison_key, poison_value),
            group_metadata("skewed-app", 4, members),
            *(offset_commit("skewed-app", "poison-skewed", p, 0) for p in range(6)),
        ],
    )

    worker = start_worker("poison-test", **FAST)
    letter = await _letter_for(bootstrap, "poison-test-dead-letters", poison_key, worker, 90)
    assert (letter["topic"], letter["partition"], letter["offset"]) == (OFFSETS_TOPIC, 0, 0)
    assert base64.b64decode(letter["value"]) == poison_value
    assert "partition" in letter["error"] and "-1" in letter["error"], letter["error"]

    # The records behind the poison one were applied: the hot partitions 0 and 1 sit on one member.
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
    assert (worker.metrics() or {}).get('kagent_malformed_records_total{topic="__consumer_offsets"}') == 1.0
    assert "malformed record at __consumer_offsets partition 0 offset 0" in worker.log()
    assert worker.stop() == 0
