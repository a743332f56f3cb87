"""deploy/kubernetes renders, is valid for the API server and the operators, and says only what kagent does.

No cluster runs here, so each overlay is rendered with ``kubectl kustomize`` (as ``kubectl apply -k``
would) and its objects are checked:

- against the Kubernetes API's schemas (``kubernetes-validate``, strict) and the custom resources' CRDs
  (ServiceMonitor, PrometheusRule, and KEDA's ScaledObject in deploy/keda), kept in tests/unit/data/crds;
- the PrometheusRule against ``deploy/prometheus/kagent-rules.yml``, which it is generated from, and its
  rules with ``promtool check rules``;
- against kagent itself: every ``KAGENT_*`` name is a field of :class:`kagent.settings.Settings`, and the
  worker's environment, as the kubelet would build it with the files the pod mounts, passes
  :func:`kagent.settings.load_settings`; probe, Service and ServiceMonitor paths are routes the worker
  serves and their ports the one it listens on; secrets reach it only as files or Secret references.

kubectl and promtool are required: without them a test is skipped, saying so, except under ``CI=true``,
where it fails.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import subprocess
import tomllib
import urllib.parse
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from kagent.settings import ENV_PREFIX, Settings, SettingsError, load_settings
from kagent.tools.cli import main as cli
from kagent.worker.shutdown import SHUTDOWN_BOUND
from tests.support import REPO
from tests.support.kubernetes import crd_errors, render, validate
from tests.support.monitoring import require_binary
from tests.support.routes import worker_routes
from tests.support.tls import Authority

KUBERNETES = REPO / "deploy" / "kubernetes"
OVERLAYS = sorted(path.name for path in (KUBERNETES / "overlays").iterdir() if (path / "kustomization.yaml").is_file())
RULES = REPO / "deploy" / "prometheus" / "kagent-rules.yml"
PROMETHEUS_RULE = KUBERNETES / "components" / "prometheus-operator" / "prometheusrule.yaml"
ALERTS = REPO / "deploy" / "kagent" / "alerts.yaml"
SCALED_OBJECT = REPO / "deploy" / "keda" / "scaledobject.yaml"
DOCKERFILE = (REPO / "Dockerfile").read_text()
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

POD_IP = "10.1.2.3"
"""The address the downward API gives the pod here (status.podIP)."""


def _settings_of_type(type_name: str) -> frozenset[str]:
    """The variables of the settings whose type (or the type an optional one has) is ``type_name``."""
    fields = Settings.model_fields.items()
    return frozenset(f"{ENV_PREFIX}{name.upper()}" for name, field in fields if type_name in str(field.annotation))


PATH_SETTINGS = _settings_of_type("Path")
"""Settings that name a file or a directory: in a pod each must be something mounted."""

SECRET_SETTINGS = _settings_of_type("SecretStr")
"""Settings kagent treats as secrets (passwords): a manifest must never give them a value."""


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """Each overlay's objects, rendered once."""
    return {overlay: render(KUBERNETES / "overlays" / overlay) for overlay in OVERLAYS}


def _objects(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [obj for obj in _objects(objects, kind) if name is None or obj["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} objects named {name or 'anything'}, not 1"
    return found[0]


def _worker(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workers' Deployment and its kagent container."""
    deployment = _one(objects, "Deployment", "kagent")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container


def _config_map(objects: list[dict[str, Any]], name: str) -> dict[str, str]:
    return _one(objects, "ConfigMap", name)["data"]


def _environment(objects: list[dict[str, Any]], container: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The container's environment as the kubelet builds it: its ConfigMaps' variables, then ``env`` in
    order, ``$(NAME)`` expanded from what came before, the pod's IP from the downward API; and the
    variables taken from Secrets (name -> "secret/key"), which have no value here."""
    env: dict[str, str] = {}
    from_secrets: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert set(source) == {"configMapRef"}, f"envFrom other than a ConfigMap: {source}"
        env.update(_config_map(objects, source["configMapRef"]["name"]))
    for variable in container.get("env", []):
        name = variable["name"]
        if "value" in variable:
            env[name] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), variable["value"])
            continue
        source = variable["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "status.podIP", f"{name}: {source}"
            env[name] = POD_IP
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            from_secrets[name] = f"{ref['name']}/{ref['key']}"
        else:
            raise AssertionError(f"{name} comes from {source}, which this test does not model")
    return env, from_secrets


def _mounted(deployment: dict[str, Any], container: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    """The pod volume a path in the container is on, and the path within it ('' for its root)."""
    volumes = {volume["name"]: volume for volume in deployment["spec"]["template"]["spec"].get("volumes", [])}
    best: tuple[dict[str, Any], str] | None = None
    for mount in container.get("volumeMounts", []):
        root = PurePosixPath(mount["mountPath"])
        target = PurePosixPath(path)
        on_it = target == root or root in target.parents
        if on_it and (best is None or len(mount["mountPath"]) > len(best[1])):
            best = (volumes[mount["name"]], mount["mountPath"])
    assert best is not None, f"{path} is on no mounted volume: on the read-only root filesystem"
    volume, root = best
    return volume, str(PurePosixPath(path).relative_to(root)) if path != root else ""


def _volume_files(volume: dict[str, Any], objects: list[dict[str, Any]]) -> set[str]:
    """The file names a Secret or ConfigMap volume shows (its items, or every key of a ConfigMap)."""
    source = volume.get("secret") or volume.get("configMap")
    assert source is not None, f"volume {volume['name']} is neither a Secret nor a ConfigMap"
    if "items" in source:
        return {item["path"] for item in source["items"]}
    assert "configMap" in volume, f"Secret volume {volume['name']} names no items: which files it has is unknown"
    return set(_config_map(objects, source["name"]))


def _settings_in_pod(
    objects: list[dict[str, Any]], tmp_path: Path
) -> tuple[Settings, dict[str, str], dict[str, tuple[dict[str, Any], str]]]:
    """The worker's settings as kagent reads them in the pod: every path setting checked to be on what the
    pod mounts (a file of a Secret or ConfigMap volume, the data directory an emptyDir), then given, for
    :func:`load_settings`, a local file with what the mount would hold (the ConfigMap's own text; for a
    Secret, a test CA's certificates and key, or a password). Returns the settings, the environment as
    the pod has it, and each path setting's volume and path within it."""
    deployment, container = _worker(objects)
    env, from_secrets = _environment(objects, container)
    local = dict(env)
    for name, reference in from_secrets.items():
        assert name == "KAGENT_SASL_USERNAME", f"{name} comes from Secret {reference}: only the SASL user does"
        local[name] = "kagent"
    tmp_path.mkdir(parents=True, exist_ok=True)
    authority = Authority(tmp_path)
    client = authority.issue("kagent", client=True)
    secret_contents = {
        "KAGENT_SSL_CAFILE": authority.cafile.read_text(),
        "KAGENT_SSL_CERTFILE": client.cert.read_text(),
        "KAGENT_SSL_KEYFILE": client.key.read_text(),
    }
    mounts = {}
    for name in sorted(PATH_SETTINGS & set(env)):
        volume, within = _mounted(deployment, container, env[name])
        mounts[name] = (volume, within)
        copy = tmp_path / name
        if "emptyDir" in volume:
            assert within == "", f"{name}={env[name]} is inside an emptyDir, not the emptyDir itself"
            copy.mkdir()
        else:
            files = _volume_files(volume, objects)
            assert within in files, f"{name}={env[name]}: volume {volume['name']} has only {sorted(files)}"
            if "configMap" in volume:
                copy.write_text(_config_map(objects, volume["configMap"]["name"])[within])
            else:
                copy.write_text(secret_contents.get(name, "a password\n"))
        local[name] = str(copy)
    try:
        return load_settings(local), env, mounts
    except SettingsError as error:
        raise AssertionError(f"a worker of this overlay would not start: {error}") from None


def _duration_seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+)(ms|s|m|h)", duration)
    assert parts and "".join(f"{n}{u}" for n, u in parts) == duration, f"not a Prometheus duration: {duration}"
    return sum(int(n) * units[u] for n, u in parts)


def _rules_file_of(rule: dict[str, Any], tmp_path: Path) -> Path:
    path = tmp_path / f"{rule['metadata']['name']}.rules.yml"
    path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return path


# -- rendering and validity ---------------------------------------------------------------------


def test_the_overlays_are_the_four_the_readme_describes() -> None:
    assert OVERLAYS == ["dev", "msk-iam", "sasl-ssl", "strimzi-mtls"]
    readme = (REPO / "README.md").read_text()
    for overlay in OVERLAYS:
        assert f"deploy/kubernetes/overlays/{overlay}" in readme, f"the README does not describe overlay {overlay}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_of_every_overlay_is_valid(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    objects = rendered[overlay]
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "Service", "PodDisruptionBudget", "ServiceAccount", "ConfigMap"} <= kinds
    assert "Secret" not in kinds, "a Secret in the manifests would be a credential in git: reference one instead"
    for obj in objects:
        validate(obj)


def test_the_validation_rejects_what_the_api_server_would(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """A misspelt field, a value of the wrong form, a kind the API lacks: each fails, so a pass means something."""
    objects = copy.deepcopy(rendered["sasl-ssl"])
    deployment = _one(objects, "Deployment", "kagent")
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(AssertionError, match="readOnlyRootFileSystem"):
        validate(deployment)
    monitor = _one(objects, "ServiceMonitor", "kagent")
    endpoint = monitor["spec"]["endpoints"][0]
    endpoint["scrapeTimout"] = endpoint.pop("scrapeTimeout")
    assert any("scrapeTimout" in error for error in crd_errors(monitor))
    endpoint["scrapeTimeout"], endpoint["interval"] = endpoint.pop("scrapeTimout"), "30 seconds"
    assert any(error.startswith("spec.endpoints.0.interval") for error in crd_errors(monitor))
    with pytest.raises(AssertionError, match="Couldn't find schema"):
        validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})


def test_keda_scaled_object_is_valid_for_kedas_crd() -> None:
    validate(yaml.safe_load(SCALED_OBJECT.read_text()))


# -- the PrometheusRule: generated from deploy/prometheus ---------------------------------------


def test_prometheus_rule_is_generated_from_the_rules_file() -> None:
    spec = importlib.util.spec_from_file_location("prometheusrule", KUBERNETES / "prometheusrule.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.RULES == RULES and generator.PROMETHEUS_RULE == PROMETHEUS_RULE
    assert PROMETHEUS_RULE.read_text() == generator.render(RULES.read_text()), (
        f"{PROMETHEUS_RULE.relative_to(REPO)} differs from {RULES.relative_to(REPO)}: "
        "run python deploy/kubernetes/prometheusrule.py"
    )
    assert yaml.safe_load(PROMETHEUS_RULE.read_text())["spec"] == yaml.safe_load(RULES.read_text())
    with pytest.raises(ValueError, match="groups"):
        generator.render("# no rules\n")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_prometheus_rules_pass_promtool(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, tmp_path: Path
) -> None:
    rules = _objects(rendered[overlay], "PrometheusRule")
    if not rules:
        assert overlay == "dev", f"overlay {overlay} has no PrometheusRule"
        return
    [rule] = rules
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    count = sum(len(group["rules"]) for group in rule["spec"]["groups"])
    result = subprocess.run(
        [require_binary("promtool"), "check", "rules", str(_rules_file_of(rule, tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {count} rules found" in result.stdout + result.stderr


# -- what kagent reads: settings, routes, ports -------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_settings_are_kagents_and_a_worker_would_start_with_them(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, tmp_path: Path
) -> None:
    objects = rendered[overlay]
    named = {key for obj in _objects(objects, "ConfigMap") for key in obj["data"] if key.startswith(ENV_PREFIX)}
    _, container = _worker(objects)
    named |= {variable["name"] for variable in container.get("env", []) if variable["name"].startswith(ENV_PREFIX)}
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    assert named - known == set(), f"not kagent settings: {sorted(named - known)}"

    settings, env, mounts = _settings_in_pod(objects, tmp_path)
    assert settings.web_host in ("0.0.0.0", "::"), "the worker must listen beyond loopback for probes and Prometheus"
    assert settings.worker_url == f"http://{POD_IP}:{settings.web_port}", "each worker advertises its pod's own URL"
    assert "emptyDir" in mounts["KAGENT_DATA_DIR"][0], "the data directory must be a writable emptyDir"
    assert int(env["KAGENT_TOPIC_PARTITIONS"]) >= _one(objects, "Deployment", "kagent")["spec"]["replicas"], (
        "more workers than KAGENT_TOPIC_PARTITIONS: the extra ones would hold nothing"
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_service_and_monitor_reach_the_workers_routes_on_its_port(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    objects = rendered[overlay]
    routes = worker_routes()
    deployment, container = _worker(objects)
    port = int(_environment(objects, container)[0]["KAGENT_WEB_PORT"])
    ports = {entry["name"]: entry["containerPort"] for entry in container["ports"]}
    assert ports == {"http": port}

    def probe_path(probe: str) -> str:
        get = container[probe]["httpGet"]
        assert ports.get(get["port"], get["port"]) == port, f"{probe} asks port {get['port']}, not {port}"
        assert get["path"] in routes, f"{probe} asks {get['path']}, which the worker does not serve"
        return get["path"]

    assert probe_path("livenessProbe") == "/healthz" and probe_path("startupProbe") == "/healthz"
    assert probe_path("readinessProbe") == "/readyz"

    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = _one(objects, "Service", "kagent")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [service_port] = service["spec"]["ports"]
    assert service_port["targetPort"] in ports
    budget = _one(objects, "PodDisruptionBudget", "kagent")
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()

    for monitor in _objects(objects, "ServiceMonitor"):
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint["port"] == service_port["name"] and endpoint["path"] in routes
        assert endpoint["path"] == "/metrics"
        assert _duration_seconds(endpoint["scrapeTimeout"]) <= _duration_seconds(endpoint["interval"])
        jobs = set(re.findall(r'up\{job="([^"]+)"\}', RULES.read_text()))
        assert jobs == {service["metadata"]["labels"][monitor["spec"]["jobLabel"]]}, (
            f"the rules read up{{job=...}} of {jobs}; the ServiceMonitor's job label is another"
        )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_worker_runs_kagent_worker_from_this_version_unprivileged(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    deployment, container = _worker(rendered[overlay])
    pod = deployment["spec"]["template"]["spec"]
    program, *args = container["command"] + container.get("args", [])
    assert program == "kagent" and program in PROJECT["scripts"] and args == ["worker"] and "worker" in cli.commands
    assert container["image"].rpartition(":")[2] == PROJECT["version"]

    user = re.search(r"^USER (\d+)(?::(\d+))?$", DOCKERFILE, re.M)
    assert user, "the Dockerfile runs as no numeric USER"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(user[1]) != 0
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False

    # The Service named kagent would otherwise put KAGENT_SERVICE_HOST and the like in the environment,
    # which kagent refuses at start: an unknown KAGENT_* setting.
    assert pod["enableServiceLinks"] is False
    with pytest.raises(SettingsError, match="unknown setting KAGENT_SERVICE_HOST"):
        load_settings({"KAGENT_SERVICE_HOST": "10.96.0.10"})

    assert pod["terminationGracePeriodSeconds"] > SHUTDOWN_BOUND, "the kubelet would kill a worker still stopping"
    resources = container["resources"]
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    assert "cpu" not in resources["limits"], "a CPU limit throttles the event loop mid-scrape"


# -- secrets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_reach_the_worker_as_mounted_files_or_references_never_as_values(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, tmp_path: Path
) -> None:
    objects = rendered[overlay]
    deployment, container = _worker(objects)
    env, _ = _environment(objects, container)
    assert SECRET_SETTINGS and not SECRET_SETTINGS & set(env), f"secrets given as values: {SECRET_SETTINGS & set(env)}"
    secretish = re.compile(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|_KEY$")
    for variable in container.get("env", []):
        if secretish.search(variable["name"]) and not variable["name"].endswith("_FILE"):
            assert "secretKeyRef" in variable.get("valueFrom", {}), f"{variable['name']} has a value in the manifest"
    for volume in deployment["spec"]["template"]["spec"].get("volumes", []):
        if "secret" in volume:
            mode = volume["secret"].get("defaultMode", 0o644)
            assert mode & 0o007 == 0, f"Secret volume {volume['name']} is readable by every user ({mode:o})"

    _, _, mounts = _settings_in_pod(objects, tmp_path)
    for name, (volume, _) in mounts.items():
        if name.startswith(("KAGENT_SSL_", "KAGENT_SASL_")):
            assert "secret" in volume, f"{name} is on volume {volume['name']}, not a Secret"


def test_the_sasl_overlay_reads_its_password_from_a_file_and_msk_iam_signs_with_the_pods_role(
    rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    settings, env, _ = _settings_in_pod(rendered["sasl-ssl"], tmp_path / "sasl")
    assert settings.security_protocol.value == "SASL_SSL" and settings.sasl_password_file is not None
    assert "KAGENT_SASL_PASSWORD" not in env

    objects = rendered["msk-iam"]
    settings, _, _ = _settings_in_pod(objects, tmp_path / "msk")
    assert settings.sasl_oauthbearer_provider is not None and settings.sasl_oauthbearer_provider.value == "aws-msk-iam"
    deployment, _ = _worker(objects)
    account = _one(objects, "ServiceAccount", deployment["spec"]["template"]["spec"]["serviceAccountName"])
    role = account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
    assert re.fullmatch(r"arn:aws:iam::\d{12}:role/[\w+=,.@/-]+", role), role
    # The image must carry Amazon's signer: the msk extra, installed by the Dockerfile's default EXTRAS.
    extras = re.search(r"^ARG EXTRAS=(\S*)$", DOCKERFILE, re.M)
    assert extras and "msk" in extras[1].split(",") and "msk" in PROJECT["optional-dependencies"]

    settings, _, mounts = _settings_in_pod(rendered["strimzi-mtls"], tmp_path / "strimzi")
    assert settings.security_protocol.value == "SSL"
    user_files = ("KAGENT_SSL_CERTFILE", "KAGENT_SSL_KEYFILE")
    assert {mounts[name][0]["secret"]["secretName"] for name in user_files} == {"kagent"}, "the KafkaUser's Secret"


# -- alerting -----------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_alerting_file_is_deploy_kagent_alerts_yaml_and_its_sinks_resolve(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, tmp_path: Path
) -> None:
    objects = rendered[overlay]
    settings, _, mounts = _settings_in_pod(objects, tmp_path)
    if settings.alerts is None:
        assert overlay == "dev", f"overlay {overlay} runs no alerting stage"
        return
    volume, within = mounts["KAGENT_ALERTS_CONFIG"]
    assert _config_map(objects, volume["configMap"]["name"])[within] == ALERTS.read_text()
    services = {obj["metadata"]["name"]: obj for obj in _objects(objects, "Service")}
    for sink in settings.alerts.sinks:
        url = urllib.parse.urlsplit(str(getattr(sink, "url", "")))
        if url.hostname and "." not in url.hostname:  # a name in the namespace: a Service of the overlay
            assert url.hostname in services, f"sink {sink.name} posts to {url.hostname}, no Service of the overlay"
            assert url.port in {port["port"] for port in services[url.hostname]["spec"]["ports"]}
