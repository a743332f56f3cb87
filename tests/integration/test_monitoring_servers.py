"""The shipped rules and Alertmanager config in the real servers, on metrics served as a worker serves them.

A scrape target on loopback serves a fixed exposition: group ``orders`` stopped (status 4) and
skewed, group ``billing`` skewed, with a hot partition. A real Prometheus scrapes it every second with the shipped
rules (their ``for`` set to 0, the only change: no test waits minutes) and sends to a real
Alertmanager running the shipped alertmanager.yml (its secret files absent: nothing is notified
within the test). Then ``orders`` recovers and its alert resolves. No Kafka is involved.

Deadlines are generous (2 busy cores in CI); every wait polls (tests.support.waiting).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support import REPO
from tests.support.monitoring import Alertmanager, MetricsTarget, Prometheus, ServerError, require_binary
from tests.support.processes import process_alive
from tests.support.waiting import wait_until

RULES = REPO / "deploy" / "prometheus" / "kagent-rules.yml"
SCALED_OBJECT = REPO / "deploy" / "keda" / "scaledobject.yaml"
ALERTMANAGER_CONFIG = REPO / "deploy" / "alertmanager" / "alertmanager.yml"

DEADLINE = 120.0
"""Seconds for anything to show up: discovery (5 s), a scrape, an evaluation, a POST; on a busy machine."""

HEALTHY = """\
# HELP kagent_group_status Burrow's status code of the group
# TYPE kagent_group_status gauge
kagent_group_status{cluster_name="prod",group="orders"} %(orders_status)d
kagent_group_status{cluster_name="prod",group="billing"} 1
# HELP kagent_group_skew Lag skew of the group
# TYPE kagent_group_skew gauge
kagent_group_skew{cluster_name="prod",group="orders"} 2.5
kagent_group_skew{cluster_name="prod",group="billing"} 2.0
# HELP kafka_consumergroup_group_max_lag_seconds Max time lag of the group
# TYPE kafka_consumergroup_group_max_lag_seconds gauge
kafka_consumergroup_group_max_lag_seconds{cluster_name="prod",group="orders",is_simple_consumer="false"} 12.0
kafka_consumergroup_group_max_lag_seconds{cluster_name="prod",group="billing",is_simple_consumer="false"} 3.0
# HELP kagent_group_recommended_members Members the group needs to keep up with its producers
# TYPE kagent_group_recommended_members gauge
kagent_group_recommended_members{cluster_name="prod",group="orders"} 3
kagent_group_recommended_members{cluster_name="prod",group="billing"} 6
# HELP kagent_group_partition_hot 1 while the partition is hot
# TYPE kagent_group_partition_hot gauge
kagent_group_partition_hot{cluster_name="prod",group="billing",partition="0",topic="invoices"} 1.0
# HELP kagent_group_partition_hot_production_rate Records per second written to a hot partition
# TYPE kagent_group_partition_hot_production_rate gauge
kagent_group_partition_hot_production_rate{cluster_name="prod",group="billing",partition="0",topic="invoices"} 63.25
# HELP kagent_group_partition_hot_best_capacity Records per second the fastest member read
# TYPE kagent_group_partition_hot_best_capacity gauge
kagent_group_partition_hot_best_capacity{cluster_name="prod",group="billing",partition="0",topic="invoices"} 40.0
# HELP kagent_stage_stalled 1 while a stage has records waiting and applies none
# TYPE kagent_stage_stalled gauge
kagent_stage_stalled{stage="storage"} 0.0
# HELP kagent_malformed_records_total Records that failed to decode
# TYPE kagent_malformed_records_total counter
kagent_malformed_records_total{topic="__consumer_offsets"} 0.0
"""
"""What the target serves, with ``orders_status`` Burrow's status code of group orders."""


def _rules_firing_at_once(tmp_path: Path) -> Path:
    """The shipped rules with every ``for`` removed (0: fire at the first evaluation that holds)."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("for", None)
    path = tmp_path / "kagent-rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def _firing(prometheus: Prometheus) -> set[tuple[str, str]]:
    return {
        (alert["labels"]["alertname"], alert["labels"].get("group", ""))
        for alert in prometheus.alerts()
        if alert["state"] == "firing"
    }


def test_served_metrics_are_ones_a_worker_exports() -> None:
    from tests.support.metric_names import exported_metric_names

    exported = exported_metric_names()
    for family in text_string_to_metric_families(HEALTHY % {"orders_status": 4}):
        for sample in family.samples:
            assert sample.name in exported, f"the test serves {sample.name}, which no worker exports"


def test_shipped_rules_fire_in_prometheus_reach_alertmanager_inhibit_and_resolve(tmp_path: Path) -> None:
    require_binary("prometheus")
    require_binary("prometheus-alertmanager", "alertmanager")
    rules = _rules_firing_at_once(tmp_path)
    with (
        Alertmanager(ALERTMANAGER_CONFIG.read_text()) as alertmanager,
        MetricsTarget(HEALTHY % {"orders_status": 4}) as target,
        Prometheus(targets=[target.address], rule_files=[rules], alertmanagers=[alertmanager.url]) as prometheus,
    ):
        # Every shipped rule loaded and evaluates without error on these metrics.
        def evaluated() -> list[dict[str, Any]] | None:
            loaded = [rule for group in prometheus.rule_groups() for rule in group["rules"]]
            return loaded if loaded and all(rule["health"] == "ok" for rule in loaded) else None

        loaded = wait_until(evaluated, DEADLINE, "every rule to evaluate with health ok", interval=0.5)
        assert len(loaded) == sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])

        # Exactly the alerts these metrics call for: orders stopped, both groups skewed, billing's hot
        # partition. (The workers-down alert, true before the first scrape, resolves at the first one.)
        expected = {
            ("KagentConsumerStopped", "orders"),
            ("KagentLagSkew", "orders"),
            ("KagentLagSkew", "billing"),
            ("KagentHotPartition", "billing"),
        }
        wait_until(
            lambda: _firing(prometheus) == expected,
            DEADLINE,
            f"Prometheus to fire exactly {sorted(expected)}",
            interval=0.5,
            detail=lambda: f"firing: {sorted(_firing(prometheus))}",
        )

        # Alertmanager has them, routed by the shipped config, and mutes orders' warning while its
        # critical alert fires.
        [stopped] = wait_until(
            lambda: alertmanager.alerts(alertname="KagentConsumerStopped", group="orders"),
            DEADLINE,
            "Alertmanager to receive KagentConsumerStopped for orders",
            interval=0.5,
            detail=lambda: f"alerts: {alertmanager.alerts()}",
        )
        assert stopped["labels"]["severity"] == "critical"
        assert stopped["labels"]["kind"] == "stop"
        assert stopped["labels"]["cluster"] == "prod"
        assert stopped["annotations"]["summary"] == "Consumer group orders has stopped consuming"
        assert {r["name"] for r in stopped["receivers"]} == {"pagerduty", "slack"}
        assert stopped["status"]["state"] == "active"

        def skew_alerts() -> dict[str, dict[str, Any]] | None:
            # Inhibition follows the alerts Alertmanager has taken in, a moment behind its API: poll.
            alerts = {a["labels"]["group"]: a for a in alertmanager.alerts(alertname="KagentLagSkew")}
            both = set(alerts) == {"orders", "billing"}
            return alerts if both and alerts["orders"]["status"]["state"] == "suppressed" else None

        skew = wait_until(
            skew_alerts,
            DEADLINE,
            "Alertmanager to receive KagentLagSkew for both groups, muting orders'",
            interval=0.5,
            detail=lambda: f"alerts: {alertmanager.alerts(alertname='KagentLagSkew')}",
        )
        assert skew["orders"]["status"]["state"] == "suppressed"
        assert skew["orders"]["status"]["inhibitedBy"] == [stopped["fingerprint"]]
        assert skew["billing"]["status"]["state"] == "active"
        assert {r["name"] for r in skew["billing"]["receivers"]} == {"slack"}

        # The hot partition's alert, its description with the partition's rate (the alert's value) and the
        # fastest member's (read by the description's own query), as kagent's own KagentHotPartition is routed.
        [hot] = wait_until(
            lambda: alertmanager.alerts(alertname="KagentHotPartition", group="billing"),
            DEADLINE,
            "Alertmanager to receive KagentHotPartition for billing",
            interval=0.5,
            detail=lambda: f"alerts: {alertmanager.alerts()}",
        )
        assert {k: hot["labels"][k] for k in ("severity", "kind", "cluster", "topic", "partition")} == {
            "severity": "warning",
            "kind": "hot-partition",
            "cluster": "prod",
            "topic": "invoices",
            "partition": "0",
        }
        assert hot["annotations"]["description"].startswith(
            "Partition invoices-0 is written at 63.25/s, faster than the fastest member of group billing "
            "(cluster prod) reads (40/s), for 10 minutes"
        ), hot["annotations"]
        assert {r["name"] for r in hot["receivers"]} == {"slack"}

        # orders consumes again: Prometheus resolves the alert, Alertmanager lets it go, and the
        # skew warning of orders is no longer muted.
        target.text = HEALTHY % {"orders_status": 1}
        wait_until(
            lambda: not alertmanager.alerts(alertname="KagentConsumerStopped"),
            DEADLINE,
            "KagentConsumerStopped to resolve in Alertmanager",
            interval=0.5,
            detail=lambda: f"alerts: {alertmanager.alerts()}",
        )
        assert ("KagentConsumerStopped", "orders") not in _firing(prometheus)
        wait_until(
            lambda: [
                a
                for a in alertmanager.alerts(alertname="KagentLagSkew", group="orders")
                if a["status"]["state"] == "active"
            ],
            DEADLINE,
            "the skew warning of orders to be active again",
            interval=0.5,
        )
        assert target.scrapes >= 2
        pids = [alertmanager.pid, prometheus.pid]
        workdirs = [alertmanager.workdir, prometheus.workdir]

    # Stopped: no process left, no temporary directory.
    assert not any(process_alive(pid) for pid in pids)
    assert not any(path.exists() for path in workdirs)


def test_a_server_that_cannot_start_fails_with_its_log_and_leaves_no_process() -> None:
    server = Alertmanager("route: {receiver: nowhere}\nreceivers: []\n")  # names an undefined receiver
    with pytest.raises(ServerError) as failed:
        server.start()
    assert "exited" in str(failed.value) and "nowhere" in str(failed.value)
    assert server.process is not None and not process_alive(server.process.pid)


GRAFANA_VALUES = {"$cluster": ".*", "$group": ".*", "$__rate_interval": "1m", "$__range": "1h"}
"""What Grafana puts for the dashboard's variables, near enough to parse."""


def test_every_dashboard_query_parses_in_prometheus() -> None:
    dashboard = json.loads((REPO / "deploy" / "grafana" / "kagent-dashboard.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(expr, label): Grafana queries expr's series
            queries.append(re.fullmatch(r"label_values\((.+), \w+\)", variable["query"]["query"])[1])
    assert len(queries) > 20
    with Prometheus() as prometheus:
        for query in queries:
            for variable, value in GRAFANA_VALUES.items():
                query = query.replace(variable, value)
            assert "$" not in query, f"a variable Grafana sets is not substituted here: {query}"
            prometheus.query(query)  # ServerError (Prometheus's 400 and its message) if it does not parse


def test_the_keda_example_query_returns_one_group_member_count_in_prometheus() -> None:
    """KEDA's Prometheus scaler needs a one-element answer; with threshold 1 its value is the replicas."""
    require_binary("prometheus")
    [trigger] = yaml.safe_load(SCALED_OBJECT.read_text())["spec"]["triggers"]
    query = trigger["metadata"]["query"].replace('cluster_name="production"', 'cluster_name="prod"')
    assert 'group="billing"' in query and 'cluster_name="prod"' in query
    with (
        MetricsTarget(HEALTHY % {"orders_status": 1}) as target,
        Prometheus(targets=[target.address]) as prometheus,
    ):
        [answer] = wait_until(
            lambda: prometheus.query(query) or None, DEADLINE, "Prometheus to answer the KEDA query", interval=0.5
        )
        assert float(answer["value"][1]) == 6
