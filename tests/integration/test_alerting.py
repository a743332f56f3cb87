"""Alerting end to end with real parts: a skewed group on the embedded broker, a real worker, a real
Prometheus scraping it and a real Alertmanager that kagent's sink posts to, which forwards through its
own webhook receiver to an HTTP server of the test's."""

from __future__ import annotations

import asyncio
import math
import urllib.request
from collections.abc import Callable
from pathlib import Path
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
from tests.support.monitoring import Alertmanager, Prometheus
from tests.support.receiver import Receiver
from tests.support.waiting import wait_until_async
from tests.support.web import wait_json
from tests.support.worker import FAST, Worker

pytestmark = pytest.mark.integration

SETTINGS = {**FAST, "cluster_name": "test-cluster"}


def forwarding_alertmanager(workdir: Path, webhook: str) -> Alertmanager:
    """An Alertmanager that forwards every alert, firing and resolved, to ``webhook`` within a second."""
    return Alertmanager(
        {
            "route": {
                "receiver": "test",
                "group_by": ["alertname", "group"],
                "group_wait": "0s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "test", "webhook_configs": [{"url": webhook, "send_resolved": True}]}],
        },
        workdir=workdir,
    )


def notifications(receiver: Receiver, status: str, group: str) -> list[dict[str, Any]]:
    """The alerts Alertmanager's webhook notifications carried with ``status``, of ``group``."""
    return [
        alert
        for post in receiver.posted
        if post.path == "/alertmanager"
        for alert in post.json()["alerts"]
        if alert["status"] == status and alert["labels"].get("group") == group
    ]


async def test_a_skewed_group_reaches_prometheus_and_alertmanager_and_its_alert_resolves_when_lag_evens_out(
    kafka_broker: EmbeddedBroker, offsets_topic: str, start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    group, topic = "alerting-skewed-app", "alerting-skewed"
    await kafka_broker.create_topics({topic: 6})
    # Range puts partitions 0 and 1, the hot ones, on one member: member lag 6000, 2000, 2000.
    await produce(bootstrap, topic, {0: 3000, 1: 3000, 2: 1000, 3: 1000, 4: 1000, 5: 1000})
    members = {f"{group}-{m}": [TopicPartition(topic, 2 * m), TopicPartition(topic, 2 * m + 1)] for m in range(3)}
    await publish(
        bootstrap, [group_metadata(group, 1, members), *(offset_commit(group, topic, p, 0) for p in range(6))]
    )

    with Receiver() as receiver, forwarding_alertmanager(tmp_path / "am", f"{receiver.url}/alertmanager") as am:
        alerts = tmp_path / "alerts.yaml"
        alerts.write_text(
            f"sinks:\n  - name: am\n    type: alertmanager\n    url: {am.url}\n"
            "    resend_interval: 2\n    ends_after: 30\n"
        )
        worker = start_worker("alerting-e2e", alerts_config=str(alerts), **SETTINGS)
        worker.wait_serving()
        with Prometheus(targets=[f"127.0.0.1:{worker.web_port}"], workdir=tmp_path / "prometheus") as prometheus:

            async def figures() -> dict[str, float] | None:
                worker.check_alive()
                found = {}
                for name, expr in {
                    "skew": f'kagent_group_skew{{group="{group}",cluster_name="test-cluster"}}',
                    "lag0": f'kafka_consumergroup_group_lag{{group="{group}",topic="{topic}",partition="0"}}',
                    "max": f'kafka_consumergroup_group_max_lag{{group="{group}"}}',
                    "sum": f'kafka_consumergroup_group_sum_lag{{group="{group}"}}',
                    "member": f'kagent_group_member_lag{{group="{group}",consumer_id="{group}-0"}}',
                    "recommended": f'kagent_group_recommended_skew{{group="{group}",cluster_name="test-cluster"}}',
                }.items():
                    result = prometheus.query(expr)
                    if len(result) != 1:
                        return None
                    # NaN while the lag is unknown: a busy machine may delay an end-offsets poll past
                    # staleness, when the figures are rightly unknown until the next.
                    if math.isnan(value := float(result[0]["value"][1])):
                        return None
                    found[name] = value
                return found

            got = await wait_until_async(figures, 90, "the group's figures in Prometheus", interval=0.5)
        assert got["skew"] == pytest.approx(6000 / (10000 / 3))  # peak-to-mean
        assert (got["lag0"], got["max"], got["sum"], got["member"]) == (3000, 3000, 10000, 6000)
        assert got["recommended"] < got["skew"]  # the strategy spreads the two hot partitions

        async def alert_in_alertmanager() -> dict[str, Any] | None:
            worker.check_alive()
            return next(iter(am.alerts(alertname="KagentLagSkew", group=group)), None)

        alert = await wait_until_async(alert_in_alertmanager, 90, "the alert in Alertmanager's API", interval=0.5)
        assert alert["labels"] == {
            "alertname": "KagentLagSkew",
            "group": group,
            "kind": "lag-skew",
            "severity": "warning",
            "cluster": "test-cluster",
        }
        assert alert["status"]["state"] == "active"
        assert (
            f"{topic}-0" in alert["annotations"]["description"] or f"{topic}-1" in alert["annotations"]["description"]
        )
        assert alert["generatorURL"] == f"http://127.0.0.1:{worker.web_port}/groups/{group}"
        # The link is the group's page on the dashboard; the API behind it shows the hot member.
        with urllib.request.urlopen(alert["generatorURL"], timeout=10) as response:
            assert response.status == 200 and response.headers.get_content_type() == "text/html"
            assert group in response.read().decode()
        detail = await wait_json(
            f"{worker.url}api/groups/{group}",
            lambda b: {m["member_id"]: m["offset_lag"] for m in b["members"]}.get(f"{group}-0") is not None,
            30,
            "the hot member's lag known",
        )
        assert {m["member_id"]: m["offset_lag"] for m in detail["members"]}[f"{group}-0"] == 6000
        await wait_until_async(
            lambda: _truthy(notifications(receiver, "firing", group)), 60, "Alertmanager's firing notification"
        )

        # The hot partitions catch up to the others: every member's lag is 2000, skew 1.0 < 1.5 x 0.8.
        await publish(bootstrap, [offset_commit(group, topic, 0, 2000), offset_commit(group, topic, 1, 2000)])
        resolved = await wait_until_async(
            lambda: _truthy(notifications(receiver, "resolved", group)),
            90,
            "Alertmanager's resolved notification",
            detail=worker.log_tail,
        )
        assert resolved[0]["labels"]["alertname"] == "KagentLagSkew"
        # Below the threshold the strategy is not run: the skew is exported, the recommended skew is not.
        series = f'{{cluster_name="test-cluster",group="{group}"}}'
        evened = await wait_until_async(
            lambda: _evened(worker, series), 60, "the even skew without a recommended skew", detail=worker.log_tail
        )
        assert evened[f"kagent_group_skew{series}"] == pytest.approx(1.0)
        # Alertmanager's own list drops the alert once it has taken Prometheus' resolution, which may come
        # after its notification went out (its clock, not ours, says when the alert's end has passed).
        await wait_until_async(
            lambda: _none_active(am, group), 60, "no active alert for the group in Alertmanager", interval=0.5
        )
        assert worker.stop() == 0


async def _evened(worker: Worker, series: str) -> dict[str, float] | None:
    """The worker's group gauges once its group's skew is below the threshold and it exports no
    recommended skew for it; None before."""
    worker.check_alive()
    samples = await asyncio.to_thread(worker.metrics, "kagent_group_skew", "kagent_group_recommended_skew")
    if not samples or samples.get(f"kagent_group_skew{series}", math.inf) >= 1.5:
        return None
    return None if f"kagent_group_recommended_skew{series}" in samples else samples


async def _truthy(value: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return value or None


async def _none_active(am: Alertmanager, group: str) -> bool:
    return not [a for a in am.alerts(group=group) if a["status"]["state"] == "active"]
