"""``kagent run`` and ``kagent worker`` as a user runs them."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from kagent.tools.embedded import free_port
from tests.support.processes import process_alive
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.worker import kagent_env

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_run_starts_broker_and_worker_and_stops_both(tmp_path: Path, stop_signal: signal.Signals) -> None:
    web_port = free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "kagent.tools.cli", "run", "--no-simulate"],
        env=kagent_env(web_port=str(web_port), session_timeout="2", data_dir=str(tmp_path / "data")),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.stdout is not None
    lines: list[str] = []
    try:
        for line in run.stdout:
            lines.append(line)
            if "Ctrl-C stops it" in line:
                break
        output = "".join(lines)
        broker = re.search(r"broker: 127\.0\.0\.1:(\d+) \(embedded Tansu, pid (\d+)\)", output)
        worker = re.search(r"worker: pid (\d+), web (http://\S+)", output)
        assert broker and worker, output
        broker_pid, worker_pid = int(broker[2]), int(worker[1])
        assert process_alive(broker_pid) and process_alive(worker_pid)
        assert get_json(f"http://127.0.0.1:{web_port}/api/groups?scope=local")["groups"] == []

        run.send_signal(stop_signal)
        rest, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output + rest
    assert rest.strip().endswith("stopped.")
    assert not process_alive(broker_pid)
    assert not process_alive(worker_pid)


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "kagent.tools.cli", "run"],
        [sys.executable, "-m", "kagent.tools.cli", "worker"],
        [sys.executable, "-m", "faust", "-A", "kagent.app", "worker"],
    ],
    ids=["kagent run", "kagent worker", "faust worker"],
)
def test_a_bad_setting_stops_start_up_with_one_line(command: list[str], tmp_path: Path) -> None:
    result = subprocess.run(
        command,
        env=kagent_env(evaluate_interval="soon"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "kagent: invalid KAGENT_EVALUATE_INTERVAL='soon': Input should be a valid number, "
        "unable to parse string as a number"
    ]
    assert not (tmp_path / ".kagent").exists()  # nothing was started or written


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "kagent.tools.cli", "worker"],
        [sys.executable, "-m", "faust", "-A", "kagent.app", "worker"],
    ],
    ids=["kagent worker", "faust worker"],
)
def test_a_bad_alerting_file_stops_start_up_with_one_line_naming_file_line_and_field(
    command: list[str], tmp_path: Path
) -> None:
    config = tmp_path / "alerts.yaml"
    config.write_text("sinks:\n  - name: am\n    type: alertmanager\n    url: not a url\n")
    result = subprocess.run(
        command, env=kagent_env(alerts_config=str(config)), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"kagent: invalid KAGENT_ALERTS_CONFIG: {config}:4: sinks[0].url: "), line
    assert not (tmp_path / ".kagent").exists()


def test_run_with_an_unreachable_broker_says_so_in_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    result = subprocess.run(
        [sys.executable, "-m", "kagent.tools.cli", "run", "--broker", f"127.0.0.1:{port}"],
        env=kagent_env(data_dir=str(tmp_path / "data")),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"kagent: cannot reach the Kafka cluster at 127.0.0.1:{port} within 5 s (no broker accepted a connection)"
    ]


def test_a_worker_without_its_broker_exits_with_one_error_line_and_no_traceback(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    result = subprocess.run(
        [sys.executable, "-m", "kagent.tools.cli", "worker"],
        env=kagent_env(broker=f"127.0.0.1:{port}", web_port=str(free_port()), data_dir=str(tmp_path)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    errors = [line for line in output.splitlines() if "kagent: cannot reach the Kafka cluster" in line]
    assert len(errors) == 1, output[-3000:]
    assert f"127.0.0.1:{port} within 15 s (no broker accepted a connection); not starting" in errors[0]


def test_worker_command_runs_the_faust_worker(tmp_path: Path) -> None:
    """``kagent worker`` execs the same Faust worker the tests run; it answers on its web port."""
    web_port = free_port()
    from kagent.tools.embedded import EmbeddedBroker

    log = tmp_path / "worker.log"
    with EmbeddedBroker() as broker, log.open("wb") as output:
        worker = subprocess.Popen(
            [sys.executable, "-m", "kagent.tools.cli", "worker"],
            env=kagent_env(
                broker=broker.bootstrap_servers, web_port=str(web_port), session_timeout="2", data_dir=str(tmp_path)
            ),
            cwd=tmp_path,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: get_json(f"http://127.0.0.1:{web_port}/healthz"), 60, "the worker's web view")
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(30) == 0, log.read_text(errors="replace")[-4000:]
        finally:
            if worker.poll() is None:
                worker.kill()


def test_run_shows_the_first_recommendation_within_a_minute_and_the_hot_partition_group_its_own_kind(
    tmp_path: Path,
) -> None:
    """The README's main command as a new user meets it: broker, simulator and worker, defaults unchanged.
    The skewed group's rebalance comes first, within a minute; the hot group (``clicks-processors``, whose
    partition 0 is written faster than any of its members reads) gets a ``hot-partition`` recommendation
    that moves nothing, and nothing else."""
    run = subprocess.Popen(
        [sys.executable, "-m", "kagent.tools.cli", "run"],
        env=kagent_env(web_port=str(free_port()), data_dir=str(tmp_path / "data")),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.stdout is not None
    lines: list[str] = []
    arrived: dict[str, float] = {}  # the first line starting with each prefix -> seconds after the start
    started = time.monotonic()

    def read(stdout: IO[str]) -> None:
        for line in stdout:
            lines.append(line)
            for prefix in (ORDERS, HOT):
                if line.startswith(prefix):
                    arrived.setdefault(prefix, time.monotonic() - started)

    reader = threading.Thread(target=read, args=(run.stdout,), daemon=True)
    reader.start()
    try:
        wait_until(lambda: ORDERS in arrived, 60, "the skewed group's recommendation", interval=0.5)
        wait_until(
            lambda: HOT in arrived,
            HOT_DEADLINE,
            "the hot group's recommendation",
            interval=0.5,
            detail=lambda: "".join(lines),
        )
        run.send_signal(signal.SIGINT)
        run.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        if run.poll() is None:
            run.kill()
    output = "".join(lines)
    assert arrived[ORDERS] < 60, f"first recommendation after {arrived[ORDERS]:.0f} s"
    [orders] = [line for line in lines if line.startswith(ORDERS)][:1]
    assert "range -> lag-sticky): rebalance, " in orders
    assert "recommendation for payments-processors" not in output  # the balanced group gets none
    hot = [line for line in lines if line.startswith(HOT)]
    assert hot and all("roundrobin -> lag-sticky): hot-partition, " in line for line in hot), output
    # It moves nothing and names the partition, its rate and the fastest member's, as the scenario makes them:
    # partition 0 at about 33 records/s, members of at most 20 records/s.
    figures = re.search(
        r"no moves: hot partition clicks-0 written at ([\d.]+)/s .*the fastest member reads ([\d.]+)/s", hot[0]
    )
    assert figures, hot[0]
    written, fastest = float(figures[1]), float(figures[2])
    assert 20 < written < 45 and 0 < fastest <= 22 and written > fastest, hot[0]
    assert run.returncode == 0 and output.strip().endswith("stopped."), output

    # The terminal (stdout and stderr both) shows kagent's own lines only: no library's log line, such as
    # aiokafka's "Heartbeat failed for group ..." or the assignor feed's "HTTP 503 ...". They are in the log
    # file the command names.
    foreign = [line for line in output.splitlines() if not KAGENT_RUN_LINE.match(line)]
    assert not foreign, f"lines on the terminal that are not kagent run's own: {foreign}"
    named = re.search(r"^log of this command's own process: (\S+)$", output, re.MULTILINE)
    assert named, output
    run_log = Path(named[1])
    assert run_log == tmp_path / "data" / "run.log"
    logged = run_log.read_text()
    assert re.search(r"^\S+ \S+ INFO aiokafka\.consumer\.\w+: ", logged, re.MULTILINE), logged[:2000]


KAGENT_RUN_LINE = re.compile(
    r"^(broker: .+ \((embedded Tansu, pid \d+|external)\)"
    r"|worker: pid \d+, web \S+, log \S+"
    r"|simulator: groups [\w, -]+"
    r"|log of this command's own process: \S+"
    r"|kagent is running; Ctrl-C stops it\. Recommendations appear below as they arrive\."
    r"|recommendation for \S+ \(generation .+"
    r"|stopping\.\.\."
    r"|stopped\.)$"
)
"""Every line ``kagent run`` writes on a terminal that is not a live table (a pipe, as here)."""

ORDERS = "recommendation for orders-processors "
HOT = "recommendation for clicks-processors "
HOT_DEADLINE = 150.0
"""Seconds after the skewed group's for the hot group's recommendation: 4-6 s later when measured on a
quiet machine (its members must first read long enough to show their pace, and the worker's hold of 3
evaluations 5 s apart must pass), with room for a busy two-core CI machine."""
