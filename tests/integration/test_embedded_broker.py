"""The embedded broker: starts, creates topics, fails clearly, and never outlives its owner."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from kagent.tools.embedded import BrokerError, EmbeddedBroker
from tests.support.processes import process_alive
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


async def test_creates_topics_with_the_partitions_asked(kafka_broker: EmbeddedBroker) -> None:
    await kafka_broker.create_topics({"embedded-a": 3, "embedded-b": 7})
    await kafka_broker.create_topics({"embedded-a": 3})  # existing topics are left alone
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    await admin.start()
    try:
        described = await admin.describe_topics(["embedded-a", "embedded-b"])
    finally:
        await admin.close()
    assert {t["topic"]: len(t["partitions"]) for t in described} == {"embedded-a": 3, "embedded-b": 7}


def test_stop_ends_the_process_by_pid() -> None:
    broker = EmbeddedBroker().start()
    pid = broker.pid
    assert pid is not None and process_alive(pid)
    with socket.create_connection((broker.host, broker.port), timeout=1):
        pass
    log = broker.log_path
    assert log is not None and log.exists()
    broker.stop()
    broker.stop()  # idempotent
    assert not process_alive(pid)
    assert not log.parent.exists(), "the directory made for the broker's log outlived it"


def test_a_log_dir_given_keeps_the_log(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        pass
    assert broker.log_path is not None and broker.log_path.parent == tmp_path
    assert "listening on" in broker.log_path.read_text()


def test_a_broker_that_cannot_listen_fails_with_its_log_tail() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = EmbeddedBroker(port=taken.getsockname()[1])
        with pytest.raises(BrokerError, match="log tail"):
            broker.start(timeout=5)
    assert broker.pid is None


def test_the_broker_dies_with_a_parent_killed_without_cleanup() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time
                from kagent.tools.embedded import EmbeddedBroker
                broker = EmbeddedBroker().start()
                print(broker.pid, flush=True)
                time.sleep(600)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    broker_pid = int(parent.stdout.readline())
    assert process_alive(broker_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    wait_until(
        lambda: not process_alive(broker_pid), 10, f"broker pid {broker_pid} to exit after its parent was killed"
    )
