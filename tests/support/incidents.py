"""Incident transitions as the evaluator writes them, for tests and benchmarks of the alerting stage.

:func:`lifecycle` gives one incident's open, updates and resolve; :func:`publish_transitions` writes
transitions to an incidents topic keyed by group, as :class:`kagent.worker.incident_log.IncidentLog`
does, so the alerting stage of a real worker reads exactly what it would read in production.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka import AIOKafkaProducer

from kagent.core.incidents import (
    SEVERITY,
    CulpritPartition,
    Incident,
    IncidentAction,
    IncidentKind,
    IncidentTransition,
    incident_id,
)
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import PartitionMove, Recommendation, Trigger
from kagent.tools.embedded import ONE_RECORD_BATCH

__all__ = ["delivered_keys", "lifecycle", "moves", "publish_transitions", "recommendation", "transition_key"]


def moves(count: int, topic: str = "orders") -> tuple[PartitionMove, ...]:
    """``count`` moves of ``topic``'s partitions 0, 1, ... from one member to another, 100 records each."""
    return tuple(
        PartitionMove(topic=topic, partition=p, from_member="consumer-1-aaa", to_member="consumer-2-bbb", lag=100.0)
        for p in range(count)
    )


def recommendation(rec_id: str, time: float = 100.0, group: str = "g", move_count: int = 2) -> Recommendation:
    """A recommendation for ``group`` at ``time``: skew 2.8 -> 1.1 (peak-to-mean, threshold 1.5), total lag
    9,300, ``move_count`` moves (:func:`moves`)."""
    return Recommendation(
        id=rec_id,
        time=time,
        group=group,
        generation=4,
        protocol="range",
        strategy="lag-sticky",
        lag_unit=LagUnit.MESSAGES,
        trigger=Trigger(
            metric=SkewMetric.PEAK_TO_MEAN,
            value=2.8,
            threshold=1.5,
            evaluations_held=3,
            total_lag=9300,
            improvement=0.6,
        ),
        members=(),
        skew_before=2.8,
        skew_after=1.1,
        lower_bound=3100,
        moves=moves(move_count),
        alternatives=(),
    )


def lifecycle(group: str, opened_at: float, updates: int = 1, *, topic: str = "orders") -> list[IncidentTransition]:
    """A ``stop`` incident of ``group``: opened at ``opened_at`` on partition 0, updated ``updates`` times
    (one more culprit partition each, a second apart), then resolved."""
    kind = IncidentKind.STOP
    incident = Incident(
        id=incident_id(group, kind, opened_at, 0),
        kind=kind,
        severity=SEVERITY[kind],
        group=group,
        opened_at=opened_at,
        updated_at=opened_at,
        lag_unit=LagUnit.MESSAGES,
        member_lag={f"{group}-member-0": 1200.0, f"{group}-member-1": 10.0},
        culprits=(CulpritPartition(topic=topic, partition=0, reason="no commit for 60 s", lag=1200),),
    )
    transitions = [IncidentTransition(action=IncidentAction.OPEN, incident=incident, reason="STOP on 1 partition")]
    for update in range(1, updates + 1):
        incident = incident.model_copy(
            update={
                "updated_at": opened_at + update,
                "culprits": tuple(
                    CulpritPartition(topic=topic, partition=p, reason="no commit for 60 s", lag=1200)
                    for p in range(update + 1)
                ),
            }
        )
        transitions.append(
            IncidentTransition(action=IncidentAction.UPDATE, incident=incident, reason=f"STOP on {update + 1}")
        )
    at = opened_at + updates + 1
    resolved = incident.model_copy(update={"updated_at": at, "resolved_at": at})
    transitions.append(IncidentTransition(action=IncidentAction.RESOLVE, incident=resolved, reason="group status OK"))
    return transitions


def transition_key(transition: IncidentTransition) -> tuple[str, str, float]:
    """What tells one transition from another: incident id, action and time."""
    return (transition.incident.id, transition.action.value, transition.incident.updated_at)


def delivered_keys(bodies: Iterable[bytes]) -> list[tuple[str, str, float]]:
    """The :func:`transition_key` of each body of the webhook sink's default ``json`` template, in order."""
    return [transition_key(IncidentTransition.model_validate_json(body)) for body in bodies]


async def publish_transitions(bootstrap_servers: str, topic: str, transitions: Iterable[IncidentTransition]) -> None:
    """Write ``transitions`` to ``topic`` in order, keyed by group, one record per batch (Tansu's
    ListOffsets is right only then), and wait until the broker has them all."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, max_batch_size=ONE_RECORD_BATCH)
    await producer.start()
    try:
        sent = [
            await producer.send(topic, transition.model_dump_json().encode(), key=transition.incident.group.encode())
            for transition in transitions
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
