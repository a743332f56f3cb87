"""``backfill``: the history of offset commits and group generations, from the earliest offset, as Parquet.

Reads ``__consumer_offsets`` (or kagent's derived-events topic) with the
``kagent-kafka`` source, decodes it in Arrow batches with
``coordinator_rows`` (``mapInArrow``: one Python call per batch, not per
record), holding each record to the rules the worker holds it to
(``kagent.core.record_checks``), and writes three Parquet tables under the
output directory, each replaced as a whole on every run, the first two
partitioned by ``date`` (the UTC day of the record's log timestamp):

- ``offset_commits``: one row per commit, or deletion (``deleted``, with a
  null ``committed_offset``), of a group's offset on a partition.
- ``group_generations``: one row per rebalance of a consumer group (its
  generation, assignor, leader and ``members`` with their subscribed topics
  and assigned partitions), or deletion of the group (``deleted``).
- ``rejected``: one row per record the worker would send to its dead-letter
  topic instead of applying, and nothing of it in the other two tables:
  ``kind`` ``undecodable`` (bytes that do not decode) or ``rejected`` (a
  record that breaks a rule), ``error`` (the dead letter's reason, naming the
  rule, the field and its value), and the record's ``key`` and ``value``.
  Not partitioned (``date`` is a column): it is small, and usually empty,
  which Spark can read back only from an unpartitioned write.

All keep the record's ``source_partition``, ``source_offset`` and
``log_timestamp``: per group, ``source_offset`` orders its history, since
all of a group's records are in one partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from kagent.connections import KafkaConnection
from kagent.tools.pipeline.coordinator_rows import (
    DECODED_SCHEMA,
    INPUT_COLUMNS,
    REJECTED_KINDS,
    Source,
    decode_batches,
)
from kagent.tools.pipeline.kafka_source import FORMAT

__all__ = [
    "OFFSETS_TOPIC",
    "TABLES",
    "BackfillSummary",
    "backfill",
    "decoded",
    "group_generations",
    "offset_commits",
    "rejected",
]

OFFSETS_TOPIC = "__consumer_offsets"

TABLES = ("offset_commits", "group_generations", "rejected")
"""The tables backfill writes, each in a directory of that name under the output."""

_PROVENANCE = ("source_partition", "source_offset", "log_timestamp", "date")


@dataclass(frozen=True)
class BackfillSummary:
    """What a backfill read and wrote."""

    rows: dict[str, int]
    """Decoded rows per kind (see ``coordinator_rows``), skipped, undecodable and rejected ones included."""
    tables: dict[str, str]
    """Each table's name to its path."""


def decoded(raw: DataFrame, source: Source) -> DataFrame:
    """``raw`` Kafka rows decoded to ``coordinator_rows.DECODED_SCHEMA`` rows, plus their ``date``."""
    return (
        raw.select(*INPUT_COLUMNS)
        .mapInArrow(partial(decode_batches, source=source), from_arrow_schema(DECODED_SCHEMA))
        .withColumn("date", F.to_date("log_timestamp"))
    )


def offset_commits(rows: DataFrame) -> DataFrame:
    """The ``offset_commits`` table of decoded rows."""
    return rows.where(F.col("kind").isin("offset-committed", "offset-deleted")).select(
        "group",
        "topic",
        "partition",
        "committed_offset",
        "commit_timestamp",
        "leader_epoch",
        (F.col("kind") == "offset-deleted").alias("deleted"),
        *_PROVENANCE,
    )


def group_generations(rows: DataFrame) -> DataFrame:
    """The ``group_generations`` table of decoded rows."""
    return rows.where(F.col("kind").isin("group-assigned", "group-deleted")).select(
        "group",
        "generation",
        "protocol",
        "leader",
        "state_timestamp",
        "members",
        (F.col("kind") == "group-deleted").alias("deleted"),
        *_PROVENANCE,
    )


def rejected(rows: DataFrame) -> DataFrame:
    """The ``rejected`` table of decoded rows: the records kagent does not apply, with why."""
    return rows.where(F.col("kind").isin(*REJECTED_KINDS)).select("kind", "error", "key", "value", *_PROVENANCE)


def backfill(
    spark: SparkSession,
    kafka: KafkaConnection,
    output: str,
    source: Source = "offsets-topic",
    topic: str = OFFSETS_TOPIC,
    timeout: float = 10.0,
    on_step: Callable[[str], None] = lambda step: None,
) -> BackfillSummary:
    """Read ``topic`` from its earliest offset up to its end now, decode it as ``source``, and
    write :data:`TABLES` under ``output`` (any path Spark writes to), replacing what was there.

    ``on_step`` hears the name of each step as it starts. Raises the Kafka
    source's error, naming the bootstrap address, if the cluster cannot be read.
    """
    on_step(f"planning the read of {topic}")
    raw = (
        spark.read.format(FORMAT)
        .options(**kafka.spark_options())
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("timeoutMs", str(int(timeout * 1000)))
        .load()
    )
    rows = decoded(raw, source).persist()
    try:
        on_step(f"reading and decoding {topic}")
        counts = {row["kind"]: row["count"] for row in rows.groupBy("kind").count().collect()}
        tables = {name: f"{output.rstrip('/')}/{name}" for name in TABLES}
        for name, table, partitions in (
            ("offset_commits", offset_commits, ("date",)),
            ("group_generations", group_generations, ("date",)),
            ("rejected", rejected, ()),
        ):
            on_step(f"writing {name}")
            table(rows).write.mode("overwrite").partitionBy(*partitions).parquet(tables[name])
    finally:
        rows.unpersist()
    return BackfillSummary(rows=counts, tables=tables)
