"""The evaluator's incident log: its outbox, under a crash between deciding transitions and sending them.

That crash cannot be caused on purpose in a real worker at the right instant, so the table, the
changelog writer and the topic are stand-ins here (plain dicts and lists with the same calls); the
end-to-end behaviour with real parts is in tests/integration/test_incidents.py and test_alerting.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from kagent.core.group_health import GroupHealth, PartitionStatus, group_status
from kagent.core.incidents import IncidentObservation, IncidentsState
from kagent.core.policy import LagUnit
from kagent.worker.incident_log import IncidentLog
from kagent.worker.metrics import Metrics


class BrokerDown(Exception):
    """What the stand-in topic raises while its broker is 'down'."""


class Table(dict[str, bytes]):
    """A table's store: what the writer's ``set`` updates at once."""

    @property
    def stored(self) -> dict[str, bytes]:
        return self


class Writer:
    """The writer's calls; ``durable`` is what a flush made it to the changelog."""

    def __init__(self) -> None:
        self.durable: dict[str, bytes | None] = {}
        self._staged: dict[str, bytes | None] = {}

    def set(self, table: Table, key: str, value: bytes) -> None:
        table[key] = value
        self._staged[key] = value

    def delete(self, table: Table, key: str) -> None:
        table.pop(key, None)
        self._staged[key] = None

    async def flush(self) -> None:
        self.durable.update(self._staged)
        self._staged.clear()


class Topic:
    """Records sent, keyed; raises :class:`BrokerDown` while ``down``."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.down = False

    async def send(self, *, key: bytes, value: bytes) -> asyncio.Future[None]:
        if self.down:
            raise BrokerDown
        self.sent.append((key, value))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def stopped(group: str) -> IncidentObservation:
    health = GroupHealth(PartitionStatus.STOP, (), 1, "STOP on 1 of 1 partitions")
    return IncidentObservation(group, LagUnit.MESSAGES, {"m": 5.0}, False, 1.0, 1.2, None, health)


def recovered(group: str) -> IncidentObservation:
    return stopped(group)._replace(health=group_status({}, group_gone_or_empty=False))


def log(table: Table, writer: Writer, topic: Topic, metrics: Metrics | None = None) -> IncidentLog:
    return IncidentLog(
        table=table,  # type: ignore[arg-type]
        topic=topic,  # type: ignore[arg-type]
        writer=writer,  # type: ignore[arg-type]
        metrics=metrics or Metrics(),
        cluster_name="c",
    )


def actions(topic: Topic) -> list[tuple[str, str]]:
    """(group, action) of each record sent."""
    return [(key.decode(), json.loads(value)["action"]) for key, value in topic.sent]


async def test_transitions_are_durable_as_pending_before_they_are_sent_and_cleared_after() -> None:
    table, writer, topic = Table(), Writer(), Topic()
    transitions = await log(table, writer, topic).observe(stopped("g"), 100.0)
    assert [t.action.value for t in transitions] == ["open"]
    assert actions(topic) == [("g", "open")]
    stored = IncidentsState.model_validate_json(table["g"])
    assert stored.pending == () and set(stored.open_incidents) == {transitions[0].incident.kind}


async def test_a_holder_that_dies_before_sending_leaves_them_pending_and_the_next_one_sends_the_same_records() -> None:
    table, writer, topic = Table(), Writer(), Topic()
    topic.down = True
    with pytest.raises(BrokerDown):
        await log(table, writer, topic).observe(stopped("g"), 100.0)
    # What survives the crash is what the flush made durable: the state with its transition pending.
    survived = IncidentsState.model_validate_json(writer.durable["g"] or b"")
    assert [t.action.value for t in survived.pending] == ["open"]

    successor_table = Table({"g": writer.durable["g"] or b""})
    topic.down = False
    metrics = Metrics()
    later = await log(successor_table, Writer(), topic, metrics).observe(stopped("g"), 160.0)
    assert later == []  # nothing new: the same STOP, the same culprits
    [(key, value)] = topic.sent
    assert key == b"g"
    assert value == survived.pending[0].model_dump_json().encode()  # the very record decided before the crash
    assert IncidentsState.model_validate_json(successor_table["g"]).pending == ()
    assert metrics.incident_transitions.labels("stop", "open")._value.get() == 1


async def test_forgetting_a_gone_group_resolves_its_incidents_then_drops_its_state() -> None:
    table, writer, topic = Table(), Writer(), Topic()
    incidents = log(table, writer, topic)
    await incidents.observe(stopped("g"), 100.0)
    gone = recovered("g")._replace(gone=True, health=group_status({}, group_gone_or_empty=True))
    resolved = await incidents.forget(gone, 130.0)
    assert [t.action.value for t in resolved] == ["resolve"]
    assert "g" not in table
    assert actions(topic) == [("g", "open"), ("g", "resolve")]
    assert await incidents.forget(gone, 140.0) == []  # nothing left to resolve


def test_forget_refuses_a_group_that_is_not_gone() -> None:
    with pytest.raises(ValueError, match="not gone"):
        asyncio.run(log(Table(), Writer(), Topic()).forget(recovered("g"), 1.0))
