"""The monitoring files under deploy/ are valid for the real tools, tested, and read only what a worker exports.

- Prometheus: ``promtool check config`` (which checks the rules file it names), ``promtool check
  rules`` and ``promtool test rules`` on the shipped unit tests, which must fire and then resolve
  every alert; the rules' labels agree with kagent's own alerts.
- Alertmanager: ``amtool check-config``, the routes (``amtool config routes test``), the templates
  (``amtool template render``), and no secret in the file.
- Grafana: the dashboard's variables, and every query's metric names.
- Every metric name in a rule or a dashboard query is one
  :func:`tests.support.metric_names.exported_metric_names` lists (rules may also read ``up``).

The binaries come from Debian's prometheus and prometheus-alertmanager packages; without them these
tests skip, saying so, except under CI=true, where they fail (:func:`tests.support.monitoring.require_binary`).
The real servers run in tests/integration/test_monitoring_servers.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kagent.core.group_health import PartitionStatus
from kagent.core.incidents import SEVERITY, IncidentKind
from tests.support import REPO
from tests.support.monitoring import grafana_query_metric_names, promql_metric_names, require_binary

DEPLOY = REPO / "deploy"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
RULES = DEPLOY / "prometheus" / "kagent-rules.yml"
RULES_TESTS = DEPLOY / "prometheus" / "kagent-rules.test.yml"
ALERTMANAGER_CONFIG = DEPLOY / "alertmanager" / "alertmanager.yml"
DASHBOARD = DEPLOY / "grafana" / "kagent-dashboard.json"
SCALED_OBJECT = DEPLOY / "keda" / "scaledobject.yaml"

SEVERITIES = {"critical", "error", "warning", "info"}
"""PagerDuty Events API v2's severities, the words kagent's alerts use."""

PROMETHEUS_SERIES = {"up"}
"""Series Prometheus makes itself that the rules may read besides the worker's."""

KAGENT_ALERTS = {
    "KagentLagSkew": IncidentKind.LAG_SKEW,
    "KagentConsumerStopped": IncidentKind.STOP,
    "KagentConsumerStalled": IncidentKind.STALL,
    "KagentConsumerRewound": IncidentKind.REWIND,
    "KagentHotPartition": IncidentKind.HOT_PARTITION,
}
"""The alerts kagent's own Alertmanager sink raises, by incident kind: the rules of the same name agree."""

STATUS_OF_KIND = {
    IncidentKind.STOP: PartitionStatus.STOP,
    IncidentKind.STALL: PartitionStatus.STALL,
    IncidentKind.REWIND: PartitionStatus.REWIND,
}
"""The group status (``kagent_group_status`` is its Burrow code) each health incident kind stands for."""


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a tool (its binary required), with a bound on its time; its output is in the assertion message."""
    binary = require_binary(argv[0])
    return subprocess.run([binary, *argv[1:]], capture_output=True, text=True, timeout=120, cwd=cwd)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(result.args)} exited with {result.returncode}:\n{output}"
    return output


def _rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def _alerts() -> dict[str, dict[str, Any]]:
    alerts = {rule["alert"]: rule for rule in _rules() if "alert" in rule}
    assert len(alerts) == sum("alert" in rule for rule in _rules()), "two alerting rules share a name"
    return alerts


@pytest.fixture(scope="module")
def exported() -> frozenset[str]:
    """Every sample name a worker exports."""
    from tests.support.metric_names import exported_metric_names

    names = exported_metric_names()
    assert names, "exported_metric_names() is empty"
    return names


# -- the PromQL scan the name checks rely on ----------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('absent(up{job="kagent"} == 1)', {"up"}),
        (
            "max by (cluster_name, group) (kafka_consumergroup_group_max_lag_seconds) > 300",
            {"kafka_consumergroup_group_max_lag_seconds"},
        ),
        ("sum(a_total) by (group) / on (group) group_left (topic) b", {"a_total", "b"}),
        ('sum without (instance) (rate(x_total{kind=~"a|b", l="{not a name}"}[5m] offset 1h))', {"x_total"}),
        ("histogram_quantile(0.99, sum by (le) (rate(h_bucket[$__rate_interval])))", {"h_bucket"}),
        ('x{cluster_name=~"$cluster", group=~"${group}"} > bool 1.5e3 unless y or z and 0x1F', {"x", "y", "z"}),
        ("a @ start() + b[5m:1m] - c offset -5m", {"a", "b", "c"}),
        ('# a comment naming not_a_metric\ncount_values("v", m) > Inf', {"m"}),
        ("$metric", {"__grafana_variable__"}),
        ("group(group)", {"group"}),
    ],
)
def test_promql_metric_names_finds_every_name_and_no_keyword(expr: str, names: set[str]) -> None:
    assert promql_metric_names(expr) == names


def test_grafana_variable_queries_are_read_for_their_metric() -> None:
    assert grafana_query_metric_names('label_values(m{cluster_name=~"$cluster"}, group)') == {"m"}
    assert grafana_query_metric_names("label_values(cluster_name)") == set()
    assert grafana_query_metric_names("query_result(topk(5, m))") == {"m"}


# -- Prometheus ---------------------------------------------------------------------------------


def test_prometheus_config_is_valid_and_loads_the_shipped_rules(tmp_path: Path) -> None:
    # From another directory: the rules file is found relative to the config file, as in the container.
    output = _ok(_run("promtool", "check", "config", str(PROMETHEUS_CONFIG), cwd=tmp_path))
    assert "SUCCESS: 1 rule files found" in output
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    assert [(PROMETHEUS_CONFIG.parent / path).resolve() for path in config["rule_files"]] == [RULES]
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert "kagent" in jobs, 'the rules read up{job="kagent"}'
    assert config["alerting"]["alertmanagers"], "alerts go nowhere"


def test_rules_are_valid() -> None:
    output = _ok(_run("promtool", "check", "rules", str(RULES)))
    assert f"SUCCESS: {len(_rules())} rules found" in output


def test_rules_unit_tests_pass() -> None:
    output = _ok(_run("promtool", "test", "rules", str(RULES_TESTS)))
    assert "SUCCESS" in output


def test_every_alert_is_tested_firing_and_then_resolved() -> None:
    tests = yaml.safe_load(RULES_TESTS.read_text())
    assert tests["rule_files"] == [RULES.name]
    fired: dict[str, set[str]] = {}
    resolved: dict[str, set[str]] = {}
    for number, case in enumerate(tests["tests"]):
        # The times an alert fires and is gone at, within one test (one set of input series).
        firing_at: dict[str, list[int]] = {}
        gone_at: dict[str, list[int]] = {}
        for check in case.get("alert_rule_test", []):
            seconds = _seconds(check["eval_time"])
            (firing_at if check.get("exp_alerts") else gone_at).setdefault(check["alertname"], []).append(seconds)
        for name, times in firing_at.items():
            fired.setdefault(name, set()).add(f"test {number}")
            if any(later > min(times) for later in gone_at.get(name, [])):
                resolved.setdefault(name, set()).add(f"test {number}")
    alerts = set(_alerts())
    assert set(fired) | set(resolved) <= alerts, "the tests name alerts the rules do not have"
    assert alerts - set(fired) == set(), "alerts no test expects to fire"
    assert alerts - set(resolved) == set(), "alerts no test expects to resolve after firing"


def _seconds(duration: str) -> int:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    parts = re.findall(r"(\d+)(ms|[smhdwy])", duration)
    assert "".join(f"{n}{u}" for n, u in parts) == duration, f"not a duration: {duration}"
    return round(sum(int(n) * units[u] for n, u in parts))


def test_alerts_are_labelled_and_described() -> None:
    for name, rule in _alerts().items():
        labels, annotations = rule.get("labels", {}), rule.get("annotations", {})
        assert labels.get("severity") in SEVERITIES, f"{name}: severity {labels.get('severity')!r}"
        assert annotations.get("summary") and annotations.get("description"), f"{name}: summary and description"
        if "group" in promql_label_names(rule["expr"]):
            # A group's alert: Alertmanager groups and inhibits by cluster and group, as kagent's own.
            assert labels.get("cluster") == "{{ $labels.cluster_name }}", f"{name}: cluster label"
            for text in (annotations["summary"], annotations["description"]):
                assert "{{ $labels.group }}" in text, f"{name}: the group is not named in {text!r}"


def promql_label_names(expr: str) -> set[str]:
    """The labels the alert keeps: those of its ``by (...)`` clauses (crude; enough for these rules)."""
    return {label.strip() for clause in re.findall(r"\bby\s*\(([^)]*)\)", expr) for label in clause.split(",")}


def test_alerts_of_kagents_own_names_agree_with_kagents_incidents() -> None:
    alerts = _alerts()
    assert set(KAGENT_ALERTS) <= set(alerts)
    for name, kind in KAGENT_ALERTS.items():
        labels = alerts[name]["labels"]
        assert labels["kind"] == kind.value, name
        assert labels["severity"] == SEVERITY[kind].value, (
            f"{name}: kagent's {kind.value} incidents are {SEVERITY[kind].value}"
        )
        if kind in STATUS_OF_KIND:
            status = STATUS_OF_KIND[kind].severity
            assert re.search(rf"\(kagent_group_status\)\s*==\s*{status}$", alerts[name]["expr"].strip()), name


def test_lag_skew_alert_uses_kagents_default_threshold() -> None:
    from kagent.settings import Settings

    threshold = Settings.model_fields["skew_threshold"].default
    expr = _alerts()["KagentLagSkew"]["expr"].strip()
    assert expr.endswith(f">= {threshold:g}"), f"KagentLagSkew triggers as kagent does: skew >= {threshold:g}"


def test_rules_read_only_metrics_a_worker_exports(exported: frozenset[str]) -> None:
    rules = _rules()
    recorded = {rule["record"] for rule in rules if "record" in rule}
    for rule in rules:
        unknown = promql_metric_names(rule["expr"]) - exported - PROMETHEUS_SERIES - recorded
        assert not unknown, (
            f"{rule.get('alert') or rule.get('record')} reads {sorted(unknown)}, which no worker exports"
        )


# -- Alertmanager -------------------------------------------------------------------------------


def test_alertmanager_config_is_valid() -> None:
    output = _ok(_run("amtool", "check-config", str(ALERTMANAGER_CONFIG)))
    assert "SUCCESS" in output


@pytest.mark.parametrize(
    ("labels", "receivers"),
    [
        ({"severity": "critical", "alertname": "KagentConsumerStopped"}, "pagerduty,slack"),
        ({"severity": "error", "alertname": "KagentConsumerRewound"}, "slack"),
        ({"severity": "warning", "alertname": "KagentLagSkew"}, "slack"),
        ({"alertname": "SomethingElse"}, "slack"),
    ],
)
def test_alertmanager_routes_critical_to_pagerduty_and_slack_and_the_rest_to_slack(
    labels: dict[str, str], receivers: str
) -> None:
    args = [f"{k}={v}" for k, v in {**labels, "group": "orders", "cluster": "prod"}.items()]
    _ok(
        _run(
            "amtool",
            "config",
            "routes",
            "test",
            f"--config.file={ALERTMANAGER_CONFIG}",
            f"--verify.receivers={receivers}",
            *args,
        )
    )


def test_every_severity_an_alert_can_have_is_routed() -> None:
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    used = {rule["labels"]["severity"] for rule in _alerts().values()} | {s.value for s in SEVERITY.values()}
    routed = " ".join(" ".join(route.get("matchers", [])) for route in config["route"]["routes"])
    for severity in used:
        assert severity in routed, f"severity {severity} reaches only the default route"
    assert config["route"]["group_by"] == ["cluster", "group", "alertname"]


def test_alertmanager_inhibits_a_groups_warnings_while_it_has_a_critical_alert() -> None:
    rules = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())["inhibit_rules"]
    assert any(
        'severity="critical"' in rule["source_matchers"]
        and 'severity="warning"' in rule["target_matchers"]
        and set(rule["equal"]) == {"cluster", "group"}
        for rule in rules
    )


def test_alertmanager_config_holds_no_secret() -> None:
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    receivers = config["receivers"]
    slack = [c for r in receivers for c in r.get("slack_configs", [])]
    pagerduty = [c for r in receivers for c in r.get("pagerduty_configs", [])]
    assert slack and pagerduty
    for c in slack:
        assert "api_url" not in c and c["api_url_file"].startswith("/etc/alertmanager/secrets/")
    for c in pagerduty:
        assert not {"routing_key", "service_key"} & set(c)
        assert c["routing_key_file"].startswith("/etc/alertmanager/secrets/")
    assert "api_url" not in config.get("global", {}) and "slack_api_url" not in config.get("global", {})
    assert not re.search(r"hooks\.slack\.com", json.dumps(config)), "a Slack webhook URL outside the comments"


def test_alertmanager_templates_render(tmp_path: Path) -> None:
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    alert = {
        "status": "firing",
        "labels": {"alertname": "KagentConsumerStopped", "group": "orders", "cluster": "prod", "severity": "critical"},
        "annotations": {
            "summary": "Consumer group orders has stopped consuming",
            "description": "d",
            "incident_id": "i-1",
        },
        "startsAt": "2024-01-01T00:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
    }
    data = tmp_path / "data.json"
    data.write_text(
        json.dumps(
            {
                "receiver": "slack",
                "status": "firing",
                "alerts": [alert],
                "groupLabels": {k: alert["labels"][k] for k in ("alertname", "group", "cluster")},
                "commonLabels": alert["labels"],
                "commonAnnotations": alert["annotations"],
                "externalURL": "http://alertmanager:9093",
            }
        )
    )
    rendered = {}
    for path, template in _templates(config["receivers"]):
        result = _run(
            "amtool",
            "template",
            "render",
            f"--template.glob={tmp_path / 'none' / '*'}",
            f"--template.data={data}",
            f"--template.text={template}",
        )
        rendered[path] = _ok(result)
    assert rendered, "no templated field"
    title = rendered["slack/slack_configs/title"]
    assert "FIRING:1" in title and "KagentConsumerStopped on orders (prod)" in title
    assert "incident i-1" in rendered["slack/slack_configs/text"]
    assert "Consumer group orders has stopped consuming" in rendered["pagerduty/pagerduty_configs/description"]


def _templates(node: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, text) of every string holding a Go template under ``node`` (receivers by name)."""
    if isinstance(node, dict):
        return [t for key, value in node.items() for t in _templates(value, f"{path}/{key}".lstrip("/"))]
    if isinstance(node, list):
        found = []
        for item in node:
            name = item.get("name") if isinstance(item, dict) else None
            found += (
                _templates({k: v for k, v in item.items() if k != "name"}, name) if name else _templates(item, path)
            )
        return found
    return [(path, node)] if isinstance(node, str) and "{{" in node else []


# -- Grafana ------------------------------------------------------------------------------------


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every panel, those inside rows included."""
    return [p for panel in panels for p in [panel, *_panels(panel.get("panels", []))]]


def _queries(dashboard: dict[str, Any]) -> list[str]:
    """Every Prometheus query: each panel target's ``expr`` and each query variable's query."""
    queries = [t["expr"] for panel in _panels(dashboard["panels"]) for t in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def test_dashboard_has_a_prometheus_datasource_variable_and_cluster_and_group_variables() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name, label in (("cluster", "cluster_name"), ("group", "group")):
        query = variables[name]["query"]
        query = query["query"] if isinstance(query, dict) else query
        assert re.fullmatch(rf"label_values\(.+, {label}\)", query), f"${name}: {query}"
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    assert "$cluster" in variables["group"]["query"]["query"], "$group lists the groups of the chosen clusters"
    panels = [p for p in _panels(dashboard["panels"]) if p["type"] != "row"]
    assert len({p["id"] for p in _panels(dashboard["panels"])}) == len(_panels(dashboard["panels"]))
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_dashboard_queries_read_only_metrics_a_worker_exports(exported: frozenset[str]) -> None:
    queries = _queries(_dashboard())
    for query in queries:
        names = grafana_query_metric_names(query)
        assert names, f"a query reads no metric: {query}"
        assert names <= exported, f"{query!r} reads {sorted(names - exported)}, which no worker exports"


def test_dashboard_shows_lag_skew_health_incidents_delivery_and_stages() -> None:
    shown = set().union(*map(grafana_query_metric_names, _queries(_dashboard())))
    wanted = {
        "kafka_consumergroup_group_sum_lag",
        "kafka_consumergroup_group_max_lag",
        "kafka_consumergroup_group_max_lag_seconds",
        "kagent_group_member_lag",
        "kagent_group_skew",
        "kagent_group_recommended_skew",
        "kagent_group_status",
        "kagent_group_open_incidents",
        "kagent_alert_deliveries_total",
        "kagent_stage_backlog_records",
        "kagent_stage_stalled",
    }
    assert wanted <= shown, f"the dashboard lacks {sorted(wanted - shown)}"
    for query in _queries(_dashboard()):
        if query.startswith("label_values") or "kafka_partition" in query:
            continue
        if any(
            name.startswith(("kafka_consumergroup_", "kagent_group_")) for name in grafana_query_metric_names(query)
        ):
            assert 'cluster_name=~"$cluster"' in query and 'group=~"$group"' in query, query


# -- the harness's binary check -----------------------------------------------------------------


def test_a_missing_binary_skips_naming_it_and_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_binary("amtool")
    assert "amtool" in str(skipped.value) and "prometheus-alertmanager" in str(skipped.value)
    assert "apt-get install -y prometheus prometheus-alertmanager" in str(skipped.value)


def test_a_missing_binary_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_binary("prometheus")
    assert "prometheus is not installed" in str(failed.value) and "CI=true" in str(failed.value)


def test_an_alternative_name_of_a_binary_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "alertmanager").write_text("#!/bin/sh\n")
    (tmp_path / "alertmanager").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert require_binary("prometheus-alertmanager", "alertmanager") == str(tmp_path / "alertmanager")


# -- KEDA ---------------------------------------------------------------------------------------


def test_keda_scales_to_the_member_count_kagent_recommends(exported: frozenset[str]) -> None:
    """The ScaledObject as KEDA 2.x reads it: one Prometheus trigger on kagent's recommended member count,
    AverageValue with threshold 1 (so the replicas are the value), a fallback, and no more replicas than
    a group can use. (Its query runs in a real Prometheus in tests/integration/test_monitoring_servers.py.)"""
    scaled = yaml.safe_load(SCALED_OBJECT.read_text())
    assert (scaled["apiVersion"], scaled["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["kind"] == "Deployment" and spec["scaleTargetRef"]["name"]
    assert 1 <= spec["minReplicaCount"] <= spec["fallback"]["replicas"] <= spec["maxReplicaCount"]
    [trigger] = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    metadata = trigger["metadata"]
    assert metadata["threshold"] == "1" and metadata["ignoreNullValues"] == "false"
    assert metadata["serverAddress"].startswith("http")
    assert promql_metric_names(metadata["query"]) == {"kagent_group_recommended_members"} <= exported
    assert re.search(r'cluster_name="[^"]+"', metadata["query"]) and re.search(r'group="[^"]+"', metadata["query"])
