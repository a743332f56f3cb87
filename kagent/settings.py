"""kagent's configuration: one settings object read from ``KAGENT_*`` environment variables.

Every setting is a field of :class:`Settings`; its environment variable is
``KAGENT_`` + the field name in upper case. :func:`load_settings` validates
them all at start-up and raises :class:`SettingsError` with one line naming
the variable, the value and what is allowed, also for a ``KAGENT_*`` variable
that names no setting (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import difflib
import functools
import os
import socket
import ssl
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from kagent.connections import KafkaConnection
from kagent.core.alert_config import AlertsConfig, AlertsConfigError, load_alerts_config
from kagent.core.assignors import STRATEGIES
from kagent.core.policy import EvaluationPolicy, LagUnit, SkewMetric
from kagent.security import OAuthProvider, SaslMechanism, Security, SecurityProtocol

__all__ = [
    "ENV_PREFIX",
    "Codec",
    "LagUnit",
    "MetricsGranularity",
    "Settings",
    "SettingsError",
    "SkewMetric",
    "Source",
    "load_settings",
]

ENV_PREFIX = "KAGENT_"

PositiveSeconds = Annotated[float, Field(gt=0)]


class Source(str, Enum):
    """Where kagent learns about consumer groups."""

    OFFSETS_TOPIC = "offsets-topic"
    """Decode the coordinator's records from ``__consumer_offsets``."""
    ADMIN_API = "admin-api"
    """Poll ListGroups / DescribeGroups / OffsetFetch, for clusters that forbid the former."""


class Codec(str, Enum):
    """Which twins run: the decoders of ``__consumer_offsets`` records (``kagent.core.consumer_offsets._native``)
    and the hot loops of the source, storage, the scrape and the API (``kagent.core.lag_twins``)."""

    COMPILED = "compiled"
    """The Cython twins built at install; a function without a built twin runs in Python."""
    PYTHON = "python"
    """The Python functions only: the generated decoders and the loops as written."""


class MetricsGranularity(str, Enum):
    """How fine the lag series in kafka-lag-exporter's names are (see :mod:`kagent.worker.lag_exporter`)."""

    PARTITION = "partition"
    TOPIC = "topic"
    GROUP = "group"


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

    topic_replication_factor: int = Field(default=1, ge=1, le=32_767)
    """Replication factor of the topics kagent creates (its own topics, the tables' changelogs, Faust's
    assignor topic): 1 suits the embedded broker and a one-broker cluster; a production cluster wants its
    usual 3 (some, Confluent Cloud among them, refuse anything else). Topics that already exist are
    left as they are."""

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

    one_record_batches: bool = False
    """Make every record the worker produces a batch of its own.

    Needed on brokers whose ListOffsets(latest) answers the partition's last
    batch's base offset + 1 instead of its log end, as Tansu (the embedded
    broker) does: Faust recovers a table by reading its changelog up to that
    offset, and would stop short of the last records of a batch. ``kagent run``
    sets it for the embedded broker.
    """

    codec: Codec = Codec.COMPILED
    """Which twins run (the ``__consumer_offsets`` decoders and the hot loops): ``compiled`` or ``python``.
    Only the environment sets it: each module of twins reads it when it is imported."""

    end_offset_interval: PositiveSeconds = 5.0
    """Seconds between ListOffsets polls of the topics the worker's groups read."""

    stall_after: float = Field(default=60.0, ge=1.0)
    """Seconds a stage may have records waiting and apply none before it counts as stalled
    (logged as an error, counted, and the worker's readiness turns false)."""

    evaluate_interval: PositiveSeconds = 5.0
    """Seconds between skew evaluations of each group."""

    lag_unit: LagUnit = LagUnit.MESSAGES
    """What a member's lag is measured in: ``messages`` (offset lag) or ``seconds`` (time lag)."""

    skew_metric: SkewMetric = SkewMetric.PEAK_TO_MEAN
    """The skew that triggers: ``peak-to-mean``, ``cv`` (coefficient of variation), ``gini`` or ``range``."""

    skew_threshold: float = Field(default=1.5, gt=0)
    """A group triggers when its skew is at least this (in the unit of ``skew_metric``)."""

    min_total_lag: float = Field(default=1000, ge=0)
    """A group triggers only when its members' lag adds up to at least this (in ``lag_unit``)."""

    min_improvement: float = Field(default=0.2, ge=0, lt=1)
    """The strategy must lower the largest member lag by at least this fraction."""

    hold_evaluations: int = Field(default=3, ge=1)
    """Consecutive evaluations the trigger must hold before a recommendation is sent."""

    hysteresis: float = Field(default=0.8, gt=0, le=1)
    """After a recommendation, the skew must fall below threshold x this before a group can trigger again."""

    cooldown: float = Field(default=300.0, ge=0)
    """Seconds after a recommendation before the same group can trigger again."""

    strategy: str = "lag-sticky"
    """The assignment strategy recommendations are computed with."""

    scale_headroom: float | None = Field(default=0.2, ge=0, le=10)
    """Capacity to spare above the producers' rate when a ``scale`` recommendation counts the members a
    group needs (0.2: 20 %). Empty turns ``scale`` recommendations off (a group that cannot keep up is
    then told to rebalance, if that lowers its largest member lag)."""

    rate_window: float = Field(default=300.0, gt=0)
    """Seconds the production rate (log-end growth) and consumption rate (committed-offset growth) are
    measured over."""

    auto_offset_reset: str = Field(default="latest", pattern=r"^(latest|earliest|none)$")
    """The ``auto.offset.reset`` assumed for a partition a group has not committed on."""

    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    """Kafka's ``security.protocol``: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``."""

    ssl_cafile: Path | None = None
    """PEM file of the certificate authorities that sign the brokers' certificates (default: the system's)."""

    ssl_certfile: Path | None = None
    """PEM file of kagent's client certificate, for brokers that require mutual TLS."""

    ssl_keyfile: Path | None = None
    """PEM file of the client certificate's private key (if not in ``ssl_certfile``)."""

    ssl_key_password: SecretStr | None = None
    """Password of an encrypted ``ssl_keyfile``."""

    ssl_check_hostname: bool = True
    """Whether a broker's certificate must name the host kagent connects to."""

    sasl_mechanism: SaslMechanism | None = None
    """``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``; required with a SASL protocol."""

    sasl_username: str | None = None
    """The SASL user (PLAIN and SCRAM)."""

    sasl_password: SecretStr | None = None
    """The SASL user's password; or give ``sasl_password_file``."""

    sasl_password_file: Path | None = None
    """A file holding the SASL password (a mounted secret); read once at start-up, trailing newline dropped."""

    sasl_oauthbearer_provider: OAuthProvider | None = None
    """Where OAUTHBEARER tokens come from: ``aws-msk-iam`` (Amazon MSK IAM, needs ``kagent[msk]``) or ``file``."""

    sasl_oauthbearer_token_file: Path | None = None
    """With the ``file`` provider: the file a token is read from on every connection."""

    aws_region: str | None = None
    """With the ``aws-msk-iam`` provider: the AWS region of the MSK cluster, ``us-east-1`` for example."""

    cluster_name: str = Field(default="default", min_length=1)
    """The cluster's name in metrics (kafka-lag-exporter's ``cluster_name`` label) and in alerts (``cluster``)."""

    metrics_granularity: MetricsGranularity = MetricsGranularity.PARTITION
    """The finest lag series ``/metrics`` exports in kafka-lag-exporter's names: ``partition`` (every
    series), ``topic`` (no per-partition series) or ``group`` (per group only), to bound cardinality."""

    health_commits: int = Field(default=10, ge=2, le=100)
    """Commits per group-partition the health check judges (Burrow's ``intervals``)."""

    health_min_distance: float = Field(default=1.0, ge=0)
    """Seconds: a commit closer than this to the previous one replaces it in the health check's window
    (Burrow's ``min-distance``), so a consumer committing many times a second keeps a window of some span."""

    alerts_config: Path | None = None
    """The alerting file (YAML): the sinks incidents are delivered to. Without it no alerting stage runs;
    incidents still go to the incidents topic."""

    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+(/\S*)?$")
    """The URL users reach the workers' web server at (behind a load balancer, say): alerts link to it.
    Default: ``http://<web host>:<web port>``."""

    advertised_url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+/?$")
    """The URL the other workers reach this worker's web server at: the API asks the worker holding a
    group through it (Faust's ``canonical_url``). Default: ``http://<web host>:<web port>``, with this
    machine's host name when the web host is a wildcard (``0.0.0.0``, ``::``)."""

    spark_master: str = Field(default="local[2]", min_length=1)
    """Where ``kagent pipeline``'s Spark jobs run when ``--master`` is not given: ``local[N]``,
    ``spark://host:7077``, ``yarn``, ``k8s://...`` (any master ``spark-submit`` takes). The worker ignores it."""

    @field_validator("scale_headroom", mode="before")
    @classmethod
    def _empty_is_off(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("strategy")
    @classmethod
    def _check_strategy(cls, value: str) -> str:
        if value not in STRATEGIES:
            raise ValueError(f"allowed: {', '.join(STRATEGIES)}")
        return value

    @model_validator(mode="after")
    def _check_rearming(self) -> Settings:
        if self.skew_metric is SkewMetric.PEAK_TO_MEAN and self.skew_threshold * self.hysteresis <= 1:
            raise ValueError(
                f"KAGENT_SKEW_THRESHOLD x KAGENT_HYSTERESIS = {self.skew_threshold * self.hysteresis:g} must exceed 1 "
                "with peak-to-mean skew (its least value is 1), or a group could never re-arm"
            )
        return self

    @field_validator("ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_password_file", "sasl_oauthbearer_token_file")
    @classmethod
    def _check_readable(cls, value: Path | None) -> Path | None:
        if value is not None:
            try:
                with value.open("rb"):
                    pass
            except OSError as exc:
                raise ValueError(f"cannot read it: {exc.strerror or exc}") from None
        return value

    @model_validator(mode="after")
    def _check_security(self) -> Settings:
        protocol = f"KAGENT_SECURITY_PROTOCOL={self.security_protocol.value}"
        if not self.security_protocol.uses_tls:
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_key_password"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{_env_name(name)} is set but {protocol} does not use TLS (SSL or SASL_SSL does)")
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError("KAGENT_SSL_KEYFILE is set without KAGENT_SSL_CERTFILE, the certificate it belongs to")
        if not self.security_protocol.uses_sasl:
            if self.sasl_mechanism is not None:
                raise ValueError(
                    f"KAGENT_SASL_MECHANISM is set but {protocol} does not use SASL (SASL_PLAINTEXT or SASL_SSL does)"
                )
            return self
        mechanism = self.sasl_mechanism
        if mechanism is None:
            raise ValueError(f"{protocol} needs KAGENT_SASL_MECHANISM ({', '.join(m.value for m in SaslMechanism)})")
        if mechanism is SaslMechanism.OAUTHBEARER:
            provider = self.sasl_oauthbearer_provider
            if provider is None:
                allowed = ", ".join(p.value for p in OAuthProvider)
                raise ValueError(
                    f"KAGENT_SASL_MECHANISM=OAUTHBEARER needs KAGENT_SASL_OAUTHBEARER_PROVIDER ({allowed})"
                )
            if provider is OAuthProvider.FILE and self.sasl_oauthbearer_token_file is None:
                raise ValueError("KAGENT_SASL_OAUTHBEARER_PROVIDER=file needs KAGENT_SASL_OAUTHBEARER_TOKEN_FILE")
            if provider is OAuthProvider.AWS_MSK_IAM:
                if not self.aws_region:
                    raise ValueError("KAGENT_SASL_OAUTHBEARER_PROVIDER=aws-msk-iam needs KAGENT_AWS_REGION")
                try:
                    import aws_msk_iam_sasl_signer  # noqa: F401
                except ImportError:
                    raise ValueError(
                        "KAGENT_SASL_OAUTHBEARER_PROVIDER=aws-msk-iam needs Amazon's signer: "
                        "pip install 'kagent[msk]' (aws-msk-iam-sasl-signer-python)"
                    ) from None
            return self
        if not self.sasl_username:
            raise ValueError(f"KAGENT_SASL_MECHANISM={mechanism.value} needs KAGENT_SASL_USERNAME")
        if (self.sasl_password is None) == (self.sasl_password_file is None):
            raise ValueError(
                f"KAGENT_SASL_MECHANISM={mechanism.value} needs exactly one of KAGENT_SASL_PASSWORD "
                "and KAGENT_SASL_PASSWORD_FILE"
            )
        return self

    @model_validator(mode="after")
    def _check_tls_files(self) -> Settings:
        """Build the TLS context once, so that a file that is not what it should be stops start-up here."""
        try:
            self.security.ssl_context()
        except ssl.SSLError as exc:
            reason = f"{exc.reason or exc} (not PEM of the kind expected, or the key does not match the certificate)"
        except OSError as exc:
            reason = exc.strerror or str(exc)
        else:
            return self
        named = ", ".join(
            f"{_env_name(name)}={getattr(self, name)}"
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
            if getattr(self, name) is not None
        )
        raise ValueError(f"cannot load the TLS files {named or '(the system trust store)'}: {reason}")

    @field_validator("alerts_config")
    @classmethod
    def _check_alerts_config(cls, value: Path | None) -> Path | None:
        if value is not None:
            try:
                load_alerts_config(value)
            except AlertsConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

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

    @functools.cached_property
    def security(self) -> Security:
        """The connections' TLS and SASL settings, the password read from its file (once) if given that way."""
        password: str | None = None
        if self.sasl_password is not None:
            password = self.sasl_password.get_secret_value()
        elif self.sasl_password_file is not None:
            password = self.sasl_password_file.read_text().rstrip("\r\n")
        return Security(
            protocol=self.security_protocol,
            ssl_cafile=_text(self.ssl_cafile),
            ssl_certfile=_text(self.ssl_certfile),
            ssl_keyfile=_text(self.ssl_keyfile),
            ssl_key_password=self.ssl_key_password.get_secret_value() if self.ssl_key_password else None,
            ssl_check_hostname=self.ssl_check_hostname,
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=self.sasl_username,
            sasl_password=password,
            oauth_provider=self.sasl_oauthbearer_provider,
            oauth_token_file=_text(self.sasl_oauthbearer_token_file),
            aws_region=self.aws_region,
        )

    @property
    def kafka(self) -> KafkaConnection:
        """How to reach the cluster: every Kafka client of the worker is made from this."""
        return KafkaConnection(self.bootstrap_servers, self.security)

    @property
    def evaluation_policy(self) -> EvaluationPolicy:
        """The evaluation's policy: the settings that decide when a group triggers."""
        return EvaluationPolicy(
            lag_unit=self.lag_unit,
            skew_metric=self.skew_metric,
            skew_threshold=self.skew_threshold,
            min_total_lag=self.min_total_lag,
            min_improvement=self.min_improvement,
            hold_evaluations=self.hold_evaluations,
            hysteresis=self.hysteresis,
            cooldown=self.cooldown,
            strategy=self.strategy,
            scale_headroom=self.scale_headroom,
            rate_window=self.rate_window,
        )

    @functools.cached_property
    def alerts(self) -> AlertsConfig | None:
        """The alerting file's sinks (:mod:`kagent.core.alert_config`); None without ``alerts_config``.
        Read at validation already, so a bad file stops start-up."""
        return None if self.alerts_config is None else load_alerts_config(self.alerts_config)

    @property
    def worker_url(self) -> str:
        """Where the other workers reach this one: ``advertised_url``, or the web server's own address."""
        if self.advertised_url is not None:
            return self.advertised_url.rstrip("/")
        host = socket.gethostname() if self.web_host in ("0.0.0.0", "::", "") else self.web_host
        return f"http://{host}:{self.web_port}"

    @property
    def web_url(self) -> str:
        """Where users reach the workers' pages: ``public_url``, or the web server's own address."""
        return (self.public_url or f"http://{self.web_host}:{self.web_port}").rstrip("/")

    @property
    def heartbeat_interval(self) -> float:
        """Heartbeat interval of kagent's own group: a third of the session timeout, at most 3 s."""
        return min(3.0, self.session_timeout / 3)


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


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
        if not first["loc"]:  # a rule across settings
            raise SettingsError(f"invalid combination: {_describe(first)}") from None
        field = str(first["loc"][0])
        # The alerting file's errors start with the file's path already (file:line: field: why).
        value = "" if field == "alerts_config" else f"={values.get(field, '')!r}"
        raise SettingsError(f"invalid {_env_name(field)}{value}: {_describe(first)}") from None
