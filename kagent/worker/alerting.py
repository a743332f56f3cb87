"""Alerting: incident transitions -> Alertmanager, webhooks and PagerDuty, losing none.

The stage reads ``<app id>-incidents`` with an aiokafka consumer of its own,
in the consumer group ``<app id>-alerting`` (the workers share its
partitions), and delivers each transition to every sink whose filter it
passes (:meth:`AlertsConfig.routes <kagent.core.alert_config.AlertsConfig.routes>`).
The contract:

- **Committed only once delivered.** A fetched batch's offsets are committed
  after every sink each of its transitions routes to has accepted it, or
  rejected it for good. A worker that dies mid-batch (SIGKILL) leaves the
  batch uncommitted, and whoever reads the partition next delivers it again:
  at least once. Sinks dedup by incident id (Alertmanager by the alert's
  labels, PagerDuty by ``dedup_key``; a webhook receiver gets the incident id
  in the body to dedup on).
- **In order per group.** One group's transitions go to each sink one at a
  time, in the order of the topic (they share a partition: the topic is
  keyed by group); different groups are delivered concurrently.
- **Retried, never dropped.** A timeout, a connection error, a 5xx or a 429
  is tried again after a capped exponential backoff with jitter
  (:func:`kagent.core.backoff.backoff_delay`; a ``Retry-After`` is
  honoured), for as long as it takes: a sink down for an hour receives every
  transition afterwards, in order. The consumer's poll interval is set long
  enough that waiting does not cost the partition.
- **Rejections are dead letters.** Any other answer (a 400: the payload or
  the key is wrong, and sending it again will not help) is counted
  (``kagent_alert_deliveries_total{outcome="rejected"}``), logged with the
  sink and the response, and the incident record goes to the dead-letter
  topic with the reason; delivery goes on with the next transition. A record
  on the incidents topic that is not an incident transition goes there too.
- **Alertmanager re-sends.** Alertmanager forgets an alert whose ``endsAt``
  has passed, so every ``resend_interval`` each Alertmanager sink gets the
  open incidents of the groups this worker holds again, with ``endsAt``
  ``ends_after`` ahead (the incidents come from the evaluator, through
  :class:`~kagent.worker.group_state.OpenIncidentsReader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from pydantic import ValidationError

from kagent.connections import KafkaConnection
from kagent.core.alert_config import AlertsConfig
from kagent.core.backoff import backoff_delay
from kagent.core.incidents import IncidentTransition
from kagent.worker.alert_sinks import AlertSink, Delivery, build_sinks
from kagent.worker.dead_letters import DeadLetters
from kagent.worker.group_state import OpenIncidentsReader
from kagent.worker.metrics import Metrics
from kagent.worker.stage import Stage

__all__ = ["Alerting"]

log = logging.getLogger(__name__)

MAX_RECORDS = 500
"""Incident records per fetched batch, at most."""

CONCURRENT_GROUPS = 64
"""Groups whose transitions are delivered at the same time, at most."""

MAX_POLL_INTERVAL = 24 * 3600.0
"""Seconds the consumer may go without a poll before it leaves its group: a day, since a batch waits
for a sink that is down as long as the sink is down. A worker that dies is still noticed within the
session timeout (heartbeats go on in the background)."""

RETRY_LOG_EVERY = 10
"""A transition's retries are logged at the first and then every this many."""


class _Stopping(Exception):
    """The stage is stopping: leave the batch uncommitted."""


class Alerting(Stage):
    """Delivers incident transitions to the configured sinks (see the module's contract)."""

    name = "alerting"

    def __init__(
        self,
        *,
        kafka: KafkaConnection,
        group_id: str,
        incidents_topic: str,
        config: AlertsConfig,
        cluster_name: str,
        web_url: str,
        open_incidents: OpenIncidentsReader,
        dead_letters: DeadLetters,
        metrics: Metrics,
        session_timeout: float = 10.0,
        heartbeat_interval: float = 3.0,
    ) -> None:
        self._kafka = kafka
        self.group_id = group_id
        self._topic = incidents_topic
        self._config = config
        self._cluster = cluster_name
        self._web_url = web_url
        self._open = open_incidents
        self._dead_letters = dead_letters
        self._metrics = metrics
        self._session_timeout = session_timeout
        self._heartbeat_interval = heartbeat_interval
        self._sinks: dict[str, AlertSink] = {}
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._random = random.Random()
        self._delivered = 0

    @property
    def delivered(self) -> int:
        """Transitions whose every routed sink accepted or rejected them, since the worker started."""
        return self._delivered

    async def start(self) -> None:
        self._sinks = {
            sink.name: sink for sink in build_sinks(self._config, cluster=self._cluster, web_url=self._web_url)
        }
        self._tasks = [asyncio.create_task(self._consume(), name="alerting-deliver")]
        self._tasks += [
            asyncio.create_task(self._resend_every(sink, interval), name=f"alerting-resend-{sink.name}")
            for sink in self._sinks.values()
            if (interval := getattr(sink.config, "resend_interval", None)) is not None
        ]

    async def stop(self) -> None:
        """Stop delivering: the batch in flight stays uncommitted (its next reader delivers it)."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sink in self._sinks.values():
            try:
                await sink.close()
            except Exception as exc:  # noqa: BLE001 -- closing must not stop the worker's shutdown
                log.warning("closing alert sink %s: %r", sink.name, exc)

    # -- delivery ------------------------------------------------------------------------------

    async def _consume(self) -> None:
        """Deliver until the stage stops; a consumer that fails (a broker gone at its start, a bug) is
        logged and made again, from the last committed batch, after a pause."""
        attempt = 0
        while not self._stopping.is_set():
            try:
                await self._consume_once()
            except _Stopping:
                return
            except Exception as exc:  # noqa: BLE001 -- the stage must outlive any one consumer
                delay = backoff_delay(self._config.retry, attempt, self._random.random())
                log.error("alerting: the incidents consumer failed (%r); starting again in %.1f s", exc, delay)
                attempt += 1
                try:
                    await self._pause(delay)
                except _Stopping:
                    return

    async def _consume_once(self) -> None:
        consumer = self._kafka.consumer(
            self._topic,
            client_id=self.group_id,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=int(self._session_timeout * 1000),
            heartbeat_interval_ms=int(self._heartbeat_interval * 1000),
            max_poll_interval_ms=int(MAX_POLL_INTERVAL * 1000),
            max_poll_records=MAX_RECORDS,
        )
        try:
            await consumer.start()
            while not self._stopping.is_set():
                fetched = await consumer.getmany(timeout_ms=1000, max_records=MAX_RECORDS)
                if not fetched:
                    continue
                await self.deliver_batch([record for tp in sorted(fetched) for record in fetched[tp]])
                await self._commit(consumer, fetched)
        finally:
            self._metrics.alerting_backlog.set(0)
            await consumer.stop()

    async def _commit(
        self, consumer: AIOKafkaConsumer, fetched: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]
    ) -> None:
        ends = {tp: OffsetAndMetadata(batch[-1].offset + 1, "") for tp, batch in fetched.items()}
        try:
            await consumer.commit(ends)
        except KafkaError as exc:
            # A rebalance took partitions away mid-batch: their new owner delivers them again (sinks dedup).
            log.warning("committing delivered incidents failed (they will be delivered again): %s", exc)

    async def deliver_batch(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        """Deliver ``records`` (in topic order per partition): each group's in order, groups concurrently.
        Returns when every record is delivered or dead-lettered; raises :class:`_Stopping` if the stage
        stops first."""
        by_group: dict[bytes | None, list[ConsumerRecord[bytes, bytes]]] = {}
        for record in records:
            by_group.setdefault(record.key, []).append(record)
        self._metrics.alerting_backlog.set(len(records))
        limit = asyncio.Semaphore(CONCURRENT_GROUPS)

        async def one_group(group_records: list[ConsumerRecord[bytes, bytes]]) -> None:
            async with limit:
                for record in group_records:
                    await self._deliver_record(record)
                    self._metrics.alerting_backlog.dec()

        await asyncio.gather(*(one_group(group_records) for group_records in by_group.values()))

    async def _deliver_record(self, record: ConsumerRecord[bytes, bytes]) -> None:
        try:
            transition = IncidentTransition.model_validate_json(record.value or b"")
        except ValidationError as exc:
            self._metrics.malformed.labels(record.topic).inc()
            log.warning(
                "malformed incident record at %s partition %d offset %d: %s",
                record.topic,
                record.partition,
                record.offset,
                exc.errors()[0]["msg"],
            )
            await self._dead_letter(record, f"not an incident transition: {exc}")
            return
        routed = [self._sinks[sink.name] for sink in self._config.routes(transition.incident)]
        await asyncio.gather(*(self._deliver_to(sink, record, transition) for sink in routed))
        self._delivered += 1

    async def _deliver_to(
        self, sink: AlertSink, record: ConsumerRecord[bytes, bytes], transition: IncidentTransition
    ) -> None:
        """Deliver one transition to one sink, trying again until it accepts or rejects it."""
        attempt = 0
        while True:
            result = await sink.deliver(transition)
            if result.delivery is Delivery.ACCEPTED:
                self._metrics.alert_deliveries.labels(sink.name, "accepted").inc()
                if record.timestamp is not None:
                    waited = max(0.0, time.time() - record.timestamp / 1000)
                    self._metrics.alert_delivery_seconds.labels(sink.name).observe(waited)
                return
            if result.delivery is Delivery.REJECTED:
                self._metrics.alert_deliveries.labels(sink.name, "rejected").inc()
                incident = transition.incident
                log.error(
                    "alert sink %s rejected the %s of incident %s (%s, group %s) for good: %s; "
                    "the record goes to the dead letters",
                    sink.name,
                    transition.action.value,
                    incident.id,
                    incident.kind.value,
                    incident.group,
                    result.detail,
                )
                await self._dead_letter(record, f"alert sink {sink.name} rejected it: {result.detail}")
                return
            self._metrics.alert_deliveries.labels(sink.name, "retried").inc()
            delay = backoff_delay(self._config.retry, attempt, self._random.random(), result.retry_after)
            if attempt % RETRY_LOG_EVERY == 0:
                log.warning(
                    "alert sink %s did not take incident %s (attempt %d): %s; trying again in %.1f s",
                    sink.name,
                    transition.incident.id,
                    attempt + 1,
                    result.detail,
                    delay,
                )
            attempt += 1
            await self._pause(delay)

    async def _dead_letter(self, record: ConsumerRecord[bytes, bytes], error: str) -> None:
        """Send ``record`` to the dead letters; returns once the broker has it (the dead-letter sender
        tries again until it does, :mod:`kagent.worker.dead_letters`)."""
        sent = await self._dead_letters.send(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            timestamp_ms=record.timestamp,
            key=record.key,
            value=record.value,
            error=error,
        )
        await sent

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds``; raise :class:`_Stopping` at once if the stage stops meanwhile."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        if self._stopping.is_set():
            raise _Stopping

    # -- Alertmanager re-sends -----------------------------------------------------------------

    async def _resend_every(self, sink: AlertSink, interval: float) -> None:
        """Every ``interval``, give ``sink`` the open incidents its filter takes again."""
        while True:
            await asyncio.sleep(interval)
            routed = [
                incident
                for incident in self._open.open_incidents()
                if any(config.name == sink.name for config in self._config.routes(incident))
            ]
            if not routed:
                continue
            result = await sink.resend(routed, time.time())
            self._metrics.alert_resends.labels(sink.name, result.delivery.value).inc()
            if result.delivery is not Delivery.ACCEPTED:
                log.warning("alert sink %s: re-sending %d open incidents: %s", sink.name, len(routed), result.detail)
