"""The ``kagent-kafka`` Spark source against the embedded broker: batch, streaming, errors."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kagent.connections import KafkaConnection
from kagent.security import SaslMechanism, Security, SecurityProtocol
from kagent.tools.embedded import EmbeddedBroker, create_topics, free_port
from kagent.tools.pipeline.kafka_source import FORMAT
from tests.support.security_front import secured_broker
from tests.support.tls import Authority

pytestmark = pytest.mark.integration

PARTITIONS = 3
BASE_TIME_MS = 1_700_000_000_000


def _topic(name: str) -> str:
    return f"pipeline-{name}-{uuid.uuid4().hex[:8]}"


async def _produce(broker: EmbeddedBroker, topic: str, numbers: Sequence[int]) -> None:
    """Record n goes to partition n % 3 with key kn, value vn, timestamp BASE + n s and a header.

    Sent without waiting in between, so the broker gets batches of many records:
    its ListOffsets(latest) then falls short of the log end and the reader must not trust it.
    """
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=20)
    await producer.start()
    try:
        sent = [
            await producer.send(
                topic,
                f"v{n}".encode(),
                key=f"k{n}".encode(),
                partition=n % PARTITIONS,
                timestamp_ms=BASE_TIME_MS + n * 1000,
                headers=[("n", str(n).encode())],
            )
            for n in numbers
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


@pytest.fixture(scope="module")
def topic(kafka_broker: EmbeddedBroker) -> str:
    """A topic of 3 partitions holding records 0-299."""
    name = _topic("read")
    asyncio.run(kafka_broker.create_topics({name: PARTITIONS}))
    asyncio.run(_produce(kafka_broker, name, range(300)))
    return name


def _reader(spark: SparkSession, broker: EmbeddedBroker, topic: str, **options: str) -> DataFrame:
    reader = spark.read.format(FORMAT).option("kafka.bootstrap.servers", broker.bootstrap_servers)
    return reader.option("subscribe", topic).options(**options).load()


def _numbers(df: DataFrame) -> list[int]:
    return sorted(int(row.value[1:]) for row in df.select("value").collect())


def test_batch_read_returns_every_record_once_one_spark_partition_per_kafka_partition(
    spark: SparkSession, kafka_broker: EmbeddedBroker, topic: str
) -> None:
    df = _reader(spark, kafka_broker, topic)
    assert df.rdd.getNumPartitions() == PARTITIONS
    rows = df.withColumn("spark_partition", F.spark_partition_id()).collect()

    assert sorted(int(r.value[1:]) for r in rows) == list(range(300))
    for row in rows:
        n = int(row.value[1:])
        assert (row.topic, row.partition, row.offset) == (topic, n % PARTITIONS, n // PARTITIONS)
        assert row.key == f"k{n}".encode()
        assert row.timestampType == 0
        assert int(row.timestamp.timestamp() * 1000) == BASE_TIME_MS + n * 1000
        assert [(h.key, h.value) for h in row.headers] == [("n", str(n).encode())]
    assert {(r.partition, r.spark_partition) for r in rows} == {(p, p) for p in range(PARTITIONS)}


def test_batch_read_between_given_offsets(spark: SparkSession, kafka_broker: EmbeddedBroker, topic: str) -> None:
    df = _reader(
        spark,
        kafka_broker,
        topic,
        startingOffsets=f'{{"{topic}": {{"0": 10, "2": -1}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 12, "1": 2}}}}',
    )
    # partition 0: offsets 10, 11; partition 1: 0, 1 (unnamed start: earliest); partition 2: nothing
    assert _numbers(df) == [1, 4, 30, 33]


def test_batch_read_between_timestamps(spark: SparkSession, kafka_broker: EmbeddedBroker, topic: str) -> None:
    df = _reader(
        spark,
        kafka_broker,
        topic,
        startingTimestamp=str(BASE_TIME_MS + 100_000),
        endingTimestamp=str(BASE_TIME_MS + 106_000),
    )
    assert _numbers(df) == list(range(100, 106))


WORKER_START_TIMEOUT = "Python worker failed to connect back"
"""Spark's failure when the Python process that plans a Python data source's micro-batches has not
connected back to the driver within 10 s (``PythonWorkerFactory.createSimpleWorker``: a fixed timeout,
no setting). It happens on a two-core machine saturated by the rest of the suite, before the source reads
anything: the query then stops, and restarting it on its checkpoint is what a streaming job's supervisor
does. The test restarts it up to twice, and still asks that every record be written exactly once."""
WORKER_START_ATTEMPTS = 3


def test_stream_resumes_from_spark_checkpoint(
    spark: SparkSession, kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    name = _topic("stream")
    asyncio.run(kafka_broker.create_topics({name: PARTITIONS}))
    asyncio.run(_produce(kafka_broker, name, range(0, 30)))
    stream = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
        .option("subscribe", name)
        .load()
    )

    def run_available() -> None:
        for attempt in range(1, WORKER_START_ATTEMPTS + 1):
            query = (
                stream.select("partition", "offset", "value")
                .writeStream.format("parquet")
                .option("path", str(tmp_path / "out"))
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            try:
                query.awaitTermination(120)
                failure = query.exception()
            except StreamingQueryException as raised:  # what the query failed with is raised here, as a rule
                failure = raised
            if failure is None:
                return
            if WORKER_START_TIMEOUT not in str(failure) or attempt == WORKER_START_ATTEMPTS:
                raise AssertionError(f"the query failed (attempt {attempt}): {failure}")

    run_available()
    assert _numbers(spark.read.parquet(str(tmp_path / "out"))) == list(range(30))
    asyncio.run(_produce(kafka_broker, name, range(30, 45)))
    run_available()  # a new query on the same checkpoint reads only what came since
    out = spark.read.parquet(str(tmp_path / "out"))
    assert _numbers(out) == list(range(45))
    assert out.count() == 45


def test_broker_down_fails_fast_naming_the_bootstrap_address(spark: SparkSession) -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(PySparkException, match=address):
        spark.read.format(FORMAT).option("kafka.bootstrap.servers", address).option("subscribe", "t").option(
            "timeoutMs", "3000"
        ).load().collect()
    assert time.monotonic() - started < 30


def test_unknown_topic_is_named(spark: SparkSession, kafka_broker: EmbeddedBroker) -> None:
    with pytest.raises(PySparkException, match="no topic 'pipeline-missing'"):
        _reader(spark, kafka_broker, "pipeline-missing").collect()


def test_batch_read_over_sasl_ssl_with_the_connection_as_options(spark: SparkSession, tmp_path: Path) -> None:
    """The tasks rebuild the connection from the options (``KafkaConnection.spark_options``): TLS with the
    test's authority and SCRAM-SHA-512, through the security front (``tests/support/security_front.py``);
    a wrong password fails the read with the broker's refusal, and Spark's plan never shows a password."""
    authority = Authority(tmp_path)
    server = authority.issue("broker")
    users = {"SCRAM-SHA-512": {"spark": "spark-secret"}}
    with secured_broker(tmp_path, cert=str(server.cert), key=str(server.key), users=users) as front:
        security = Security(
            SecurityProtocol.SASL_SSL,
            ssl_cafile=str(authority.cafile),
            sasl_mechanism=SaslMechanism.SCRAM_SHA_512,
            sasl_username="spark",
            sasl_password="spark-secret",
        )
        kafka = KafkaConnection(front.bootstrap_servers, security)
        name = _topic("secure")

        async def produce() -> None:
            await create_topics(kafka, {name: 2})
            producer = kafka.producer()
            await producer.start()
            try:
                await asyncio.gather(*[await producer.send(name, b"v%d" % n, partition=n % 2) for n in range(20)])
            finally:
                await producer.stop()

        asyncio.run(produce())
        df = spark.read.format(FORMAT).options(**kafka.spark_options()).option("subscribe", name).load()
        assert sorted(int(row.value[1:]) for row in df.select("value").collect()) == list(range(20))
        wrong = KafkaConnection(front.bootstrap_servers, replace(security, sasl_password="not-it")).spark_options()
        with pytest.raises(PySparkException, match="rejected kagent's SASL credentials"):
            spark.read.format(FORMAT).options(**wrong).option("subscribe", name).load().count()
