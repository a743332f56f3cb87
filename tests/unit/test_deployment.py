"""docker-compose.yml and the Dockerfile name only commands, paths and settings that exist.

No Docker engine runs here, so these files are checked against the code instead.
"""

from __future__ import annotations

import re
import tomllib

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


def test_compose_settings_are_known_and_valid() -> None:
    for service in COMPOSE["services"].values():
        kagent_env = {k: str(v) for k, v in service.get("environment", {}).items() if k.startswith("KAGENT_")}
        load_settings(kagent_env)  # raises SettingsError naming any unknown or invalid one


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
