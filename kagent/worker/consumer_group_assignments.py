"""KIP-848 consumer groups: their states, and their assignments once every topic id has a name.

Part of the storage stage, which owns it and the tables it writes. A group
on the consumer protocol has no one record of its assignment (see
:mod:`kagent.core.consumer_group_state`). Storage hands this each such event
(:meth:`ConsumerGroupAssignments.apply`); at the end of its batch
(:meth:`ConsumerGroupAssignments.store`) each touched group's state is written
to the consumer-group-state table and, when every topic id its members hold
has a name, its assignment to the assignments table, as a classic group's
would be. Names come from the group's type-4 records (Kafka 3.7-4.0) or from
the cluster's Metadata v12 (:mod:`kagent.core.topic_ids`), asked at most once
per ``ask_interval`` while some group waits for a name, in the background: a
batch of storage never waits for the cluster's answer (one that took its
40 s request timeout, asked again at once, stalled storage for good). A
waiting group is stored again at the first :meth:`store` after an answer
(storage calls it after each batch and each end-offsets poll).
"""

from __future__ import annotations

import asyncio
import logging
import time

import faust
from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaError

from kagent.connections import KafkaConnection
from kagent.core.consumer_group_state import ConsumerGroupState, assignment, fold
from kagent.core.events import DerivedEvent
from kagent.core.topic_ids import MetadataWithTopicIds, topic_names
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.topology import HeldGroups

__all__ = ["ConsumerGroupAssignments"]

log = logging.getLogger(__name__)

ASK_TIMEOUT = 10.0
"""Seconds one Metadata request for topic ids may take."""


class ConsumerGroupAssignments:
    """The KIP-848 groups this worker holds: fold, store, and name their topics."""

    def __init__(
        self,
        *,
        kafka: KafkaConnection,
        client_id: str,
        ask_interval: float,
        states: faust.Table,
        assignments: faust.Table,
        writer: ChangelogWriter,
        held: HeldGroups,
    ) -> None:
        self._kafka = kafka
        self._client_id = client_id
        self._ask_interval = ask_interval
        self._states = states
        self._assignments = assignments
        self._writer = writer
        self._held = held
        self._touched: dict[str, ConsumerGroupState | None] = {}
        """Groups changed since the last store -> their state (None: deleted)."""
        self._waiting: set[str] = set()
        """Held groups whose assignment waits for a topic name."""
        self._names: dict[str, str] = {}
        self._asked_at = float("-inf")
        self._asking: asyncio.Task[None] | None = None
        self._answered = False
        """Names arrived since the last :meth:`store` looked."""
        self._client: AIOKafkaClient | None = None

    def apply(self, event: DerivedEvent) -> None:
        """Fold one event of a KIP-848 group (or its ``GroupDeleted``) into its state."""
        group = event.group
        if group not in self._touched:
            raw = self._states.get(group)
            self._touched[group] = None if raw is None else ConsumerGroupState.model_validate_json(raw)
        self._touched[group] = fold(self._touched[group], event)

    def state(self, group: str) -> ConsumerGroupState | None:
        """``group``'s state as last stored (None: not a KIP-848 group, or not held here)."""
        raw = self._states.get(group)
        return None if raw is None else ConsumerGroupState.model_validate_json(raw)

    async def store(self) -> list[str]:
        """Write the touched groups' states and the assignments that can be named (with the names
        of every answer so far); start asking the cluster for names, in the background, if some
        group waits for one and the last question is old enough. Never waits for the cluster.
        Returns the groups whose assignment was written."""
        assigned: list[str] = []
        touched, self._touched = self._touched, {}
        for group, state in touched.items():
            if state is None:
                self._writer.delete(self._states, group)
                self._waiting.discard(group)
            else:
                self._writer.set(self._states, group, state.model_dump_json().encode())
                if self._assign(group, state):
                    assigned.append(group)
        if self._answered:
            self._answered = False
            for group in list(self._waiting):
                raw = self._states.get(group)
                if raw is None or not self._held.holds(group):
                    self._waiting.discard(group)
                elif self._assign(group, ConsumerGroupState.model_validate_json(raw)):
                    assigned.append(group)
        asking = self._asking is not None and not self._asking.done()
        if self._waiting and not asking and time.monotonic() - self._asked_at >= self._ask_interval:
            self._asked_at = time.monotonic()
            self._asking = asyncio.create_task(self._ask_names(), name="topic-ids")
        return assigned

    async def stop(self) -> None:
        if self._asking is not None:
            self._asking.cancel()
            await asyncio.gather(self._asking, return_exceptions=True)
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _assign(self, group: str, state: ConsumerGroupState) -> bool:
        """Write the group's assignment if every topic has a name; whether it changed."""
        assigned = assignment(state, self._names)
        if assigned is None:
            self._waiting.add(group)
            return False
        self._waiting.discard(group)
        value = assigned.model_dump_json().encode()
        if self._assignments.get(group) == value:
            return False
        self._writer.set(self._assignments, group, value)
        return True

    async def _ask_names(self) -> None:
        try:
            async with asyncio.timeout(ASK_TIMEOUT):
                if self._client is None:
                    client = self._kafka.client(client_id=self._client_id, request_timeout_ms=int(ASK_TIMEOUT * 1000))
                    try:
                        await client.bootstrap()
                    except BaseException:
                        await client.close()
                        raise
                    self._client = client
                response = await self._client.send(self._client.get_random_node(), MetadataWithTopicIds())
        except (KafkaError, NotImplementedError, OSError, TimeoutError) as exc:
            log.warning(
                "asking the cluster for topic ids failed (%d groups wait for names): %r", len(self._waiting), exc
            )
            return
        self._names.update(topic_names(response))
        self._answered = True
