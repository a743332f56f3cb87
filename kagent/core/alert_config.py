"""The alerting file: which sinks incident transitions go to, and how deliveries are retried.

``KAGENT_ALERTS_CONFIG`` names a YAML file (durations in seconds)::

    retry:                               # optional; these are the defaults
      initial_backoff: 0.5
      max_backoff: 30
      multiplier: 2
      jitter: 0.2                        # fraction of each delay drawn at random
      timeout: 10                        # seconds per HTTP request
      max_retry_after: 300               # the longest Retry-After honoured
    sinks:                               # at least one
      - name: alertmanager               # unique; names the sink in metrics and logs
        type: alertmanager
        url: http://alertmanager:9093    # base URL; the sink POSTs to <url>/api/v2/alerts
        resend_interval: 60              # open incidents are re-sent this often (default 60)
        ends_after: 300                  # endsAt = now + this while open; >= 2 x resend_interval (default 300)
        filter: {groups: "^payments-", kinds: [lag-skew, stop], min_severity: warning}
        headers: {Authorization: "Bearer ${AM_TOKEN}"}
      - name: slack
        type: webhook
        url: ${SLACK_WEBHOOK_URL}
        template: slack                  # json (default) | slack | teams
        # or open_template: open.j2 and resolve_template: resolve.j2 (relative to this file's folder)
      - name: pagerduty
        type: pagerduty
        routing_key: ${PD_ROUTING_KEY}   # or routing_key_file: /run/secrets/pd
        url: https://events.pagerduty.com/v2/enqueue   # the default

Every sink may have a ``filter`` (:class:`SinkFilter`; without one it takes
every incident) and ``headers`` (added to each request). ``${NAME}`` in any
string value is the environment variable NAME, read at load (``$${`` is a
literal ``${``); an unset one is an error. Top-level keys starting with
``x-`` are ignored: a place for YAML anchors that sinks merge (``<<: *am``).

:func:`load_alerts_config` reads the file, and the template and key files it
names, once. Every problem raises :class:`AlertsConfigError`, one line naming
the file, the line and the field, such as ``alerts.yaml:7: sinks[1].url:
Input should be a valid URL, relative URL without a base``.

No I/O but in :func:`load_alerts_config` and the files a configuration names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, cast

import yaml  # type: ignore[import-untyped, unused-ignore]
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    HttpUrl,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from kagent.core.alert_payloads import WebhookFormat, compile_template
from kagent.core.backoff import RetryPolicy
from kagent.core.incidents import Incident, IncidentKind, Severity

__all__ = [
    "PAGERDUTY_URL",
    "SEVERITY_ORDER",
    "SINK_TYPES",
    "AlertmanagerSinkConfig",
    "AlertsConfig",
    "AlertsConfigError",
    "PagerDutySinkConfig",
    "SecretFile",
    "SinkConfig",
    "SinkFilter",
    "TemplateFile",
    "WebhookSinkConfig",
    "load_alerts_config",
    "parse_alerts_config",
]

PAGERDUTY_URL = "https://events.pagerduty.com/v2/enqueue"
"""PagerDuty's Events API v2 endpoint: a PagerDuty sink's default ``url``."""

SEVERITY_ORDER: Mapping[Severity, int] = {
    Severity.INFO: 0,
    Severity.WARNING: 1,
    Severity.ERROR: 2,
    Severity.CRITICAL: 3,
}
"""Severities from the least to the most severe, for :attr:`SinkFilter.min_severity`."""

SINK_TYPES = ("alertmanager", "webhook", "pagerduty")
"""The sinks' ``type`` values, in the order error messages list them."""

_AT = "kagent_at"
"""The pydantic error type of this module's cross-field checks: ``ctx["at"]`` is the field it is about,
below the model that raised it."""


class AlertsConfigError(ValueError):
    """The alerting file cannot be used; the message is one line: ``<file>:<line>: <field>: <problem>``."""


def _at(field: str, message: str) -> PydanticCustomError:
    """A validation error about ``field`` of the model raising it (so the message names that field's line)."""
    return PydanticCustomError(_AT, "{field}: {message}", {"at": field, "field": field, "message": message})


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


def _compile_groups(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
    return value


class SinkFilter(_Config):
    """Which incidents a sink takes; every condition must hold. Without a filter, a sink takes them all."""

    groups: Annotated[re.Pattern[str] | None, BeforeValidator(_compile_groups)] = None
    """A regular expression ``re.search``-ed in the consumer group's name; None: every group."""
    kinds: tuple[IncidentKind, ...] | None = Field(default=None, min_length=1)
    """The incident kinds taken; None: every kind."""
    min_severity: Severity = Severity.INFO
    """The least severe incident taken (info < warning < error < critical)."""

    def matches(self, incident: Incident) -> bool:
        """Whether the sink takes ``incident``."""
        return (
            (self.groups is None or self.groups.search(incident.group) is not None)
            and (self.kinds is None or incident.kind in self.kinds)
            and SEVERITY_ORDER[incident.severity] >= SEVERITY_ORDER[self.min_severity]
        )


def _relative_to_config(value: str | Path, info: ValidationInfo) -> Path:
    """``value`` as a path; a relative one is relative to the alerting file's folder (``context["base_dir"]``)."""
    path = Path(value).expanduser()
    base_dir = (info.context or {}).get("base_dir")
    return path if path.is_absolute() or base_dir is None else Path(base_dir) / path


class TemplateFile(NamedTuple):
    """A webhook template file, read and compiled at load."""

    path: Path
    source: str


def _read_template(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, str | Path):
        return value
    path = _relative_to_config(value, info)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the template {path}: {_reason(exc)}") from None
    compile_template(source, path.name)  # a ValueError naming the template's line
    return TemplateFile(path, source)


class SecretFile(NamedTuple):
    """A file holding a secret (a PagerDuty routing key), read at load; the secret is stripped."""

    path: Path
    secret: SecretStr


def _read_secret(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, str | Path):
        return value
    path = _relative_to_config(value, info)
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {_reason(exc)}") from None
    if not secret:
        raise ValueError(f"{path} is empty")
    return SecretFile(path, SecretStr(secret))


class _SinkConfig(_Config):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """Unique among the sinks; the ``sink`` label of the alerting metrics and the name in logs."""
    filter: SinkFilter = SinkFilter()
    """Which incidents it takes; by default every one."""
    headers: dict[str, str] = {}
    """HTTP headers added to each request (``Authorization``, say), after the sink's own (``Content-Type``)."""

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if "\r" in value or "\n" in value:
                raise ValueError(f"the value of header {name!r} has a line break")
        return headers


class AlertmanagerSinkConfig(_SinkConfig):
    """A Prometheus Alertmanager: each transition is POSTed to ``<url>/api/v2/alerts`` (API v2), and the
    open incidents are POSTed again every ``resend_interval``, since Alertmanager forgets an alert at its
    ``endsAt``."""

    type: Literal["alertmanager"]
    url: HttpUrl
    """The base URL (``http://alertmanager:9093``, or with a path prefix)."""
    resend_interval: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    """Seconds between two re-sends of the open incidents."""
    ends_after: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    """An open incident's alert has ``endsAt`` this many seconds after it is sent: it resolves by itself
    that long after kagent stops re-sending it. At least ``2 x resend_interval``, so that one lost re-send
    does not resolve it."""

    @model_validator(mode="after")
    def _outlives_resends(self) -> AlertmanagerSinkConfig:
        if self.ends_after < 2 * self.resend_interval:
            raise _at(
                "ends_after",
                f"must be at least 2 x resend_interval ({2 * self.resend_interval:g} s), not {self.ends_after:g}",
            )
        return self

    @property
    def alerts_url(self) -> str:
        """Where alerts are POSTed: ``<url>/api/v2/alerts``."""
        return f"{str(self.url).rstrip('/')}/api/v2/alerts"


class WebhookSinkConfig(_SinkConfig):
    """Any HTTP endpoint: each transition is POSTed to ``url``, its body a built-in format (``template``)
    or the operator's own templates (``open_template`` for open and update, ``resolve_template`` for
    resolve: both or neither, and then no ``template``)."""

    type: Literal["webhook"]
    url: HttpUrl
    template: WebhookFormat = WebhookFormat.JSON
    """The built-in body format: ``json`` (the transition record), ``slack`` or ``teams``."""
    open_template: Annotated[TemplateFile | None, BeforeValidator(_read_template)] = None
    """A Jinja2 template file (relative to the alerting file's folder) for opens and updates."""
    resolve_template: Annotated[TemplateFile | None, BeforeValidator(_read_template)] = None
    """A Jinja2 template file for resolves."""

    @model_validator(mode="after")
    def _one_kind_of_template(self) -> WebhookSinkConfig:
        if (self.open_template is None) != (self.resolve_template is None):
            missing = "resolve_template" if self.resolve_template is None else "open_template"
            raise _at(missing, "open_template and resolve_template go together: set both or neither")
        if self.open_template is not None and "template" in self.model_fields_set:
            raise _at("template", "set either template or open_template and resolve_template, not both")
        return self


class PagerDutySinkConfig(_SinkConfig):
    """PagerDuty's Events API v2: each transition is POSTed to ``url`` as an event of the integration whose
    key is ``routing_key`` (or the content of ``routing_key_file``: one of the two)."""

    type: Literal["pagerduty"]
    routing_key: SecretStr | None = Field(default=None, min_length=1)
    """The Events API v2 integration key."""
    routing_key_file: Annotated[SecretFile | None, BeforeValidator(_read_secret)] = None
    """A file holding the key (a mounted secret, say), read at load; relative to the alerting file's folder."""
    url: HttpUrl = HttpUrl(PAGERDUTY_URL)

    @model_validator(mode="after")
    def _one_key(self) -> PagerDutySinkConfig:
        if (self.routing_key is None) == (self.routing_key_file is None):
            raise _at("routing_key", "set either routing_key or routing_key_file (one of them)")
        return self

    @property
    def key(self) -> str:
        """The routing key, from ``routing_key`` or ``routing_key_file``."""
        secret = self.routing_key if self.routing_key is not None else cast(SecretFile, self.routing_key_file).secret
        return secret.get_secret_value()


SinkConfig = Annotated[
    AlertmanagerSinkConfig | WebhookSinkConfig | PagerDutySinkConfig,
    Field(discriminator="type"),
]
"""One sink of the alerting file, by its ``type``."""


class AlertsConfig(_Config):
    """The alerting file (module docstring): the retry policy and the sinks."""

    retry: RetryPolicy = RetryPolicy()
    sinks: tuple[SinkConfig, ...] = Field(min_length=1)
    """The sinks, in file order; names unique."""

    @model_validator(mode="after")
    def _unique_names(self) -> AlertsConfig:
        first: dict[str, int] = {}
        for index, sink in enumerate(self.sinks):
            if sink.name in first:
                raise _at(f"sinks[{index}].name", f"{sink.name!r} is already the name of sinks[{first[sink.name]}]")
            first[sink.name] = index
        return self

    def routes(self, incident: Incident) -> list[SinkConfig]:
        """The sinks whose filter takes ``incident``, in file order."""
        return [sink for sink in self.sinks if sink.filter.matches(incident)]


# -- loading -------------------------------------------------------------------------------------


def load_alerts_config(path: Path, environ: Mapping[str, str] | None = None) -> AlertsConfig:
    """The alerting file at ``path``, with ``${NAME}`` taken from ``environ`` (default: ``os.environ``).

    Relative template and key files are read from the file's folder, now.
    Raises :class:`AlertsConfigError` (see :func:`parse_alerts_config`), also
    when the file cannot be read.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AlertsConfigError(f"{path}: cannot read the alerting file: {_reason(exc)}") from None
    return parse_alerts_config(text, str(path), path.parent, environ)


def parse_alerts_config(
    text: str, source: str, base_dir: Path, environ: Mapping[str, str] | None = None
) -> AlertsConfig:
    """The alerting file whose content is ``text``; ``source`` names it in messages.

    ``${NAME}`` in string values is replaced from ``environ`` (default:
    ``os.environ``) before validation; relative files are under ``base_dir``.
    Raises :class:`AlertsConfigError` ``<source>:<line>: <field>: <problem>``
    (one line) for the first problem in file order, with `` (and N more
    problems)`` when there are others: YAML syntax (at the error's line; no
    field), a duplicate key, an unset environment variable, and every
    validation error (at the line of the field's value, or of its mapping
    when the field is missing).
    """
    if environ is None:
        environ = os.environ
    lines = _Lines(source)
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is not None:
                _refuse_duplicate_keys(root, (), lines, set())
            data = loader.construct_document(root) if root is not None else {}
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = ": ".join(part for part in (exc.context, exc.problem) if part)
        raise AlertsConfigError(f"{lines.at(mark)}: {_one_line(problem or 'invalid YAML')}") from None
    except yaml.YAMLError as exc:
        raise AlertsConfigError(f"{source}: {_one_line(str(exc))}") from None
    if root is not None:
        _index(root, (), lines, set())
        data = _expand(data, (), environ, lines)
    if isinstance(data, dict):  # extension keys: a place for YAML anchors (x-defaults: &defaults ...)
        data = {key: value for key, value in data.items() if not (isinstance(key, str) and key.startswith("x-"))}
    try:
        return AlertsConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise AlertsConfigError(_describe(exc, data, lines)) from None


_Path = tuple[str | int, ...]


class _Lines:
    """Where each value of the document is: a map from its path to its YAML node's first line."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: dict[_Path, int] = {}

    def at(self, mark: Any) -> str:
        return f"{self.source}:{mark.line + 1}" if mark is not None else self.source

    def line(self, path: _Path) -> int:
        """The line of ``path``, or of its nearest ancestor in the document."""
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path, 1)


def _key(node: Any) -> Any:
    return node.value if isinstance(node, yaml.ScalarNode) else str(node.value)


def _refuse_duplicate_keys(node: Any, path: _Path, lines: _Lines, ancestors: set[int]) -> None:
    """Raise on a key given twice in one mapping (PyYAML keeps the last silently). Run before the document
    is constructed, so that a key overriding one a merge (``<<: *defaults``) brings in is not refused."""
    if id(node) in ancestors:  # a recursive alias
        return
    ancestors = ancestors | {id(node)}
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = _key(key_node)
            if key in seen:
                raise AlertsConfigError(
                    f"{lines.source}:{key_node.start_mark.line + 1}: {_dotted((*path, key))}: duplicate key"
                )
            seen.add(key)
            _refuse_duplicate_keys(value_node, (*path, key), lines, ancestors)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _refuse_duplicate_keys(item, (*path, index), lines, ancestors)


def _index(node: Any, path: _Path, lines: _Lines, ancestors: set[int]) -> None:
    """Record the line of every node under ``node``; run after construction, which flattens merge keys."""
    if id(node) in ancestors:
        return
    ancestors = ancestors | {id(node)}
    lines.lines[path] = node.start_mark.line + 1  # a key given after a merge overrides it: its line wins
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            _index(value_node, (*path, _key(key_node)), lines, ancestors)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index(item, (*path, index), lines, ancestors)


_REFERENCE = re.compile(r"\$(\$?)\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _expand(value: Any, path: _Path, environ: Mapping[str, str], lines: _Lines) -> Any:
    """``value`` with ``${NAME}`` replaced in every string in it."""
    if isinstance(value, dict):
        return {key: _expand(item, (*path, key), environ, lines) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item, (*path, index), environ, lines) for index, item in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def substitute(match: re.Match[str]) -> str:
        escaped, name = match.groups()
        if escaped:
            return "${" + name + "}"
        problem = None
        if not _NAME.fullmatch(name):
            problem = f"${{{name}}} is not an environment variable reference (${{NAME}}, NAME of letters, digits, _)"
        elif name not in environ:
            problem = f"environment variable {name} is not set"
        if problem is not None:
            raise AlertsConfigError(f"{lines.source}:{lines.line(path)}: {_dotted(path)}: {problem}")
        return environ[name]

    return _REFERENCE.sub(substitute, value)


def _describe(error: ValidationError, data: Any, lines: _Lines) -> str:
    """The first of ``error``'s problems in file order, as one line, counting the others."""
    problems = error.errors()
    # A list whose items failed is also too short "after validation": only the items' problems count then.
    paths = [_document_path(problem["loc"], data) for problem in problems]
    failed = [path for problem, path in zip(problems, paths, strict=True) if problem["type"] != "too_short"]
    problems = [
        problem
        for problem, path in zip(problems, paths, strict=True)
        if problem["type"] != "too_short" or not any(other[: len(path)] == path for other in failed)
    ]
    described = sorted((_problem(problem, data, lines) for problem in problems), key=lambda p: p[0])
    line, text = described[0]
    more = f" (and {len(described) - 1} more problem{'' if len(described) == 2 else 's'})" if len(described) > 1 else ""
    return f"{lines.source}:{line}: {text}{more}"


def _problem(problem: Any, data: Any, lines: _Lines) -> tuple[int, str]:
    path = _document_path(problem["loc"], data)
    kind, ctx = problem["type"], problem.get("ctx") or {}
    if kind == _AT:
        path = (*path, *_parse_dotted(ctx["at"]))
        return lines.line(path), f"{_dotted(path)}: {_one_line(str(ctx['message']))}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        path = (*path, "type")
        tag = ctx.get("tag")
        what = f"unknown sink type {tag!r}" if kind == "union_tag_invalid" else "missing sink type"
        return lines.line(path), f"{_dotted(path)}: {what} ({', '.join(SINK_TYPES)})"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if kind == "model_type" and not path:
        message = f"the alerting file is a mapping (retry:, sinks:), not {type(data).__name__}"
    elif kind == "missing":
        message = "missing (required)"
    elif kind == "too_short" and path == ("sinks",):
        message = "at least one sink is needed"
    return lines.line(path), f"{_dotted(path)}: {_one_line(message)}"


def _document_path(loc: tuple[str | int, ...], data: Any) -> _Path:
    """``loc`` (pydantic's) as a path in the document: without the sink-type tags a discriminated union adds."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part not in node and part in SINK_TYPES:
            continue  # the union's tag, not a key
        path.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(path)


def _dotted(path: _Path) -> str:
    """``sinks[1].url``; ``(top level)`` for the document itself."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _parse_dotted(text: str) -> _Path:
    """The path ``_dotted`` wrote."""
    return tuple(int(part) if part.isdigit() else part for part in re.findall(r"[^.\[\]]+", text))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return _one_line(str(exc))
