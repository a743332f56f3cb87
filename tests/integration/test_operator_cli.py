"""The operator's commands as a user runs them, against one real worker on the embedded broker holding a
skewed group it has recommended a rebalance for: ``kagent groups`` and ``kagent group`` through the worker's
HTTP API, ``kagent recommendations list|show|tail`` from the real recommendations topic, and the demo's live
table, whose figures now must follow the group's lag after the recommendation."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest
from aiokafka.structs import TopicPartition
from rich.console import Console

from kagent.core.api_records import GroupDetail, GroupsPage, GroupSummary
from kagent.core.recommendation import Recommendation
from kagent.tools.demo import watch_recommendations
from kagent.tools.embedded import ONE_RECORD_BATCH, EmbeddedBroker
from tests.support import REPO
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.incidents import recommendation
from tests.support.waiting import wait_until, wait_until_async
from tests.support.web import get_json
from tests.support.worker import STEADY, Worker, kagent_env, running_workers

pytestmark = pytest.mark.integration

APP_ID = "operator-cli"
GROUP, TOPIC = "operator-cli-skewed", "operator-cli-orders"
TOPIC_RECORDS = {0: 600, 1: 600, 2: 200, 3: 200, 4: 200, 5: 200}
"""Range gives each of 3 members two partitions: member 0 the hot ones, 1,200 records behind; the others 400."""


@dataclass(frozen=True)
class Cluster:
    """The module's worker, the skewed group's summary once it has a recommendation, and the CLI's environment."""

    broker: EmbeddedBroker
    worker: Worker
    summary: GroupSummary
    env: dict[str, str]


@pytest.fixture(scope="module")
def cluster(kafka_broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One worker holding one skewed group of 3 members, and the group's summary once the worker has
    published a recommendation for it."""
    bootstrap = kafka_broker.bootstrap_servers
    members = {f"{GROUP}-{m}": [TopicPartition(TOPIC, 2 * m), TopicPartition(TOPIC, 2 * m + 1)] for m in range(3)}

    async def skew() -> None:
        await kafka_broker.create_topics({TOPIC: 6, OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS})
        await produce(bootstrap, TOPIC, TOPIC_RECORDS)
        await publish(
            bootstrap, [group_metadata(GROUP, 1, members), *(offset_commit(GROUP, TOPIC, p, 0) for p in range(6))]
        )

    asyncio.run(skew())
    with running_workers(bootstrap, tmp_path_factory.mktemp("operator-cli")) as start:
        worker = start(APP_ID, **STEADY)
        worker.wait_serving()

        def recommended() -> GroupSummary | None:
            worker.check_alive()
            body = get_json(f"{worker.url}api/groups?q={GROUP}", timeout=2)
            found = GroupsPage.model_validate(body).groups if body is not None else ()
            return next((g for g in found if g.group == GROUP and g.last_recommendation_id), None)

        summary = wait_until(
            recommended, 60, f"a recommendation for {GROUP} in /api/groups", interval=0.2, detail=worker.log_tail
        )
        yield Cluster(
            kafka_broker, worker, summary, kagent_env(broker=bootstrap, app_id=APP_ID, web_port=str(worker.web_port))
        )
        worker.stop()


def kagent(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``kagent ARGS`` run as a user runs it, with the cluster's KAGENT_* settings."""
    return subprocess.run(
        [sys.executable, "-m", "kagent.tools.cli", *args],
        env=cluster.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_groups_lists_the_group_from_the_workers_api(cluster: Cluster) -> None:
    result = kagent(cluster, "groups", "--url", cluster.worker.url, "--json")
    assert result.returncode == 0, result.stderr
    page = GroupsPage.model_validate_json(result.stdout)
    assert page.complete and result.stderr == ""
    [summary] = [g for g in page.groups if g.group == GROUP]
    assert (summary.members, summary.partitions, summary.generation) == (3, 6, 1)
    assert summary.total_lag == 2000 and summary.max_lag == 600
    assert summary.skew is not None and summary.skew >= 1.5

    table = kagent(cluster, "groups", "--filter", "CLI-SKEWED")  # the worker the settings name; any case
    assert table.returncode == 0, table.stderr
    [row] = [line for line in table.stdout.splitlines() if GROUP in line]
    assert "2,000" in row and "range" in row


def test_group_shows_its_members_the_recommendations_moves_and_its_partitions(cluster: Cluster) -> None:
    result = kagent(cluster, "group", GROUP, "--json")
    assert result.returncode == 0, result.stderr
    detail = GroupDetail.model_validate_json(result.stdout)
    assert detail.summary.group == GROUP
    assert sorted(m.member_id for m in detail.members) == sorted(f"{GROUP}-{m}" for m in range(3))
    assert max(m.lag for m in detail.members) == 1200
    assert [(p.topic, p.partition, p.offset_lag) for p in detail.partitions] == [
        (TOPIC, p, lag) for p, lag in TOPIC_RECORDS.items()
    ]
    assert detail.recommendation is not None and detail.recommendation.moves
    assert all(m.recommended_partitions is not None for m in detail.members)
    # Its commits were published once, with lag: no member's pace is measured, so no drain time is stated
    # (unknown, not 0 nor "caught up"), and the group's neither.
    assert {m.drain.state.value for m in detail.members} == {"unknown"} and detail.drain.state.value == "unknown"

    table = kagent(cluster, "group", GROUP)
    assert table.returncode == 0, table.stderr
    for expected in (GROUP, "members", "moves of the latest recommendation", f"{GROUP}-0", detail.recommendation.id):
        assert expected in table.stdout
    [drain_line] = [line for line in table.stdout.splitlines() if line.startswith("drain time")]
    assert drain_line.split()[2:] == ["unknown"]


def test_an_unknown_group_is_one_line_and_exit_1(cluster: Cluster) -> None:
    result = kagent(cluster, "group", "no such group")
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"kagent: {cluster.worker.url}api/groups/no%20such%20group: HTTP 404"), line


def test_recommendations_list_and_show_read_the_topic(cluster: Cluster) -> None:
    result = kagent(cluster, "recommendations", "list", "--json")
    assert result.returncode == 0, result.stderr
    listed = [Recommendation.model_validate(r) for r in json.loads(result.stdout)]
    ours = [r for r in listed if r.group == GROUP]
    assert ours and ours[0].id == cluster.summary.last_recommendation_id
    assert [r.time for r in listed] == sorted((r.time for r in listed), reverse=True)

    other = kagent(cluster, "recommendations", "list", "--group", "another-group", "--json")
    assert other.returncode == 0 and json.loads(other.stdout) == []

    shown = kagent(cluster, "recommendations", "show", ours[0].id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert Recommendation.model_validate_json(shown.stdout) == ours[0]
    table = kagent(cluster, "recommendations", "show", ours[0].id[:10])
    assert table.returncode == 0, table.stderr
    assert GROUP in table.stdout and ours[0].id in table.stdout

    missing = kagent(cluster, "recommendations", "show", "feedface")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.splitlines() == [
        f"kagent: no recommendation with id feedface on {APP_ID}-recommendations at {cluster.broker.bootstrap_servers}"
    ]


def test_recommendations_tail_follows_new_records_until_ctrl_c(cluster: Cluster, tmp_path: Path) -> None:
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        tail = subprocess.Popen(
            [sys.executable, "-m", "kagent.tools.cli", "recommendations", "tail", "--group", "tail-probe", "--json"],
            env=cluster.env,
            cwd=REPO,
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
    try:
        wait_until(lambda: "following" in err.read_text() or tail.poll() is not None, 30, "tail to follow the topic")
        assert tail.poll() is None, err.read_text()
        sent = [
            recommendation(f"{n:032x}", group=group)
            for n, group in enumerate(["tail-probe", "elsewhere", "tail-probe"])
        ]
        asyncio.run(_publish(cluster.broker, sent))
        wait_until(
            lambda: out.read_text().count("\n") >= 2, 30, "two recommendations on tail's output", detail=err.read_text
        )
        tail.send_signal(signal.SIGINT)
        assert tail.wait(30) == 0, err.read_text()
    finally:
        if tail.poll() is None:
            tail.kill()
    assert [Recommendation.model_validate_json(line) for line in out.read_text().splitlines()] == [sent[0], sent[2]]
    assert err.read_text().splitlines() == [
        f"kagent: following {APP_ID}-recommendations at {cluster.broker.bootstrap_servers}; Ctrl-C stops"
    ]


async def _publish(broker: EmbeddedBroker, recommendations: list[Recommendation]) -> None:
    """Write ``recommendations`` to the module's recommendations topic, keyed by group, as the evaluator does."""
    producer = broker.kafka.producer(max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        for r in recommendations:
            await (await producer.send(f"{APP_ID}-recommendations", r.model_dump_json().encode(), key=r.group.encode()))
    finally:
        await producer.stop()


async def test_the_demos_live_table_shows_the_lag_now_not_the_lag_at_the_recommendation(cluster: Cluster) -> None:
    """Last in the module: it makes the group's hot partition fall further behind."""
    out = StringIO()
    stop = asyncio.Event()
    watcher = asyncio.create_task(
        watch_recommendations(
            cluster.broker.kafka,
            f"{APP_ID}-recommendations",
            stop,
            out.write,
            live=True,
            api_url=cluster.worker.url,
            console=Console(file=out, force_terminal=True, color_system=None, width=200),
        )
    )

    def row() -> str | None:
        rows = [line for line in out.getvalue().splitlines() if GROUP in line]
        return rows[-1] if rows else None

    async def shows(figure: str) -> str | None:
        assert not watcher.done(), watcher
        last = row()
        return last if last is not None and figure in last else None

    try:
        first = await wait_until_async(
            lambda: shows("1,200"), 30, "the live table's row with the lag now", detail=out.getvalue
        )
        assert f"{cluster.summary.skew:.2f} ->" in first  # the recommendation's skew before
        await produce(cluster.broker.bootstrap_servers, TOPIC, {0: 300})
        later = await wait_until_async(
            lambda: shows("1,500"), 30, "the live table's row with the grown lag", detail=out.getvalue
        )
        assert f"{cluster.summary.skew:.2f} ->" in later  # the recommendation's own figures stay
    finally:
        stop.set()
        await asyncio.wait_for(watcher, 10)
