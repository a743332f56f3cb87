"""A real Spark standalone cluster on loopback: a master and workers, started from the PySpark package.

The PySpark wheel has no ``sbin/start-master.sh``, but its ``bin/spark-class`` runs any Spark
class on the JVM with Spark's jars, so :func:`spark_cluster` starts
``org.apache.spark.deploy.master.Master`` and ``org.apache.spark.deploy.worker.Worker`` with it, as
the README's "Running the pipeline on a cluster" tells a user to (:func:`master_command`,
:func:`worker_command`). Every process listens on 127.0.0.1 on free ports, writes its log under
the cluster's directory, and leads a process group of its own, so that stopping the group stops
the executors a worker started, and their Python workers, with it.

Python on the executors is whatever the driver names in ``PYSPARK_PYTHON`` (kagent's
``spark_session`` names its own interpreter): these workers run on this machine, so the driver's
interpreter, with kagent installed, is theirs as well; nothing is shipped to them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from kagent.tools.embedded import die_with_parent, free_port
from tests.support.waiting import wait_until

__all__ = [
    "MASTER_CLASS",
    "QUICK_JVM",
    "WORKER_CLASS",
    "SparkCluster",
    "SparkClusterError",
    "get_json",
    "master_command",
    "spark_class",
    "spark_cluster",
    "spark_home",
    "worker_command",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

START_TIMEOUT = 90.0
"""Seconds the master may take to be ALIVE, and then the workers to register with it."""

QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options for a JVM that lives seconds: the client JIT compiler only (C2 would spend a short run's CPU
compiling) and the serial collector. For the daemons here, and what a test may pass as
``spark.driver.extraJavaOptions`` and ``spark.executor.extraJavaOptions``; no result depends on them."""

STOP_TIMEOUT = 15.0
"""Seconds a process group may take to exit after SIGTERM before it is killed."""


class SparkClusterError(RuntimeError):
    """Java is missing, or a process of the cluster exited, or a web UI did not answer (the logs say why)."""


def spark_home() -> Path:
    """The PySpark package's directory: the ``SPARK_HOME`` of a pip-installed Spark (``bin/``, ``jars/``)."""
    return Path(pyspark.__file__).resolve().parent


def spark_class() -> Path:
    """The package's ``bin/spark-class``: runs a Spark class on the JVM, with Spark's jars on its class path."""
    return spark_home() / "bin" / "spark-class"


def master_command(port: int, webui_port: int) -> list[str]:
    """The command of a standalone master on ``127.0.0.1:port``, its web UI on ``webui_port``."""
    return [
        str(spark_class()),
        MASTER_CLASS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--webui-port",
        str(webui_port),
    ]


def worker_command(master_url: str, port: int, webui_port: int, cores: int, memory: str, work_dir: Path) -> list[str]:
    """The command of a worker on ``127.0.0.1:port`` registering with ``master_url``, offering ``cores`` cores
    and ``memory`` to applications, its executors' files under ``work_dir``."""
    return [
        *(str(spark_class()), WORKER_CLASS, "--host", "127.0.0.1", "--port", str(port)),
        *("--webui-port", str(webui_port), "--cores", str(cores), "--memory", memory),
        *("--work-dir", str(work_dir), master_url),
    ]


def _java() -> str:
    """The ``java`` that ``spark-class`` runs (``$JAVA_HOME/bin/java``, else the one on ``PATH``).

    Raises :class:`SparkClusterError` saying what to install when there is none.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise SparkClusterError(
            "Java is not installed, and Spark's master, workers and driver are JVM processes: install a JDK 17+ "
            "(Debian: apt-get install -y openjdk-17-jre-headless) or set JAVA_HOME"
        )
    return found


def get_json(url: str, timeout: float = 5.0) -> Any | None:
    """GET ``url`` and parse its JSON body; None while nothing answers there, or not yet with JSON (a
    Spark web UI answers with an empty body while it starts)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


@dataclass
class _Process:
    """One JVM of the cluster: its name, command, log file and, once started, the process."""

    name: str
    command: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str], cwd: Path) -> None:
        """Start it as the leader of a new process group (which its children, the executors, join), its
        output appended to the log; the kernel sends it SIGTERM if the thread that started it dies."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of its log, headed by its name and path."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else "(no log)"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"--- spark {self.name} log {self.log_path} (last {lines} lines) ---\n{tail}"

    def check_alive(self) -> None:
        """Raise :class:`SparkClusterError` with the log's tail if the process has exited."""
        if self.process is not None and (code := self.process.poll()) is not None:
            raise SparkClusterError(f"spark {self.name} exited with code {code}\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM to its process group, SIGKILL to the group once the leader has exited or ``timeout`` s
        have passed (an executor still shutting down is not waited for). Nothing if it never started."""
        if self.process is None:
            return
        group = self.process.pid  # the leader of a new session: its pid is the group's id
        _signal_group(group, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        finally:
            _signal_group(group, signal.SIGKILL)
            self.process.wait()


def _signal_group(group: int, signum: signal.Signals) -> None:
    """Send ``signum`` to process group ``group``; a group with no process left is left alone."""
    with suppress(ProcessLookupError):
        os.killpg(group, signum)


@dataclass(frozen=True)
class SparkCluster:
    """A running standalone cluster: where its master listens, and where to look at each process."""

    master_url: str
    """``spark://127.0.0.1:PORT``: what ``--master`` takes."""
    master_ui: str
    """The master's web UI, ending in ``/``; ``json/`` under it is the cluster's state."""
    worker_uis: tuple[str, ...]
    """Each worker's web UI, ending in ``/``; ``json/`` under it lists its executors."""
    work_dirs: tuple[Path, ...]
    """Each worker's work directory: an executor's ``stdout`` and ``stderr`` are in ``<app id>/<executor id>/``."""
    directory: Path
    """Where the logs and the work directories are."""
    _processes: tuple[_Process, ...] = field(repr=False)

    def state(self) -> dict[str, Any]:
        """The master's JSON view now (``workers``, ``activeapps``, ``completedapps``...)."""
        return self._json(self.master_ui)

    def worker_states(self) -> list[dict[str, Any]]:
        """Each worker's JSON view now (``executors``, ``finishedexecutors``...), in worker order."""
        return [self._json(ui) for ui in self.worker_uis]

    def log_tails(self, lines: int = 40) -> str:
        """The tail of every process's log: what to print when something on the cluster went wrong."""
        return "\n".join(process.log_tail(lines) for process in self._processes)

    def _json(self, ui: str) -> dict[str, Any]:
        """The JSON view of the web UI at ``ui``; :class:`SparkClusterError` with the logs if it does not answer."""
        body = get_json(ui + "json/")
        if body is None:
            raise SparkClusterError(f"the web UI at {ui} does not answer\n{self.log_tails()}")
        return dict(body)


@contextmanager
def spark_cluster(
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    directory: Path | None = None,
    timeout: float = START_TIMEOUT,
) -> Iterator[SparkCluster]:
    """A standalone master and ``workers`` workers on 127.0.0.1: yields the cluster once the master reports
    every worker ALIVE; on the way out, also when starting failed or the body raised, stops every process
    it started by its process group.

    Each worker offers ``cores`` cores and ``memory`` (Spark's size syntax) to applications; an
    executor asks 1g by default, so ``memory`` should be at least that. Files go under ``directory``
    (default: a new temporary directory, removed at the end). Raises :class:`SparkClusterError` if Java
    is missing or a process exits while starting (with its log's tail), and
    :class:`tests.support.waiting.WaitTimedOut` if the master is not ALIVE, or the workers are not all
    registered, within ``timeout`` seconds each (with the logs' tails).
    """
    java = _java()
    with ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kagent-spark-cluster-")))
        conf_dir = directory / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "JAVA_HOME": os.environ.get("JAVA_HOME") or str(Path(java).resolve().parents[1]),
            # Every address Spark picks for itself, the executors' included, is loopback.
            "SPARK_LOCAL_IP": "127.0.0.1",
            # No spark-env.sh or spark-defaults.conf of the user's: the cluster is what this function says.
            "SPARK_CONF_DIR": str(conf_dir),
            # The master's REST submission server would take port 6066 (or the next free one): not used here.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            # Daemons of a short test: the quick JIT only and one GC thread, which halves their start-up's CPU.
            "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,
        }
        master_port, master_ui_port = free_port(), free_port()
        master_url, master_ui = f"spark://127.0.0.1:{master_port}", f"http://127.0.0.1:{master_ui_port}/"
        master = _Process("master", master_command(master_port, master_ui_port), directory / "master.log")
        worker_processes, worker_uis, work_dirs = [], [], []
        for index in range(1, workers + 1):
            ui_port, work_dir = free_port(), directory / f"worker-{index}" / "work"
            work_dir.mkdir(parents=True, exist_ok=True)
            command = worker_command(master_url, free_port(), ui_port, cores, memory, work_dir)
            worker_processes.append(_Process(f"worker-{index}", command, directory / f"worker-{index}.log"))
            worker_uis.append(f"http://127.0.0.1:{ui_port}/")
            work_dirs.append(work_dir)
        processes = (master, *worker_processes)
        cluster = SparkCluster(master_url, master_ui, tuple(worker_uis), tuple(work_dirs), directory, processes)
        for process in processes:
            stack.callback(process.stop)  # in reverse on the way out: the workers, then the master

        def master_alive() -> bool:
            master.check_alive()
            body = get_json(master_ui + "json/", timeout=2.0)
            return body is not None and body.get("status") == "ALIVE"

        def workers_alive() -> bool:
            for process in processes:
                process.check_alive()
            body = get_json(master_ui + "json/", timeout=2.0) or {}
            alive = [worker for worker in body.get("workers", []) if worker.get("state") == "ALIVE"]
            return len(alive) == workers

        # The workers start once the master leads: a worker that finds no master retries only 5-15 s later.
        master.start(env, directory)
        wait_until(master_alive, timeout, f"the Spark master at {master_url} to be ALIVE", detail=master.log_tail)
        for process in worker_processes:
            process.start(env, directory)
        wait_until(
            workers_alive,
            timeout,
            f"the Spark master at {master_url} to report {workers} ALIVE workers",
            interval=0.2,
            detail=cluster.log_tails,
        )
        yield cluster
