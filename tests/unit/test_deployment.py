"""docker-compose.yml and the Dockerfile name only commands, paths and settings that exist.

No Docker engine runs here, so these files are checked against the code instead.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from kagent.settings import load_settings
from kagent.tools.cli import main as cli
from tests.support import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
DOCKERFILE = (REPO / "Dockerfile").read_text()
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def _check_command(argv: list[str]) -> None:
    program, *args = argv
    assert program in SCRIPTS, f"{program!r} is not a console script of the package"
    assert SCRIPTS[program] == "kagent.tools.cli:main"
    assert args and args[0] in cli.commands, f"'kagent {args[0] if args else ''}' is not a command"


def test_compose_has_kafka_in_kraft_mode_and_a_kagent_worker() -> None:
    kafka = COMPOSE["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    kagent = COMPOSE["services"]["kagent"]
    assert kagent["build"] == "."
    internal = re.search(r"INTERNAL://(\S+?)(,|$)", kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"])
    assert internal and kagent["environment"]["KAGENT_BROKER"] == internal[1]


def test_compose_commands_exist() -> None:
    for service in COMPOSE["services"].values():
        if "build" in service:
            _check_command(service["command"])


def _on_host(service: dict[str, object], path: str) -> str:
    """The file of the repository a path inside ``service``'s container is, through its bind mounts."""
    for volume in service.get("volumes", []):  # type: ignore[attr-defined]
        source, target = str(volume).split(":")[:2]
        if source.startswith("./") and (path == target or path.startswith(target + "/")):
            return str(REPO / source / path[len(target) :].lstrip("/"))
    return path


def test_compose_settings_are_known_and_valid() -> None:
    for service in COMPOSE["services"].values():
        kagent_env = {k: str(v) for k, v in service.get("environment", {}).items() if k.startswith("KAGENT_")}
        if "KAGENT_ALERTS_CONFIG" in kagent_env:  # a file mounted into the container: read the repository's
            kagent_env["KAGENT_ALERTS_CONFIG"] = _on_host(service, kagent_env["KAGENT_ALERTS_CONFIG"])
        settings = load_settings(kagent_env)  # raises SettingsError naming any unknown or invalid one
        if "KAGENT_ALERTS_CONFIG" in kagent_env:
            assert settings.alerts is not None
            assert [sink.name for sink in settings.alerts.sinks] == ["alertmanager"]


def test_dockerfile_copies_existing_paths_runs_an_existing_command_and_sets_valid_settings() -> None:
    for sources in re.findall(r"^COPY (?!--from=)(.+) \S+$", DOCKERFILE, re.M):
        for source in sources.split():
            assert (REPO / source).exists(), f"Dockerfile copies {source}, which does not exist"
    cmd = re.search(r"^CMD (\[.*\])$", DOCKERFILE, re.M)
    assert cmd
    _check_command(yaml.safe_load(cmd[1]))
    env = dict(re.findall(r"(KAGENT_[A-Z_]+)=(\S+)", DOCKERFILE))
    assert env
    load_settings(env)


# -- the monitoring services: Prometheus, Alertmanager, Grafana --------------------------------------

PROMETHEUS = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())


def _mounts(service: dict) -> dict[str, Path]:
    """A service's bind mounts, container path -> the repository path mounted there."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            mounts[target.rstrip("/")] = (REPO / source).resolve()
    return mounts


def _in_repo(service: dict, container_path: str) -> Path:
    """The repository file a service sees at ``container_path``, through its bind mounts."""
    for target, source in sorted(_mounts(service).items(), key=lambda item: -len(item[0])):
        if container_path == target or container_path.startswith(target + "/"):
            return source / container_path[len(target) :].lstrip("/")
    raise AssertionError(f"{container_path} is not mounted from the repository")


def _flag(service: dict, name: str) -> str:
    values = [arg.split("=", 1)[1] for arg in service["command"] if arg.startswith(f"--{name}=")]
    assert len(values) == 1, f"--{name} is given {len(values)} times"
    return values[0]


def _listen_port(service: dict) -> int:
    return int(_flag(service, "web.listen-address").rsplit(":", 1)[1])


def test_compose_bind_mounts_exist() -> None:
    for name, service in COMPOSE["services"].items():
        for target, source in _mounts(service).items():
            assert source.exists(), f"{name} mounts {source}, which does not exist, at {target}"


def test_compose_monitoring_services_read_the_shipped_configs() -> None:
    services = COMPOSE["services"]
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["alertmanager"]["image"].startswith("prom/alertmanager:")
    config = _in_repo(services["prometheus"], _flag(services["prometheus"], "config.file"))
    assert config == REPO / "deploy" / "prometheus" / "prometheus.yml"
    for rules in PROMETHEUS["rule_files"]:  # relative to the config file, in the container as here
        assert (config.parent / rules).is_file(), f"prometheus.yml loads {rules}, which is not beside it"
    config = _in_repo(services["alertmanager"], _flag(services["alertmanager"], "config.file"))
    assert config == REPO / "deploy" / "alertmanager" / "alertmanager.yml"


def test_prometheus_scrapes_and_alerts_to_services_of_the_compose_file_on_their_ports() -> None:
    services = COMPOSE["services"]

    def check(host: str, port: int, what: str) -> None:
        if host == "localhost":
            return
        assert host in services, f"Prometheus {what} {host}, which is no service of docker-compose.yml"
        service = services[host]
        if "build" in service:  # a kagent worker: its web server, on every interface
            env = service["environment"]
            assert port == int(env["KAGENT_WEB_PORT"]), f"Prometheus {what} {host}:{port}"
            assert env["KAGENT_WEB_HOST"] == "0.0.0.0", f"{host} listens on loopback only: Prometheus cannot scrape it"
        else:
            assert port == _listen_port(service), f"Prometheus {what} {host}:{port}"

    scraped = set()
    for job in PROMETHEUS["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, port = target.rsplit(":", 1)
                check(host, int(port), f"job {job['job_name']} scrapes")
                scraped.add(host)
        for dns in job.get("dns_sd_configs", []):
            for host in dns["names"]:
                check(host, dns["port"], f"job {job['job_name']} scrapes")
                scraped.add(host)
    assert "kagent" in scraped
    for alertmanager in PROMETHEUS["alerting"]["alertmanagers"]:
        for static in alertmanager["static_configs"]:
            for target in static["targets"]:
                host, port = target.rsplit(":", 1)
                check(host, int(port), "sends alerts to")
    kagent_job = next(job for job in PROMETHEUS["scrape_configs"] if job["job_name"] == "kagent")
    assert kagent_job.get("metrics_path", "/metrics") == "/metrics"


def test_grafana_is_provisioned_with_the_prometheus_service_and_the_dashboard() -> None:
    grafana = COMPOSE["services"]["grafana"]
    provisioning = _in_repo(grafana, "/etc/grafana/provisioning")
    [datasource] = [
        d
        for file in sorted((provisioning / "datasources").glob("*.yml"))
        for d in yaml.safe_load(file.read_text())["datasources"]
    ]
    assert datasource["type"] == "prometheus"
    host, port = datasource["url"].removeprefix("http://").rsplit(":", 1)
    assert host == "prometheus" and int(port) == _listen_port(COMPOSE["services"]["prometheus"])
    [provider] = [
        p
        for file in sorted((provisioning / "dashboards").glob("*.yml"))
        for p in yaml.safe_load(file.read_text())["providers"]
    ]
    folder = provider["options"]["path"].rstrip("/")
    found = set()
    for target, source in _mounts(grafana).items():  # a folder mounted there, or files mounted in it
        if target == folder or folder.startswith(target + "/"):
            found |= set((source / folder[len(target) :].lstrip("/")).glob("*.json"))
        elif target.startswith(folder + "/") and target.endswith(".json"):
            found.add(source)
    assert REPO / "deploy" / "grafana" / "kagent-dashboard.json" in found, (
        f"Grafana loads dashboards from {folder}, where the compose file mounts no deploy/grafana/kagent-dashboard.json"
    )
