"""kagent's configuration: one settings object read from ``KAGENT_*`` environment variables.

Every setting is a field of :class:`Settings`; its environment variable is
``KAGENT_`` + the field name in upper case. :func:`load_settings` validates
them all at start-up and raises :class:`SettingsError` with one line naming
the variable, the value and what is allowed, also for a ``KAGENT_*`` variable
that names no setting (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["ENV_PREFIX", "Settings", "SettingsError", "Source", "load_settings"]

ENV_PREFIX = "KAGENT_"

PositiveSeconds = Annotated[float, Field(gt=0)]


class Source(str, Enum):
    """Where kagent learns about consumer groups."""

    OFFSETS_TOPIC = "offsets-topic"
    """Decode the coordinator's records from ``__consumer_offsets``."""
    ADMIN_API = "admin-api"
    """Poll ListGroups / DescribeGroups / OffsetFetch, for clusters that forbid the former."""


class SettingsError(ValueError):
    """A ``KAGENT_*`` variable is unknown or has an invalid value; the message is one line."""


class Settings(BaseModel):
    """All of kagent's settings, with their defaults; build it with :func:`load_settings`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    broker: str = "127.0.0.1:9092"
    """Bootstrap servers of the Kafka cluster, ``host:port[,host:port...]``, optionally ``kafka://``-prefixed."""

    app_id: str = Field(default="kagent", pattern=r"^[A-Za-z0-9._-]+$")
    """Faust application id: names kagent's own consumer group and internal topics."""

    source: Source = Source.OFFSETS_TOPIC
    """How consumer-group state is read: ``offsets-topic`` or ``admin-api``."""

    web_host: str = "127.0.0.1"
    """Interface the worker's web server binds to."""

    web_port: int = Field(default=6066, ge=1, le=65535)
    """Port of the worker's web server (views and, later, metrics)."""

    topic_partitions: int = Field(default=8, ge=1, le=10_000)
    """Partitions of kagent's own topics and table changelogs (they must all match to co-partition)."""

    data_dir: Path = Path(".kagent")
    """Where the worker keeps local table state."""

    session_timeout: float = Field(default=10.0, ge=1.0, le=300.0)
    """Consumer session timeout (seconds) of kagent's own group.

    Faust's default of 60 s made a worker's first join take 30 s on the
    embedded broker: Tansu holds a classic group's first JoinGroup for half
    the session timeout (measured: 2 s -> 1.0 s, 6 s -> 3.0 s, 10 s -> 5.0 s,
    20 s -> 10.0 s; heartbeat, rebalance and max-poll intervals had no effect).
    Apache Kafka does not, and 10 s was Kafka's own default before 3.0.
    """

    end_offset_interval: PositiveSeconds = 5.0
    """Seconds between ListOffsets polls of the topics the worker's groups read."""

    evaluate_interval: PositiveSeconds = 5.0
    """Seconds between skew evaluations of each group."""

    @field_validator("broker")
    @classmethod
    def _check_broker(cls, value: str) -> str:
        for server in value.removeprefix("kafka://").split(","):
            host, sep, port = server.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError("must be host:port[,host:port...], optionally prefixed kafka://")
        return value

    @property
    def bootstrap_servers(self) -> str:
        """The broker list as aiokafka takes it: ``host:port,...``."""
        return ",".join(server.strip() for server in self.broker.removeprefix("kafka://").split(","))

    @property
    def broker_url(self) -> str:
        """The broker list as Faust takes it: ``kafka://host:port;host:port``."""
        return ";".join(f"kafka://{server}" for server in self.bootstrap_servers.split(","))

    @property
    def heartbeat_interval(self) -> float:
        """Heartbeat interval of kagent's own group: a third of the session timeout, at most 3 s."""
        return min(3.0, self.session_timeout / 3)


def _env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _describe(error: Mapping[str, Any]) -> str:
    message = str(error["msg"])
    ctx = error.get("ctx") or {}
    if "expected" in ctx:
        return f"allowed: {ctx['expected']}"
    return message.removeprefix("Value error, ")


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the settings from ``environ`` (default: ``os.environ``).

    Raises :class:`SettingsError` (one line) for the first unknown ``KAGENT_*``
    variable or invalid value.
    """
    env = {variable.upper(): value for variable, value in (os.environ if environ is None else environ).items()}
    known = {_env_name(name): name for name in Settings.model_fields}
    for variable in sorted(env):
        if variable.startswith(ENV_PREFIX) and variable not in known:
            hint = difflib.get_close_matches(variable, known, n=1)
            suggestion = f"; did you mean {hint[0]}?" if hint else ""
            raise SettingsError(f"unknown setting {variable}{suggestion} (known: {', '.join(sorted(known))})")
    values = {name: env[variable] for variable, name in known.items() if variable in env}
    try:
        return Settings(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "?"
        value = values.get(field, "")
        raise SettingsError(f"invalid {_env_name(field)}={value!r}: {_describe(first)}") from None
