"""Changelog records and CPU per evaluation round over groups whose state did not change.

    python benchmarks/bench_evaluation.py [--groups 1000] [--rounds 20]

The real evaluator stage (``kagent.worker.evaluator.Evaluator``) evaluates
``--groups`` held groups (3 members, 12 partitions each, lag spread evenly
and unchanging) every round, writing through a real ``ChangelogWriter`` to
the embedded broker; the first round (every group new) is set apart, and
the figures are the mean over the following rounds. What is counted is every
record the writer sends to a changelog topic.

Baseline, in the same run: the same stage made to store every evaluation's
state, as kagent did before the evaluation state lost its ``evaluated_at``
(every evaluation changed the state, so every evaluation was a write). The
baseline is that behaviour emulated on today's code, not the old code itself.
Target: 0 changelog records per round of unchanged groups.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import faust
from aiokafka.structs import TopicPartition

from kagent.core.evaluation import EvaluationState
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.snapshot import GroupSnapshot, PartitionLag
from kagent.settings import Settings
from kagent.tools.embedded import EmbeddedBroker
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.channel import Channel
from kagent.worker.evaluator import Evaluator
from kagent.worker.group_state import GroupChanged
from kagent.worker.metrics import Metrics
from kagent.worker.topology import declare

MEMBERS = 3
PARTITIONS_PER_MEMBER = 4


def snapshot(group: str) -> GroupSnapshot:
    """A balanced group: every partition 500 records behind."""
    members, lag = [], {}
    for m in range(MEMBERS):
        refs = []
        for p in range(m * PARTITIONS_PER_MEMBER, (m + 1) * PARTITIONS_PER_MEMBER):
            refs.append(PartitionRef(topic="orders", partition=p))
            lag[TopicPartition("orders", p)] = PartitionLag(
                group=group,
                topic="orders",
                partition=p,
                committed=1000,
                log_start=0,
                log_end=1500,
                offset_lag=500,
                time_lag=5.0,
                polled_at=0.0,
            )
        members.append(
            MemberAssignment(
                member_id=f"m{m}", client_id=f"c{m}", client_host="/h", topics=("orders",), partitions=tuple(refs)
            )
        )
    assignment = GroupAssigned(group=group, generation=1, protocol="range", leader="m0", members=tuple(members))
    return GroupSnapshot(
        assignment=assignment, partition_counts={"orders": MEMBERS * PARTITIONS_PER_MEMBER}, lag=lag, taken_at=0.0
    )


class UnchangingGroups:
    """A ``GroupStateReader`` over fixed snapshots: groups whose state never changes."""

    def __init__(self, count: int) -> None:
        self._snapshots = {f"group-{i:05d}": snapshot(f"group-{i:05d}") for i in range(count)}

    def held_groups(self) -> list[str]:
        return sorted(self._snapshots)

    def assignment(self, group: str) -> GroupAssigned | None:
        return self._snapshots[group].assignment

    def snapshot(self, group: str, now: float) -> GroupSnapshot | None:
        return self._snapshots[group]

    def partitions_read(self) -> list[TopicPartition]:
        return []


class WritesEveryEvaluation(Evaluator):
    """The baseline: every evaluation stores its state, as when the state carried ``evaluated_at``."""

    def _state(self, group: str) -> EvaluationState | None:
        state = super()._state(group)  # read and parsed as kagent does
        # ... then made to differ from the next state, as ``evaluated_at`` made it: a write every time.
        # (Another generation resets the hold count, which is 0 anyway for these balanced groups.)
        return None if state is None else state.model_copy(update={"generation": -1})


class CountingWriter(ChangelogWriter):
    """A changelog writer that counts the records its flushes send."""

    def __init__(self, app: faust.App) -> None:
        super().__init__(app)
        self.sent = 0

    async def flush(self) -> None:
        staged = self.staged
        await super().flush()
        self.sent += staged


async def measure(
    kind: type[Evaluator], app: faust.App, states: Any, groups: UnchangingGroups, rounds: int
) -> tuple[int, float, float]:
    """First round's records; mean records and CPU seconds of the following rounds."""
    writer = CountingWriter(app)
    evaluator = kind(
        interval=1e-6,  # every group is due every round
        policy=Settings().evaluation_policy,
        groups=groups,
        changes=Channel[GroupChanged](),
        states=states,
        recommendations=app.topic("bench-recommendations"),
        writer=writer,
        metrics=Metrics(),
    )
    await evaluator.run_due()
    first = writer.sent
    writer.sent = 0
    cpu = 0.0
    for _ in range(rounds):
        started = time.process_time()
        evaluated = await evaluator.run_due()
        cpu += time.process_time() - started
        assert evaluated == len(groups.held_groups()), evaluated
    return first, writer.sent / rounds, cpu / rounds


async def main(count: int, rounds: int) -> None:
    with EmbeddedBroker() as broker:
        settings = Settings(broker=broker.bootstrap_servers, app_id="bench-evaluation")
        app = faust.App(settings.app_id, **settings.kafka.faust_options(), store="memory://")
        topology = declare(app, settings)
        await broker.create_topics({topology.evaluation_state.changelog_topic.get_topic_name(): 8})
        await app.producer.start()
        try:
            groups = UnchangingGroups(count)
            results = {
                "kagent (writes on change)": await measure(Evaluator, app, topology.evaluation_state, groups, rounds),
            }
            topology.evaluation_state.data.clear()
            results["baseline (writes every evaluation)"] = await measure(
                WritesEveryEvaluation, app, topology.evaluation_state, groups, rounds
            )
        finally:
            await app.producer.stop()
    print(
        f"evaluation rounds over {count:,} unchanged groups ({MEMBERS} members, "
        f"{MEMBERS * PARTITIONS_PER_MEMBER} partitions each), mean of {rounds} rounds after the first"
    )
    print(f"{'':38} {'first round':>12} {'records/round':>14} {'CPU ms/round':>13}")
    for name, (first, per_round, cpu) in results.items():
        print(f"{name:38} {first:>12,} {per_round:>14,.1f} {cpu * 1000:>13.1f}")
    ours, base = results["kagent (writes on change)"], results["baseline (writes every evaluation)"]
    print(f"CPU per round, kagent / baseline: {ours[2] / base[2]:.2f}")
    print(f"target: 0 changelog records per round -> {'met' if ours[1] == 0 else 'MISSED'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.groups, arguments.rounds))
