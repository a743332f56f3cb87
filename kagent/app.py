"""The Faust application: builds the worker's stages and registers them; nothing else.

Start a worker with ``faust -A kagent.app worker -l info`` (or ``kagent worker``).
Settings come from ``KAGENT_*`` variables (:mod:`kagent.settings`); an invalid
one stops the import with a one-line message and exit code 2.

The stages (:mod:`kagent.worker`), in the order a record meets them: a
source (``offsets-topic`` or ``admin-api``) -> storage (the one owner of
group state) <- end offsets; storage -> evaluator -> incidents topic ->
alerting (when ``KAGENT_ALERTS_CONFIG`` names sinks); views read storage.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import faust

from kagent.connections import ClusterUnreachable, KafkaConnection
from kagent.settings import Settings, SettingsError, Source, load_settings
from kagent.tools.embedded import ONE_RECORD_BATCH
from kagent.worker import garbage_collection
from kagent.worker.admin_api import AdminApiSource
from kagent.worker.alerting import Alerting
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.channel import Channel
from kagent.worker.cluster_api import ClusterApi
from kagent.worker.committed_offsets import CommittedOffsets
from kagent.worker.consumer_group_assignments import ConsumerGroupAssignments
from kagent.worker.dashboard import Dashboard
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.end_offsets import EndOffsets
from kagent.worker.evaluator import Evaluator
from kagent.worker.group_overview import GroupOverview
from kagent.worker.group_state import EndOffsetsPolled, GroupChanged
from kagent.worker.health import Health
from kagent.worker.incident_log import IncidentLog
from kagent.worker.lag_exporter import LagExporter
from kagent.worker.lag_figures import LagFigures
from kagent.worker.loop_lag import LoopLag
from kagent.worker.metrics import Metrics
from kagent.worker.offsets_topic import OffsetsTopicSource
from kagent.worker.output_topics import prepare_output_topics
from kagent.worker.readiness import Readiness
from kagent.worker.recommendation_history import RecommendationHistory
from kagent.worker.routing import ClusterRouter
from kagent.worker.shutdown import STAGE_STOP_TIMEOUT, arm_watchdog, limit_repeated_errors
from kagent.worker.stage import Stage
from kagent.worker.stalls import ReportsProgress, StallDetector
from kagent.worker.storage import Storage
from kagent.worker.table_recovery import TableManager
from kagent.worker.topology import HeldGroups, Topology, declare
from kagent.worker.views import Views

__all__ = ["app", "build_stages", "create_app", "settings", "topology"]

log = logging.getLogger(__name__)


def _load_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"kagent: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def build_stages(app: faust.App, topology: Topology, settings: Settings, metrics: Metrics) -> list[Stage]:
    """The worker's stages, each built from what it needs, in start order."""
    dead_letters = DeadLetters(app, topology.dead_letters.get_topic_name(), metrics)
    stalls = StallDetector(settings.stall_after)
    changes: Channel[GroupChanged] = Channel()
    end_offsets: Channel[EndOffsetsPolled] = Channel()
    held = HeldGroups(app, topology.derived_events, settings.topic_partitions)
    storage_writer = ChangelogWriter(app)
    committed = CommittedOffsets(
        topology.committed,
        storage_writer,
        capacity=settings.health_commits,
        min_distance=settings.health_min_distance,
        index=topology.committed.partition_index,
    )
    storage = Storage(
        derived_events=topology.derived_events,
        assignments=topology.assignments,
        committed=committed,
        applied_offsets=topology.applied_offsets,
        lag=LagFigures(
            committed,
            topology.partition_lag,
            storage_writer,
            poll_interval=settings.end_offset_interval,
            auto_offset_reset=settings.auto_offset_reset,
        ),
        consumer_groups=ConsumerGroupAssignments(
            kafka=settings.kafka,
            client_id=f"{settings.app_id}-topic-ids",
            ask_interval=settings.end_offset_interval,
            states=topology.consumer_group_state,
            assignments=topology.assignments,
            writer=storage_writer,
            held=held,
        ),
        writer=storage_writer,
        held=held,
        dead_letters=dead_letters,
        metrics=metrics,
        changes=changes,
        end_offsets=end_offsets,
    )
    source: OffsetsTopicSource | AdminApiSource
    if settings.source is Source.OFFSETS_TOPIC:
        source = OffsetsTopicSource(
            app,
            settings,
            consumer_offsets=topology.consumer_offsets,
            derived_events=topology.derived_events,
            dead_letters=dead_letters,
            metrics=metrics,
        )
    else:
        source = AdminApiSource(settings, topology.derived_events, metrics)
    ingest: list[ReportsProgress] = [source, storage] if isinstance(source, OffsetsTopicSource) else [storage]
    evaluator_writer = ChangelogWriter(app)
    overview = GroupOverview()
    history = RecommendationHistory(topology.recent_recommendations, evaluator_writer)
    evaluator = Evaluator(
        interval=settings.evaluate_interval,
        policy=settings.evaluation_policy,
        groups=storage,
        changes=changes,
        states=topology.evaluation_state,
        recommendations=topology.recommendations,
        incidents=IncidentLog(
            table=topology.incidents_state,
            topic=topology.incidents,
            writer=evaluator_writer,
            metrics=metrics,
            cluster_name=settings.cluster_name,
        ),
        history=history,
        overview=overview,
        writer=evaluator_writer,
        metrics=metrics,
        cluster_name=settings.cluster_name,
        worker_url=settings.worker_url,
        ingest=ingest,
    )
    lag_series = LagExporter(
        storage,
        cluster_name=settings.cluster_name,
        granularity=settings.metrics_granularity.value,
        policy=settings.evaluation_policy,
    )
    alerting = []
    if settings.alerts is not None:
        alerting.append(
            Alerting(
                kafka=settings.kafka,
                group_id=f"{settings.app_id}-alerting",
                incidents_topic=topology.incidents.get_topic_name(),
                config=settings.alerts,
                cluster_name=settings.cluster_name,
                web_url=settings.web_url,
                open_incidents=evaluator,
                dead_letters=dead_letters,
                metrics=metrics,
                session_timeout=settings.session_timeout,
                heartbeat_interval=settings.heartbeat_interval,
            )
        )
    polls = EndOffsets(
        kafka=settings.kafka,
        client_id=f"{settings.app_id}-end-offsets",
        interval=settings.end_offset_interval,
        groups=storage,
        polled=end_offsets,
        metrics=metrics,
        stall_after=settings.stall_after,
    )
    return [
        LoopLag(metrics.loop_lag.observe),
        source,
        storage,
        polls,
        evaluator,
        *alerting,
        Health(ingest, stalls, metrics),
        ClusterApi(
            router=ClusterRouter(
                app,
                table=topology.assignments.name,
                partitions=settings.topic_partitions,
                own_url=settings.worker_url,
            ),
            groups=storage,
            overview=overview,
            history=history,
            incidents=evaluator,
            readiness=Readiness(app, source, stalls, polls),
            policy=settings.evaluation_policy,
        ),
        Views(metrics, [metrics.group_gauges, lag_series]),
        Dashboard(),
    ]


STARTUP_REACH_TIMEOUT = 15.0
"""Seconds a starting worker waits for its cluster to answer before it exits with one line."""


class _App(faust.App):
    """Faust's app, its start refused in one line when the cluster cannot be reached (Faust would
    fail in its producer's start with a traceback of 45 lines), and its shutdown bounded from the
    moment it begins (:func:`arm_watchdog`): Faust's own hooks (``on_before_shutdown``) come only
    after the consumer and the tables have stopped, which is where an unbounded wait would be."""

    kafka: KafkaConnection

    async def on_first_start(self) -> None:
        garbage_collection.tune()
        try:
            await self.kafka.check_reachable(STARTUP_REACH_TIMEOUT)
        except ClusterUnreachable as exc:
            log.error("kagent: %s; not starting", exc)
            raise SystemExit(1) from None
        await super().on_first_start()

    async def on_stop(self) -> None:
        arm_watchdog(crashed=lambda: self.crash_reason is not None)
        await super().on_stop()


def create_app(settings: Settings) -> tuple[faust.App, Topology]:
    """Build the Faust app for ``settings`` with all its stages (no I/O until a worker starts it)."""
    app = _App(
        settings.app_id,
        **settings.kafka.faust_options(),
        store="memory://",
        datadir=str(settings.data_dir),
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        canonical_url=settings.worker_url,
        broker_session_timeout=settings.session_timeout,
        broker_heartbeat_interval=settings.heartbeat_interval,
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication_factor,
        consumer_auto_offset_reset="earliest",
        # Faust's default waits at shutdown until every event its streams took is acknowledged,
        # unbounded: a SIGTERM under load hung there (and Robinhood's own apps turned it off,
        # faust#117). Events not acknowledged are read again by the next holder; storage's
        # writes are idempotent and never undo newer state.
        stream_wait_empty=False,
        TableManager=TableManager,  # Faust's, restoring changelogs in bulk first (worker/table_recovery.py)
        # No standby copies: a worker that takes partitions over reads their changelogs in bulk from the
        # start whatever it held (worker/table_recovery.py), so a standby would buy nothing, and Faust
        # applies a standby's records one at a time: half of each of two workers' CPU in bench_ingest.
        table_standby_replicas=0,
        **({"producer_max_batch_size": ONE_RECORD_BATCH} if settings.one_record_batches else {}),
    )
    app.kafka = settings.kafka
    topology = declare(app, settings)
    limit_repeated_errors()
    metrics = Metrics()
    garbage_collection.PAUSES.time_collections(metrics.gc_paused)
    garbage_collection.FROZEN.on_thaw(metrics.gc_thawed)
    stages = build_stages(app, topology, settings, metrics)
    for stage in stages:
        stage.register(app)

    @app.task
    async def start_stages() -> None:
        await prepare_output_topics(
            app,
            [
                topology.derived_events,
                topology.recommendations,
                topology.incidents,
                topology.dead_letters,
                topology.partition_lag.topic,
            ],
            topology.tables(),
        )
        for stage in stages:
            await stage.start()

    @app.on_before_shutdown.connect
    async def stop_stages(sender: Any, **kwargs: Any) -> None:
        for stage in reversed(stages):
            try:
                async with asyncio.timeout(STAGE_STOP_TIMEOUT):
                    await stage.stop()
            except TimeoutError:
                log.warning("stage %s did not stop within %g s; going on", stage.name, STAGE_STOP_TIMEOUT)

    return app, topology


settings = _load_or_exit()
settings.data_dir.mkdir(parents=True, exist_ok=True)
app, topology = create_app(settings)
