"""A record that decodes but breaks a rule of :mod:`kagent.core.record_checks` is dead-lettered by a real
worker, which stays up and applies the records after it (issue 17, item 1).

The module runs its own embedded broker: the poison record it writes to ``__consumer_offsets`` must
not reach the workers of other tests, which read that topic from its start and count what they
dead-letter.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from tests.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, group_metadata, offset_commit, produce, publish

from kagent.core.consumer_offsets import OffsetCommit, encode
from kagent.tools.embedded import EmbeddedBroker
from tests.conftest import Worker, get_json

pytestmark = pytest.mark.integration

FAST = {"evaluate_interval": "0.5", "end_offset_interval": "0.5", "hold_evaluations": "2", "topic_partitions": "4"}


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """A broker of this module's own (overrides the session's, for ``start_worker`` too)."""
    with EmbeddedBroker() as broker:
        yield broker


async def _letter_for(bootstrap: str, topic: str, key: bytes, worker: Worker, timeout: float) -> dict[str, Any]:
    """The first letter of ``topic`` whose record key is ``key``; fails at once if ``worker`` exits."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        async with asyncio.timeout(timeout):
            while True:
                assert worker.process is not None
                if worker.process.poll() is not None:
                    pytest.fail(f"the worker exited with {worker.process.returncode}; log:\n{worker.log()[-3000:]}")
                batches = await consumer.getmany(timeout_ms=500)
                for record in (r for records in batches.values() for r in records):
                    letter: dict[str, Any] = json.loads(record.value)
                    if base64.b64decode(letter["key"]) == key:
                        return letter
    except TimeoutError:
        pytest.fail(f"no dead letter for the poison record in {timeout:g} s; log:\n{worker.log()[-3000:]}")
    finally:
        await consumer.stop()


async def _wait_groups(worker: Worker, predicate: Callable[[Any], bool], timeout: float) -> Any:
    """Poll the worker's ``/groups/`` until ``predicate`` holds; fails with the last body after ``timeout``."""
    body = None
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        body = await asyncio.to_thread(get_json, worker.url + "groups/")
        if body is not None and predicate(body):
            return body
        await asyncio.sleep(0.2)  # poll interval of a deadline-bounded wait
    pytest.fail(f"/groups/ did not reach the expected state in {timeout:g} s; last body: {json.dumps(body)[:3000]}")


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
            (poison_key, poison_value),
            encode(group_metadata("skewed-app", 4, members)),
            *(encode(offset_commit("skewed-app", "poison-skewed", p, 0)) for p in range(6)),
        ],
    )

    worker = start_worker("poison-test", **FAST)
    letter = await _letter_for(bootstrap, "poison-test-dead-letters", poison_key, worker, 90)
    assert (letter["topic"], letter["partition"], letter["offset"]) == (OFFSETS_TOPIC, 0, 0)
    assert base64.b64decode(letter["value"]) == poison_value
    assert "partition" in letter["error"] and "-1" in letter["error"], letter["error"]

    # The records behind the poison one were applied: the hot partitions 0 and 1 sit on one member.
    body = await _wait_groups(
        worker,
        lambda b: (
            b["groups"].get("skewed-app", {}).get("member_lag")
            == {"skewed-app-0": 600, "skewed-app-1": 200, "skewed-app-2": 200}
        ),
        60,
    )
    assert body["groups"]["skewed-app"]["generation"] == 4
    assert "poison-app" not in body["groups"]
    metrics = await asyncio.to_thread(lambda: urllib.request.urlopen(worker.url + "metrics").read())
    assert b'kagent_malformed_records_total{topic="__consumer_offsets"} 1.0' in metrics
    assert "malformed record at __consumer_offsets partition 0 offset 0" in worker.log()
    assert worker.stop() == 0
