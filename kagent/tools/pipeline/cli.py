"""``kagent pipeline``: the Spark jobs, one subcommand each.

The group takes where Spark runs (``--master``, default the setting
``KAGENT_SPARK_MASTER``, itself ``local[2]`` by default; any cluster URL
``spark-submit`` would take) and extra Spark settings; each job
creates its session, shows its steps and running stages while it works, and
prints what it wrote. An error (Kafka unreachable, a bad option) exits with
code 1 and one line on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import click
from pyspark.sql import SparkSession

from kagent.connections import KafkaConnection
from kagent.settings import Settings, SettingsError, load_settings
from kagent.tools.pipeline.backfill import OFFSETS_TOPIC, backfill
from kagent.tools.pipeline.backtest import backtest, read_snapshots, snapshots_from_changelogs
from kagent.tools.pipeline.backtest_kernel import STRATEGIES
from kagent.tools.pipeline.coordinator_rows import REJECTED_KINDS, Source
from kagent.tools.pipeline.kafka_client import KafkaSourceError
from kagent.tools.pipeline.kafka_offsets import SourceOptionError
from kagent.tools.pipeline.progress import Progress
from kagent.tools.pipeline.recommendations import (
    RecommendationsRead,
    recommendations_from_json_lines,
    recommendations_from_topic,
)
from kagent.tools.pipeline.report import strategy_comparison
from kagent.tools.pipeline.session import spark_session

__all__ = ["pipeline"]


@dataclass(frozen=True)
class _Spark:
    """Where the group's jobs run."""

    master: str
    conf: dict[str, str]
    settings: Settings

    def kafka(self, broker: str) -> KafkaConnection:
        """The cluster at ``broker``, reached with the security settings (``KAGENT_SECURITY_PROTOCOL``...)."""
        return KafkaConnection(
            ",".join(s.strip() for s in broker.removeprefix("kafka://").split(",")), self.settings.security
        )


def _parse_conf(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    conf = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, not {value!r}")
        conf[key] = setting
    return conf


@click.group("pipeline")
@click.option(
    "--master",
    show_default="the setting KAGENT_SPARK_MASTER",
    help="Spark master URL: local[N], spark://host:7077, yarn, k8s://...",
)
@click.option("--conf", multiple=True, callback=_parse_conf, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
@click.pass_context
def pipeline(ctx: click.Context, master: str | None, conf: dict[str, str]) -> None:
    """Spark jobs over kagent's data: backfill history into Parquet, backtest strategies."""
    settings = _settings()  # validated even when --master is given, as the worker validates them
    ctx.obj = _Spark(master or settings.spark_master, conf, settings)


def _settings() -> Settings:
    """The settings, as the worker reads them; an invalid ``KAGENT_*`` variable exits with code 1 and one line."""
    try:
        return load_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


@contextmanager
def _job(spark_settings: _Spark, name: str) -> Iterator[tuple[SparkSession, Progress]]:
    """A session for job ``name`` and its progress, shown on stderr; errors of the job exit with code 1.

    A session already active in this process (a notebook's, a test's) is
    used as it is and left running; one started here is stopped at the end.
    """
    in_place = sys.stderr.isatty()

    def write(text: str, rewrite: bool) -> None:
        click.echo(f"\r\x1b[K{text}" if rewrite else text, err=True, nl=not rewrite)

    # Spark's own console bar would fight ours for the terminal.
    conf = {"spark.ui.showConsoleProgress": "false", **spark_settings.conf}
    running = SparkSession.getActiveSession()
    spark = running or spark_session(spark_settings.master, f"kagent-{name}", conf)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with Progress(spark.sparkContext, write, in_place) as progress:
            yield spark, progress
        if in_place:
            click.echo("", err=True)
    except (KafkaSourceError, SourceOptionError) as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # Spark wraps errors raised in Python workers; show their last line
        reason = _python_error(exc)
        if reason is None:
            raise
        raise click.ClickException(reason) from None
    finally:
        if running is None:
            spark.stop()


def _python_error(exc: Exception) -> str | None:
    """The kagent error a Spark exception carries from a Python worker, if any."""
    for line in reversed(str(exc).splitlines()):
        for error in (KafkaSourceError, SourceOptionError):
            marker = f"{error.__module__}.{error.__name__}: "
            if marker in line:
                return line.split(marker, 1)[1]
    return None


@pipeline.command("backfill")
@click.option("--broker", envvar="KAGENT_BROKER", required=True, help="Kafka bootstrap servers, host:port[,...].")
@click.option("--output", required=True, help="Directory (any path Spark writes to) for the Parquet tables.")
@click.option(
    "--source",
    type=click.Choice(["offsets-topic", "derived-events"]),
    default="offsets-topic",
    show_default=True,
    help="Read raw __consumer_offsets, or kagent's derived-events topic.",
)
@click.option("--topic", help="Topic to read [default: __consumer_offsets, or kagent-derived-events].")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per Kafka operation.")
@click.pass_obj
def backfill_command(
    spark_settings: _Spark, broker: str, output: str, source: Source, topic: str | None, timeout: float
) -> None:
    """Decode a topic from its earliest offset into Parquet: offset commits, group generations, and the
    records not applied (they do not decode or break a rule), each with why."""
    topic = topic or (OFFSETS_TOPIC if source == "offsets-topic" else "kagent-derived-events")
    with _job(spark_settings, "backfill") as (spark, progress):
        summary = backfill(
            spark,
            spark_settings.kafka(broker),
            output,
            source,
            topic,
            timeout,
            on_step=progress.step,
        )
    rows = ", ".join(f"{count} {kind}" for kind, count in sorted(summary.rows.items())) or "nothing"
    click.echo(f"read {topic}: {rows}")
    not_applied = sum(summary.rows.get(kind, 0) for kind in REJECTED_KINDS)
    if not_applied:
        click.echo(f"{not_applied} records not applied (they do not decode or break a rule), each with why in rejected")
    for name, path in summary.tables.items():
        click.echo(f"{name}: {path}")


@pipeline.command("backtest")
@click.option("--snapshots", help="Parquet lag snapshots (group, snapshot, topic, partition, lag, member).")
@click.option("--broker", help="Read the snapshots from kagent's changelogs on this cluster instead.")
@click.option(
    "--app-id",
    default="kagent",
    show_default=True,
    help="The kagent app id naming the changelogs and the recommendations topic.",
)
@click.option("--output", required=True, help="Directory for the Parquet results and report.html.")
@click.option("--threshold", type=float, default=1.5, show_default=True, help="Skew from which a snapshot counts.")
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    type=click.Choice(STRATEGIES),
    help="A strategy to compare (repeatable) [default: all six].",
)
@click.option("--worst-groups", type=int, default=5, show_default=True, help="Groups plotted over time in the report.")
@click.option(
    "--recommendations",
    "recommendations_path",
    metavar="PATH",
    help="kagent's own recommendations to set beside the strategies: JSON Lines, one record a line "
    "(as `kagent recommendations tail --json` prints them).",
)
@click.option(
    "--recommendations-broker",
    metavar="HOST:PORT",
    help="Read kagent's own recommendations from <app id>-recommendations on this cluster instead.",
)
@click.pass_obj
def backtest_command(
    spark_settings: _Spark,
    snapshots: str | None,
    broker: str | None,
    app_id: str,
    output: str,
    threshold: float,
    strategies: tuple[str, ...],
    worst_groups: int,
    recommendations_path: str | None,
    recommendations_broker: str | None,
) -> None:
    """Replay every strategy on a history of lag snapshots; write results, a summary and an HTML report."""
    if (snapshots is None) == (broker is None):
        raise click.UsageError("give exactly one of --snapshots and --broker")
    if recommendations_path is not None and recommendations_broker is not None:
        raise click.UsageError("give at most one of --recommendations and --recommendations-broker")
    with _job(spark_settings, "backtest") as (spark, progress):
        progress.step("planning the read of the lag snapshots")
        if snapshots is not None:
            rows = read_snapshots(spark, snapshots)
        else:
            assert broker is not None
            rows = snapshots_from_changelogs(spark, spark_settings.kafka(broker), app_id)
        recommendations = None
        if recommendations_path is not None or recommendations_broker is not None:
            progress.step("reading kagent's recommendations")
            recommendations = _recommendations(
                spark, spark_settings, recommendations_path, recommendations_broker, app_id
            )
        chosen = strategies or STRATEGIES
        result = backtest(
            rows,
            output,
            threshold,
            chosen,
            worst_groups=worst_groups,
            on_step=progress.step,
            recommendations=recommendations,
        )
    click.echo(strategy_comparison(result.summary).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if recommendations is not None and result.recommendations is not None:
        kagent = result.recommendations
        click.echo(
            f"kagent's recommendations for these groups: {kagent['kagent_rebalances'].sum()} rebalances, "
            f"{kagent['kagent_scales'].sum()} scales, {kagent['kagent_hot_partitions'].sum()} hot partitions; "
            f"{recommendations.skipped} records skipped (not recommendations)"
        )
    click.echo(f"snapshot_results: {result.snapshot_results}")
    click.echo(f"strategy_summary: {result.strategy_summary}")
    if result.recommendation_summary is not None:
        click.echo(f"recommendation_summary: {result.recommendation_summary}")
    click.echo(f"report: {result.report}")


def _recommendations(
    spark: SparkSession, spark_settings: _Spark, path: str | None, broker: str | None, app_id: str
) -> RecommendationsRead:
    """kagent's recommendations from the JSON Lines at ``path``, or else from ``<app_id>-recommendations`` on
    ``broker`` (one of the two is given)."""
    if path is not None:
        return recommendations_from_json_lines(spark, path)
    assert broker is not None
    return recommendations_from_topic(spark, spark_settings.kafka(broker), app_id)
