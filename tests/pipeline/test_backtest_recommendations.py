"""The backtest reads kagent's own recommendations, of the shape before ``kind`` existed and of today's.

The old shape is written out literally, as a kagent of that time published it; the new ones are built
with the model. They are read from JSON Lines and from the recommendations topic on the embedded broker,
then set beside the strategies in ``backtest`` and ``kagent pipeline backtest``.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from aiokafka import AIOKafkaProducer
from click.testing import CliRunner
from pyspark.sql import SparkSession

from kagent.core.recommendation import (
    HOT_PARTITION_REMEDY,
    HotPartitionEvidence,
    HotPartitionRate,
    Recommendation,
    RecommendationKind,
    ScaleEvidence,
    ServerAssignorAdvice,
)
from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.pipeline.backtest import backtest, read_snapshots
from kagent.tools.pipeline.backtest_kernel import SNAPSHOT_COLUMNS
from kagent.tools.pipeline.cli import pipeline
from kagent.tools.pipeline.recommendations import (
    RecommendationsRead,
    recommendations_from_json_lines,
    recommendations_from_topic,
)
from tests.support.incidents import recommendation

# As kagent published it before kind, scale, client_side and server_assignor: a rebalance of group "hot".
OLD_SHAPE = (
    '{"id":"0f3c9a1be2d4f5a6b7c8d9e0f1a2b3c4","time":1704067200.5,"group":"hot","generation":7,'
    '"protocol":"range","strategy":"lag-sticky","lag_unit":"messages",'
    '"trigger":{"metric":"peak-to-mean","value":1.62,"threshold":1.5,"evaluations_held":3,'
    '"total_lag":2600.0,"improvement":0.29},'
    '"members":[{"member_id":"a-1","client_id":"a","client_host":"/10.0.0.1",'
    '"current":[{"topic":"t","partition":0},{"topic":"t","partition":1}],"current_lag":1400.0,'
    '"recommended":[{"topic":"t","partition":0}],"recommended_lag":900.0},'
    '{"member_id":"b-2","client_id":"b","client_host":"/10.0.0.2",'
    '"current":[{"topic":"t","partition":2},{"topic":"t","partition":3}],"current_lag":600.0,'
    '"recommended":[{"topic":"t","partition":1},{"topic":"t","partition":2},{"topic":"t","partition":3}],'
    '"recommended_lag":1100.0}],'
    '"skew_before":1.62,"skew_after":1.27,"lower_bound":900.0,'
    '"moves":[{"topic":"t","partition":1,"from_member":"a-1","to_member":"b-2","lag":500.0}],'
    '"alternatives":[{"strategy":"range","skew":1.62,"largest_lag":1400.0,"moves":0}]}'
)
OLD_ID = "0f3c9a1be2d4f5a6b7c8d9e0f1a2b3c4"
NOT_JSON = "{this is not a recommendation"
MISSING_FIELDS = '{"id":"x","group":"hot","kind":"scale"}'

START = pd.Timestamp("2024-01-01", tz="UTC")
HOT = [(900, "a-1"), (500, "a-1"), (500, "b-2"), (100, "b-2")]
CALM = [(100, "a-1"), (100, "b-2")]


def _scale(rec_id: str, group: str, time: float, members_needed: int) -> Recommendation:
    """A scale recommendation of today's shape: 2 members, ``members_needed`` needed."""
    evidence = ScaleEvidence(
        members=2,
        members_needed=members_needed,
        partitions=4,
        production_rate=400.0,
        capacity=250.0,
        member_capacity=125.0,
        headroom=250.0 / 400.0 - 1,
        window=60.0,
        partition_rates=(),
        member_rates=(),
    )
    return recommendation(rec_id, time=time, group=group, move_count=0).model_copy(
        update={"kind": RecommendationKind.SCALE, "scale": evidence}
    )


def _server_side(rec_id: str, group: str, time: float) -> Recommendation:
    """A rebalance of a group on the consumer protocol (KIP-848): the broker assigns, range fits better."""
    advice = ServerAssignorAdvice(
        current="uniform",
        recommended="range",
        skew={"uniform": 2.8, "range": 1.1},
        largest_lag={"uniform": 5000.0, "range": 2000.0},
    )
    return recommendation(rec_id, time=time, group=group, move_count=3).model_copy(
        update={"client_side": False, "server_assignor": advice}
    )


def _new_shapes() -> list[Recommendation]:
    """Of group "hot": a scale (then a re-send of it) and a later one; of "calm", a hot-partition one and
    a later server-side rebalance; of "elsewhere" (no snapshots), a client-side rebalance."""
    first = _scale("s1", "hot", 1704067260.0, members_needed=3)
    return [
        first,
        first,
        _scale("s2", "hot", 1704067320.0, members_needed=4),
        _server_side("k1", "calm", 1704067230.0),
        _hot_partition("h1", "calm", 1704067210.0),
        recommendation("e1", time=1704067200.0, group="elsewhere"),
    ]


def _hot_partition(rec_id: str, group: str, time: float) -> Recommendation:
    """A ``hot-partition`` recommendation: t-0 written at 300/s, its member's and the fastest pace 100/s."""
    hot = HotPartitionEvidence(
        partitions=(
            HotPartitionRate(topic="t", partition=0, member_id="a", production_rate=300.0, member_capacity=100.0),
        ),
        best_capacity=100.0,
        window=300.0,
        remedy=HOT_PARTITION_REMEDY,
    )
    return recommendation(rec_id, time=time, group=group).model_copy(
        update={"kind": RecommendationKind.HOT_PARTITION, "moves": (), "hot": hot}
    )


def _json_lines(path: Path) -> str:
    """The old shape, the new ones and two records that are not recommendations, with a blank line, at ``path``."""
    lines = [OLD_SHAPE, NOT_JSON, "", *(r.model_dump_json() for r in _new_shapes()), MISSING_FIELDS]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _rows(read: RecommendationsRead) -> pd.DataFrame:
    return read.rows.toPandas().set_index("id").sort_index()


def _assert_shapes(rows: pd.DataFrame) -> None:
    """Both shapes, as the model reads them: the old one a client-side rebalance."""
    assert sorted(rows.index) == sorted([OLD_ID, "s1", "s2", "k1", "h1", "e1"])  # the re-send of s1 once
    old = rows.loc[OLD_ID]
    assert (old["group"], old["kind"], old["client_side"], old["strategy"]) == ("hot", "rebalance", True, "lag-sticky")
    assert (old["generation"], old["moves"], old["members"]) == (7, 1, 2)
    assert (old["skew_before"], old["skew_after"]) == (1.62, 1.27)
    assert pd.Timestamp(old["time"]) == pd.Timestamp("2024-01-01 00:00:00.5")
    assert old[["members_needed", "production_rate", "capacity", "server_assignor"]].isna().all()
    scale = rows.loc["s1"]
    assert (scale["kind"], scale["members_needed"], scale["moves"], scale["client_side"]) == ("scale", 3, 0, True)
    assert (scale["production_rate"], scale["capacity"]) == (400.0, 250.0)
    assert rows.loc["s2", "members_needed"] == 4
    server = rows.loc["k1"]
    assert (server["kind"], server["client_side"], server["server_assignor"], server["moves"]) == (
        "rebalance",
        False,
        "range",
        3,
    )
    assert pd.isna(server["members_needed"])
    assert rows.loc["e1", "kind"] == "rebalance" and bool(rows.loc["e1", "client_side"])
    hot = rows.loc["h1"]
    assert (hot["kind"], hot["moves"]) == ("hot-partition", 0) and pd.isna(hot["members_needed"])


def _snapshots(spark: SparkSession, path: Path) -> str:
    """Lag snapshots of groups "hot" and "calm", one a minute for 3 minutes, as Parquet at ``path``."""
    rows = [
        {
            "group": group,
            "snapshot": START + pd.Timedelta(minutes=s),
            "topic": "t",
            "partition": p,
            "lag": lag,
            "member": member,
        }
        for group, layout in (("hot", HOT), ("calm", CALM))
        for s in range(3)
        for p, (lag, member) in enumerate(layout)
    ]
    spark.createDataFrame(pd.DataFrame(rows).astype(SNAPSHOT_COLUMNS)).write.parquet(str(path))
    return str(path)


def test_json_lines_of_both_shapes(spark: SparkSession, tmp_path: Path) -> None:
    read = recommendations_from_json_lines(spark, _json_lines(tmp_path / "recommendations.jsonl"))

    assert read.skipped == 2  # not JSON, and JSON missing fields; the blank line is no record
    _assert_shapes(_rows(read))
    assert read.rows.schema.simpleString() == (
        "struct<group:string,id:string,time:timestamp,generation:int,kind:string,strategy:string,"
        "skew_before:double,skew_after:double,moves:int,members:int,members_needed:int,"
        "production_rate:double,capacity:double,client_side:boolean,server_assignor:string>"
    )


def test_backtest_sets_them_beside_the_strategies(spark: SparkSession, tmp_path: Path) -> None:
    snapshots = read_snapshots(spark, _snapshots(spark, tmp_path / "snapshots"))
    read = recommendations_from_json_lines(spark, _json_lines(tmp_path / "recommendations.jsonl"))

    result = backtest(snapshots, str(tmp_path / "out"), strategies=("range", "lag"), recommendations=read)

    assert (
        result.recommendations is not None and result.recommendation_summary == f"{tmp_path}/out/recommendation_summary"
    )
    kagent = result.recommendations.set_index("group")
    assert list(kagent.index) == ["calm", "hot"]  # the backtested groups: "elsewhere" has no snapshots
    hot, calm = kagent.loc["hot"], kagent.loc["calm"]
    assert (hot["kagent_rebalances"], hot["kagent_scales"], hot["kagent_moves"]) == (1, 2, 1)
    assert hot["kagent_members_needed"] == 4  # of the latest scale recommendation
    assert pd.isna(hot["kagent_server_assignor"])
    assert pd.Timestamp(hot["kagent_latest"]) == pd.Timestamp("2024-01-01 00:02:00")
    assert (calm["kagent_rebalances"], calm["kagent_scales"], calm["kagent_moves"]) == (1, 0, 3)
    assert (calm["kagent_hot_partitions"], hot["kagent_hot_partitions"]) == (1, 0)
    assert pd.isna(calm["kagent_members_needed"]) and calm["kagent_server_assignor"] == "range"
    written = spark.read.parquet(result.recommendation_summary).toPandas().set_index("group").sort_index()
    pd.testing.assert_frame_equal(written, kagent, check_dtype=False)
    report = Path(result.report).read_text()
    assert "<h2>kagent's recommendations</h2>" in report
    totals = "Rebalances: 2; scale recommendations: 2; hot-partition recommendations: 1; groups with any: 2 of 2."
    assert totals in report
    assert "Records skipped (not recommendations): 2." in report
    cells = re.findall(r"<td>([^<]*)</td>", report)
    assert {"None", "NaN", "&lt;NA&gt;", "NaT"}.isdisjoint(cells) and "" in cells  # absent figures are blank
    assert report.index("<td>hot</td>") < report.index("<td>calm</td>")  # the most first


def test_backtest_without_them_is_unchanged(spark: SparkSession, tmp_path: Path) -> None:
    snapshots = read_snapshots(spark, _snapshots(spark, tmp_path / "snapshots"))

    result = backtest(snapshots, str(tmp_path / "out"), strategies=("range",))

    assert result.recommendations is None and result.recommendation_summary is None
    assert "kagent's recommendations" not in Path(result.report).read_text()
    assert not (tmp_path / "out" / "recommendation_summary").exists()


async def _publish(broker: EmbeddedBroker, topic: str, values: list[bytes | None]) -> None:
    """``values`` to ``topic`` (3 partitions) keyed by run, one send awaited at a time."""
    await broker.create_topics({topic: 3})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()
    try:
        for n, value in enumerate(values):
            await producer.send_and_wait(topic, value, key=f"k{n}".encode(), partition=n % 3)
    finally:
        await producer.stop()


@pytest.mark.integration
def test_the_topic_of_both_shapes(spark: SparkSession, kafka_broker: EmbeddedBroker, tmp_path: Path) -> None:
    app_id = f"recs-{uuid.uuid4().hex[:8]}"
    values: list[bytes | None] = [OLD_SHAPE.encode(), NOT_JSON.encode(), None]  # None: a tombstone
    values += [r.model_dump_json().encode() for r in _new_shapes()]
    asyncio.run(_publish(kafka_broker, f"{app_id}-recommendations", values))

    read = recommendations_from_topic(spark, kafka_broker.kafka, app_id)

    assert read.skipped == 2
    _assert_shapes(_rows(read))

    # --- the CLI: snapshots from Parquet, recommendations from the topic
    out = tmp_path / "out"
    cli = CliRunner().invoke(
        pipeline,
        [
            "backtest",
            "--snapshots",
            _snapshots(spark, tmp_path / "snapshots"),
            "--output",
            str(out),
            "--strategy",
            "lag",
            "--app-id",
            app_id,
            "--recommendations-broker",
            kafka_broker.bootstrap_servers,
        ],
    )
    assert cli.exit_code == 0, cli.output
    assert "reading kagent's recommendations" in cli.output
    assert (
        "kagent's recommendations for these groups: 2 rebalances, 2 scales, 1 hot partitions; 2 records skipped"
        in cli.output
    )
    assert f"recommendation_summary: {out}/recommendation_summary" in cli.output
    summary = spark.read.parquet(str(out / "recommendation_summary")).toPandas().set_index("group")
    assert summary.loc["hot", "kagent_scales"] == 2 and summary.loc["calm", "kagent_server_assignor"] == "range"
    assert isinstance(summary.loc["hot", "kagent_latest"], datetime)


def test_cli_takes_one_source_of_recommendations(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        pipeline,
        [
            "backtest",
            "--snapshots",
            str(tmp_path),
            "--output",
            str(tmp_path),
            "--recommendations",
            str(tmp_path / "r.jsonl"),
            "--recommendations-broker",
            "127.0.0.1:9092",
        ],
    )

    assert result.exit_code == 2
    assert "at most one of --recommendations and --recommendations-broker" in result.output
