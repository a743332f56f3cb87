"""The one place every Kafka client of kagent is made: how to reach the cluster.

Every connection kagent opens (the Faust app's own, the source's consumer,
the end-offset poller, the KIP-848 metadata client, the admin-api source,
the demo's watcher, the simulator, the embedded broker's helpers, the
Spark reader inside its tasks) is built from one :class:`KafkaConnection`,
so that what a cluster demands of a connection (its bootstrap servers and
its :class:`~kagent.security.Security`: TLS and SASL) is decided here once
and reaches them all.

A :class:`KafkaConnection` is plain, frozen, picklable data: a Spark task
receives it and builds its own clients with it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any

from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, KafkaError, SaslAuthenticationFailed, UnsupportedSaslMechanismError
from aiokafka.protocol.metadata import MetadataRequest

from kagent.security import OAuthProvider, SaslMechanism, Security, SecurityProtocol

__all__ = ["ClusterRejected", "ClusterUnreachable", "KafkaConnection"]

RETRY_BACKOFF = 0.5
"""Seconds between two attempts to reach the cluster."""


CLOSED_IN_A_ROW = 5
"""Connections a broker closes during the first request, in a row, before kagent stops trying: a TLS
listener closes a plaintext client's, and a broker that requires a client certificate a TLS client's
without one (TLS 1.3 reports the missing certificate only after the handshake)."""


class ClusterUnreachable(Exception):
    """No broker of the cluster answered in time; ``str()`` names the servers and the last error."""


class ClusterRejected(ClusterUnreachable):
    """A broker answered and refused kagent's connection: its certificate is not trusted, the TLS
    handshake failed, or it rejected the SASL mechanism or credentials. Trying again cannot help, so
    it is raised at once; ``str()`` names the broker, the security settings and the reason."""


@dataclass(frozen=True)
class KafkaConnection:
    """How to reach one Kafka cluster."""

    bootstrap_servers: str
    """``host:port[,host:port...]``, as aiokafka takes it."""

    security: Security = field(default_factory=Security)
    """TLS and SASL of every connection (default: PLAINTEXT, no authentication)."""

    def client_options(self) -> dict[str, Any]:
        """The options every aiokafka client of this cluster is given: its bootstrap servers and
        security settings."""
        return {"bootstrap_servers": self.bootstrap_servers, **self.security.aiokafka_options()}

    def consumer(self, *topics: str, **options: Any) -> AIOKafkaConsumer:
        """An aiokafka consumer (not started) of ``topics``; ``options`` are aiokafka's."""
        return AIOKafkaConsumer(*topics, **self.client_options(), **options)

    def producer(self, **options: Any) -> AIOKafkaProducer:
        """An aiokafka producer (not started); ``options`` are aiokafka's."""
        return AIOKafkaProducer(**self.client_options(), **options)

    def client(self, **options: Any) -> AIOKafkaClient:
        """A bare aiokafka client (not bootstrapped), for requests aiokafka has no API for."""
        return AIOKafkaClient(**self.client_options(), **options)

    def admin(self, **options: Any) -> AIOKafkaAdminClient:
        """An aiokafka admin client (not started)."""
        return AIOKafkaAdminClient(**self.client_options(), **options)

    @property
    def faust_broker(self) -> str:
        """The broker list as Faust's ``broker`` setting takes it: ``kafka://host:port;kafka://host:port``."""
        return ";".join(f"kafka://{server}" for server in self.bootstrap_servers.split(","))

    async def check_reachable(self, timeout: float, *, quiet: bool = False) -> None:
        """Return once a broker of the cluster has accepted a connection (TLS and SASL included) and
        answered a metadata request.

        Raise :class:`ClusterRejected` at once when a broker refuses the connection for good (an
        untrusted certificate, a failed TLS handshake, rejected SASL credentials or mechanism), and
        :class:`ClusterUnreachable` if none has answered within ``timeout`` seconds (trying every
        :data:`RETRY_BACKOFF` s). ``quiet`` keeps aiokafka from logging each failed attempt (a
        command line that reports the outcome in one line of its own)."""
        last: BaseException | None = None
        closed = 0  # connections closed by a broker during the first request, in a row
        options = {"request_timeout_ms": max(1000, int(timeout * 1000)), **self.security.aiokafka_options()}
        try:
            with _aiokafka_silenced(quiet):
                async with asyncio.timeout(timeout):
                    while True:
                        for server in (s.strip() for s in self.bootstrap_servers.split(",")):
                            last = await self._answer(server, options)
                            if last is None:
                                return
                            closed = closed + 1 if isinstance(last.__cause__, asyncio.IncompleteReadError) else 0
                            if closed >= CLOSED_IN_A_ROW:
                                raise ClusterRejected(
                                    f"the Kafka broker at {server}{self._security_note()} closed the connection "
                                    f"during kagent's first request {closed} times in a row: it does not accept "
                                    f"{self.security.protocol.value} connections like this one (check "
                                    "KAGENT_SECURITY_PROTOCOL against the listener; with TLS, a broker that "
                                    "requires a client certificate does this without KAGENT_SSL_CERTFILE)"
                                ) from last
                        await asyncio.sleep(RETRY_BACKOFF)
        except TimeoutError:
            refused = isinstance(last, (KafkaConnectionError, ConnectionError, TimeoutError))
            reason = "no broker accepted a connection" if refused or last is None else repr(last)
            raise ClusterUnreachable(
                f"cannot reach the Kafka cluster at {self.bootstrap_servers}{self._security_note()} "
                f"within {timeout:g} s ({reason})"
            ) from last

    async def _answer(self, server: str, options: Mapping[str, Any]) -> BaseException | None:
        """Connect to ``server`` as aiokafka's bootstrap does (keeping the cause it only logs) and ask for
        metadata: None if it answered, else what went wrong; raise :class:`ClusterRejected` for a refusal."""
        host, _, port = server.rpartition(":")
        try:
            conn = await create_conn(host, int(port), **options)
        except (KafkaError, OSError, ValueError, KeyError) as exc:
            self._raise_if_rejected(server, exc)
            return exc
        try:
            await conn.send(MetadataRequest([]))
        except KafkaError as exc:
            return exc
        finally:
            conn.close()
        return None

    def _security_note(self) -> str:
        """`` (SASL_SSL, SCRAM-SHA-512 as 'alice')`` for messages; nothing for PLAINTEXT."""
        return "" if self.security.protocol is SecurityProtocol.PLAINTEXT else f" ({self.security.describe()})"

    def _raise_if_rejected(self, server: str, exc: BaseException) -> None:
        """Raise :class:`ClusterRejected` if ``exc``, from connecting to ``server``, is a refusal for good."""
        where = f"the Kafka broker at {server}{self._security_note()}"
        if isinstance(exc, ssl.SSLCertVerificationError):
            raise ClusterRejected(
                f"{where}: its TLS certificate is not trusted: {exc.verify_message}"
                " (check KAGENT_SSL_CAFILE and KAGENT_SSL_CHECK_HOSTNAME)"
            ) from exc
        if isinstance(exc, ssl.SSLError):
            raise ClusterRejected(f"{where}: the TLS handshake failed: {exc.reason or exc}") from exc
        if isinstance(exc, UnsupportedSaslMechanismError):
            raise ClusterRejected(f"{where}: rejected the SASL mechanism: {exc}") from exc
        # aiokafka reports rejected SCRAM credentials as the broker's SaslAuthenticate error, or (when
        # the broker answers with a SCRAM error message instead of a signature) as a KeyError or
        # ValueError from reading the server's final message.
        if isinstance(exc, SaslAuthenticationFailed) or (
            self.security.protocol.uses_sasl and isinstance(exc, (KeyError, ValueError))
        ):
            raise ClusterRejected(f"{where}: rejected kagent's SASL credentials ({type(exc).__name__}: {exc})") from exc

    def spark_options(self) -> dict[str, str]:
        """This connection as options of kagent's Spark source (``kafka.bootstrap.servers``,
        ``kafka.security.protocol``, ``kafka.ssl.cafile``, ``kafka.sasl.password``...): strings a
        Spark task turns back into the connection with :meth:`from_spark_options`. Spark redacts
        the values of options named like a password in its plans and UI. Files are named by path:
        they must exist at that path where the tasks run."""
        options = {"kafka.bootstrap.servers": self.bootstrap_servers}
        for name, option in _SPARK_OPTIONS.items():
            value = getattr(self.security, name)
            if value is not None and value != getattr(_PLAINTEXT, name):
                options[option] = _option_text(value)
        return options

    @classmethod
    def from_spark_options(cls, options: Mapping[str, str]) -> KafkaConnection:
        """The connection :meth:`spark_options` describes; raises ``ValueError`` naming a bad option."""
        values: dict[str, Any] = {}
        for name, option in _SPARK_OPTIONS.items():
            text = options.get(option)
            if text is None:
                continue
            kind = _SPARK_OPTION_TYPES.get(name, str)
            try:
                values[name] = kind(text) if kind is not bool else _boolean(text)
            except ValueError:
                raise ValueError(f"option {option}={text!r} is not valid") from None
        return cls(options["kafka.bootstrap.servers"], replace(_PLAINTEXT, **values))

    def faust_options(self) -> dict[str, Any]:
        """The settings a Faust app of this cluster is given: its ``broker`` and, unless the cluster
        is PLAINTEXT, its ``broker_credentials``."""
        credentials = self.security.faust_credentials()
        return {"broker": self.faust_broker, **({"broker_credentials": credentials} if credentials else {})}


_PLAINTEXT = Security()

#: Security field -> the Spark source's option carrying it, named as Kafka's client configs are.
_SPARK_OPTIONS = {
    item.name: "kafka."
    + {"protocol": "security.protocol", "aws_region": "aws.region"}.get(
        item.name, item.name.replace("oauth_", "sasl.oauthbearer.").replace("_", ".")
    )
    for item in fields(Security)
}
_SPARK_OPTION_TYPES: dict[str, Any] = {
    "protocol": SecurityProtocol,
    "sasl_mechanism": SaslMechanism,
    "oauth_provider": OAuthProvider,
    "ssl_check_hostname": bool,
}


def _option_text(value: object) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


@contextmanager
def _aiokafka_silenced(quiet: bool) -> Iterator[None]:
    """While open, and only if ``quiet``, aiokafka logs nothing below CRITICAL."""
    logger = logging.getLogger("aiokafka")
    level = logger.level
    if quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
