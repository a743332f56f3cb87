"""Shared fixtures: the embedded broker, and real kagent worker processes on it (``tests.support``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kagent.tools.embedded import EmbeddedBroker
from tests.support.worker import Worker, running_workers


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """One embedded Tansu broker for the whole session, stopped by pid at the end."""
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def start_worker(kafka_broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Factory ``start_worker(app_id, **settings)`` of real workers on the session broker;
    any still running at teardown are killed."""
    with running_workers(kafka_broker.bootstrap_servers, tmp_path) as start:
        yield start
