"""Real Prometheus and Alertmanager servers for the tests, and a scrape target serving fixed metrics.

- :func:`require_binary`: the path of a server binary (Debian's ``prometheus`` and
  ``prometheus-alertmanager`` packages, which ``tests/install-servers`` installs); without it the
  test is skipped, saying which binary and how to install it, except under ``CI=true``, where it fails.
- :class:`Prometheus` and :class:`Alertmanager`: the real binary on a free loopback port, with a
  temporary data directory and a config the test gives (or builds from a few arguments), started
  by :meth:`~_Server.start` (or ``with``), which returns once ``/-/ready`` answers 200, and stopped
  by :meth:`~_Server.stop`: SIGTERM, then SIGKILL after a bound, leaving no process. Each is
  started with ``die_with_parent``, so the kernel stops it if the test process dies first.
- :class:`MetricsTarget`: an aiohttp server on loopback (in a thread of its own) answering
  ``GET /metrics`` with :attr:`MetricsTarget.text`, a Prometheus exposition the test sets.
- :func:`promql_metric_names` and :func:`grafana_query_metric_names`: the metric names a rule's
  or a dashboard's query reads, to check them against what a worker exports.

Nothing here sleeps to synchronise: every wait is :func:`tests.support.waiting.wait_until` with a
deadline, generous because CI runs on two busy cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import pytest
import yaml

from kagent.tools.embedded import die_with_parent, free_port, stop_process
from tests.support.processes import process_alive
from tests.support.receiver import Answer, Receiver
from tests.support.waiting import wait_until

__all__ = [
    "INSTALL_COMMAND",
    "Alertmanager",
    "MetricsTarget",
    "Prometheus",
    "ServerError",
    "grafana_query_metric_names",
    "in_ci",
    "promql_metric_names",
    "require_binary",
]

INSTALL_COMMAND = "apt-get install -y prometheus prometheus-alertmanager"
"""What installs every binary :func:`require_binary` is asked for (as root; ``tests/install-servers`` runs it)."""

_PACKAGE = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "alertmanager": "prometheus-alertmanager",
    "amtool": "prometheus-alertmanager",
}
"""The Debian package each binary comes with."""

READY_TIMEOUT = 90.0
"""Seconds a server may take to answer ``/-/ready`` (Prometheus opens its TSDB first)."""

STOP_TIMEOUT = 15.0
"""Seconds a server may take to exit after SIGTERM before it is killed."""

HTTP_TIMEOUT = 10.0
"""Seconds one request to a server may take."""


class ServerError(RuntimeError):
    """A server did not start, exited, or answered a request with an error."""


def in_ci() -> bool:
    """True under ``CI=true`` (as CI services set it), where a missing server fails instead of skipping."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require_binary(name: str, *alternatives: str) -> str:
    """The path of executable ``name`` (or else of the first of ``alternatives`` found) on ``PATH``.

    Missing, the calling test is skipped with a reason naming the binary, its Debian package and
    the install command; under ``CI=true`` it fails instead, since CI installs them all.
    """
    for candidate in (name, *alternatives):
        path = shutil.which(candidate)
        if path is not None:
            return path
    package = _PACKAGE.get(name, name)
    reason = (
        f"{name} is not installed; it comes with Debian's {package} package: "
        f"{INSTALL_COMMAND} (as root; tests/install-servers does it)"
    )
    if in_ci():
        pytest.fail(f"{reason}. Under CI=true a missing server fails the test.", pytrace=False)
    pytest.skip(reason)


def _request(url: str, *, data: Any = None, timeout: float = HTTP_TIMEOUT) -> Any:
    """GET ``url`` (or POST ``data`` as JSON) and return the parsed JSON body (None if empty);
    :class:`ServerError` with the status and body for an HTTP error."""
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as error:
        raise ServerError(f"{url} answered {error.code}: {error.read().decode(errors='replace')[:2000]}") from None
    return json.loads(raw) if raw.strip() else None


def _address(target: str) -> str:
    """``host:port`` of a target given as a URL or as ``host:port``."""
    return urllib.parse.urlsplit(target).netloc if "://" in target else target


def _duration(seconds: float) -> str:
    """A Prometheus duration (whole milliseconds: ``1500ms``)."""
    return f"{max(1, round(seconds * 1000))}ms"


class _Server:
    """A server binary on a free loopback port, its config and data in a directory of its own."""

    name: str = "server"
    binaries: tuple[str, ...] = ()
    """The executable's names, the first one preferred (Debian's first)."""

    def __init__(
        self,
        config: Mapping[str, Any] | str,
        *,
        workdir: Path | None = None,
        ready_timeout: float = READY_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
    ) -> None:
        """``config``: the YAML text of the config file, or the mapping to dump as YAML. ``workdir``:
        where the config, data and log go (kept); by default a temporary directory, removed at
        :meth:`stop`."""
        self.config = config
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self._given_dir = workdir
        self._workdir: Path | None = workdir
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    # -- what a subclass gives -------------------------------------------------------------------
    def _argv(self, binary: str) -> list[str]:
        raise NotImplementedError

    # -- the process -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, no trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``: how another server's config names this one."""
        return f"127.0.0.1:{self.port}"

    @property
    def workdir(self) -> Path:
        """Where the config, the data and the log are: the given ``workdir``, or a temporary
        directory made by :meth:`start`."""
        assert self._workdir is not None, f"{self.name} was never started"
        return self._workdir

    @property
    def config_path(self) -> Path:
        return self.workdir / f"{self.name}.yml"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} was never started"
        return self.process.pid

    def start(self) -> Self:
        """Write the config, start the binary and wait until ``/-/ready`` answers 200; returns ``self``.

        Skips (fails under CI) without the binary. A port taken between choosing it and binding it
        is retried on another; any other exit, or no readiness within ``ready_timeout``, raises
        with the log's tail (and stops the process)."""
        binary = require_binary(*self.binaries)
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix=f"kagent-{self.name}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        text = self.config if isinstance(self.config, str) else yaml.safe_dump(dict(self.config), sort_keys=False)
        self.config_path.write_text(text)
        try:
            for _attempt in range(3):
                self.port = free_port()
                with self.log_path.open("ab") as log:
                    logged_before = log.tell()
                    self.process = subprocess.Popen(
                        self._argv(binary),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=self.workdir,
                        preexec_fn=die_with_parent,
                    )
                outcome = wait_until(
                    self._ready_or_exited,
                    self.ready_timeout,
                    f"{self.name} at {self.url} to answer /-/ready",
                    interval=0.1,
                    detail=self.log_tail,
                )
                if outcome == "ready":
                    return self
                code = self.process.wait()
                if b"address already in use" not in self.log_path.read_bytes()[logged_before:].lower():
                    raise ServerError(f"{self.name} exited with {code} on start-up\n{self.log_tail()}")
            raise ServerError(f"{self.name} found no free port in 3 attempts\n{self.log_tail()}")
        except BaseException:
            self.stop()
            raise

    def _ready_or_exited(self) -> str | None:
        assert self.process is not None
        if self.process.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                return "ready" if response.status == 200 else None
        except (urllib.error.URLError, OSError):  # not listening yet, or 503 while it starts
            return None

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout`` s; the exit code (None if never started).
        Afterwards no process is left, and a temporary ``workdir`` is removed."""
        code = None
        if self.process is not None:
            code = stop_process(self.process, self.stop_timeout)
            assert not process_alive(self.process.pid), f"{self.name} (pid {self.process.pid}) outlived its stop"
        if self._given_dir is None and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        return code

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None and not isinstance(exc, pytest.skip.Exception):
            print(self.log_tail(80))  # pytest shows it with the failure: the server's side of it
        self.stop()

    def log(self) -> str:
        """Everything the server has logged so far (until :meth:`stop` removes a temporary directory)."""
        if self._workdir is None or not self.log_path.exists():
            return "(no log)"
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        tail = "\n".join(self.log().splitlines()[-lines:])
        return f"--- {self.name} log (last {lines} lines) ---\n{tail}"

    # -- its HTTP API ----------------------------------------------------------------------------
    def get(self, path: str, **params: str | Sequence[str]) -> Any:
        """GET ``path`` (with query ``params``; a sequence repeats the parameter) and parse its JSON."""
        query = urllib.parse.urlencode(params, doseq=True)
        return _request(f"{self.url}{path}" + (f"?{query}" if query else ""))


class Prometheus(_Server):
    """A real Prometheus: ``Prometheus(targets=[...], rule_files=[...], alertmanagers=[...])``,
    or ``Prometheus(config)`` with a config of the test's own."""

    name = "prometheus"
    binaries = ("prometheus",)

    def __init__(
        self,
        config: Mapping[str, Any] | str | None = None,
        *,
        targets: Sequence[str] = (),
        rule_files: Sequence[str | Path] = (),
        alertmanagers: Sequence[str] = (),
        interval: float = 1.0,
        job: str = "kagent",
        workdir: Path | None = None,
        ready_timeout: float = READY_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
    ) -> None:
        """Without ``config``, one is built by :meth:`make_config` from the other arguments."""
        if config is None:
            config = self.make_config(
                targets=targets, rule_files=rule_files, alertmanagers=alertmanagers, interval=interval, job=job
            )
        super().__init__(config, workdir=workdir, ready_timeout=ready_timeout, stop_timeout=stop_timeout)

    @staticmethod
    def make_config(
        *,
        targets: Sequence[str] = (),
        rule_files: Sequence[str | Path] = (),
        alertmanagers: Sequence[str] = (),
        interval: float = 1.0,
        job: str = "kagent",
    ) -> dict[str, Any]:
        """A config scraping ``targets`` (URLs or ``host:port``, at ``/metrics``) as job ``job``,
        loading ``rule_files`` (absolute paths) and sending alerts to ``alertmanagers``, scraping
        and evaluating every ``interval`` s."""
        every = _duration(interval)
        config: dict[str, Any] = {
            "global": {"scrape_interval": every, "scrape_timeout": every, "evaluation_interval": every},
            "rule_files": [str(Path(path).resolve()) for path in rule_files],
            "scrape_configs": [
                {
                    "job_name": job,
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": [_address(target) for target in targets]}],
                }
            ],
        }
        if alertmanagers:
            config["alerting"] = {
                "alertmanagers": [
                    {"api_version": "v2", "static_configs": [{"targets": [_address(am) for am in alertmanagers]}]}
                ]
            }
        return config

    def _argv(self, binary: str) -> list[str]:
        return [
            binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address={self.address}",
            "--log.level=info",
        ]

    def _api(self, path: str, **params: str) -> Any:
        body = self.get(f"/api/v1/{path}", **params)
        if body.get("status") != "success":
            raise ServerError(f"Prometheus /api/v1/{path} failed: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now: ``[{"metric": {labels}, "value": [t, "v"]}, ...]``
        (``/api/v1/query``; a scalar or string result is a one-element list of it)."""
        data = self._api("query", query=expr)
        result = data["result"]
        return result if data["resultType"] in ("vector", "matrix") else [result]

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts pending or firing in Prometheus itself (``/api/v1/alerts``)."""
        return list(self._api("alerts")["alerts"])

    def rule_groups(self) -> list[dict[str, Any]]:
        """The loaded rule groups with each rule's health and last error (``/api/v1/rules``)."""
        return list(self._api("rules")["groups"])

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets with their health and last error (``/api/v1/targets``)."""
        return list(self._api("targets")["activeTargets"])


class Alertmanager(_Server):
    """A real Alertmanager, without gossip: ``Alertmanager(config)``; by default a config that
    routes every alert to a receiver that notifies nobody."""

    name = "alertmanager"
    binaries = ("prometheus-alertmanager", "alertmanager")

    NOBODY: Mapping[str, Any] = {
        "route": {"receiver": "nobody", "group_by": ["..."]},
        "receivers": [{"name": "nobody"}],
    }
    """The default config: alerts are kept (and shown by the API), never sent on."""

    def __init__(
        self,
        config: Mapping[str, Any] | str | None = None,
        *,
        workdir: Path | None = None,
        ready_timeout: float = READY_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
    ) -> None:
        super().__init__(
            self.NOBODY if config is None else config,
            workdir=workdir,
            ready_timeout=ready_timeout,
            stop_timeout=stop_timeout,
        )

    def _argv(self, binary: str) -> list[str]:
        return [
            binary,
            f"--config.file={self.config_path}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address={self.address}",
            "--cluster.listen-address=",  # empty: no gossip, no second port
            "--log.level=info",
        ]

    def alerts(self, **labels: str) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds (``GET /api/v2/alerts``: active, silenced and inhibited),
        those whose labels equal ``labels`` (``alertname="KagentLagSkew", group="orders"``). Each has
        ``labels``, ``annotations``, ``status`` (``state``, ``inhibitedBy``, ``silencedBy``) and
        ``receivers``."""
        filters = [f"{name}={json.dumps(value)}" for name, value in labels.items()]
        return list(self.get("/api/v2/alerts", filter=filters))

    def post_alerts(self, alerts: Sequence[Mapping[str, Any]]) -> None:
        """``POST /api/v2/alerts``: what Prometheus and kagent's sink send (``labels``, ``annotations``,
        optional ``startsAt``/``endsAt``)."""
        _request(f"{self.url}/api/v2/alerts", data=list(alerts))


class MetricsTarget(Receiver):
    """A scrape target on loopback: ``GET /metrics`` answers :attr:`text` (any other path 404).

    A :class:`~tests.support.receiver.Receiver` (aiohttp in a thread of its own, so it answers while
    the test blocks); :attr:`text` may be changed while it runs. :attr:`scrapes` counts the
    ``/metrics`` requests answered."""

    CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

    def __init__(self, text: str = "") -> None:
        super().__init__(self._exposition)
        self.text = text

    def _exposition(self, path: str, body: bytes) -> Answer:
        if path != "/metrics":
            return Answer(404)
        return Answer(200, headers={"Content-Type": self.CONTENT_TYPE}, body=self.text)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/metrics``."""
        return f"http://127.0.0.1:{self.port}/metrics"

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``: the target as a Prometheus config names it."""
        return f"127.0.0.1:{self.port}"

    @property
    def scrapes(self) -> int:
        return sum(1 for request in self.posted if request.path == "/metrics")


# -- PromQL: the metric names an expression reads ---------------------------------------------------

_PROMQL_WORDS = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
    | {"inf", "nan", "atan2"}
)
"""Bare words of PromQL that are not metric names (compared in lower case)."""

_STRING_OR_COMMENT = re.compile(r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`|#[^\n]*""")
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[[^\]]*\]\]")
_GRAFANA_PLACEHOLDER = "__grafana_variable__"
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE)
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")
_LABEL_VALUES = re.compile(r"^\s*label_values\s*\((?:(.*),)?\s*[A-Za-z_]\w*\s*\)\s*$", re.DOTALL)
_QUERY_RESULT = re.compile(r"^\s*query_result\s*\((.*)\)\s*$", re.DOTALL)


def promql_metric_names(expr: str) -> set[str]:
    """The metric names PromQL ``expr`` selects, by a crude but sound scan: every identifier
    (outside strings, comments, ``{matchers}``, ``[ranges]`` and ``by``/``without``/``on``/
    ``ignoring``/``group_*`` label lists) that is neither called (a function or an aggregation:
    followed by ``(``) nor a keyword. Extra identifiers can only make a check stricter, never hide a
    name. Grafana's ``$variables`` are allowed where a string or a range goes; anywhere else they
    come out as the name ``__grafana_variable__``, which no worker exports, so a check fails."""
    expr = _GRAFANA_VARIABLE.sub(_GRAFANA_PLACEHOLDER, expr)
    expr = _STRING_OR_COMMENT.sub(" ", expr)
    expr = _MATCHERS.sub("{}", expr)
    expr = _RANGE.sub("[]", expr)
    expr = _LABEL_LIST.sub(" ", expr)
    names = set()
    for match in _IDENTIFIER.finditer(expr):
        name, called = match.groups()
        if not called and name.lower() not in _PROMQL_WORDS:
            names.add(name)
    return names


def grafana_query_metric_names(query: str) -> set[str]:
    """:func:`promql_metric_names` of a Grafana Prometheus query: a panel's PromQL, or a template
    variable's ``label_values(expr, label)`` / ``label_values(label)`` / ``query_result(expr)``."""
    if match := _LABEL_VALUES.match(query):
        return promql_metric_names(match[1] or "")
    if match := _QUERY_RESULT.match(query):
        return promql_metric_names(match[1])
    return promql_metric_names(query)
