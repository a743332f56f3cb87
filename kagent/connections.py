"""The one place every Kafka client of kagent is made: how to reach the cluster.

Every connection kagent opens (the Faust app's own, the source's consumer,
the end-offset poller, the KIP-848 metadata client, the admin-api source,
the demo's watcher, the simulator, the embedded broker's helpers, the
Spark reader inside its tasks) is built from one :class:`KafkaConnection`,
so that what a cluster demands of a connection (bootstrap servers today;
TLS and SASL next) is decided here once and reaches them all.

A :class:`KafkaConnection` is plain, frozen, picklable data: a Spark task
receives it and builds its own clients with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError, KafkaError

__all__ = ["ClusterUnreachable", "KafkaConnection"]

RETRY_BACKOFF = 0.5
"""Seconds between two attempts to reach the cluster."""


class ClusterUnreachable(Exception):
    """No broker of the cluster answered in time; ``str()`` names the servers and the last error."""


@dataclass(frozen=True)
class KafkaConnection:
    """How to reach one Kafka cluster."""

    bootstrap_servers: str
    """``host:port[,host:port...]``, as aiokafka takes it."""

    def client_options(self) -> dict[str, Any]:
        """The options every aiokafka client of this cluster is given (bootstrap servers and,
        once the cluster needs them, its security settings)."""
        return {"bootstrap_servers": self.bootstrap_servers}

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
        """Return once a broker of the cluster answers a metadata request; raise
        :class:`ClusterUnreachable` if none has within ``timeout`` seconds (trying every
        :data:`RETRY_BACKOFF` s). ``quiet`` keeps aiokafka from logging each failed attempt (a
        command line that reports the outcome in one line of its own)."""
        last: BaseException | None = None
        client = self.client(request_timeout_ms=max(1000, int(timeout * 1000)))
        try:
            with _aiokafka_silenced(quiet):
                async with asyncio.timeout(timeout):
                    while True:
                        try:
                            await client.bootstrap()
                            return
                        except (KafkaError, OSError) as exc:
                            last = exc
                        await asyncio.sleep(RETRY_BACKOFF)
        except TimeoutError:
            reason = "no broker accepted a connection" if isinstance(last, KafkaConnectionError) else repr(last)
            raise ClusterUnreachable(
                f"cannot reach the Kafka cluster at {self.bootstrap_servers} within {timeout:g} s ({reason})"
            ) from last
        finally:
            await client.close()

    def faust_options(self) -> dict[str, Any]:
        """The settings a Faust app of this cluster is given (its ``broker`` and, once the
        cluster needs them, ``broker_credentials``)."""
        return {"broker": self.faust_broker}


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
