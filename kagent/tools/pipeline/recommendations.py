"""kagent's own recommendations as a Spark DataFrame: what the backtest sets beside the strategies it replays.

Two sources, one reading:

- the topic ``<app id>-recommendations`` through the ``kagent-kafka`` source
  (:func:`recommendations_from_topic`), every partition from its earliest
  offset to its end when the read is planned;
- JSON Lines files, one record a line, as ``kagent recommendations tail
  --json`` prints them (:func:`recommendations_from_json_lines`); blank
  lines are not records.

Each record is validated by the model itself
(:class:`kagent.core.recommendation.Recommendation`, through
``kagent.tools.recommendations_topic.parse_recommendation``, as ``kagent
recommendations`` reads the topic), in a Python UDF, so both shapes read
alike: a record written before ``kind``, ``scale``, ``client_side`` and
``server_assignor`` existed takes the model's defaults, a client-side
rebalance. A record that is not a recommendation (a tombstone, not JSON, a
field missing, of the wrong type or unknown to this kagent, a time no
timestamp holds) is skipped and counted; it never fails the job.

The read is eager: the records are read and parsed once (a local
checkpoint), to count the skipped ones, and the rows come from that copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from kagent.connections import KafkaConnection
from kagent.core.recommendation import Recommendation, RecommendationKind
from kagent.tools.pipeline.kafka_source import FORMAT
from kagent.tools.recommendations_topic import parse_recommendation, recommendations_topic

__all__ = [
    "RECOMMENDATION_COLUMNS",
    "RecommendationsRead",
    "parse_recommendations",
    "recommendation_row",
    "recommendation_summary",
    "recommendations_from_json_lines",
    "recommendations_from_topic",
]

RECOMMENDATION_COLUMNS = (
    "group string, id string, time timestamp, generation int, kind string, strategy string, "
    "skew_before double, skew_after double, moves int, members int, members_needed int, "
    "production_rate double, capacity double, client_side boolean, server_assignor string"
)
"""Spark's schema of the rows, one per recommendation:

``moves`` and ``members`` are counts (partitions moved, members of the
generation); ``members_needed``, ``production_rate`` (records per second)
and ``capacity`` (records per second) come from the scale evidence and are
null unless ``kind`` is ``scale``; ``server_assignor`` is the broker assignor
recommended to a group on the consumer protocol (KIP-848), null otherwise.
"""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class RecommendationsRead:
    """What a read of kagent's recommendations found."""

    rows: DataFrame
    """Rows of :data:`RECOMMENDATION_COLUMNS`, one per recommendation id (a re-send of an id, as a worker
    does after a crash, is the same recommendation: the earliest is kept)."""
    skipped: int
    """Records that were not recommendations."""


def recommendation_row(recommendation: Recommendation) -> Row:
    """One recommendation as a row of :data:`RECOMMENDATION_COLUMNS`; ``time`` to the nearest microsecond,
    halves up (as the backtest's snapshot times). Raises :class:`OverflowError` or :class:`ValueError` when
    ``time`` is no instant a timestamp holds (years 1-9999)."""
    scale = recommendation.scale if recommendation.kind is RecommendationKind.SCALE else None
    advice = recommendation.server_assignor
    return Row(
        group=recommendation.group,
        id=recommendation.id,
        time=_EPOCH + timedelta(microseconds=math.floor(recommendation.time * 1_000_000 + 0.5)),
        generation=recommendation.generation,
        kind=recommendation.kind.value,
        strategy=recommendation.strategy,
        skew_before=recommendation.skew_before,
        skew_after=recommendation.skew_after,
        moves=len(recommendation.moves),
        members=len(recommendation.members),
        members_needed=None if scale is None else scale.members_needed,
        production_rate=None if scale is None else scale.production_rate,
        capacity=None if scale is None else scale.capacity,
        client_side=recommendation.client_side,
        server_assignor=None if advice is None else advice.recommended,
    )


def _parse(value: bytes | None) -> Row | None:
    """The row of the recommendation ``value`` holds; None when it holds none, or one of no instant."""
    recommendation = parse_recommendation(value)
    if recommendation is None:
        return None
    try:
        return recommendation_row(recommendation)
    except (OverflowError, ValueError):
        return None


def parse_recommendations(values: DataFrame) -> RecommendationsRead:
    """The recommendations of ``values``'s binary column ``value``, one record each (null: a tombstone).

    Runs one Spark job: the parsed records are checkpointed locally and the
    skipped ones counted, so ``values`` is read once.
    """
    parse = F.udf(_parse, RECOMMENDATION_COLUMNS, useArrow=True)
    parsed = values.select(parse("value").alias("r")).localCheckpoint()
    skipped = parsed.where(F.col("r").isNull()).count()
    first_sent = Window.partitionBy("id").orderBy("time")
    rows = (
        parsed.where(F.col("r").isNotNull())
        .select("r.*")
        .withColumn("sent", F.row_number().over(first_sent))
        .where(F.col("sent") == 1)
        .drop("sent")
    )
    return RecommendationsRead(rows, skipped)


def recommendations_from_topic(
    spark: SparkSession, kafka: KafkaConnection, app_id: str = "kagent", timeout: float = 10.0
) -> RecommendationsRead:
    """The recommendations on ``<app_id>-recommendations`` (see :func:`parse_recommendations`);
    ``timeout`` is in seconds per Kafka operation."""
    raw = (
        spark.read.format(FORMAT)
        .options(**kafka.spark_options())
        .option("subscribe", recommendations_topic(app_id))
        .option("timeoutMs", str(int(timeout * 1000)))
        .load()
    )
    return parse_recommendations(raw.select("value"))


def recommendations_from_json_lines(spark: SparkSession, path: str) -> RecommendationsRead:
    """The recommendations in the JSON Lines file(s) at ``path`` (a file, a directory or a glob; any path
    Spark reads), one record a line; blank lines are left out (see :func:`parse_recommendations`)."""
    lines = spark.read.text(path).where(F.trim("value") != "")
    return parse_recommendations(lines.select(F.col("value").cast("binary").alias("value")))


def recommendation_summary(rows: DataFrame, groups: DataFrame) -> DataFrame:
    """Per group of ``groups`` (its column ``group``), kagent's recommendations among ``rows``
    (:data:`RECOMMENDATION_COLUMNS`), groups without any included:

    ``kagent_rebalances``, ``kagent_scales`` and ``kagent_hot_partitions`` (counts by kind, the last of
    ``hot-partition`` recommendations: a partition no member keeps up with, which moves nothing),
    ``kagent_moves`` (the partitions its rebalances move, added up),
    ``kagent_members_needed`` (of its latest scale recommendation),
    ``kagent_server_assignor`` (of its latest recommendation naming one) and
    ``kagent_latest`` (the time of its latest recommendation); the last
    three are null without such a recommendation. Rows of other groups are
    left out.
    """
    rebalance = F.col("kind") == RecommendationKind.REBALANCE.value
    scale = F.col("kind") == RecommendationKind.SCALE.value
    hot = F.col("kind") == RecommendationKind.HOT_PARTITION.value
    per_group = rows.groupBy("group").agg(
        F.count_if(rebalance).alias("kagent_rebalances"),
        F.count_if(scale).alias("kagent_scales"),
        F.count_if(hot).alias("kagent_hot_partitions"),
        F.sum(F.when(rebalance, F.col("moves"))).alias("kagent_moves"),
        F.max_by("members_needed", F.when(scale, F.col("time"))).alias("kagent_members_needed"),
        F.max_by("server_assignor", F.when(F.col("server_assignor").isNotNull(), F.col("time"))).alias(
            "kagent_server_assignor"
        ),
        F.max("time").alias("kagent_latest"),
    )
    counts = ["kagent_rebalances", "kagent_scales", "kagent_hot_partitions", "kagent_moves"]
    return groups.select("group").distinct().join(per_group, "group", "left").fillna(0, subset=counts)
