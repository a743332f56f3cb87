"""`kagent.core.incidents`: open, update and resolve per kind, one open per kind, idempotence, stable ids."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from kagent.core.contracts import schemas
from kagent.core.drain_time import Drain, DrainState
from kagent.core.group_health import GroupHealth, PartitionHealth, PartitionStatus, group_status
from kagent.core.incidents import (
    INCIDENT_NAMESPACE,
    SEVERITY,
    IncidentAction,
    IncidentKind,
    IncidentObservation,
    IncidentsState,
    IncidentTransition,
    Severity,
    incident_id,
    step,
)
from kagent.core.policy import LagUnit
from kagent.core.recommendation import Recommendation
from tests.support.incidents import recommendation

_UNKNOWN, OK, WARN, STOP, STALL, REWIND = PartitionStatus
OPEN, UPDATE, RESOLVE = IncidentAction.OPEN, IncidentAction.UPDATE, IncidentAction.RESOLVE
SKEW, KIND_STOP, KIND_STALL, KIND_REWIND, KIND_HOT = IncidentKind


def health(status: PartitionStatus = OK, partitions: Sequence[int] = (0,), gone: bool = False) -> GroupHealth:
    """The group at `status` on `partitions` of topic `t` (OK on partition 9)."""
    judged = {TopicPartition("t", p): PartitionHealth(status, f"{status.value} on {p}", 10 * p) for p in partitions}
    judged[TopicPartition("t", 9)] = PartitionHealth(OK, "caught up: lag 0", 0)
    return group_status(judged, gone)


def observe(
    *,
    rec: Recommendation | None = None,
    skew: float | None = 2.8,
    status: PartitionStatus = OK,
    partitions: Sequence[int] = (0,),
    gone: bool = False,
    member_lag: dict[str, float] | None = None,
    falls_behind: bool = False,
) -> IncidentObservation:
    return IncidentObservation(
        group="g",
        lag_unit=LagUnit.MESSAGES,
        member_lag={"a": 9000.0, "b": 300.0} if member_lag is None else member_lag,
        gone=gone,
        skew=skew,
        rearm_below=1.2,
        recommendation=rec,
        health=health(status, partitions, gone),
        falls_behind=falls_behind,
    )


def run(
    observations: Sequence[IncidentObservation], state: IncidentsState | None = None, start: float = 100.0
) -> tuple[IncidentsState, list[list[IncidentTransition]]]:
    state = state or IncidentsState(group="g")
    emitted = []
    for i, observation in enumerate(observations):
        state, transitions = step(state, observation, start + 10 * i)
        emitted.append(transitions)
    return state, emitted


def actions(transitions: Sequence[IncidentTransition]) -> list[tuple[IncidentAction, IncidentKind]]:
    return [(t.action, t.incident.kind) for t in transitions]


def test_lag_skew_opens_on_a_recommendation_updates_on_a_newer_one_and_resolves_below_rearm() -> None:
    state, (opened, same, updated, still, resolved) = run(
        [
            observe(rec=recommendation("r1", 100.0, move_count=1)),
            observe(skew=1.3),
            observe(rec=recommendation("r2", 120.0)),
            observe(rec=recommendation("r2", 120.0), skew=1.0),
            observe(skew=1.19),
        ]
    )
    assert actions(opened) == [(OPEN, SKEW)]
    incident = opened[0].incident
    assert incident.severity is Severity.WARNING and incident.resolved_at is None
    assert (incident.opened_at, incident.updated_at) == (100.0, 100.0)
    assert incident.member_lag == {"a": 9000.0, "b": 300.0}
    assert incident.skew is not None and incident.skew.recommendation_id == "r1"
    assert (incident.skew.skew_before, incident.skew.skew_after, len(incident.skew.moves)) == (2.8, 1.1, 1)
    assert same == [] and still == []
    assert actions(updated) == [(UPDATE, SKEW)]
    assert updated[0].incident.id == incident.id and updated[0].incident.opened_at == 100.0
    assert updated[0].incident.skew is not None and updated[0].incident.skew.recommendation_id == "r2"
    assert updated[0].incident.updated_at == 120.0
    assert actions(resolved) == [(RESOLVE, SKEW)]
    assert resolved[0].incident.id == incident.id and resolved[0].incident.resolved_at == 140.0
    assert "below 1.2" in resolved[0].reason
    assert state.open_incidents == {} and state.opened == 1


def test_a_lag_skew_incident_stays_open_while_the_members_cannot_keep_up_whatever_the_skew() -> None:
    # A scale recommendation for a balanced group (skew 1): open until the group keeps up again.
    _, emitted = run(
        [
            observe(rec=recommendation("r1", 100.0), skew=1.0, falls_behind=True),
            observe(skew=1.0, falls_behind=True),
            observe(skew=1.0),
        ]
    )
    assert [actions(t) for t in emitted] == [
        [(IncidentAction.OPEN, IncidentKind.LAG_SKEW)],
        [],
        [(IncidentAction.RESOLVE, IncidentKind.LAG_SKEW)],
    ]


def test_an_unmeasured_skew_resolves_nothing_and_a_seen_recommendation_never_reopens() -> None:
    state, (opened, unmeasured, resolved, replayed) = run(
        [
            observe(rec=recommendation("r1")),
            observe(skew=None),
            observe(skew=1.0),
            observe(rec=recommendation("r1"), skew=3.0),
        ]
    )
    assert actions(opened) == [(OPEN, SKEW)] and unmeasured == []
    assert actions(resolved) == [(RESOLVE, SKEW)] and replayed == []
    _, (reopened,) = run([observe(rec=recommendation("r3", 200.0))], state)
    assert actions(reopened) == [(OPEN, SKEW)] and reopened[0].incident.id != opened[0].incident.id


@pytest.mark.parametrize(
    ("status", "kind", "severity"),
    [
        (STOP, KIND_STOP, Severity.CRITICAL),
        (STALL, KIND_STALL, Severity.CRITICAL),
        (REWIND, KIND_REWIND, Severity.ERROR),
    ],
)
def test_each_health_status_above_warn_opens_its_incident_and_resolves_when_ok(
    status: PartitionStatus, kind: IncidentKind, severity: Severity
) -> None:
    state, (opened, again, resolved) = run([observe(status=status), observe(status=status), observe(status=OK)])
    assert actions(opened) == [(OPEN, kind)] and again == []
    incident = opened[0].incident
    assert incident.severity is severity is SEVERITY[kind]
    assert incident.skew is None
    assert [(c.topic, c.partition, c.reason, c.lag) for c in incident.culprits] == [("t", 0, f"{status.value} on 0", 0)]
    assert opened[0].reason.startswith(f"{status.value} on 1 of 2 partitions")
    assert actions(resolved) == [(RESOLVE, kind)] and resolved[0].incident.id == incident.id
    assert resolved[0].incident.culprits == incident.culprits
    assert state.open_incidents == {}


def test_an_unknown_status_keeps_health_incidents_as_they_are() -> None:
    """A group nothing could be judged of (not measured yet, at a restart or a failover) neither resolves
    its STOP nor opens anything: it pages and un-pages only on what was measured."""
    unknown = IncidentObservation(
        group="g",
        lag_unit=LagUnit.MESSAGES,
        member_lag={},
        gone=False,
        skew=None,
        rearm_below=1.2,
        recommendation=None,
        health=group_status({}, group_gone_or_empty=False),
    )
    state, (stopped, blind, again) = run([observe(status=STOP), unknown, observe(status=STOP)])
    assert actions(stopped) == [(OPEN, KIND_STOP)]
    assert blind == [] and again == []
    assert state.open_incidents[KIND_STOP].id == stopped[0].incident.id


def test_warn_opens_nothing_and_resolves_a_health_incident() -> None:
    _, (warned, stopped, warned_again) = run([observe(status=WARN), observe(status=STOP), observe(status=WARN)])
    assert warned == []
    assert actions(stopped) == [(OPEN, KIND_STOP)]
    assert actions(warned_again) == [(RESOLVE, KIND_STOP)] and "group status WARN" in warned_again[0].reason


def test_a_health_incident_updates_when_its_culprits_change_not_when_their_reasons_do() -> None:
    first = observe(status=STALL, partitions=(0, 1))
    moved = first._replace(health=first.health._replace(reason="other words"), member_lag={"a": 1.0})
    _, (opened, same_partitions, more, fewer) = run(
        [first, moved, observe(status=STALL, partitions=(0, 1, 2)), observe(status=STALL, partitions=(2,))]
    )
    assert actions(opened) == [(OPEN, KIND_STALL)] and same_partitions == []
    assert actions(more) == actions(fewer) == [(UPDATE, KIND_STALL)]
    assert [c.partition for c in more[0].incident.culprits] == [0, 1, 2]
    assert [c.partition for c in fewer[0].incident.culprits] == [2]
    assert {t.incident.id for t in more + fewer} == {opened[0].incident.id}
    assert fewer[0].incident.opened_at == 100.0 and fewer[0].incident.updated_at == 130.0


def test_a_status_change_resolves_the_old_kind_before_opening_the_new_one() -> None:
    state, (_, changed, back) = run([observe(status=REWIND), observe(status=STOP), observe(status=REWIND)])
    assert actions(changed) == [(RESOLVE, KIND_REWIND), (OPEN, KIND_STOP)]
    assert actions(back) == [(RESOLVE, KIND_STOP), (OPEN, KIND_REWIND)]
    assert list(state.open_incidents) == [KIND_REWIND] and state.opened == 3


def test_a_deleted_group_resolves_everything_open_and_opens_nothing() -> None:
    state, (opened, gone, still_gone) = run(
        [
            observe(rec=recommendation("r1"), status=STOP),
            observe(rec=recommendation("r2"), status=STOP, gone=True),
            observe(gone=True, status=STOP),
        ]
    )
    assert actions(opened) == [(OPEN, SKEW), (OPEN, KIND_STOP)]
    assert actions(gone) == [(RESOLVE, SKEW), (RESOLVE, KIND_STOP)]
    assert all(t.reason == "group deleted or empty" and t.incident.resolved_at == 110.0 for t in gone)
    assert still_gone == [] and state.open_incidents == {}


def test_no_duplicate_open_and_the_same_observation_twice_emits_nothing() -> None:
    observation = observe(rec=recommendation("r1"), status=STALL, partitions=(0, 3))
    state, transitions = step(IncidentsState(group="g"), observation, 100.0)
    assert actions(transitions) == [(OPEN, SKEW), (OPEN, KIND_STALL)]
    again, repeated = step(state, observation, 200.0)
    assert repeated == [] and again is state


def test_ids_are_stable_across_a_json_round_trip_of_the_state() -> None:
    state, (opened,) = run([observe(rec=recommendation("r1"), status=STOP)])
    restored = IncidentsState.model_validate_json(state.model_dump_json())
    assert restored == state
    _, resolved = step(restored, observe(skew=1.0, status=OK), 300.0)
    assert [t.incident.id for t in resolved] == [t.incident.id for t in opened]
    assert opened[0].incident.id == incident_id("g", SKEW, 100.0, 0)
    assert opened[1].incident.id == incident_id("g", KIND_STOP, 100.0, 1)


def test_ids_are_the_same_on_any_worker_and_differ_per_incident() -> None:
    assert incident_id("g", KIND_STOP, 100, 0) == incident_id("g", KIND_STOP, 100.0, 0)
    assert incident_id("g", KIND_STOP, 100.0, 0) == str(uuid.uuid5(INCIDENT_NAMESPACE, '["g","stop",100.0,0]'))
    ids = {incident_id(g, k, t, n) for g in ("g", "h") for k in IncidentKind for t in (1.0, 2.0) for n in (0, 1)}
    assert len(ids) == 2 * len(IncidentKind) * 2 * 2


def test_a_recommendation_re_sent_after_a_failover_opens_the_same_incident() -> None:
    _, first = step(IncidentsState(group="g"), observe(rec=recommendation("r1", 100.0)), 105.0)
    _, second = step(IncidentsState(group="g"), observe(rec=recommendation("r1", 100.0)), 190.0)
    assert first == second and first[0].incident.opened_at == 100.0


def test_an_observation_of_another_group_is_refused() -> None:
    with pytest.raises(ValueError, match="observation of"):
        step(IncidentsState(group="other"), observe(), 100.0)
    with pytest.raises(ValueError, match="observation of"):
        step(IncidentsState(group="g"), observe(rec=recommendation("r", group="other")), 100.0)


def test_transitions_validate_against_the_incident_schema() -> None:
    _, emitted = run(
        [
            observe(rec=recommendation("r1"), status=STOP),
            observe(rec=recommendation("r2"), status=STOP, partitions=(0, 1)),
            observe(gone=True),
        ]
    )
    validator = Draft202012Validator(schemas()["incident.schema.json"])
    for transitions in emitted:
        for transition in transitions:
            value = json.loads(transition.model_dump_json())
            validator.validate(value)
            assert IncidentTransition.model_validate(value) == transition


def test_a_state_that_contradicts_itself_is_refused() -> None:
    state, _ = run([observe(status=STOP)])
    with pytest.raises(ValueError, match="not an open stall incident"):
        IncidentsState(group="g", open_incidents={KIND_STALL: state.open_incidents[KIND_STOP]})
    with pytest.raises(ValueError, match="is critical, not warning"):
        state.open_incidents[KIND_STOP].model_validate(
            {**state.open_incidents[KIND_STOP].model_dump(), "severity": "warning"}
        )


OBSERVATIONS = st.builds(
    observe,
    rec=st.none() | st.sampled_from(["r1", "r2", "r3"]).map(recommendation),
    skew=st.none() | st.sampled_from([1.0, 1.3, 2.8]),
    status=st.sampled_from(list(PartitionStatus)),
    partitions=st.sampled_from([(0,), (1,), (0, 1)]),
    gone=st.booleans(),
)


@settings(max_examples=200)
@given(st.lists(OBSERVATIONS, max_size=12), st.lists(st.sampled_from([0.0, 1.0, 5.0]), min_size=12, max_size=12))
def test_any_sequence_keeps_one_open_per_kind_and_stable_ids(
    observations: list[IncidentObservation], gaps: list[float]
) -> None:
    state, restored = IncidentsState(group="g"), IncidentsState(group="g")
    now = 1000.0
    open_ids: dict[IncidentKind, str] = {}
    closed: set[str] = set()
    for observation, gap in zip(observations, gaps, strict=False):
        now += gap
        state, transitions = step(state, observation, now)
        restored, replayed = step(IncidentsState.model_validate_json(restored.model_dump_json()), observation, now)
        assert replayed == transitions and restored == state
        for transition in transitions:
            incident = transition.incident
            if transition.action is OPEN:
                assert incident.kind not in open_ids and incident.id not in closed
                assert incident.id not in open_ids.values()
                open_ids[incident.kind] = incident.id
            else:
                assert open_ids.get(incident.kind) == incident.id
                if transition.action is RESOLVE:
                    assert incident.resolved_at == now
                    closed.add(open_ids.pop(incident.kind))
        assert {kind: incident.id for kind, incident in state.open_incidents.items()} == open_ids
        assert len([k for k in open_ids if k is not SKEW]) <= 1
        if observation.gone:
            assert open_ids == {}
        again, repeated = step(state, observation, now + 1)
        assert repeated == [] and again is state


def test_every_transition_carries_the_drain_times_observed_at_it_and_they_alone_make_no_transition() -> None:
    behind = Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=40.0)
    catching = Drain(state=DrainState.CATCHING_UP, seconds=90.0)
    state, [opened] = step(
        IncidentsState(group="g"),
        observe(rec=recommendation("r1", 100.0))._replace(drain=behind, member_drain={"a": behind}),
        100.0,
    )
    assert (opened.incident.drain, opened.incident.member_drain) == (behind, {"a": behind})
    # The drain changing alone is no transition: the incident keeps what its last transition saw.
    same, nothing = step(state, observe()._replace(drain=catching, member_drain={"a": catching}), 160.0)
    assert nothing == [] and same == state
    _, [resolved] = step(state, observe(skew=1.0)._replace(drain=catching, member_drain={"a": catching}), 220.0)
    assert resolved.action is IncidentAction.RESOLVE
    assert (resolved.incident.drain, resolved.incident.member_drain) == (catching, {"a": catching})
    # Unmeasured: none, never a made-up figure.
    _, [bare] = step(IncidentsState(group="g"), observe(rec=recommendation("r2", 300.0)), 300.0)
    assert bare.incident.drain is None and bare.incident.member_drain == {}
