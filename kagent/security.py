"""How kagent proves itself to a Kafka cluster: TLS and SASL, as data, and what aiokafka and Faust take.

:class:`Security` is the part of a :class:`kagent.connections.KafkaConnection`
that production clusters demand: the security protocol (Kafka's
``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), the TLS
trust and client identity, and the SASL mechanism with its credentials. It is
plain, frozen, picklable data (a Spark task receives it inside a connection);
what is not picklable (the ``ssl.SSLContext``, an OAUTHBEARER token provider)
is built from it where a client is made, once per process.

Secrets never leave it by accident: the password fields are left out of
``repr()``, and :meth:`Security.describe` (what logs and errors show) names the
protocol, the mechanism and the user, never a password.

OAUTHBEARER takes its token from a provider named by
:class:`OAuthProvider`: ``aws-msk-iam`` signs a token with Amazon's own
signer (``aws-msk-iam-sasl-signer-python``, the ``msk`` extra) from the
default AWS credentials chain, refreshed before it expires; ``file`` reads a
token from a file on every connection (a sidecar that keeps an OIDC token
fresh on disk, as Kubernetes setups for Confluent Cloud do).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiokafka.abc import AbstractTokenProvider

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT

__all__ = [
    "MskIamTokenProvider",
    "OAuthProvider",
    "SaslMechanism",
    "Security",
    "SecurityProtocol",
    "TokenFileProvider",
]


class SecurityProtocol(str, Enum):
    """Kafka's ``security.protocol``: whether the connection is encrypted (SSL) and authenticated (SASL)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SaslMechanism(str, Enum):
    """Kafka's ``sasl.mechanism`` values that kagent supports (GSSAPI/Kerberos is not among them)."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"


class OAuthProvider(str, Enum):
    """Where an OAUTHBEARER token comes from."""

    AWS_MSK_IAM = "aws-msk-iam"
    """Amazon MSK IAM: a token signed by ``aws-msk-iam-sasl-signer-python`` (install ``kagent[msk]``)."""
    FILE = "file"
    """The contents of a file, read again on every connection."""


@dataclass(frozen=True)
class Security:
    """The security settings of one cluster's connections; the default is PLAINTEXT with no authentication.

    Contract: a :class:`Security` built by :mod:`kagent.settings` is consistent
    (a SASL protocol has a mechanism and what it needs; TLS files are only set
    with a TLS protocol); building one by hand skips those checks.
    """

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl_cafile: str | None = None
    """PEM file of the certificate authorities to trust; None trusts the system's."""
    ssl_certfile: str | None = None
    """PEM file of the client's certificate (mutual TLS)."""
    ssl_keyfile: str | None = None
    """PEM file of the client certificate's private key."""
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    """Whether the broker's certificate must name the host connected to."""
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    oauth_provider: OAuthProvider | None = None
    oauth_token_file: str | None = None
    aws_region: str | None = None

    def describe(self) -> str:
        """What logs and errors say of these settings: ``SASL_SSL, SCRAM-SHA-512 as 'alice'``; never a secret."""
        parts = [self.protocol.value]
        if self.protocol.uses_sasl and self.sasl_mechanism is not None:
            if self.sasl_mechanism is SaslMechanism.OAUTHBEARER:
                parts.append(f"OAUTHBEARER from {self.oauth_provider.value if self.oauth_provider else '?'}")
            else:
                parts.append(f"{self.sasl_mechanism.value} as {self.sasl_username!r}")
        return ", ".join(parts)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of every connection (None without TLS); one per process and settings.

        Raises ``OSError`` or ``ssl.SSLError`` if a file cannot be read or is not PEM of the kind expected.
        """
        return _ssl_context(self) if self.protocol.uses_tls else None

    def aiokafka_options(self) -> dict[str, Any]:
        """The security options every aiokafka client is given (``security_protocol``, ``ssl_context``,
        ``sasl_*``)."""
        options: dict[str, Any] = {"security_protocol": self.protocol.value}
        if self.protocol.uses_tls:
            options["ssl_context"] = self.ssl_context()
        if self.protocol.uses_sasl and self.sasl_mechanism is not None:
            options["sasl_mechanism"] = self.sasl_mechanism.value
            if self.sasl_mechanism is SaslMechanism.OAUTHBEARER:
                options["sasl_oauth_token_provider"] = _token_provider(self)
            else:
                options["sasl_plain_username"] = self.sasl_username
                options["sasl_plain_password"] = self.sasl_password
        return options

    def faust_credentials(self) -> CredentialsT | None:
        """Faust's ``broker_credentials`` for these settings (None for PLAINTEXT); Faust hands them to
        every client it makes (its consumer, producer, admin and table recovery)."""
        from faust.auth import OAuthCredentials, SASLCredentials, SSLCredentials

        context = self.ssl_context()
        if not self.protocol.uses_sasl:
            return SSLCredentials(context) if context is not None else None
        if self.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            return OAuthCredentials(oauth_cb=_token_provider(self), ssl_context=context)
        assert self.sasl_mechanism is not None
        return SASLCredentials(
            username=self.sasl_username,
            password=self.sasl_password,
            ssl_context=context,
            mechanism=self.sasl_mechanism.value,
        )


@functools.cache
def _ssl_context(security: Security) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=security.ssl_cafile)
    context.check_hostname = security.ssl_check_hostname
    if not security.ssl_check_hostname:
        # Without a host to check, a certificate is still verified against the trusted authorities.
        context.verify_mode = ssl.CERT_REQUIRED
    if security.ssl_certfile is not None:
        context.load_cert_chain(security.ssl_certfile, security.ssl_keyfile, security.ssl_key_password)
    return context


@functools.cache
def _token_provider(security: Security) -> AbstractTokenProvider:
    if security.oauth_provider is OAuthProvider.AWS_MSK_IAM:
        assert security.aws_region is not None
        return MskIamTokenProvider(security.aws_region)
    if security.oauth_provider is OAuthProvider.FILE:
        assert security.oauth_token_file is not None
        return TokenFileProvider(Path(security.oauth_token_file))
    raise ValueError("OAUTHBEARER needs a token provider (KAGENT_SASL_OAUTHBEARER_PROVIDER)")


REFRESH_BEFORE = 60.0
"""Seconds before its expiry that a signed MSK IAM token is replaced."""


class MskIamTokenProvider(AbstractTokenProvider):
    """Amazon MSK IAM tokens, signed by ``aws_msk_iam_sasl_signer`` with the default AWS credentials chain
    (environment, profile, instance or pod role) for ``region``.

    A token is reused until :data:`REFRESH_BEFORE` seconds before it expires, as aiokafka asks of a
    provider; signing (local, no request to AWS) runs off the event loop.
    """

    def __init__(self, region: str) -> None:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

        self._sign = functools.partial(MSKAuthTokenProvider.generate_auth_token, region)
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()

    async def token(self) -> str:
        async with self._lock:
            if self._token is None or time.time() >= self._expires - REFRESH_BEFORE:
                token, expiry_ms = await asyncio.get_running_loop().run_in_executor(None, self._sign)
                self._token, self._expires = str(token), int(expiry_ms) / 1000
            return self._token


class TokenFileProvider(AbstractTokenProvider):
    """An OAUTHBEARER token read from ``path`` on every connection (whoever writes the file keeps it fresh)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    async def token(self) -> str:
        return self._path.read_text().strip()
