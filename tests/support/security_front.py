"""A security front for the embedded broker: TLS and SASL where Tansu 0.6 as shipped cannot serve them.

What Tansu 0.6 (the PyPI build the tests run) lacks, found by trying and by
reading its source at v0.6.0:

- TLS: ``tansu broker`` declares ``--cert`` and ``--key`` in one argument
  group that allows only one of them, and enables TLS only with both, so TLS
  cannot be turned on.
- SASL: ``--authentication`` works, but the only storage compiled in
  (``dynostore``: ``memory://``, ``s3://``) stores no SCRAM credentials
  (``tansu user create`` succeeds and stores nothing; every SCRAM login then
  fails with ``e=unknown-user``), and PLAIN and OAUTHBEARER are not offered
  (``NoSharedMechanism``). No client can log in to it.

So this front stands in front of a plaintext Tansu, in a process of its own,
and is the broker's security as a client sees it: a real TLS server
(Python's ``ssl``, OpenSSL; a client certificate signed by the test's
authority can be required), and the server side of Kafka's SASL exchange
(SaslHandshake, then SaslAuthenticate) with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 verified by ``scramp`` (the SCRAM server of pg8000) against the
users it is given, and OAUTHBEARER tokens checked as Amazon MSK checks an IAM
token's form (a SigV4-presigned ``kafka-cluster:Connect`` URL for the region,
signed with the expected access key). ApiVersions before authentication is
answered by the broker; any other request before it closes the connection,
as Kafka does. After authentication, bytes are relayed as they are. The
broker advertises the front's address, so every connection a client makes
after bootstrap goes through the front too.

What is real here: the clients (aiokafka, Faust, the simulator, the Spark
reader), their TLS and SASL code, and the broker behind. What is the test's:
the server side of TLS termination and of the SASL exchange.

Run as ``python -m tests.support.security_front CONFIG.json``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import ssl
import struct
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.protocol.admin import (
    SaslAuthenticateResponse_v0,
    SaslAuthenticateResponse_v1,
    SaslHandShakeResponse_v0,
    SaslHandShakeResponse_v1,
)
from scramp import ScramMechanism

from kagent.tools.embedded import EmbeddedBroker, die_with_parent, free_port, stop_process
from tests.support import REPO
from tests.support.waiting import wait_until

__all__ = ["FrontConfig", "SecurityFront", "secured_broker"]

HOST = "127.0.0.1"
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58

log = logging.getLogger("security-front")


@dataclass
class FrontConfig:
    """What the front serves: on ``port``, for the broker on ``upstream``."""

    port: int
    upstream: int
    cert: str | None = None
    """With ``key``: serve TLS with this certificate."""
    key: str | None = None
    client_ca: str | None = None
    """Require a client certificate signed by this authority."""
    users: dict[str, dict[str, str]] = field(default_factory=dict)
    """Mechanism -> user -> password; SASL is required when any is given."""
    msk_region: str | None = None
    """Accept OAUTHBEARER tokens that are MSK IAM tokens for this region..."""
    msk_access_key: str | None = None
    """... signed with this access key id."""

    @property
    def mechanisms(self) -> list[str]:
        return [*self.users, *(["OAUTHBEARER"] if self.msk_region else [])]


class Rejected(Exception):
    """The client's SASL credentials are not accepted."""


class _Exchange:
    """The server side of one SASL exchange: ``step`` takes the client's bytes and returns the server's
    and whether the exchange is done; raises :class:`Rejected`."""

    def __init__(self, mechanism: str, config: FrontConfig) -> None:
        self._mechanism, self._config, self._round = mechanism, config, 0
        if mechanism.startswith("SCRAM-"):
            scram = ScramMechanism(mechanism)
            infos = {user: scram.make_auth_info(pw, 4096) for user, pw in config.users[mechanism].items()}

            def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
                if user not in infos:
                    raise Rejected(f"unknown user {user!r}")
                return infos[user]

            self._scram = scram.make_server(auth_info)

    def step(self, data: bytes) -> tuple[bytes, bool]:
        self._round += 1
        if self._mechanism == "PLAIN":
            _, user, password = data.decode().split("\0")
            if self._config.users["PLAIN"].get(user) != password:
                raise Rejected(f"wrong user or password for {user!r}")
            return b"", True
        if self._mechanism == "OAUTHBEARER":
            fields_ = dict(part.split("=", 1) for part in data.decode().split("\x01") if "=" in part)
            self._check_msk_token(fields_.get("auth", "").removeprefix("Bearer "))
            return b"", True
        try:
            if self._round == 1:
                self._scram.set_client_first(data.decode())
                return self._scram.get_server_first().encode(), False
            self._scram.set_client_final(data.decode())
            return self._scram.get_server_final().encode(), True
        except Rejected:
            raise
        except Exception as exc:  # scramp's ScramException: a wrong proof
            raise Rejected(str(exc)) from exc

    def _check_msk_token(self, token: str) -> None:
        padded = token + "=" * (-len(token) % 4)
        url = urllib.parse.urlsplit(base64.urlsafe_b64decode(padded).decode())
        query = urllib.parse.parse_qs(url.query)
        region, key = self._config.msk_region, self._config.msk_access_key
        if url.netloc != f"kafka.{region}.amazonaws.com" or query.get("Action") != ["kafka-cluster:Connect"]:
            raise Rejected(f"not an MSK IAM token for {region}: {url.netloc} {query.get('Action')}")
        credential = query.get("X-Amz-Credential", [""])[0]
        if not credential.startswith(f"{key}/") or "X-Amz-Signature" not in query:
            raise Rejected("the MSK IAM token is not signed with the expected key")


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def _write_frame(writer: asyncio.StreamWriter, correlation_id: int, body: bytes) -> None:
    writer.write(struct.pack(">ii", len(body) + 4, correlation_id) + body)


def _string(data: bytes, at: int) -> tuple[str, int]:
    (size,) = struct.unpack_from(">h", data, at)
    return data[at + 2 : at + 2 + max(size, 0)].decode(), at + 2 + max(size, 0)


async def _authenticate(
    config: FrontConfig,
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    broker: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> bool:
    """Run Kafka's SASL exchange with the client; True once it is authenticated."""
    exchange: _Exchange | None = None
    while True:
        frame = await _read_frame(client[0])
        api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
        if api_key == API_VERSIONS and exchange is None:
            broker[1].write(struct.pack(">i", len(frame)) + frame)
            answer = await _read_frame(broker[0])
            client[1].write(struct.pack(">i", len(answer)) + answer)
            continue
        _, at = _string(frame, 8)  # the client id
        if api_key == SASL_HANDSHAKE and exchange is None:
            mechanism, _ = _string(frame, at)
            handshake = (SaslHandShakeResponse_v0, SaslHandShakeResponse_v1)[min(api_version, 1)]
            supported = mechanism in config.mechanisms
            code = 0 if supported else UNSUPPORTED_SASL_MECHANISM
            _write_frame(client[1], correlation_id, handshake(code, config.mechanisms).encode())
            if not supported or api_version == 0:  # v0's raw tokens: no client of these tests sends them
                return False
            exchange = _Exchange(mechanism, config)
        elif api_key == SASL_AUTHENTICATE and exchange is not None:
            (size,) = struct.unpack_from(">i", frame, at)
            token = frame[at + 4 : at + 4 + size]
            response = (SaslAuthenticateResponse_v0, SaslAuthenticateResponse_v1)[min(api_version, 1)]
            extra = (0,) if api_version >= 1 else ()
            try:
                reply, done = exchange.step(token)
            except Rejected as exc:
                log.warning("rejected: %s", exc)
                message = f"Authentication failed: {exc}"
                _write_frame(
                    client[1], correlation_id, response(SASL_AUTHENTICATION_FAILED, message, b"", *extra).encode()
                )
                await client[1].drain()
                return False
            _write_frame(client[1], correlation_id, response(0, None, reply, *extra).encode())
            if done:
                return True
        else:  # anything else before authentication: Kafka closes the connection
            return False
        await client[1].drain()


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


async def _serve(config: FrontConfig) -> None:
    context: ssl.SSLContext | None = None
    if config.cert and config.key:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(config.cert, config.key)
        if config.client_ca:
            context.load_verify_locations(config.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            broker = await asyncio.open_connection(HOST, config.upstream)
        except OSError:
            writer.close()
            return
        try:
            if config.mechanisms and not await _authenticate(config, (reader, writer), broker):
                return
            await asyncio.gather(_relay(reader, broker[1]), _relay(broker[0], writer))
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
            broker[1].close()

    server = await asyncio.start_server(
        accepted, HOST, config.port, ssl=context, ssl_handshake_timeout=5 if context else None
    )
    async with server:
        await server.serve_forever()


class SecurityFront:
    """The front as a process (a context manager): ``with SecurityFront(config, log): ...``."""

    def __init__(self, config: FrontConfig, log_path: Path) -> None:
        self.config = config
        self._log = log_path
        self._config_path = log_path.with_suffix(".json")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.config.port}"

    def __enter__(self) -> SecurityFront:
        self._config_path.write_text(json.dumps(asdict(self.config)))
        with self._log.open("ab") as output:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.security_front", str(self._config_path)],
                cwd=REPO,
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        wait_until(self._listening, 15, f"the security front on port {self.config.port} to listen")
        return self

    def _listening(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise RuntimeError(f"the security front exited: {self._log.read_text(errors='replace')[-2000:]}")
        try:
            socket.create_connection((HOST, self.config.port), timeout=1).close()
        except OSError:
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            stop_process(self._process)


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(_serve(FrontConfig(**json.loads(Path(argv[0]).read_text()))))


if __name__ == "__main__":
    main(sys.argv[1:])


@contextmanager
def secured_broker(directory: Path, **config: Any) -> Iterator[SecurityFront]:
    """An embedded broker that clients reach only through a :class:`SecurityFront` made of ``config``
    (:class:`FrontConfig`'s fields but the ports); yields the front."""
    port = free_port()
    with (
        EmbeddedBroker(log_dir=directory, advertised=f"{HOST}:{port}") as broker,
        SecurityFront(FrontConfig(port, broker.port, **config), directory / f"front-{port}.log") as front,
    ):
        yield front
