"""A real ``faust -A kagent.app worker`` process, as the tests and the benchmarks run it.

Each worker has its own app id, web port, data directory and log file, and is configured by
``KAGENT_*`` variables only (none inherited from the caller's environment). It is started with
``die_with_parent``, so the kernel sends it SIGTERM if the thread that started it dies.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kagent.tools.embedded import die_with_parent, free_port
from tests.support import REPO
from tests.support.waiting import wait_until
from tests.support.web import get_json

__all__ = [
    "FAST",
    "STEADY",
    "Worker",
    "WorkerExited",
    "WorkerIgnoredSigterm",
    "kagent_env",
    "metric_total",
    "running_workers",
]


FAST = {"evaluate_interval": "0.5", "end_offset_interval": "0.5", "hold_evaluations": "2", "topic_partitions": "4"}
"""Settings of a worker that evaluates and polls twice a second and recommends after 2 evaluations, on
kagent topics of 4 partitions: what the end-to-end tests start, so a skew is seen in seconds."""

STEADY = {**FAST, "end_offset_interval": "2"}
""":data:`FAST`, but end offsets polled every 2 s, so that they turn stale (after 3 polls) only 6 s after
the last answer: for tests that read lag figures at a given moment. At 0.5 s, a poll delayed 1.5 s on a busy
two-core machine rightly turns the figures unknown until the next one, which is not what those tests are
about (tests/integration/test_unknown_figures.py is)."""


def kagent_env(**settings: str) -> dict[str, str]:
    """This process's environment without its ``KAGENT_*`` variables, plus ``settings`` (kagent settings by
    name, ``web_port="7000"``) as ``KAGENT_*``: what a kagent process the tests start is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGENT_")}
    return {**env, **{f"KAGENT_{k.upper()}": v for k, v in settings.items()}}


class WorkerExited(RuntimeError):
    """The worker process ended while it was expected to run."""


class WorkerIgnoredSigterm(AssertionError):
    """The worker was still running ``timeout`` s after SIGTERM (it has been killed)."""


class Worker:
    """A real worker on the broker at ``bootstrap_servers``, its files under ``workdir``."""

    def __init__(self, bootstrap_servers: str, workdir: Path, app_id: str, **settings: str) -> None:
        """``settings`` are kagent settings by name (``evaluate_interval="0.5"``), passed as ``KAGENT_*``."""
        self.app_id = app_id
        self.web_port = free_port()
        self.log_path = workdir / f"{app_id}-worker.log"
        defaults = {
            "broker": bootstrap_servers,
            "app_id": app_id,
            "web_port": str(self.web_port),
            "data_dir": str(workdir / f"{app_id}-data"),
            # Tansu holds a group's first join for half the session timeout.
            "session_timeout": "2",
            # Tansu's ListOffsets is right only for one-record batches (kagent.tools.embedded).
            "one_record_batches": "true",
        }
        self.env = kagent_env(**{**defaults, **settings})  # settings override the defaults
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The worker's web root, ending in ``/``."""
        return f"http://127.0.0.1:{self.web_port}/"

    @property
    def pid(self) -> int:
        """The pid of the started process."""
        assert self.process is not None, f"worker {self.app_id} was never started"
        return self.process.pid

    def start(self) -> Worker:
        """Start the process, its output appended to :attr:`log_path`; returns ``self``."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "faust", "-A", "kagent.app", "worker", "-l", "info"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                preexec_fn=die_with_parent,
            )
        return self

    def log(self) -> str:
        """Everything the worker has logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else "(no log)"

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the log, headed by the app id: a failure's explanation."""
        tail = "\n".join(self.log().splitlines()[-lines:])
        return f"--- worker {self.app_id} log (last {lines} lines) ---\n{tail}"

    def check_alive(self) -> None:
        """Raise :class:`WorkerExited` with the log's tail unless the process is running."""
        if self.process is None or self.process.poll() is not None:
            raise WorkerExited(f"worker {self.app_id} is not running\n{self.log_tail()}")

    def wait_serving(self, timeout: float = 90.0) -> None:
        """Until the worker answers at ``/healthz``; fails with the log if it exits or times out."""

        def serving() -> bool:
            self.check_alive()
            return get_json(self.url + "healthz", timeout=2) is not None

        wait_until(serving, timeout, f"worker {self.app_id} to serve /healthz", interval=0.2, detail=self.log_tail)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the worker says ready at ``/readyz`` (started in full: its tables recovered, its
        source caught up); fails with the log if it exits or times out. ``/healthz`` answers from
        early in start-up, while Faust may still be creating topics and joining its group."""

        def ready() -> bool:
            self.check_alive()
            return bool((get_json(self.url + "readyz", timeout=2) or {}).get("ready"))

        wait_until(ready, timeout, f"worker {self.app_id} ready at /readyz", interval=0.2, detail=self.log_tail)

    def metrics(self, *names: str, timeout: float = 5.0) -> dict[str, float] | None:
        """The worker's Prometheus samples at ``/metrics`` (only those of ``names``, given some),
        ``name{label="value",...}`` -> value (labels sorted by name; no braces without labels);
        None while it does not answer."""
        query = "?" + urllib.parse.urlencode([("name[]", name) for name in names]) if names else ""
        try:
            with urllib.request.urlopen(self.url + "metrics" + query, timeout=timeout) as response:
                text = response.read().decode()
        except (urllib.error.URLError, OSError):
            return None
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return samples

    def collector_pauses(self, timeout: float = 30.0) -> dict[str, float]:
        """The garbage collector's pauses so far (:func:`pauses_by_generation`); empty while it does not answer."""
        return pauses_by_generation(self.metrics(*GC_FAMILIES, timeout=timeout) or {})

    def loop_lags(self, timeout: float = 30.0) -> dict[str, float]:
        """How late its event loop ran its timers so far (:func:`lags_read`); empty while it does not answer."""
        return lags_read(self.metrics(*LOOP_LAG_FAMILIES, timeout=timeout) or {})

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for the exit; its exit code. A worker still running after ``timeout`` s
        is killed and :class:`WorkerIgnoredSigterm` raised. A worker that has exited is only reaped."""
        assert self.process is not None, f"worker {self.app_id} was never started"
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise WorkerIgnoredSigterm(
                f"worker {self.app_id} ignored SIGTERM for {timeout:g} s\n{self.log_tail(60)}"
            ) from None

    def kill(self) -> None:
        """SIGKILL the process if it runs, and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()


def metric_total(samples: dict[str, float], name: str) -> float:
    """The sum of sample ``name`` over all its label sets (0 if absent)."""
    return sum(value for key, value in samples.items() if key == name or key.startswith(name + "{"))


GC_PAUSES = "kagent_gc_pause_seconds"
"""The worker's histogram of the garbage collector's pauses, by generation."""
GC_FAMILIES = (f"{GC_PAUSES}_count", f"{GC_PAUSES}_sum", f"{GC_PAUSES}_bucket")
"""Its sample names, for :meth:`Worker.metrics`."""


def pauses_by_generation(samples: dict[str, float]) -> dict[str, float]:
    """A worker's :data:`GC_PAUSES` samples by generation ``N``: ``count N``, ``sum N`` and ``le N BOUND`` (each
    bucket's cumulative count)."""
    found: dict[str, float] = {}
    for key, value in samples.items():
        named = re.fullmatch(rf'{GC_PAUSES}_(count|sum|bucket)\{{generation="(\d)"(?:,le="([^"]+)")?\}}', key)
        if named:
            what, generation, bound = named.groups()
            name = f"le {generation} {bound}" if what == "bucket" else f"{what} {generation}"
            found[name] = found.get(name, 0.0) + value
    return found


def collector_line(before: dict[str, float], after: dict[str, float]) -> str:
    """How long the collector held a worker between two :meth:`Worker.collector_pauses` readings: in all, how many
    pauses were over 20 ms, and generation by generation the collections, their time and the bucket the
    longest fell in."""

    def since(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    count = held = over = 0.0
    parts = []
    for generation in "012":
        collections = since(f"count {generation}")
        if not collections:
            continue
        worst, late = _largest(since, after, f"le {generation} ", collections)
        over += late
        count += collections
        paused = since(f"sum {generation}")
        held += paused
        parts.append(f"generation {generation}: {collections:.0f}, {paused * 1000:.0f} ms, the longest {worst}")
    return f"{count:.0f} collections, {held * 1000:.0f} ms in all, {over:.0f} over 20 ms ({'; '.join(parts) or 'none'})"


LOOP_LAG = "kagent_event_loop_lag_seconds"
"""The worker's histogram of how late its event loop ran a timer due (one every 50 ms)."""
LOOP_LAG_FAMILIES = (f"{LOOP_LAG}_count", f"{LOOP_LAG}_sum", f"{LOOP_LAG}_bucket")
"""Its sample names, for :meth:`Worker.metrics`."""


def lags_read(samples: dict[str, float]) -> dict[str, float]:
    """A worker's :data:`LOOP_LAG` samples as ``count``, ``sum`` and ``le BOUND`` (each bucket's cumulative count)."""
    found: dict[str, float] = {}
    for key, value in samples.items():
        named = re.fullmatch(rf'{LOOP_LAG}_(count|sum|bucket)(?:\{{le="([^"]+)"\}})?', key)
        if named:
            what, bound = named.groups()
            found[f"le {bound}" if what == "bucket" else what] = value
    return found


def loop_lag_line(before: dict[str, float], after: dict[str, float]) -> str:
    """How late a worker's event loop ran its timers between two :meth:`Worker.loop_lags` readings: how many ran,
    how many over 20 ms late, and the bucket the latest fell in (its longest stall, give or take 50 ms)."""

    def since(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    timers = since("count")
    if not timers:
        return "no timer ran"
    worst, over = _largest(since, after, "le ", timers)
    return f"{timers:.0f} timers, {over:.0f} over 20 ms late, the latest {worst}"


def _largest(since: Callable[[str], float], after: dict[str, float], prefix: str, count: float) -> tuple[str, float]:
    """Of ``count`` observations of a histogram since an earlier reading (``since(key)``: a key's growth), whose
    buckets are the keys of ``after`` that start with ``prefix`` and end in the bound: the bucket the largest
    fell in (``under 50 ms``), and how many were over 20 ms."""
    bounds = sorted((float(key.removeprefix(prefix)), key) for key in after if key.startswith(prefix))
    largest = next((bound for bound, key in bounds if since(key) >= count), math.inf)
    over = count - sum(since(key) for bound, key in bounds if bound == 0.02)
    finite = [bound for bound, _ in bounds if bound < largest]
    worst = f"under {largest * 1000:g} ms" if largest < math.inf else f"over {max(finite, default=0) * 1000:g} ms"
    return worst, over


@contextmanager
def running_workers(bootstrap_servers: str, workdir: Path) -> Iterator[Callable[..., Worker]]:
    """A factory ``start(app_id, **settings)`` of started workers; any still running on the way out is killed
    (a test or benchmark that wants a clean stop calls :meth:`Worker.stop` itself)."""
    workers: list[Worker] = []

    def start(app_id: str, **settings: str) -> Worker:
        worker = Worker(bootstrap_servers, workdir, app_id, **settings).start()
        workers.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in workers:
            worker.kill()
