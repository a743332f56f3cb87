"""Shared fixtures: the embedded broker, and real kagent worker processes on it (``tests.support``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from kagent.tools.embedded import EmbeddedBroker
from tests.support.coordinator import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS
from tests.support.scheduling import CPU_HEAVY, FileScheduling, unit_of
from tests.support.worker import Worker, running_workers

settings.register_profile("kagent", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kagent")
"""Property tests judged by what they find, never by the clock: on a busy two-core machine (the suite
beside its brokers and workers) input generation ran over Hypothesis' one second and failed a test
(``test_every_strategy_assigns_validly_and_deterministically``) that found nothing wrong."""


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """One embedded Tansu broker for the whole session, stopped by pid at the end.

    ``__consumer_offsets`` is made at once, of Kafka's 50 partitions: a worker's consumer asking for it
    first would have Tansu auto-create it with 4, and every later test of the session that writes a
    group's records to its partition by Kafka's rule would find it missing (which test runs first on
    a process varies with the machine's load)."""
    with EmbeddedBroker() as broker:
        asyncio.run(broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS}))
        yield broker


@pytest.fixture
async def offsets_topic(kafka_broker: EmbeddedBroker) -> str:
    """``__consumer_offsets`` on the session broker, of Kafka's default 50 partitions (Tansu has none of its
    own: the tests write what Kafka's coordinator would)."""
    await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS})
    return OFFSETS_TOPIC


_DRILL_FIGURE = "drill figure"
"""The name of a drill's figure among its test's ``user_properties``."""


@pytest.fixture
def drill_figures(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``drill_figures(line)``: a figure a drill measured, printed in the run's summary (so CI's log has it).

    The figure travels as one of the test's ``user_properties``, which are part of its reports: under
    pytest-xdist the test runs in a worker process, and only its reports reach the process that prints
    the summary (a worker's ``config.stash`` does not)."""
    return lambda line: request.node.user_properties.append((_DRILL_FIGURE, line))


class _DrillFigures:
    """Collects the drills' figures from the tests' reports and prints them after the results."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A test's teardown report carries every property it recorded, whichever process ran it."""
        if report.when == "teardown":
            self.lines += [str(value) for name, value in report.user_properties if name == _DRILL_FIGURE]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("drill figures")
            for line in self.lines:
                terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    """Register the drills' figures' collector (in every process; only the one that prints the summary,
    the controller under pytest-xdist, shows it)."""
    config.pluginmanager.register(_DrillFigures(), "kagent-drill-figures")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The CPU-heavy drills first (:mod:`tests.support.scheduling`), the rest in the order collected."""
    items.sort(key=lambda item: unit_of(item.nodeid) != CPU_HEAVY)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> FileScheduling:
    """pytest-xdist shares the tests out a file at a time, the CPU-heavy drills as one unit
    (:mod:`tests.support.scheduling`), in the order collected (not the files with the most tests first)."""
    config.option.loadscopereorder = False
    return FileScheduling(config, log)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the item, so a fixture's teardown knows whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def start_worker(
    kafka_broker: EmbeddedBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Worker]]:
    """Factory ``start_worker(app_id, **settings)`` of real workers on the session broker;
    any still running at teardown are killed. When the test failed, each worker's log tail is
    printed (pytest shows it with the failure): the worker's side of what went wrong."""
    started: list[Worker] = []
    with running_workers(kafka_broker.bootstrap_servers, tmp_path) as start:

        def start_and_note(app_id: str, **settings: str) -> Worker:
            worker = start(app_id, **settings)
            started.append(worker)
            return worker

        yield start_and_note
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            for worker in started:
                print(worker.log_tail(150))
