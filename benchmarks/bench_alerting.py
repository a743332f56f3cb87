"""Alerting: how soon an alert is visible in Alertmanager, and how fast one alerting stage delivers.

    python benchmarks/bench_alerting.py [--quick]

Both parts start an embedded broker (Tansu) and real worker processes, as the integration tests do.

Delay. A real Alertmanager (Debian's ``prometheus-alertmanager``) and a worker whose alerting file
has one Alertmanager sink. 20 consumer groups (10 with ``--quick``), each of 3 members on a
6-partition topic whose two hot partitions sit on one member (member lag 600, 200, 200: skew 1.8,
above the threshold of 1.5), are published at once. For each group, the delay runs from its
recommendation record's timestamp on the recommendations topic (the broker's append time of the
record that opens the ``lag-skew`` incident) to the first poll of Alertmanager's API
(``GET /api/v2/alerts``, every 50 ms) that shows the group's ``KagentLagSkew`` alert. Median and max
over the groups. The baseline, in the same run, is the same Alertmanager's own floor: from just before
an alert is POSTed straight to its API to the first poll that shows it, 20 times, one at a time.

Rate. A worker's alerting stage with one webhook sink (the default ``json`` body) pointed at a
local HTTP server (aiohttp, in a thread of the benchmark's process), given 6,000 incident
transitions of 2,000 groups (open, update, resolve each; 1,500 transitions of 500 groups with
``--quick``) already on its incidents topic. Its rate runs from the first transition the server
accepts to the last. The baseline, in the same run, is a bare aiohttp client, in a process of its
own as the worker is, posting the same bodies to the same server the way the stage does: 64 groups
at a time, each group's transitions one after another (best of 2). The ratio is the stage's rate over the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka.structs import TopicPartition

from kagent.tools.embedded import EmbeddedBroker
from kagent.worker.alerting import CONCURRENT_GROUPS
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.incidents import lifecycle, publish_transitions
from tests.support.monitoring import Alertmanager
from tests.support.receiver import Receiver
from tests.support.topics import TopicReader
from tests.support.waiting import wait_until_async
from tests.support.worker import FAST, running_workers


async def delay(workdir: Path, groups: int) -> None:
    """Recommendation record -> alert visible in Alertmanager's API, per group."""
    with EmbeddedBroker() as broker, Alertmanager(workdir=workdir / "alertmanager") as alertmanager:
        bootstrap = broker.bootstrap_servers
        await broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS})
        alerts = workdir / "alerts.yaml"
        alerts.write_text(
            f"sinks:\n  - name: am\n    type: alertmanager\n    url: {alertmanager.url}\n"
            "    resend_interval: 30\n    ends_after: 300\n"
        )
        records = []
        names = [f"bench-skewed-{g}" for g in range(groups)]
        for group in names:
            topic = f"{group}-topic"
            await broker.create_topics({topic: 6})
            await produce(bootstrap, topic, {0: 300, 1: 300, 2: 100, 3: 100, 4: 100, 5: 100})
            members = {
                f"{group}-{m}": [TopicPartition(topic, 2 * m), TopicPartition(topic, 2 * m + 1)] for m in range(3)
            }
            records.append(group_metadata(group, 1, members))
            records += [offset_commit(group, topic, p, 0) for p in range(6)]
        with running_workers(bootstrap, workdir) as start:
            worker = start("bench-alert-delay", alerts_config=str(alerts), min_total_lag="100", **FAST)
            seen: dict[str, float] = {}
            await publish(bootstrap, records)

            async def all_visible() -> bool:
                worker.check_alive()
                now = time.time()
                for alert in await asyncio.to_thread(alertmanager.alerts):
                    labels = alert["labels"]
                    if labels.get("alertname") == "KagentLagSkew":
                        seen.setdefault(labels["group"], now)
                return set(names) <= set(seen)

            await wait_until_async(all_visible, 180, "every group's alert in Alertmanager", interval=0.05)
            async with TopicReader(bootstrap, "bench-alert-delay-recommendations") as reader:
                await reader.until(lambda: len(reader.records) >= groups, 60, "the recommendations", worker.log_tail)
                recommended = {json.loads(r.value)["group"]: r.timestamp / 1000 for r in reader.records}
        floor = await direct_post_delays(alertmanager, groups)
    delays = sorted(seen[group] - recommended[group] for group in names)
    print(f"groups: {groups} skewed groups (skew 1.8 >= 1.5), one Alertmanager sink")
    print(f"{'':<52}{'median ms':>10}{'max ms':>8}")
    for label, figures in (
        ("an alert POSTed straight to Alertmanager (baseline)", floor),
        ("recommendation record -> alert, through kagent", delays),
    ):
        print(f"{label:<52}{statistics.median(figures) * 1000:>10.0f}{max(figures) * 1000:>8.0f}")
    print(f"ratio of the medians, kagent / baseline: {statistics.median(delays) / statistics.median(floor):.1f}")


async def direct_post_delays(alertmanager: Alertmanager, count: int) -> list[float]:
    """The floor of the delay: from just before one alert is POSTed to Alertmanager's API to the first poll
    of its ``GET /api/v2/alerts`` (every 50 ms, as above) that shows it; one alert at a time."""
    delays = []
    for n in range(count):
        labels = {"alertname": "BenchDirect", "group": f"direct-{n}"}
        started = time.time()
        await asyncio.to_thread(alertmanager.post_alerts, [{"labels": labels}])

        async def visible(labels: dict[str, str] = labels) -> bool:
            return bool(await asyncio.to_thread(alertmanager.alerts, **labels))

        await wait_until_async(visible, 60, "the posted alert in Alertmanager's API", interval=0.05)
        delays.append(time.time() - started)
    return delays


async def bare_client_rate(url: str, bodies_by_group: list[list[bytes]]) -> float:
    """Transitions per second a bare aiohttp client posts, 64 groups at a time, each group in order."""
    limit = asyncio.Semaphore(CONCURRENT_GROUPS)
    async with aiohttp.ClientSession() as session:

        async def one_group(bodies: list[bytes]) -> None:
            async with limit:
                for body in bodies:
                    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as answer:
                        await answer.read()
                        assert answer.status == 202

        started = time.perf_counter()
        await asyncio.gather(*(one_group(bodies) for bodies in bodies_by_group))
        return sum(map(len, bodies_by_group)) / (time.perf_counter() - started)


async def bare_client_process(url: str, bodies: Path) -> float:
    """:func:`bare_client_rate` in a process of its own, as the worker is (not sharing the receiver's GIL)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--bare-client", url, str(bodies), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    assert child.returncode == 0, "the bare client failed"
    return float(out.decode().split()[-1])


async def rate(workdir: Path, groups: int) -> None:
    """One alerting stage's delivery rate to a local webhook, beside a bare aiohttp client."""
    transitions = [t for g in range(groups) for t in lifecycle(f"bench-rate-{g}", 4_000_000.0, updates=1)]
    count = len(transitions)
    with EmbeddedBroker() as broker, Receiver() as receiver:
        bootstrap = broker.bootstrap_servers
        alerts = workdir / "alerts-rate.yaml"
        alerts.write_text(f"sinks:\n  - name: hook\n    type: webhook\n    url: {receiver.url}/hook\n")
        await broker.create_topics({"bench-rate-incidents": 4})
        await publish_transitions(bootstrap, "bench-rate-incidents", transitions)
        with running_workers(bootstrap, workdir) as start:
            worker = start("bench-rate", alerts_config=str(alerts), topic_partitions="4")

            async def delivered() -> bool:
                worker.check_alive()
                return len(receiver.posted) >= count

            await wait_until_async(delivered, 600, f"{count} transitions at the webhook", interval=0.2)
        posted = receiver.posted
        stage = (count - 1) / (posted[count - 1].at - posted[0].at)
        bodies: dict[str, list[str]] = {}
        for transition in transitions:
            bodies.setdefault(transition.incident.group, []).append(transition.model_dump_json())
        by_group = workdir / "bodies.json"
        by_group.write_text(json.dumps(list(bodies.values())))
        bare = max([await bare_client_process(f"{receiver.url}/bare", by_group) for _ in range(2)])
    print(f"transitions: {count:,} of {groups:,} groups on the incidents topic, one webhook sink on loopback")
    print(f"{'':<40}{'transitions/s':>14}")
    print(f"{'bare aiohttp client (baseline, best of 2)':<40}{bare:>14,.0f}")
    print(f"{'alerting stage of a worker':<40}{stage:>14,.0f}")
    print(f"ratio stage / baseline: {stage / bare:.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer groups")
    parser.add_argument("--bare-client", nargs=2, metavar=("URL", "BODIES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_client:  # the baseline's own process
        url, path = args.bare_client
        groups = [[body.encode() for body in group] for group in json.loads(Path(path).read_text())]
        print(await bare_client_rate(url, groups))
        return
    with tempfile.TemporaryDirectory(prefix="bench-alerting-") as tmp:
        workdir = Path(tmp)
        print("== delay: recommendation -> Alertmanager ==")
        await delay(workdir, 10 if args.quick else 20)
        print("== rate: incident transitions -> webhook ==")
        await rate(workdir, 500 if args.quick else 2000)


if __name__ == "__main__":
    asyncio.run(main())
