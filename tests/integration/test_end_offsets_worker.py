"""End-offset polls through a real worker: a partition without an answer costs only itself (issue 35).

A user's group assigned partition 5 of a 2-partition topic made every poll wait
40 s and fail as a whole (aiokafka's ``end_offsets``), so another group's lag
stopped following its records and the poll timer overlapped; a deleted topic
did the same. Here each such partition is named in the poll's answer, the
others are measured, the deleted topic is dropped after a while and comes back
when re-created, and a worker whose polls all fail says it is not ready until
one answers again.

Each test has a broker of its own, so that its worker holds only its groups
(a worker reads every group in ``__consumer_offsets``, and these groups would
make every later worker's polls partial). Records are produced one per batch,
for Tansu's ListOffsets (see DESIGN.md).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition as TP

from kagent.connections import KafkaConnection
from kagent.tools.embedded import EmbeddedBroker, create_topics
from kagent.worker.missing_topics import DROP_AFTER_POLLS, RECHECK_AFTER_POLLS
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.s3_broker import S3Broker
from tests.support.waiting import wait_until
from tests.support.web import get_answer, get_json
from tests.support.worker import FAST, Worker, running_workers

pytestmark = pytest.mark.integration

OVERLAPPING = re.compile(r"Timer poll-end-offsets is overlapping")


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of the test's own (memory storage), stopped by pid at the end."""
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        yield broker


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def detail(worker: Worker, group: str) -> dict[str, Any] | None:
    """``GET /api/groups/{group}`` of ``worker``; None unless it answers 200."""
    try:
        status, body = get_answer(worker.url + f"api/groups/{quote(group, safe='')}")
    except OSError:
        return None
    return body if status == 200 else None


def figures(worker: Worker, group: str) -> dict[tuple[str, int], dict[str, Any]] | None:
    """The group's partitions with lag figures, as the API shows them: (topic, partition) -> figures;
    None unless the API answers for the group."""
    body = detail(worker, group)
    return None if body is None else {(p["topic"], p["partition"]): p for p in body["partitions"]}


def sample(worker: Worker, name: str, **labels: str) -> float:
    """One sample of ``worker``'s ``/metrics`` (0 when absent or the worker does not answer)."""
    key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
    return (worker.metrics() or {}).get(key, 0.0)


def unavailable(worker: Worker, reason: str) -> float:
    return sample(worker, "kagent_end_offset_partitions_unavailable", reason=reason)


def polls(worker: Worker, outcome: str) -> float:
    return sample(worker, "kagent_end_offset_polls_total", outcome=outcome)


def lag_follows(worker: Worker, group: str, tp: TP, log_end: int, offset_lag: int, within: float) -> float:
    """Wait until the group's figures on ``tp`` show ``log_end`` and ``offset_lag``; the seconds it took."""
    started = time.monotonic()

    def shown() -> bool:
        worker.check_alive()
        entry = (figures(worker, group) or {}).get((tp.topic, tp.partition), {})
        return entry.get("log_end") == log_end and entry.get("offset_lag") == offset_lag

    wait_until(
        shown, within, f"{group}'s lag on {tp} to show {offset_lag} of {log_end}", interval=0.2, detail=worker.log_tail
    )
    return time.monotonic() - started


async def test_an_impossible_partition_costs_only_itself_and_other_groups_lag_follows_their_records(
    own_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Group A is assigned partition 5 of its 2-partition topic; group B reads another topic. B's lag
    follows new records within a few poll intervals, A's real partition is measured, the polls are
    counted partial with one partition unknown, and the poll timer never overlaps."""
    interval = 1.0  # the user's
    impossible, other = unique("two-partitions"), unique("other")
    a, b = unique("group-a"), unique("group-b")
    await create_topics(own_broker.kafka, {OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, impossible: 2, other: 2})
    await produce(own_broker.bootstrap_servers, impossible, {0: 4, 1: 2})
    await produce(own_broker.bootstrap_servers, other, {0: 5, 1: 5})
    await publish(
        own_broker.bootstrap_servers,
        [
            group_metadata(a, 1, {"a-1": [TP(impossible, 0), TP(impossible, 5)]}),
            offset_commit(a, impossible, 0, 1),
            group_metadata(b, 1, {"b-1": [TP(other, 0), TP(other, 1)]}),
            offset_commit(b, other, 0, 5),
            offset_commit(b, other, 1, 5),
        ],
    )
    with running_workers(own_broker.bootstrap_servers, tmp_path) as start:
        worker = start(unique("impossible"), **{**FAST, "end_offset_interval": str(interval)})
        worker.wait_ready()
        lag_follows(worker, b, TP(other, 0), 5, 0, 60)

        await produce(own_broker.bootstrap_servers, other, {0: 7})
        took = lag_follows(worker, b, TP(other, 0), 12, 7, 10 * interval)
        print(f"\nB's lag followed 7 new records in {took:.1f} s (poll interval {interval:g} s)")

        lag_follows(worker, a, TP(impossible, 0), 4, 3, 10 * interval)

        def member_measured() -> dict[str, Any] | None:
            # Read again once known: a busy machine may delay a poll past staleness (3 polls), when partition 0's
            # figures, and the member's, are rightly unknown until the next.
            body = detail(worker, a)
            known = body is not None and body["members"] and body["members"][0]["offset_lag"] is not None
            return body if known else None

        shown = wait_until(
            member_measured,
            10 * interval,
            f"{a}'s member lag known",
            interval=0.2,
            detail=lambda: f"last body: {detail(worker, a)}\n{worker.log_tail()}",
        )
        members = shown["members"]
        assert [(r["topic"], r["partition"]) for r in members[0]["partitions"]] == [(impossible, 0), (impossible, 5)]
        # Partition 5 is shown, flagged, its figures unknown; it does not exist, so A's member counts only
        # partition 0, and its lag (3) is known.
        fifth = (figures(worker, a) or {})[(impossible, 5)]
        assert (fifth["offset_lag"], fifth["time_lag"]) == (None, None)
        assert "unknown-partition" in fifth["flags"]
        assert (members[0]["offset_lag"], members[0]["partitions_unknown"]) == (3, 0)
        wait_until(lambda: unavailable(worker, "unknown-partition") == 1, 10 * interval, "partition 5 counted unknown")
        partial = polls(worker, "partial")
        assert partial >= 1
        wait_until(lambda: polls(worker, "partial") >= partial + 3, 10 * interval, "partial polls counted")
        assert get_json(worker.url + "readyz")["ready"] is True
        log = worker.log()
        assert not OVERLAPPING.search(log), [line for line in log.splitlines() if OVERLAPPING.search(line)]
        assert "Failed to get offsets by times" not in log
        assert f"{impossible}-5: unknown-partition (topic has 2 partitions)" in log
        assert worker.stop() == 0


async def test_a_deleted_topic_is_flagged_then_dropped_and_comes_back_when_re_created(
    own_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Group C reads a topic that is deleted under it (Tansu answers DeleteTopics); group D reads another.
    The deleted topic's partitions are counted unknown, then after DROP_AFTER_POLLS intervals no longer
    polled nor shown for C, while D's lag keeps following its records; re-created with one partition, the
    topic is asked for again within RECHECK_AFTER_POLLS intervals, its partition 0 measured, and its
    partition 1, still assigned to C, counted unknown (never dropped)."""
    interval = 0.5
    doomed, other = unique("doomed"), unique("kept")
    c, d = unique("group-c"), unique("group-d")
    await create_topics(own_broker.kafka, {OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, doomed: 2, other: 1})
    await produce(own_broker.bootstrap_servers, doomed, {0: 6, 1: 6})
    await produce(own_broker.bootstrap_servers, other, {0: 2})
    await publish(
        own_broker.bootstrap_servers,
        [
            group_metadata(c, 1, {"c-1": [TP(doomed, 0), TP(doomed, 1)]}),
            offset_commit(c, doomed, 0, 2),
            offset_commit(c, doomed, 1, 2),
            group_metadata(d, 1, {"d-1": [TP(other, 0)]}),
            offset_commit(d, other, 0, 2),
        ],
    )
    with running_workers(own_broker.bootstrap_servers, tmp_path) as start:
        worker = start(unique("deleted"), **{**FAST, "end_offset_interval": str(interval)})
        worker.wait_ready()
        lag_follows(worker, c, TP(doomed, 1), 6, 4, 60)
        lag_follows(worker, d, TP(other, 0), 2, 0, 60)

        admin = AIOKafkaAdminClient(bootstrap_servers=own_broker.bootstrap_servers)
        await admin.start()
        try:
            answer = await admin.delete_topics([doomed])
        finally:
            await admin.close()
        assert [code for _, code in answer.topic_error_codes] == [0], answer
        deleted = time.monotonic()

        # Flagged: the metadata refreshes within DROP_AFTER_POLLS intervals (its max age here).
        bound = DROP_AFTER_POLLS * interval
        wait_until(
            lambda: unavailable(worker, "unknown-partition") == 2, 2 * bound + 30, "the deleted partitions counted"
        )
        flagged = time.monotonic()
        flagged_figures = (figures(worker, c) or {}).get((doomed, 0))  # shown, unknown, until it is dropped
        assert flagged_figures is not None and flagged_figures["offset_lag"] is None, flagged_figures

        def dropped_from_c() -> bool:
            shown = figures(worker, c)
            return shown is not None and (doomed, 0) not in shown

        wait_until(dropped_from_c, bound + 30, "the deleted topic dropped from C's figures", detail=worker.log_tail)
        dropped = time.monotonic()
        assert dropped - flagged >= bound / 2, f"dropped {dropped - flagged:.1f} s after being flagged"
        assert figures(worker, c) == {}
        wait_until(lambda: unavailable(worker, "unknown-partition") == 0, 30, "the dropped topic no longer polled")
        print(f"\ndeleted topic flagged after {flagged - deleted:.1f} s, dropped {dropped - flagged:.1f} s later")

        await produce(own_broker.bootstrap_servers, other, {0: 3})
        lag_follows(worker, d, TP(other, 0), 5, 3, 10 * interval + 10)
        assert get_json(worker.url + "readyz")["ready"] is True

        await create_topics(own_broker.kafka, {doomed: 1})
        await produce(own_broker.bootstrap_servers, doomed, {0: 1})
        recreated = time.monotonic()
        lag_follows(worker, c, TP(doomed, 0), 1, 0, RECHECK_AFTER_POLLS * interval + 30)
        print(f"re-created topic measured again after {time.monotonic() - recreated:.1f} s")
        wait_until(lambda: unavailable(worker, "unknown-partition") == 1, 30, "C's partition 1 counted unknown")
        beyond = (figures(worker, c) or {})[(doomed, 1)]  # still C's, beyond the count: shown, flagged, unknown
        assert beyond["offset_lag"] is None and "unknown-partition" in beyond["flags"]
        assert worker.stop() == 0


async def test_the_worker_is_unready_while_no_poll_answers_and_ready_again_after_one_does(tmp_path: Path) -> None:
    """The broker (``s3://`` storage on moto, so its data survives) is stopped under a running worker:
    once every poll has failed for KAGENT_STALL_AFTER seconds, ``/readyz`` answers 503 with
    ``end_offsets_polled`` false and the polls are counted errors; restarted, the next poll that
    answers makes the worker ready again."""
    topic, group = unique("restart"), unique("restart-group")
    stall_after = 3.0
    with S3Broker(tmp_path) as broker, running_workers(broker.bootstrap_servers, tmp_path) as start:
        await create_topics(
            KafkaConnection(broker.bootstrap_servers), {OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, topic: 1}
        )
        await produce(broker.bootstrap_servers, topic, {0: 3})
        await publish(broker.bootstrap_servers, [group_metadata(group, 1, {"a-1": [TP(topic, 0)]})])
        worker = start(unique("unready"), **{**FAST, "stall_after": str(stall_after)})
        worker.wait_ready()
        wait_until(lambda: polls(worker, "ok") >= 1, 30, "an answered poll")

        broker.stop()
        stopped = time.monotonic()

        def readiness() -> dict[str, Any]:
            try:
                return get_answer(worker.url + "readyz")[1]
            except OSError:  # a busy worker's answer may take longer than the request's timeout
                return {}

        def unready() -> dict[str, Any] | None:
            body = readiness()
            return body if body.get("end_offsets_polled") is False else None

        body = wait_until(unready, stall_after + 30, "readiness false after the polls failed", interval=0.2)
        took = time.monotonic() - stopped
        assert took >= stall_after - 0.5, f"unready {took:.1f} s after the broker stopped"
        assert body["ready"] is False
        assert polls(worker, "error") >= 2  # every poll an error: no broker reachable

        answered = polls(worker, "ok") + polls(worker, "partial")
        broker.start()
        restarted = time.monotonic()
        wait_until(
            lambda: readiness().get("end_offsets_polled") is True,
            60,
            "an answered poll after the restart",
            interval=0.2,
            detail=worker.log_tail,
        )
        polled_again = time.monotonic() - restarted
        assert polls(worker, "ok") + polls(worker, "partial") > answered
        wait_until(lambda: readiness().get("ready") is True, 90, "the worker ready again", detail=worker.log_tail)
        print(f"\nunready {took:.1f} s after the broker stopped; polled again {polled_again:.1f} s after it restarted")
        assert "ListOffsets failed" in worker.log()
        assert worker.stop(timeout=20) == 0
