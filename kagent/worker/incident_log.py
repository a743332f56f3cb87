"""The held groups' incidents: their state in a changelog table, their transitions on the incidents topic.

Part of the evaluator stage, which owns it and calls :meth:`IncidentLog.observe`
after each group's evaluation. The decision is :func:`kagent.core.incidents.step`,
a pure function of the group's :class:`IncidentsState` and what the round
observed; this module makes its result durable and sends it:

- the state is written with the transitions it decided as ``pending`` (an
  outbox) and flushed to its changelog before any transition is sent; once
  the broker has them all, the state is written again without them. A
  worker that takes the group over after a crash finds them pending and
  sends them first (the same records, with the same incident ids), so a
  transition is never lost and never decided twice with different ids. It
  may be sent twice (a crash between the send and the second write): the
  alerting stage's sinks dedup by incident id;
- transitions go to ``<app id>-incidents`` keyed by group, so one group's
  transitions stay in order on one partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from faust.types import TopicT

from kagent.core.incidents import Incident, IncidentObservation, IncidentsState, IncidentTransition, step
from kagent.worker.changelog import ChangelogWriter
from kagent.worker.loop_slices import waited
from kagent.worker.metrics import Metrics
from kagent.worker.topology import GroupPartitionedTable

__all__ = ["IncidentLog"]


class IncidentLog:
    """Steps each group's incidents, keeps their state in ``table`` and sends their transitions to ``topic``."""

    def __init__(
        self,
        *,
        table: GroupPartitionedTable,
        topic: TopicT,
        writer: ChangelogWriter,
        metrics: Metrics,
        cluster_name: str,
    ) -> None:
        self._table = table
        self._topic = topic
        self._writer = writer
        self._metrics = metrics
        self._cluster = cluster_name

    def state(self, group: str) -> IncidentsState | None:
        """The group's incidents as stored; None if it never had one."""
        raw = self._table.stored.get(group)  # the store's own dict: Faust's get costs about 15 µs a read
        return IncidentsState.model_validate_json(raw) if raw is not None else None

    def open_incidents(self, groups: Iterable[str]) -> list[Incident]:
        """The open incidents of ``groups``, by group and then kind."""
        found = []
        for group in groups:
            state = self.state(group)
            if state is not None:
                found.extend(state.open_incidents.values())
        return found

    async def observe(self, observation: IncidentObservation, now: float) -> list[IncidentTransition]:
        """Step the group's incidents with what this round observed; store the new state and send its
        transitions (after any a previous holder left pending). Returns the transitions decided now.

        Raises what the producer raises when the broker fails; the transitions then stay pending in
        the stored state and go out at the group's next round (or with its next holder)."""
        group = observation.group
        state = await self._settle(group)
        stepped, transitions = step(state, observation, now)
        if transitions:
            await self._send(stepped.model_copy(update={"pending": tuple(transitions)}))
        self._export(group, stepped)
        return transitions

    async def forget(self, observation: IncidentObservation, now: float) -> list[IncidentTransition]:
        """The group is gone: resolve its open incidents (``observation.gone`` must be true), then drop
        its state once the resolves are on the topic."""
        if not observation.gone:
            raise ValueError(f"forget({observation.group!r}) with an observation of a group that is not gone")
        if self.state(observation.group) is None:
            return []
        transitions = await self.observe(observation, now)
        self._writer.delete(self._table, observation.group)
        self._metrics.group_gauges.set_open_incidents(self._cluster, observation.group, ())
        return transitions

    async def _settle(self, group: str) -> IncidentsState:
        """The group's state with nothing pending: transitions a previous round (or holder) decided but
        may not have sent go out first."""
        state = self.state(group)
        if state is None:
            return IncidentsState(group=group)
        if state.pending:
            state = await self._send(state)
        return state

    async def _send(self, outbox: IncidentsState) -> IncidentsState:
        """Make ``outbox`` durable, send its pending transitions in order, and store it without them."""
        group = outbox.group
        self._writer.set(self._table, group, outbox.model_dump_json().encode())
        await waited(self._writer.flush())  # waits on the broker: not an evaluation round's CPU (loop_slices)
        sent = [
            await waited(self._topic.send(key=group.encode(), value=transition.model_dump_json().encode()))
            for transition in outbox.pending
        ]
        await waited(asyncio.gather(*sent))
        for transition in outbox.pending:
            self._metrics.incident_transitions.labels(transition.incident.kind.value, transition.action.value).inc()
        settled = outbox.model_copy(update={"pending": ()})
        self._writer.set(self._table, group, settled.model_dump_json().encode())
        return settled

    def _export(self, group: str, state: IncidentsState) -> None:
        self._metrics.group_gauges.set_open_incidents(self._cluster, group, state.open_incidents)
