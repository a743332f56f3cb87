"""The Faust application: a thin shell that wires kagent's topics and tables to its cores.

Start a worker with ``faust -A kagent.app worker -l info`` (or ``kagent worker``).
Settings come from ``KAGENT_*`` variables (:mod:`kagent.settings`); an invalid
one stops the import with a one-line message and exit code 2.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import faust
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import ONE_RECORD_BATCH
from kagent.core.table_keys import partition_of_group
from kagent.settings import Settings, SettingsError, Source, load_settings
from kagent.worker.topology import Topology, declare
from kagent.worker import (
    admin_api,
    changelog,
    consumer_group_assignments,
    end_offsets,
    evaluator,
    metrics,
    offsets_topic,
    storage,
    views,
)
from kagent.worker.changelog import PRODUCER_ERRORS, ChangelogWriteError

__all__ = ["app", "create_app", "settings", "topology"]

log = logging.getLogger(__name__)


def _load_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"kagent: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def create_app(settings: Settings) -> tuple[faust.App, Topology]:
    """Build the Faust app for ``settings`` with all its stages (no I/O until a worker starts it)."""
    app = faust.App(
        settings.app_id,
        **settings.kafka.faust_options(),
        store="memory://",
        datadir=str(settings.data_dir),
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        broker_session_timeout=settings.session_timeout,
        broker_heartbeat_interval=settings.heartbeat_interval,
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        **({"producer_max_batch_size": ONE_RECORD_BATCH} if settings.one_record_batches else {}),
    )
    topology = declare(app, settings)
    worker_metrics = metrics.Metrics()
    derived_events = topology.derived_events.get_topic_name()

    def active_partitions() -> set[int]:
        return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == derived_events}

    def holds(group: str) -> bool:
        """Whether this worker holds ``group``'s derived-events partition as active."""
        return partition_of_group(group, settings.topic_partitions) in active_partitions()

    def held_groups() -> list[str]:
        """The groups with an assignment whose derived-events partition this worker holds as active."""
        actives = active_partitions()
        return [
            group
            for group in topology.assignments.keys()
            if partition_of_group(group, settings.topic_partitions) in actives
        ]

    writer = changelog.ChangelogWriter(app)
    poller = end_offsets.EndOffsetPoller(settings, topology, writer, worker_metrics, held_groups)
    group_evaluator = evaluator.Evaluator(settings, topology, writer, worker_metrics, poller)

    if settings.source is Source.OFFSETS_TOPIC:
        offsets_topic.install(app, topology, settings, worker_metrics)
    else:
        admin_offsets_topic.install(app, topology, settings, worker_metrics)

    def on_change(group: str, tp: TopicPartition | None) -> None:
        if tp is None:
            poller.refresh_group(group)
        else:
            poller.refresh_partition(group, tp)
        group_evaluator.changed(group)

    kip848_groups = consumer_group_assignments.ConsumerGroups(
        settings, topology, writer, holds, on_assigned=lambda group: on_change(group, None)
    )
    storage.install(app, topology, writer, kip848_groups, worker_metrics, on_change)
    views.install(app, group_evaluator, worker_metrics, held_groups)

    @app.timer(settings.end_offset_interval, name="poll-end-offsets")
    async def poll_end_offsets() -> None:
        try:
            await kip848_groups.store()  # groups waiting for topic names ask again
            await poller.poll()
        except ChangelogWriteError as exc:
            log.warning("end-offset poll: %s; the next flush sends them", exc)

    @app.timer(group_evaluator.tick, name="evaluate-groups")
    async def evaluate_groups() -> None:
        try:
            await group_evaluator.run_due(held_groups())
        except ChangelogWriteError as exc:
            log.warning("evaluation: %s; the next flush sends them", exc)
        except PRODUCER_ERRORS as exc:
            log.error("evaluation: a recommendation was not sent: %r", exc)

    @app.on_before_shutdown.connect
    async def stop_poller(sender: Any, **kwargs: Any) -> None:
        await poller.stop()
        await kip848_groups.stop()
        try:
            await writer.flush()  # while the producer still runs
        except ChangelogWriteError as exc:
            log.warning("at shutdown: %s", exc)

    return app, topology


settings = _load_or_exit()
settings.data_dir.mkdir(parents=True, exist_ok=True)
app, topology = create_app(settings)
