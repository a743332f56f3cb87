"""The ``kagent`` command line.

- ``kagent run``: kagent's main job on the embedded broker (or on ``--broker``):
  starts the broker and a worker, prints where each listens, and on Ctrl-C or
  SIGTERM stops the worker, then the broker, leaving no process behind. The
  terminal shows kagent's own lines; the logging of what runs in the command's
  own process (the simulator, its consumers, the applying assignor's feed, the
  recommendations reader: aiokafka's and kagent's loggers, Python's warnings)
  goes to the file it names, ``<data dir>/run.log`` (:func:`log_to_file`).
- ``kagent worker``: one Faust worker against ``KAGENT_BROKER``, for deployments.

Settings come from ``KAGENT_*`` variables; an invalid one exits with code 2 and
one line on stderr before anything starts.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import ClassVar

import click

from kagent.connections import ClusterUnreachable
from kagent.core.contracts import write_schemas
from kagent.settings import Settings, SettingsError, load_settings
from kagent.tools.demo import watch_recommendations
from kagent.tools.embedded import EmbeddedBroker, create_topics, die_with_parent, stop_process
from kagent.tools.operator_cli import group, groups, recommendations
from kagent.tools.simulator.cli import simulate
from kagent.tools.simulator.runner import run_simulation
from kagent.tools.simulator.scenario import Scenario, default_scenario
from kagent.tools.stopping import STOP_GRACE, stop_within

WORKER_READY_TIMEOUT = 120.0
REACH_TIMEOUT = 5.0
"""Seconds ``kagent run --broker`` waits for the cluster to answer before it gives up."""
RUN_LOG = "run.log"
"""The file, in the data directory, that ``kagent run`` sends its own process's logging to."""
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

log = logging.getLogger(__name__)


def _settings_or_exit(overrides: dict[str, str]) -> Settings:
    try:
        return load_settings({**os.environ, **overrides})
    except SettingsError as exc:
        click.echo(f"kagent: {exc}", err=True)
        raise SystemExit(2) from None


def _worker_command(log_level: str) -> list[str]:
    return [sys.executable, "-m", "faust", "-A", "kagent.app", "worker", "-l", log_level]


@contextmanager
def _interrupt_on_stop_signals() -> Iterator[None]:
    """Raise KeyboardInterrupt on SIGINT and SIGTERM for the duration, so cleanup runs.

    Installed explicitly because a process started in the background of a
    non-interactive shell inherits SIGINT as ignored.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def log_to_file(path: Path, level: str) -> Iterator[None]:
    """Send this process's logging at ``level`` (``debug``, ``info``, ...) and above, every logger's (aiokafka's
    heartbeats, the assignor feed's failures, the simulator's) and Python's warnings, to ``path`` (appended)
    for the duration, instead of the terminal: with no handler of its own, Python's logging prints warnings and
    errors to stderr, between the lines and over the live table of ``kagent run``. Restores the root logger's
    level and handlers, and the warnings' routing, on the way out."""
    root = logging.getLogger()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()


def _wait_web_ready(process: subprocess.Popen[bytes], url: str, timeout: float) -> bool:
    """Poll ``url`` until it answers 200, the process exits, or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)  # poll interval of a deadline-bounded wait
    return False


class _Commands(click.Group):
    """kagent's command group; ``pipeline`` is imported only when used, since it needs PySpark."""

    LAZY: ClassVar[dict[str, tuple[str, str, str]]] = {
        "pipeline": ("kagent.tools.pipeline.cli", "pipeline", "pipeline"),
    }
    """Command name -> (module, attribute, the package extra it needs)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.LAZY:
            return super().get_command(ctx, name)
        module, attribute, extra = self.LAZY[name]
        try:
            command: click.Command = getattr(importlib.import_module(module), attribute)
        except ImportError as exc:
            message = f"'kagent {name}' needs the {extra!r} extra: pip install 'kagent[{extra}]' ({exc})"

            def missing() -> None:
                raise click.ClickException(message)

            return click.Command(
                name,
                callback=missing,
                help=message,
                short_help=f"(needs the {extra!r} extra)",
                context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
                add_help_option=False,
            )
        return command


@click.group(cls=_Commands)
@click.version_option(package_name="kagent")
def main() -> None:
    """kagent: consumer-lag balancing agent for Kafka."""


@main.command()
@click.option("--broker", help="Bootstrap servers of an existing cluster; without it an embedded broker is started.")
@click.option(
    "--simulate/--no-simulate",
    default=None,
    help=(
        "Run the simulator's skewed, balanced and hot-partition groups, and a skewed one applying the worker's "
        "recommendations (default: on the embedded broker only)."
    ),
)
@click.option(
    "--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"])
)
def run(broker: str | None, simulate: bool | None, log_level: str) -> None:
    """Run kagent's main job: a broker (embedded unless --broker or KAGENT_BROKER), a worker and,
    on the embedded broker, the simulator; recommendations are shown as they arrive."""
    external = broker or os.environ.get("KAGENT_BROKER")
    embedded: EmbeddedBroker | None = None
    worker: subprocess.Popen[bytes] | None = None
    # Every setting checked before anything starts; the data directory is where the logs go.
    settings = _settings_or_exit({"KAGENT_BROKER": external} if external else {})
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    run_log = settings.data_dir / RUN_LOG
    with _interrupt_on_stop_signals(), log_to_file(run_log, log_level):
        try:
            if external:
                asyncio.run(_reachable_or_exit(settings))
                click.echo(f"broker: {settings.bootstrap_servers} (external)")
            else:
                embedded = EmbeddedBroker().start()
                settings = _settings_or_exit({"KAGENT_BROKER": embedded.bootstrap_servers})
                click.echo(f"broker: {embedded.bootstrap_servers} (embedded Tansu, pid {embedded.pid})")
            asyncio.run(
                create_topics(
                    settings.kafka, _own_topics(settings), replication_factor=settings.topic_replication_factor
                )
            )
            log_path = settings.data_dir / "worker.log"
            with log_path.open("ab") as log:
                worker = subprocess.Popen(
                    _worker_command(log_level),
                    env={**os.environ, **_worker_env(settings, embedded is not None)},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
            web = f"http://{settings.web_host}:{settings.web_port}/"
            click.echo(f"worker: pid {worker.pid}, web {web}, log {log_path}")
            if not _wait_web_ready(worker, web + "healthz", WORKER_READY_TIMEOUT):
                _fail_worker(worker, log_path)
            with_simulator = embedded is not None if simulate is None else simulate
            if with_simulator:
                # Its kagent group applies the recommendations of the worker started here.
                scenario = default_scenario(kagent_url=settings.worker_url)
                click.echo(f"simulator: groups {', '.join(g.group for g in scenario.groups)}")
            click.echo(f"log of this command's own process: {run_log}")
            code = asyncio.run(_watch(settings, worker, scenario if with_simulator else None))
            if code is not None:
                _fail_worker(worker, log_path, code)
        except KeyboardInterrupt:
            pass
        finally:
            if worker is not None or embedded is not None:
                click.echo("stopping...")
            if worker is not None:
                stop_process(worker, timeout=15.0)
            if embedded is not None:
                embedded.stop()
    click.echo("stopped.")


async def _reachable_or_exit(settings: Settings) -> None:
    """Return once the cluster answers; else one line on stderr and exit code 1."""
    try:
        await settings.kafka.check_reachable(REACH_TIMEOUT, quiet=True)
    except ClusterUnreachable as exc:
        click.echo(f"kagent: {exc}", err=True)
        raise SystemExit(1) from None


async def _watch(settings: Settings, worker: subprocess.Popen[bytes], scenario: Scenario | None) -> int | None:
    """Run the simulator (if any) and show recommendations until a stop signal or the worker exits.

    Returns the worker's exit code if it exited on its own, else None. After a stop signal the tasks
    get :data:`~kagent.tools.stopping.STOP_GRACE` s to stop cleanly (a second signal cuts it short),
    then are cancelled (:func:`~kagent.tools.stopping.stop_within`): a simulated member that a broker
    keeps in a rebalance does not keep the command running. An error in a task stops the others and
    is raised.
    """
    loop = asyncio.get_running_loop()
    stop, hurry = asyncio.Event(), asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            hurry.set()
        stop.set()

    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        loop.add_signal_handler(signum, on_signal)
    # Said only now that a stop signal ends the loop cleanly.
    click.echo("kagent is running; Ctrl-C stops it. Recommendations appear below as they arrive.")
    exited: list[int] = []

    async def watch_worker() -> None:
        while not stop.is_set():
            code = worker.poll()
            if code is not None:
                exited.append(code)
                stop.set()
            await asyncio.sleep(0.5)  # poll interval of the worker's liveness

    tasks = [
        asyncio.create_task(watch_worker(), name="the worker's watch"),
        asyncio.create_task(
            watch_recommendations(
                settings.kafka,
                f"{settings.app_id}-recommendations",
                stop,
                lambda text: click.echo(text, nl=False),
                live=sys.stdout.isatty(),
                api_url=settings.worker_url,
            ),
            name="the recommendations reader",
        ),
    ]
    if scenario is not None:
        tasks.append(asyncio.create_task(run_simulation(settings.kafka, scenario, stop), name="the simulator"))
    stopping = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set() and _failed(tasks) is None:
            running = [task for task in tasks if not task.done()]
            await asyncio.wait([*running, stopping], return_when=asyncio.FIRST_COMPLETED)
        stop.set()  # when a task failed, the others stop too
        late = await stop_within(tasks, hurry=hurry)
        if late:
            log.warning(
                "not stopped %.0f s after the stop signal (or at a second one), cancelled: %s", STOP_GRACE, late
            )
            click.echo(f"{', '.join(late)}: not stopped in time, cancelled")
        failed = _failed(tasks)
        if failed is not None:
            raise failed
    finally:
        stopping.cancel()
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, handler)
    return exited[0] if exited else None


def _failed(tasks: list[asyncio.Task[None]]) -> BaseException | None:
    """The error of the first of ``tasks`` (in order) that ended with one, not counting cancellation."""
    for task in tasks:
        if task.done() and not task.cancelled() and (error := task.exception()) is not None:
            return error
    return None


def _worker_env(settings: Settings, embedded: bool) -> dict[str, str]:
    """The worker's KAGENT_* overrides: the broker, and Tansu's one-record batches when embedded."""
    env = {"KAGENT_BROKER": settings.bootstrap_servers}
    if embedded:
        env["KAGENT_ONE_RECORD_BATCHES"] = "true"
    return env


main.add_command(simulate)
main.add_command(groups)
main.add_command(group)
main.add_command(recommendations)


def _own_topics(settings: Settings) -> dict[str, int]:
    """kagent's own source topics, created up front so their partitions match the tables'."""
    return {f"{settings.app_id}-derived-events": settings.topic_partitions}


def _fail_worker(worker: subprocess.Popen[bytes], log_path: Path, code: int | None = None) -> None:
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    state = f"exited with code {code}" if code is not None else "did not become ready"
    raise click.ClickException(f"the worker (pid {worker.pid}) {state}; log tail:\n{tail}")


@main.command()
@click.option(
    "--directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("tables"),
    show_default=True,
    help="Where to write the schema files.",
)
def schemas(directory: Path) -> None:
    """Write the JSON Schemas of every table value and topic record kagent writes."""
    for path in write_schemas(directory):
        click.echo(str(path))


@main.command()
@click.option(
    "--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"])
)
def worker(log_level: str) -> None:
    """Run one Faust worker against KAGENT_BROKER (the deployment entry point)."""
    _settings_or_exit({})
    os.execv(sys.executable, _worker_command(log_level))


if __name__ == "__main__":
    main()
