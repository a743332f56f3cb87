"""A real worker's lag series follow a group's rebalance: the labels are made again when the members change.

A worker renders each group's series with a layout (labels, each partition's owner) that it keeps while the
group's members and the partitions it reads stay the same (``kagent.core.lag_series.GroupLayout``), so a
new generation, a member gone and a partition first committed must each show in the next scrape: no series
of the member that left, each partition under its new owner, and a partition committed outside the
assignment under kafka-lag-exporter's ``unknown`` member.

Real parts: the session's embedded broker, ``__consumer_offsets`` records in Kafka's format, a ``kagent
worker`` process, its ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import group_metadata, offset_commit, produce, publish
from tests.support.waiting import wait_until
from tests.support.worker import STEADY, Worker

pytestmark = pytest.mark.integration

GROUP, TOPIC, OTHER = "rebalanced-consumers", "rebalanced-orders", "rebalanced-audit"
RECORDS = 10
COMMITTED = {0: 2, 1: 4, 2: 6, 3: 8}
"""Each partition of TOPIC's committed offset: lag 8, 6, 4 and 2."""


def series(worker: Worker) -> dict[str, dict[tuple[str, str], float]]:
    """The group's per-partition lag, ``(topic, partition) -> consumer_id``, and per-member lag,
    ``consumer_id -> lag``, as ``{"owners": ..., "members": ...}`` (empty while /metrics does not answer)."""
    samples = worker.metrics("kafka_consumergroup_group_lag", "kagent_group_member_lag") or {}
    owners: dict[Any, Any] = {}
    members: dict[Any, Any] = {}
    for key, value in samples.items():
        name, _, rest = key.partition("{")
        labels = dict(pair.split("=", 1) for pair in rest.rstrip("}").split(","))
        labels = {label: text.strip('"') for label, text in labels.items()}
        if labels.get("group") != GROUP:
            continue
        if name == "kafka_consumergroup_group_lag":
            owners[(labels["topic"], labels["partition"])] = (labels["consumer_id"], value)
        else:
            members[labels["consumer_id"]] = value
    return {"owners": owners, "members": members}


def seen(worker: Worker, expected: dict[str, Any]) -> Callable[[], bool]:
    def check() -> bool:
        worker.check_alive()
        return series(worker) == expected

    return check


async def test_a_rebalance_and_a_partition_first_committed_show_in_the_next_scrapes_labels(
    kafka_broker: EmbeddedBroker, offsets_topic: str, start_worker: Callable[..., Worker]
) -> None:
    await kafka_broker.create_topics({TOPIC: 4, OTHER: 1})
    await produce(kafka_broker.bootstrap_servers, TOPIC, dict.fromkeys(range(4), RECORDS))
    await produce(kafka_broker.bootstrap_servers, OTHER, {0: RECORDS})
    parts = [TopicPartition(TOPIC, p) for p in range(4)]
    a, b, c = "series-a-1", "series-b-1", "series-c-1"
    await publish(
        kafka_broker.bootstrap_servers,
        [
            group_metadata(GROUP, 1, {a: parts[:2], b: parts[2:]}),
            *(offset_commit(GROUP, TOPIC, p, offset) for p, offset in COMMITTED.items()),
        ],
        by_group=True,
    )
    worker = start_worker("series-rebalance", **STEADY)  # its own groups are named after it: not watched
    first = {
        "owners": {
            (TOPIC, "0"): (a, 8.0),
            (TOPIC, "1"): (a, 6.0),
            (TOPIC, "2"): (b, 4.0),
            (TOPIC, "3"): (b, 2.0),
        },
        "members": {a: 14.0, b: 6.0},
    }
    wait_until(seen(worker, first), 120, "generation 1's series", detail=lambda: str(series(worker)))

    # Generation 2: b left, c joined; a takes partition 2. The group commits on a partition outside its
    # assignment too (a topic it no longer subscribes to, say): no member holds it.
    await publish(
        kafka_broker.bootstrap_servers,
        [group_metadata(GROUP, 2, {a: parts[:3], c: parts[3:]}), offset_commit(GROUP, OTHER, 0, 7)],
        by_group=True,
    )
    second = {
        "owners": {
            (TOPIC, "0"): (a, 8.0),
            (TOPIC, "1"): (a, 6.0),
            (TOPIC, "2"): (a, 4.0),
            (TOPIC, "3"): (c, 2.0),
            (OTHER, "0"): ("unknown", 3.0),
        },
        "members": {a: 18.0, c: 2.0, "unknown": 3.0},
    }
    wait_until(seen(worker, second), 60, "generation 2's series", detail=lambda: str(series(worker)))
