"""A real worker reports each stage's progress and answers readiness (issue 17, item 5)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    publish,
)
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.worker import Worker

pytestmark = pytest.mark.integration


def metric(worker: Worker, name: str, stage: str) -> float | None:
    return (worker.metrics() or {}).get(f'{name}{{stage="{stage}"}}')


async def test_stages_report_what_they_applied_and_the_worker_is_ready(
    kafka_broker: EmbeddedBroker, start_worker: Callable[..., Worker]
) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"health-{suffix}", f"health-group-{suffix}"
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, topic: 2})
    worker = start_worker(f"health-{suffix}", end_offset_interval="0.5", evaluate_interval="0.5")
    members = {"a-1": [TopicPartition(topic, 0)], "b-1": [TopicPartition(topic, 1)]}
    await publish(
        kafka_broker.bootstrap_servers,
        [group_metadata(group, 1, members), offset_commit(group, topic, 0, 0)],
    )
    wait_until(
        lambda: group in (get_json(worker.url + "api/local/groups") or {}).get("groups", {}),
        90,
        f"{group} on the worker",
    )
    wait_until(lambda: (metric(worker, "kagent_stage_applied_records", "storage") or 0) >= 1, 30, "storage's progress")
    assert (metric(worker, "kagent_stage_applied_records", "offsets-topic-source") or 0) >= 2
    assert metric(worker, "kagent_stage_stalled", "storage") == 0
    # Asked for by name, as Prometheus' name[] filter does: those samples only, no per-group figures.
    asked = worker.metrics("kagent_stage_applied_records", "kagent_evaluations_total")
    assert asked is not None and asked.keys() == {
        'kagent_stage_applied_records{stage="offsets-topic-source"}',
        'kagent_stage_applied_records{stage="storage"}',
        "kagent_evaluations_total",
    }, asked
    assert any(name.startswith("kafka_consumergroup_group_lag{") for name in worker.metrics() or {})
    assert get_json(worker.url + "readyz") == {
        "ready": True,
        "tables_recovered": True,
        "source_caught_up": True,
        "end_offsets_polled": True,
        "stalled_stages": [],
    }
