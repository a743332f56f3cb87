"""``kagent-kafka``: a Spark data source for Kafka topics on Spark 4's Python Data Source API.

Spark's own Kafka connector is a JVM jar; this one runs aiokafka inside the
reader's partitions instead, so it needs nothing but PySpark. Register it on
a session with :func:`register` (``kagent.tools.pipeline.session`` does), then::

    spark.read.format("kagent-kafka")
        .option("kafka.bootstrap.servers", "host:9092")
        .option("subscribe", "topic-a,topic-b")
        .load()

Batch and streaming (``spark.readStream``) both work. Each Spark input
partition is one topic partition's offset range, so partitions are read in
parallel. Options (see ``kafka_offsets`` for the offsets ones):
``kafka.bootstrap.servers`` and ``subscribe`` (required), the connection's
security as :meth:`kagent.connections.KafkaConnection.spark_options` writes
it (``kafka.security.protocol``, ``kafka.ssl.cafile``, ``kafka.sasl.mechanism``,
``kafka.sasl.username``, ``kafka.sasl.password``...), ``startingOffsets``
(default ``earliest``), ``endingOffsets`` (batch; default ``latest``),
``startingTimestamp``, ``endingTimestamp`` (batch), ``timeoutMs`` (each
broker operation; default 10000). A streaming query's offsets are Spark's:
they live in its checkpoint, and a restarted query resumes from there.

Rows have Spark's Kafka source columns: ``key``, ``value`` (binary),
``topic``, ``partition``, ``offset``, ``timestamp`` (UTC), ``timestampType``
(0 create time, 1 log-append time) and ``headers``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

import pyarrow as pa
from aiokafka.structs import ConsumerRecord, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from kagent.connections import KafkaConnection
from kagent.tools.pipeline.kafka_client import Connection, offsets_at, partition_bounds, read_range
from kagent.tools.pipeline.kafka_offsets import (
    EARLIEST,
    LATEST,
    Bounds,
    OffsetRange,
    OffsetSpec,
    SourceOptionError,
    from_checkpoint,
    parse_offsets,
    ranges,
    resolve,
    to_checkpoint,
)

__all__ = ["FORMAT", "KAFKA_SCHEMA", "KafkaDataSource", "register"]

FORMAT = "kagent-kafka"
"""The short name the source is registered under."""

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
"""The rows' schema: that of Spark's own Kafka source."""

_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)

_RECORDS_PER_BATCH = 10_000


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("kagent-kafka")`` (and ``readStream``) available on ``spark``."""
    spark.dataSource.register(KafkaDataSource)


class KafkaDataSource(DataSource):
    """Kafka topics as a Spark source: see the module docstring for options and rows."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(_Options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StreamReader(_Options(self.options))


class _Options:
    """The source's options, validated on the driver before any read."""

    def __init__(self, options: Mapping[str, str]) -> None:
        bootstrap = options.get("kafka.bootstrap.servers")
        topics = [t.strip() for t in options.get("subscribe", "").split(",") if t.strip()]
        if not bootstrap:
            raise SourceOptionError("option kafka.bootstrap.servers is required")
        if not topics:
            raise SourceOptionError("option subscribe (comma-separated topics) is required")
        try:
            kafka = KafkaConnection.from_spark_options(options)
        except ValueError as exc:
            raise SourceOptionError(str(exc)) from None
        self.connection = Connection(kafka, timeout=int(options.get("timeoutMs", "10000")) / 1000)
        self.topics = tuple(topics)
        self.starting = parse_offsets(options.get("startingOffsets"), "startingOffsets", "earliest")
        self.ending = parse_offsets(options.get("endingOffsets"), "endingOffsets", "latest")
        self.starting_timestamp = _optional_int(options, "startingTimestamp")
        self.ending_timestamp = _optional_int(options, "endingTimestamp")

    def bounds(self) -> dict[TopicPartition, Bounds]:
        return partition_bounds(self.connection, self.topics)

    def start(self, bounds: Mapping[TopicPartition, Bounds]) -> dict[TopicPartition, int]:
        return self._resolve(self.starting, bounds, "startingOffsets", EARLIEST, self.starting_timestamp)

    def end(self, bounds: Mapping[TopicPartition, Bounds]) -> dict[TopicPartition, int]:
        return self._resolve(self.ending, bounds, "endingOffsets", LATEST, self.ending_timestamp)

    def _resolve(
        self,
        spec: OffsetSpec,
        bounds: Mapping[TopicPartition, Bounds],
        option: str,
        unnamed: int,
        timestamp: int | None,
    ) -> dict[TopicPartition, int]:
        at_time = None if timestamp is None else offsets_at(self.connection, bounds, timestamp)
        return resolve(spec, bounds, option, unnamed, at_time)


def _optional_int(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise SourceOptionError(f"{name}: expected milliseconds since the epoch, not {text!r}") from None


def _input_partitions(offset_ranges: list[OffsetRange]) -> list[InputPartition]:
    return [InputPartition(offsets) for offsets in offset_ranges]


def _read(options: _Options, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one input partition (None: Spark's stand-in when there is nothing to read)."""
    offsets: OffsetRange | None = partition.value
    if offsets is None:
        return
    for chunk in read_range(options.connection, offsets, _RECORDS_PER_BATCH):
        yield record_batch(chunk)


def record_batch(records: list[ConsumerRecord]) -> pa.RecordBatch:
    """Kafka records as one Arrow batch of the source's schema."""
    return pa.RecordBatch.from_pydict(
        {
            "key": [r.key for r in records],
            "value": [r.value for r in records],
            "topic": [r.topic for r in records],
            "partition": [r.partition for r in records],
            "offset": [r.offset for r in records],
            "timestamp": [datetime.fromtimestamp(r.timestamp / 1000, UTC) for r in records],
            "timestampType": [r.timestamp_type for r in records],
            "headers": [[{"key": k, "value": v} for k, v in r.headers] for r in records],
        },
        schema=_ARROW_SCHEMA,
    )


class _BatchReader(DataSourceReader):
    """A batch read: one input partition per non-empty topic-partition range, planned on the driver."""

    def __init__(self, options: _Options) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        bounds = self.options.bounds()
        return _input_partitions(ranges(self.options.start(bounds), self.options.end(bounds)))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class _StreamReader(DataSourceStreamReader):
    """A streaming read: offsets are ``{"topic": {"partition": offset}}``, checkpointed by Spark.

    Each micro-batch reads from the previous end to the log ends at its
    planning; a partition that appears later is read from its start.
    """

    def __init__(self, options: _Options) -> None:
        self.options = options

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return to_checkpoint(self.options.start(self.options.bounds()))

    def latestOffset(self) -> dict[str, dict[str, int]]:  # type: ignore[override]
        """The log ends now. The no-argument form, which every Spark 4 calls; Spark 4.2's
        form with a read limit serves sources that cap micro-batches, which this one does not."""
        return to_checkpoint({tp: b.end for tp, b in self.options.bounds().items()})

    def partitions(self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]) -> list[InputPartition]:
        return _input_partitions(ranges(from_checkpoint(start), from_checkpoint(end)))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to release: the offsets are in Spark's checkpoint, not in Kafka."""
