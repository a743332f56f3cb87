"""The Dockerfile builds an image a cluster can run as is: what can be checked without a container engine.

No Docker engine runs here, so the Dockerfile is read instead (its instructions, stage by stage, with its
build arguments' defaults) and held to: a base image pinned to a Python release, the same in the build
stage that compiles the codec's twins and in the runtime stage that loads them; a runtime stage with no
compiler; a numeric non-root user owning the data directory; the worker's port exposed; ``kagent worker``
as the command; and a health check that really asks ``/healthz``, run here against an HTTP server.
(tests/unit/test_deployment.py checks the paths it copies and its settings.)
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import yaml

from kagent.settings import Settings
from tests.support import REPO
from tests.support.routes import worker_routes

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


@dataclass
class Stage:
    """One ``FROM`` of the Dockerfile and the instructions under it."""

    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, instruction: str) -> list[str]:
        return [arguments for name, arguments in self.instructions if name == instruction]


def _stages(text: str) -> list[Stage]:
    """The Dockerfile's stages, ``ARG`` defaults given before the first ``FROM`` substituted in its image."""
    logical = re.sub(r"\\\n", " ", text)
    arguments: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        instruction, rest = instruction.upper(), " ".join(rest.split())
        if instruction == "FROM":
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: arguments[m[1] or m[2]], rest.split()[0])
            name = rest.split()[2] if len(rest.split()) == 3 and rest.split()[1].upper() == "AS" else None
            stages.append(Stage(image, name))
        elif not stages and instruction == "ARG":
            name, _, default = rest.partition("=")
            arguments[name] = default
        else:
            stages[-1].instructions.append((instruction, rest))
    return stages


STAGES = _stages((REPO / "Dockerfile").read_text())
BUILD, RUNTIME = STAGES[0], STAGES[-1]


def test_both_stages_start_from_one_python_image_pinned_to_a_release() -> None:
    assert len(STAGES) == 2 and BUILD.name == "build" and RUNTIME.name is None
    assert BUILD.image == RUNTIME.image, "the twins are compiled for the build stage's Python, loaded by the runtime's"
    pinned = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-[a-z]+(@sha256:[0-9a-f]{64})?", RUNTIME.image)
    assert pinned, f"{RUNTIME.image} is not pinned to a Python release (python:X.Y.Z-slim-DEBIAN[@sha256:...])"
    minimum = re.fullmatch(r">=(\d+)\.(\d+)", PROJECT["requires-python"])
    assert minimum and (int(pinned[1]), int(pinned[2])) >= (int(minimum[1]), int(minimum[2]))


def test_the_runtime_stage_has_only_the_wheels_of_the_build_and_no_compiler() -> None:
    assert any("gcc" in run for run in BUILD.all("RUN")), "the build stage no longer installs the compiler"
    assert not any(re.search(r"\b(gcc|cc|build-essential|apt-get)\b", run) for run in RUNTIME.all("RUN"))
    assert RUNTIME.all("COPY") == ["--from=build /wheels /wheels"]
    [install] = [run for run in RUNTIME.all("RUN") if "pip install" in run]
    assert "rm -rf /wheels" in install
    # The default extras include msk, so that the msk-iam overlay's image carries Amazon's signer.
    [extras] = [arg for arg in RUNTIME.all("ARG") if arg.startswith("EXTRAS=")]
    assert set(extras.removeprefix("EXTRAS=").split(",")) <= set(PROJECT["optional-dependencies"])
    assert "msk" in extras and "${EXTRAS:+[$EXTRAS]}" in install


def test_the_worker_runs_as_a_numeric_user_other_than_root_owning_its_data_dir() -> None:
    [user] = RUNTIME.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, "Kubernetes' runAsNonRoot can verify only a numeric non-root USER"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    data_dir = dict(re.findall(r"(KAGENT_\w+)=(\S+)", " ".join(RUNTIME.all("ENV"))))["KAGENT_DATA_DIR"]
    assert any(re.search(rf"useradd .*--uid {uid}\b", run) for run in RUNTIME.all("RUN"))
    owned = rf"install -d -o \S+ -g \S+ -m 07\d0 {re.escape(data_dir)}\b"
    assert any(re.search(owned, run) for run in RUNTIME.all("RUN")), f"{data_dir} is not made the user's"
    assert RUNTIME.all("WORKDIR") == [data_dir], "the working directory is the one the user may write"


def test_the_command_is_kagent_worker_on_the_exposed_web_port() -> None:
    assert RUNTIME.all("CMD") == ['["kagent", "worker"]'] and not RUNTIME.all("ENTRYPOINT")
    assert RUNTIME.all("EXPOSE") == [str(Settings.model_fields["web_port"].default)]


class _Health(BaseHTTPRequestHandler):
    status = 200
    asked: list[str] = []  # noqa: RUF012 -- the requests the server saw, for the test to read

    def do_GET(self) -> None:
        self.asked.append(self.path)
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _health_server(status: int) -> Iterator[tuple[int, list[str]]]:
    handler = type("Health", (_Health,), {"status": status, "asked": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler.asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_healthcheck_asks_healthz_on_the_web_port_and_fails_on_an_error() -> None:
    [healthcheck] = RUNTIME.all("HEALTHCHECK")
    options, _, command = healthcheck.partition(" CMD ")
    assert re.search(r"--interval=\d+s", options) and re.search(r"--timeout=\d+s", options)
    program, flag, code = yaml.safe_load(command)
    assert (program, flag) == ("python", "-c")
    for status, healthy in ((200, True), (503, False)):
        with _health_server(status) as (port, asked):
            result = subprocess.run(
                [sys.executable, "-c", code], env={"KAGENT_WEB_PORT": str(port)}, capture_output=True, timeout=30
            )
        assert (result.returncode == 0) == healthy, f"HTTP {status}: exit {result.returncode} {result.stderr!r}"
        assert asked == ["/healthz"]
    assert "/healthz" in worker_routes()
