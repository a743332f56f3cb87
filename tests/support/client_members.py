"""Real consumers of clients other than aiokafka, each member in a thread of its own.

- librdkafka through ``confluent-kafka`` (its wheel carries librdkafka), with
  its built-in assignors (``range``, ``roundrobin``, ``cooperative-sticky``);
- ``kafka-python``, with its ``range`` and ``roundrobin`` assignors.

A :class:`ClientMember` owns its consumer: only its own thread calls it (a
librdkafka consumer's ``assignment()`` called from another thread while this
one polls can deadlock on the GIL against the rebalance callback), and it
publishes what the client reports of itself (its member id, generation where
the client says it, the partitions it holds, the offsets it committed) as a
:class:`MemberState` after every poll. It reads each record of its partitions
and commits the offset after it, synchronously; given ``limit``, it reads only
the records below that offset of each partition and then pauses the partition
(keeping its membership alive by polling): a member that falls behind, its
committed offsets held where it stopped.

The clients are pinned in the ``test`` extra; :func:`require_client` skips a
test without one, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from tests.support.monitoring import in_ci

__all__ = ["CLIENTS", "ClientMember", "MemberState", "kafka_python_generation", "require_client"]

CLIENTS = {"librdkafka": ("confluent_kafka", "confluent-kafka"), "kafka-python": ("kafka", "kafka-python")}
"""Client -> the module it imports and the PyPI package that has it."""

SESSION_TIMEOUT_MS = 6000
"""Short, so that a member that stops without leaving is out in seconds; Tansu holds a group's first join
for half of it."""


def kafka_python_generation(consumer: Any) -> Any | None:
    """The generation a kafka-python 2.x ``consumer`` holds once its join has finished, else None.

    Read only from the thread that polls ``consumer``. ``generation_if_stable()`` alone is not enough: the
    coordinator marks itself stable, with the new generation, in the join's callback, which can fire in a
    poll that then returns before ``_on_join_complete`` installs the new assignment (that happens at the
    next poll). In that window ``assignment()`` still lists the previous generation's partitions; the
    coordinator still says it needs to rejoin until the assignment is installed."""
    coordinator = consumer._coordinator
    generation = coordinator.generation_if_stable()
    if generation is None or coordinator.need_rejoin():
        return None
    return generation


def require_client(client: str) -> ModuleType:
    """The module of ``client`` (a key of :data:`CLIENTS`); the calling test is skipped without it, or fails
    under ``CI=true``, where the ``test`` extra installs it."""
    module, package = CLIENTS[client]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{client} needs the {package} package (pip install -e '.[test]'): {exc}"
        if in_ci():
            pytest.fail(f"{reason}. Under CI=true a missing client fails the test.", pytrace=False)
        pytest.skip(reason)


@dataclass(frozen=True)
class MemberState:
    """What a member's client reports of itself, as of its last poll."""

    member_id: str | None
    """The member id the coordinator gave it, as the client holds it; None before it has one."""
    generation: int | None
    """The generation it is in, where the client says it (kafka-python; librdkafka does not)."""
    assignment: frozenset[TopicPartition]
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    """The offsets it committed successfully, the last of each partition."""


class _Librdkafka:
    """confluent-kafka's Consumer, called only from the member's thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str, strategy: str) -> None:
        kafka = require_client("librdkafka")
        self._kafka = kafka
        self._consumer = kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": client_id,
                "partition.assignment.strategy": strategy,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 500,
                "log.connection.close": False,  # a closed idle connection is no news in a test's output
            }
        )
        self._consumer.subscribe([topic])

    def poll(self) -> list[tuple[TopicPartition, int]]:
        records = []
        for message in self._consumer.consume(num_messages=100, timeout=0.2):
            if message.error() is None:
                records.append((TopicPartition(message.topic(), message.partition()), message.offset()))
        return records

    def commit(self, offsets: dict[TopicPartition, int]) -> bool:
        kafka = self._kafka
        try:
            self._consumer.commit(
                offsets=[kafka.TopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
                asynchronous=False,
            )
        except kafka.KafkaException:  # a rebalance under way: committed at a later poll
            return False
        return True

    def pause(self, tp: TopicPartition) -> None:
        self._consumer.pause([self._kafka.TopicPartition(tp.topic, tp.partition)])

    def state(self, committed: dict[TopicPartition, int]) -> MemberState:
        held = frozenset(TopicPartition(tp.topic, tp.partition) for tp in self._consumer.assignment())
        return MemberState(self._consumer.memberid() or None, None, held, dict(committed))

    def close(self) -> None:
        self._consumer.close()


class _KafkaPython:
    """kafka-python's KafkaConsumer, called only from the member's thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str, strategy: str) -> None:
        kafka = require_client("kafka-python")
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
        self._kafka = kafka
        self._consumer = kafka.KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            partition_assignment_strategy=[assignors[strategy]],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=500,
        )

    def poll(self) -> list[tuple[TopicPartition, int]]:
        batches = self._consumer.poll(timeout_ms=200)
        return [(TopicPartition(tp.topic, tp.partition), r.offset) for tp, records in batches.items() for r in records]

    def commit(self, offsets: dict[TopicPartition, int]) -> bool:
        kafka = self._kafka
        try:
            self._consumer.commit(
                {
                    kafka.TopicPartition(tp.topic, tp.partition): kafka.OffsetAndMetadata(o, "", -1)
                    for tp, o in offsets.items()
                }
            )
        except kafka.errors.KafkaError:  # a rebalance under way: committed at a later poll
            return False
        return True

    def pause(self, tp: TopicPartition) -> None:
        self._consumer.pause(self._kafka.TopicPartition(tp.topic, tp.partition))

    def state(self, committed: dict[TopicPartition, int]) -> MemberState:
        # kafka-python 2.x (pinned: kagent's kafka-python assignor is for it) has no group_metadata(); its
        # coordinator says the generation and member id it holds, None while it is joining.
        group = kafka_python_generation(self._consumer)
        held = frozenset(TopicPartition(tp.topic, tp.partition) for tp in self._consumer.assignment())
        member_id = (group.member_id or None) if group is not None else None
        generation = group.generation_id if group is not None and group.generation_id >= 0 else None
        return MemberState(member_id, generation, held, dict(committed))

    def close(self) -> None:
        self._consumer.close()


_DRIVERS: dict[str, Any] = {"librdkafka": _Librdkafka, "kafka-python": _KafkaPython}


class ClientMember(threading.Thread):
    """One member of ``group`` on ``topic``: a real ``client`` consumer with assignor ``strategy``, run by
    this thread from :meth:`start` until :meth:`stop` (which closes it: it leaves the group)."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        topic: str,
        client_id: str,
        strategy: str,
        limit: int | None = None,
    ) -> None:
        super().__init__(name=f"{client}-{client_id}", daemon=True)
        require_client(client)  # skip or fail in the test, not in the thread
        self.client, self.client_id, self.strategy, self.limit = client, client_id, strategy, limit
        self._args = (bootstrap, group, topic, client_id, strategy)
        self._state = MemberState(None, None, frozenset())
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.error: BaseException | None = None

    def state(self) -> MemberState:
        """What the client reported of itself at its last poll; raises what ended the thread, if anything did."""
        if self.error is not None:
            raise AssertionError(f"member {self.client_id} ({self.client}) failed: {self.error!r}") from self.error
        with self._lock:
            return self._state

    def stop(self) -> None:
        """Close the consumer (it leaves the group) and end the thread."""
        self._stopping.set()
        self.join(30)

    def run(self) -> None:
        try:
            consumer = _DRIVERS[self.client](*self._args)
        except BaseException as exc:  # noqa: BLE001 - whatever ends the thread is reported by state()
            self.error = exc
            return
        committed: dict[TopicPartition, int] = {}
        pending: dict[TopicPartition, int] = {}
        try:
            while not self._stopping.is_set():
                for tp, offset in consumer.poll():
                    if self.limit is not None and offset >= self.limit:
                        consumer.pause(tp)  # it has fallen behind here: it reads no further
                        continue
                    pending[tp] = offset + 1
                if pending and consumer.commit(pending):
                    committed.update(pending)
                    pending.clear()
                state = consumer.state(committed)
                with self._lock:
                    self._state = state
        except BaseException as exc:  # noqa: BLE001 - whatever ends the thread is reported by state()
            self.error = exc
        finally:
            consumer.close()
