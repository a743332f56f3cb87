"""``kagent pipeline --master spark://...`` on a real standalone cluster gives what local mode gives.

A master and two workers started from the PySpark package's ``bin/spark-class``
(``tests.support.spark_cluster``, as the README's cluster section tells a user) run ``backfill``
and ``backtest``, each as the ``kagent`` command a user types, in its own process; the same job in
local mode runs in this process. Their Parquet tables must be equal row for row, their printed
summaries and reports identical, and the cluster's own account must show the job: a finished
application of the job's name, with an executor on each worker that ran tasks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition
from click.testing import CliRunner
from pyspark.sql import SparkSession

from kagent.core.consumer_offsets import Record
from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker
from kagent.tools.pipeline import session
from kagent.tools.pipeline.backfill import TABLES
from kagent.tools.pipeline.backtest_kernel import SNAPSHOT_COLUMNS
from kagent.tools.pipeline.cli import pipeline
from kagent.tools.simulator.coordinator_records import offsets_topic_message
from tests.support.coordinator import group_metadata, offset_commit
from tests.support.spark_cluster import QUICK_JVM, SparkCluster, spark_cluster
from tests.support.waiting import wait_until
from tests.support.worker import kagent_env

pytestmark = pytest.mark.integration

KAGENT = Path(sys.executable).with_name("kagent")
"""The ``kagent`` command of the interpreter running the tests (the venv's)."""

JOB_TIMEOUT = 180.0
"""Seconds one job on the cluster may take, Spark's start-up included."""

CLUSTER_CONF = (
    *("--conf", "spark.cores.max=2"),
    *("--conf", "spark.sql.shuffle.partitions=2"),
    *("--conf", f"spark.driver.extraJavaOptions={QUICK_JVM}"),
    *("--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}"),
)
"""Both workers' cores for each job: with a maximum set, Spark starts scheduling once both executors have
registered (``spark.scheduler.minRegisteredResourcesRatio``), so each of them runs tasks. Two partitions
after a shuffle, as the tests' local session has, for inputs this small (Spark's default is 200). The
driver's and the executors' JVMs tuned for a short run (:data:`tests.support.spark_cluster.QUICK_JVM`)."""

OFFSETS_TOPIC_PARTITIONS = 4
"""Partitions of the test's own offsets topic: four Spark input partitions, spread over both executors."""


def _coordinator_records() -> list[Record]:
    """Six consumer groups' history as Kafka's coordinator writes it: a generation, commits on both
    partitions, a second generation with the members swapped, and more commits."""
    records: list[Record] = []
    for index in range(6):
        group, topic = f"cluster-group-{index}", f"orders-{index % 2}"
        first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
        records.append(group_metadata(group, 1, {f"c0-{index}": [first], f"c1-{index}": [second]}))
        records += [offset_commit(group, topic, n % 2, 10 * n + index) for n in range(4)]
        records.append(group_metadata(group, 2, {f"c0-{index}": [second], f"c1-{index}": [first]}))
        records += [offset_commit(group, topic, n % 2, 100 + 10 * n + index) for n in range(4)]
    return records


async def _publish(broker: EmbeddedBroker, topic: str, records: Sequence[Record]) -> None:
    """Each record to ``topic`` on its group's partition, as Kafka places it in ``__consumer_offsets``; one
    record per batch, so that Tansu's ListOffsets gives the log end (``kagent.tools.embedded``)."""
    await broker.create_topics({topic: OFFSETS_TOPIC_PARTITIONS})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        pending = []
        for record in records:
            message = offsets_topic_message(record, OFFSETS_TOPIC_PARTITIONS)
            pending.append(await producer.send(topic, message.value, key=message.key, partition=message.partition))
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


def _lag_history() -> pd.DataFrame:
    """Lag snapshots of three groups over ten minutes: one skewed under its assignment, two balanced."""
    start = pd.Timestamp("2024-01-01", tz="UTC")
    layouts = {
        "hot": [(900, "a-1"), (500, "a-1"), (500, "b-2"), (100, "b-2"), (300, "c-3"), (300, "c-3")],
        "calm": [(100, "a-1"), (100, "b-2"), (100, "a-1"), (100, "b-2")],
        "warm": [(400, "a-1"), (100, "b-2"), (200, "a-1"), (300, "b-2"), (50, "c-3")],
    }
    rows = [
        {
            "group": group,
            "snapshot": start + pd.Timedelta(minutes=s),
            "topic": "t",
            "partition": p,
            "lag": lag * (s + 1),
            "member": member,
        }
        for group, layout in layouts.items()
        for s in range(10)
        for p, (lag, member) in enumerate(layout)
    ]
    return pd.DataFrame(rows).astype(SNAPSHOT_COLUMNS)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone master and two workers (1 core, 1 GiB each) on loopback, for the module."""
    with spark_cluster(workers=2, cores=1, memory="1g", directory=tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def offsets_topic(kafka_broker: EmbeddedBroker) -> str:
    """A topic of this module's own, holding coordinator records in ``__consumer_offsets``' format (the
    session's ``__consumer_offsets`` holds other tests' records, which may change between two runs)."""
    topic = "cluster-consumer-offsets"
    asyncio.run(_publish(kafka_broker, topic, _coordinator_records()))
    return topic


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The lag history as Parquet (timestamps in microseconds, as Spark writes them)."""
    directory = tmp_path_factory.mktemp("snapshots")
    _lag_history().to_parquet(directory / "part-0.parquet", coerce_timestamps="us", index=False)
    return str(directory)


class _ClusterJob:
    """``kagent pipeline --master <cluster> ... <job> ...`` run as its own process, as a user runs it; as a
    context manager, the process (and its group: the driver's JVM) is killed on the way out if still running."""

    def __init__(self, cluster: SparkCluster, args: Sequence[str], workdir: Path) -> None:
        """Start it in ``workdir``, its output in files there. Its environment is the tests' without their
        Spark and kagent variables: the command finds its interpreter, and its driver its address, itself."""
        env = {
            name: value
            for name, value in kagent_env().items()
            if name not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "SPARK_HOME")
        }
        self.command = [str(KAGENT), "pipeline", "--master", cluster.master_url, *CLUSTER_CONF, *args]
        self.cluster = cluster
        self.stdout, self.stderr = workdir / "cluster-job.out", workdir / "cluster-job.err"
        with self.stdout.open("wb") as stdout, self.stderr.open("wb") as stderr:
            self.process = subprocess.Popen(
                self.command, cwd=workdir, env=env, stdout=stdout, stderr=stderr, start_new_session=True
            )

    def __enter__(self) -> _ClusterJob:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def finish(self) -> str:
        """Wait for it and return its stdout; fails with its stderr and the cluster's logs unless it exits 0
        within :data:`JOB_TIMEOUT` seconds."""
        try:
            code: int | str = self.process.wait(JOB_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = f"nothing within {JOB_TIMEOUT:g} s"
        stdout, stderr = self.stdout.read_text(), self.stderr.read_text(errors="replace")
        assert code == 0, (
            f"{' '.join(self.command)} exited with {code}\n--- stdout ---\n{stdout}\n"
            f"--- stderr ---\n{stderr[-6000:]}\n{self.cluster.log_tails()}"
        )
        return stdout


def _local(args: Sequence[str]) -> str:
    """The same job in local mode, in this process: on the tests' local ``spark`` session, which the calling
    test holds, as ``kagent pipeline`` uses a session already active; its stdout."""
    result = CliRunner().invoke(pipeline, ["--master", "local[2]", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _table(path: Path, keys: Sequence[str]) -> pd.DataFrame:
    """A Parquet table Spark wrote, its rows sorted by ``keys`` (which identify a row), its partition columns
    as strings and nested values as Python lists and dicts: two runs' tables compare equal exactly when their
    rows do."""
    frame = pd.read_parquet(path)
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):  # a partition column (date, strategy)
            frame[column] = frame[column].astype(str)
        elif frame[column].dtype == object:
            frame[column] = frame[column].map(_plain)
    return frame.sort_values(list(keys), ignore_index=True)[sorted(frame.columns)]


def _plain(value: Any) -> Any:
    """``value`` with Arrow's nested values (NumPy arrays of dicts) turned into lists, recursively."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _assert_ran_on_both_workers(cluster: SparkCluster, name: str) -> None:
    """The master lists a finished application ``name``, and each worker ran one executor of it, which ran
    tasks (its log in the worker's work directory says so) for a driver on loopback."""

    def finished() -> list[dict[str, Any]]:
        return [a for a in cluster.state()["completedapps"] if a["name"] == name and a["state"] == "FINISHED"]

    (app,) = wait_until(finished, 30, f"the master to list application {name} as FINISHED", detail=cluster.log_tails)

    def executors() -> list[list[dict[str, Any]]] | None:
        per_worker = [
            [e for e in state["finishedexecutors"] if e["appid"] == app["id"]] for state in cluster.worker_states()
        ]
        return per_worker if all(per_worker) else None

    per_worker = wait_until(executors, 30, f"both workers to list an executor of {app['id']} as finished")
    assert [len(found) for found in per_worker] == [1, 1], per_worker
    for work_dir, (executor,) in zip(cluster.work_dirs, per_worker, strict=True):
        assert "CoarseGrainedScheduler@127.0.0.1:" in executor["appdesc"]["command"]  # the driver's address
        log = (work_dir / app["id"] / str(executor["id"]) / "stderr").read_text(errors="replace")
        assert "Running task" in log, f"executor {executor['id']} in {work_dir} ran no task of {name}:\n{log[-3000:]}"


@pytest.mark.parametrize(
    ("master", "on_loopback"),
    [
        ("local[2]", True),
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077,127.0.0.2:7078", True),
        ("spark://[::1]:7077", True),
        ("spark://spark-master:7077", False),
        ("spark://127.0.0.1:7077,10.0.0.5:7077", False),
        ("yarn", False),
        ("k8s://https://127.0.0.1:6443", False),
    ],
)
def test_the_driver_stays_on_loopback_only_for_a_master_there(master: str, on_loopback: bool) -> None:
    assert session.on_loopback(master) is on_loopback


def test_backfill_on_the_cluster_equals_local_mode(
    cluster: SparkCluster, spark: SparkSession, kafka_broker: EmbeddedBroker, offsets_topic: str, tmp_path: Path
) -> None:
    args = ["backfill", "--broker", kafka_broker.bootstrap_servers, "--topic", offsets_topic]
    with _ClusterJob(cluster, [*args, "--output", str(tmp_path / "cluster")], tmp_path) as on_cluster:
        local_output = _local([*args, "--output", str(tmp_path / "local")])  # meanwhile
        cluster_output = on_cluster.finish()

    assert cluster_output.splitlines()[0] == local_output.splitlines()[0]  # the rows read, by kind
    assert local_output.splitlines()[0] == f"read {offsets_topic}: 12 group-assigned, 48 offset-committed"
    keys = ["source_partition", "source_offset"]  # one row per record read
    for name in TABLES:
        local = _table(tmp_path / "local" / name, keys)
        assert len(local) == {"offset_commits": 48, "group_generations": 12, "rejected": 0}[name]
        pd.testing.assert_frame_equal(_table(tmp_path / "cluster" / name, keys), local)
    _assert_ran_on_both_workers(cluster, "kagent-backfill")


def test_backtest_on_the_cluster_equals_local_mode(
    cluster: SparkCluster, spark: SparkSession, snapshots: str, tmp_path: Path
) -> None:
    args = ["backtest", "--snapshots", snapshots]
    with _ClusterJob(cluster, [*args, "--output", str(tmp_path / "cluster")], tmp_path) as on_cluster:
        local_output = _local([*args, "--output", str(tmp_path / "local")])  # meanwhile
        cluster_output = on_cluster.finish()

    # The strategy comparison, everything printed before the paths written.
    comparison = local_output.split("snapshot_results:")[0]
    assert "lag-sticky" in comparison
    assert cluster_output.split("snapshot_results:")[0] == comparison
    for name, keys in (
        ("snapshot_results", ["group", "snapshot", "strategy"]),
        ("strategy_summary", ["group", "strategy"]),
    ):
        pd.testing.assert_frame_equal(
            _table(tmp_path / "cluster" / name, keys), _table(tmp_path / "local" / name, keys)
        )
    assert (tmp_path / "cluster" / "report.html").read_text() == (tmp_path / "local" / "report.html").read_text()
    _assert_ran_on_both_workers(cluster, "kagent-backtest")
