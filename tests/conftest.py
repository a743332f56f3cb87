"""Shared fixtures: the embedded broker, and helpers to run real kagent processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kagent.tools.embedded import EmbeddedBroker, free_port

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """One embedded Tansu broker for the whole session, stopped by pid at the end."""
    with EmbeddedBroker() as broker:
        yield broker


def process_alive(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns a truthy value, or fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def get_json(url: str) -> Any | None:
    """GET ``url`` and parse its JSON body; None while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError):
        return None


class Worker:
    """A real ``faust -A kagent.app worker`` process with its own app id, web port and data dir."""

    def __init__(self, broker: EmbeddedBroker, tmp_path: Path, app_id: str, **settings: str) -> None:
        self.app_id = app_id
        self.web_port = free_port()
        self.log_path = tmp_path / f"{app_id}-worker.log"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KAGENT_")},
            "KAGENT_BROKER": broker.bootstrap_servers,
            "KAGENT_APP_ID": app_id,
            "KAGENT_WEB_PORT": str(self.web_port),
            "KAGENT_DATA_DIR": str(tmp_path / f"{app_id}-data"),
            # Tansu holds a group's first join for half the session timeout.
            "KAGENT_SESSION_TIMEOUT": "2",
            # Tansu's ListOffsets is right only for one-record batches (kagent.tools.embedded).
            "KAGENT_ONE_RECORD_BATCHES": "true",
            **{f"KAGENT_{k.upper()}": v for k, v in settings.items()},
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}/"

    def start(self) -> Worker:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "faust", "-A", "kagent.app", "worker", "-l", "info"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code (SIGKILL after ``timeout``)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"worker {self.app_id} ignored SIGTERM for {timeout:g} s; log:\n{self.log()[-3000:]}")


@pytest.fixture
def start_worker(kafka_broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Factory of real workers on the session broker; any still running at teardown are killed."""
    workers: list[Worker] = []

    def start(app_id: str, **settings: str) -> Worker:
        worker = Worker(kafka_broker, tmp_path, app_id, **settings).start()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        if worker.process is not None and worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()


def fail_first_send(monkeypatch: pytest.MonkeyPatch, producer: Any, error: BaseException) -> Callable[[], bool]:
    """Make ``producer.send`` raise ``error`` once, then send for real: a broker refusing a write
    is a fault the embedded broker cannot cause. Returns whether the fault has happened."""
    real_send = producer.send
    pending = [error]

    async def send_failing_once(*args: Any, **kwargs: Any) -> Any:
        if pending:
            raise pending.pop()
        return await real_send(*args, **kwargs)

    monkeypatch.setattr(producer, "send", send_failing_once)
    return lambda: not pending
