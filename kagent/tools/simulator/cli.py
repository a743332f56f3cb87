"""The `simulate` command; kagent's main CLI group registers it as `kagent simulate`."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Iterable

import click
from aiokafka.structs import TopicPartition

from kagent.connections import KafkaConnection
from kagent.settings import SettingsError, load_settings
from kagent.tools.embedded import EmbeddedBroker
from kagent.tools.simulator.runner import run_simulation
from kagent.tools.simulator.scenario import Scenario, default_scenario
from kagent.tools.simulator.status import GroupRebalanced, OffsetsCommitted, SimulationEvent

__all__ = ["simulate"]

SCENARIOS = {"default": default_scenario}


def describe_partitions(partitions: Iterable[TopicPartition]) -> str:
    """`orders[0,1,2] payments[5]`: partitions grouped by topic, in order."""
    by_topic: dict[str, list[int]] = {}
    for partition in sorted(partitions):
        by_topic.setdefault(partition.topic, []).append(partition.partition)
    return " ".join(f"{topic}[{','.join(map(str, numbers))}]" for topic, numbers in by_topic.items()) or "-"


class _Printer:
    """Prints rebalances as they complete and counts commits per group."""

    def __init__(self) -> None:
        self.commits: Counter[str] = Counter()

    def __call__(self, event: SimulationEvent) -> None:
        if isinstance(event, OffsetsCommitted):
            self.commits[event.group] += 1
        elif isinstance(event, GroupRebalanced):
            click.echo(f"{event.group}: generation {event.generation} ({event.protocol}), leader {event.leader}")
            for member_id, partitions in event.assignment.items():
                click.echo(f"  {member_id}: {describe_partitions(partitions)}")


async def _simulate(kafka: KafkaConnection, scenario: Scenario, duration: float | None, records: bool) -> _Printer:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if duration is not None:
        loop.call_later(duration, stop.set)
    printer = _Printer()
    try:
        await run_simulation(kafka, scenario, stop, publish_coordinator_records=records, on_event=printer)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return printer


@click.command()
@click.option(
    "--broker",
    help="Bootstrap servers of the cluster (default: KAGENT_BROKER); without either an embedded broker is started.",
)
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Seconds to run; default: until Ctrl-C.")
@click.option(
    "--no-coordinator-records",
    is_flag=True,
    help="Do not publish __consumer_offsets records (a real Kafka broker writes its own).",
)
@click.option("--scenario", "scenario_name", type=click.Choice(sorted(SCENARIOS)), default="default", show_default=True)
def simulate(broker: str | None, duration: float | None, no_coordinator_records: bool, scenario_name: str) -> None:
    """Produce skewed keyed traffic and run consumer groups that commit offsets.

    On the embedded broker, which keeps no __consumer_offsets, it also
    publishes the records Kafka's group coordinator would write there.
    Ctrl-C or SIGTERM stops it cleanly: members commit and leave.
    """
    scenario = SCENARIOS[scenario_name]()
    external = broker or os.environ.get("KAGENT_BROKER")
    embedded: EmbeddedBroker | None = None
    if external:
        try:
            settings = load_settings({**os.environ, "KAGENT_BROKER": external})
        except SettingsError as exc:
            raise click.ClickException(str(exc)) from None
        kafka, kind = settings.kafka, "external"
    else:
        embedded = EmbeddedBroker().start()
        kafka, kind = embedded.kafka, f"embedded Tansu, pid {embedded.pid}"
    try:
        click.echo(f"broker: {kafka.bootstrap_servers} ({kind})")
        click.echo(f"scenario: {scenario_name}; groups: {', '.join(g.group for g in scenario.groups)}")
        printer = asyncio.run(_simulate(kafka, scenario, duration, not no_coordinator_records))
    finally:
        if embedded is not None:
            embedded.stop()
    for group in scenario.groups:
        click.echo(f"{group.group}: {printer.commits[group.group]} commits")
    click.echo("stopped.")
