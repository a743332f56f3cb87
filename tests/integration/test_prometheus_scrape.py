"""A real Prometheus scrapes a worker holding the issue's mix (issue 36): 5,000 groups, every sample ingested.

The mix: 5,000 groups of 1-20 members reading 1-3 of 24 topics (552 partitions in all, the partition
counts of ``benchmarks/bench_ingest.py``), every partition assigned and committed once, some records
left unread on every partition. The worker's exposition at ``partition`` granularity is about 700,000
samples (160 MB). Prometheus scrapes it every 10 s with a timeout of 10 s; the test asserts that its
scrapes succeed, that it ingested every sample, that the figures it stored are the worker's (the lag it
sums per group is the lag the test committed), and that the worker's loop-lag histogram grows. The
module runs its own broker: the mix's records in ``__consumer_offsets`` must not reach the workers of
other tests.
"""

from __future__ import annotations

import asyncio
import math
import random
import socket
import urllib.parse
from pathlib import Path

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.monitoring import Prometheus
from tests.support.waiting import wait_until
from tests.support.worker import Worker

pytestmark = pytest.mark.integration

TOPIC_PARTITIONS = (1, 2, 3, 4, 6, 6, 8, 8, 10, 12, 12, 16, 16, 20, 24, 24, 30, 32, 36, 40, 48, 60, 64, 70)
GROUPS = 5_000
RECORDS = 4
"""Records in each topic partition; each group commits at 0-3, so every group-partition but those at 4
has lag."""

SCRAPE_EVERY = 10.0
"""Prometheus' scrape interval and timeout: a scrape of the mix takes about 2 s on a quiet machine."""
SETTINGS = {"end_offset_interval": "5", "evaluate_interval": "5", "one_record_batches": "false"}
"""End offsets polled every 5 s: stale (every lag unknown, NaN) only after 15 s without a poll, which a busy
two-core machine running the broker, the worker and Prometheus at once does not reach (every 2 s, a poll
delayed past 6 s made a scrape's sums NaN there)."""


SUM_LAG = 'kafka_consumergroup_group_sum_lag{job="kagent"}'


def _mix(seed: int = 36) -> tuple[list[object], dict[str, int]]:
    """The records of the mix, and each group's lag summed over its partitions."""
    rng = random.Random(seed)
    topics = [f"orders-{t:02d}" for t in range(len(TOPIC_PARTITIONS))]
    records: list[object] = []
    lag: dict[str, int] = {}
    for g in range(GROUPS):
        group = f"service-{g:05d}"
        read = rng.sample(range(len(topics)), rng.choice((1, 1, 1, 2, 2, 3)))
        partitions = [TopicPartition(topics[t], p) for t in read for p in range(TOPIC_PARTITIONS[t])]
        size = rng.randint(1, 20)
        members = {f"consumer-{group}-{m}-{rng.getrandbits(64):016x}": partitions[m::size] for m in range(size)}
        records.append(group_metadata(group, 1, members))
        offsets = [rng.randint(0, RECORDS - 1) for _ in partitions]
        records += [offset_commit(group, tp.topic, tp.partition, o) for tp, o in zip(partitions, offsets, strict=True)]
        lag[group] = sum(RECORDS - o for o in offsets)
    return records, lag


HUNG_UP = "hung up before the scrape's end"
"""What the worker logs (at info) of a scraper that hangs up."""


def _hang_up(url: str, first_bytes: int) -> None:
    """Ask ``url``'s /metrics and hang up once at least ``first_bytes`` of the answer came."""
    address = urllib.parse.urlsplit(url)
    with socket.create_connection((address.hostname, address.port), timeout=60) as connection:
        connection.sendall(f"GET /metrics HTTP/1.1\r\nHost: {address.netloc}\r\n\r\n".encode())
        if first_bytes:
            connection.recv(first_bytes)


async def test_a_real_prometheus_ingests_every_sample_of_a_worker_holding_the_issues_mix(tmp_path: Path) -> None:
    records, lag = await asyncio.to_thread(_mix)
    group_partitions = len(records) - GROUPS
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        topics = {f"orders-{t:02d}": count for t, count in enumerate(TOPIC_PARTITIONS)}
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, **topics})
        await asyncio.gather(
            *(
                produce(broker.bootstrap_servers, topic, dict.fromkeys(range(count), RECORDS))
                for topic, count in topics.items()
            )
        )
        await publish(broker.bootstrap_servers, records, by_group=True, batched=True)
        worker = Worker(broker.bootstrap_servers, tmp_path, "scraped", **SETTINGS).start()
        try:
            await asyncio.to_thread(worker.wait_ready, 300)

            def measured() -> bool:
                worker.check_alive()
                samples = worker.metrics("kagent_group_partitions", "kagent_derived_events_total") or {}
                return samples.get("kagent_group_partitions", 0) >= group_partitions

            await asyncio.to_thread(wait_until, measured, 300, "every group-partition polled", interval=1.0)
            with Prometheus(targets=[worker.url], interval=SCRAPE_EVERY, workdir=tmp_path / "prometheus") as prometheus:

                def two_scrapes_ingested() -> list[dict[str, object]] | None:
                    worker.check_alive()
                    scraped = prometheus.query('count_over_time(up{job="kagent"}[5m])')
                    if not scraped or float(scraped[0]["value"][1]) < 2:
                        return None
                    return prometheus.query('count(kafka_consumergroup_group_lag{job="kagent"})')

                counted = await asyncio.to_thread(
                    wait_until,
                    two_scrapes_ingested,
                    180,
                    "two scrapes of the worker",
                    interval=1.0,
                    detail=prometheus.log_tail,
                )
                health = {target["health"]: target.get("lastError", "") for target in prometheus.targets()}
                assert health == {"up": ""}, health
                assert int(counted[0]["value"][1]) == group_partitions
                samples = prometheus.query('scrape_samples_scraped{job="kagent"}')
                assert float(samples[0]["value"][1]) > 3 * group_partitions

                # A scrape taken while the worker's end offsets were stale (a busy machine delays its polls)
                # rightly stores NaN, the unknown lag: wait for one that knows every group's.
                def known_sums() -> dict[str, float] | None:
                    worker.check_alive()
                    sums = prometheus.query(SUM_LAG)
                    values = {s["metric"]["group"]: float(s["value"][1]) for s in sums}
                    return values if values and not any(math.isnan(v) for v in values.values()) else None

                known = await asyncio.to_thread(
                    wait_until, known_sums, 120, "a scrape with every group's lag known", interval=1.0
                )
                assert {group: int(value) for group, value in known.items()} == lag

                # The worker's loop-lag timers run all along: two scrapes that succeeded have different counts
                # (a scrape that timed out on a busy machine stores none), and the histogram is whole.
                def timers_ran() -> float | None:
                    worker.check_alive()
                    ran = prometheus.query(
                        'max_over_time(kagent_event_loop_lag_seconds_count{job="kagent"}[5m])'
                        ' - min_over_time(kagent_event_loop_lag_seconds_count{job="kagent"}[5m])'
                    )
                    return float(ran[0]["value"][1]) if ran and float(ran[0]["value"][1]) > 0 else None

                await asyncio.to_thread(wait_until, timers_ran, 120, "two scrapes with more timers run", interval=1.0)
                whole = prometheus.query(
                    'kagent_event_loop_lag_seconds_count{job="kagent"}'
                    ' - ignoring(le) kagent_event_loop_lag_seconds_bucket{job="kagent", le="+Inf"}'
                )
                assert float(whole[0]["value"][1]) == 0, whole

                # The worker freezes what outlives its middle collections and no full collection has gone
                # over them yet (an hour at least): what one would free is unknown, not 0.
                thaws = prometheus.query('kagent_gc_thaws_total{job="kagent"}')
                assert float(thaws[0]["value"][1]) == 0
                freed = prometheus.query('kagent_gc_freed_at_thaw_objects{job="kagent"}')
                assert math.isnan(float(freed[0]["value"][1]))

            # Scrapers that hang up (before the body, and after its first block) are not errors of the worker.
            for first_bytes in (0, 1):
                await asyncio.to_thread(_hang_up, worker.url, first_bytes)
            await asyncio.to_thread(  # both scrapes over on the worker's side: what they logged is all there
                wait_until,
                lambda: worker.log().count(HUNG_UP) >= 2,
                120,
                "the worker to see both scrapers hang up",
                interval=0.5,
                detail=worker.log_tail,
            )
            assert worker.metrics("kagent_scrapes_total"), "the worker's /metrics stopped answering"
            assert "Error handling request" not in worker.log(), worker.log_tail()
            assert worker.stop() == 0
        finally:
            worker.kill()
