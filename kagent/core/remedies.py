"""The remedies compared: what each option a recommendation weighed would give the group, at today's rates.

A recommendation asks for one thing: a rebalance, a scale-out, or nothing to move because a partition is
hot. Its ``remedies`` (:func:`remedies`, called where :func:`kagent.core.evaluation.evaluate` builds the
recommendation) say what each option considered would give, so a reader sees why that one was chosen: a
rebalance that leaves a member falling behind, a scale-out that catches up in minutes, a hot partition
that outruns any member whatever is done. One :class:`Remedy` per option, in this order:

1. ``rebalance``, always: the strategy's recommended assignment of the members the group has (of the
   rest of the group, every hot partition left with its member, when some are hot: the assignment a
   ``rebalance`` recommendation carries). Its ``skew`` is that assignment's, in the trigger's metric (of
   the rest when some partitions are hot, as the recommendation's ``skew_after``); its ``drain`` is
   predicted member by member under it (below).
2. ``scale``, when the throughput says the group needs more members (``members_needed``: the count of
   the recommendation's scale evidence, :func:`kagent.core.evaluation.scale_evidence`): its ``members``
   is that count, its ``skew`` None (kagent assigns no member that does not exist yet), its ``drain``
   predicted pooled (below).
3. ``hot-partition``, when some partitions are hot (:mod:`kagent.core.hot_partitions`): "no assignment
   helps", naming them in ``partitions``. Nothing moves, so its ``skew`` is the skew now and its
   ``drain`` the group's drain now (:mod:`kagent.core.drain_time`'s rules over the current assignment).

Exactly one remedy is ``chosen``: the one of the recommendation's kind.

Drains are :class:`~kagent.core.drain_time.Drain` states, of the group: it catches up when its slowest
member does (:func:`kagent.core.drain_time.slowest`). Lags are offset lags (records) and rates records/s,
whatever the evaluation's lag unit, as in :mod:`kagent.core.drain_time`.

The rebalance's drain, member by member. A member whose partitions the assignment does not change drains
as it does today (:func:`kagent.core.drain_time.member_drain`); so do the partitions no member holds (no
one reads them). A member given other partitions drains its new lag (their offset lags added up) at its
*pace* less their production (their production rates added up):

- its new lag unknown (one partition's is): ``unknown``; 0: ``caught-up``;
- their production unknown (one partition's is, or no throughput at all): ``unknown``;
- pace above production: ``catching-up`` in ``lag / (pace - production)``;
- pace at or below production: ``falling-behind`` at ``production - pace``, unless the pace is only a
  lower bound (below): then ``unknown``, for it may read faster than it has had to.

A member's pace, from :func:`kagent.core.throughput.group_throughput` over the current assignment, is:

- *measured* when it is saturated (it was behind throughout the window on a partition it holds, so it read
  as fast as it could): its consumption rate, its partitions added up;
- *estimated* when it is not and the group has a typical member capacity (the median of its saturated
  members' rates): the larger of its own rate and that typical one. kagent's throughput model takes
  members to be alike; the member has not shown it, so the time is an estimate (``estimated``);
- *a lower bound* when it is not saturated and no member is: its own rate, which it can at least read.
  A time from it is the most the member would take (it may be faster: the time is marked
  ``estimated``); a shortfall from it is no evidence of one, so ``unknown``. Never 0.

The scale's drain is pooled: the group's lag (without the hot partitions) at the capacity of ``N``
members, the group's members at their capacity (measured, or as the throughput model estimates it) and
each new one at the typical member capacity, less the production (without the hot partitions):
``lag / (capacity - production)`` as above, ``falling-behind`` when the capacity is short of it,
``unknown`` when the typical capacity (no member saturated), one lag or one production rate is unknown.
It is the best an assignment of the ``N`` members can do (the lag and the production shared in
proportion to their capacity; a partition with more of either than one member's share takes longer),
and it rests on the new members' pace, not measured: ``estimated``. Each hot partition stays with its
member, at best alone on it at its measured pace, which is short of its production (that is what made it
hot): with hot partitions the scale's drain is ``falling-behind`` at their shortfall, measured, as no
number of members fixes them.

The group's drain is ``estimated`` when it is ``falling-behind`` because of a member whose figure is
estimated, or ``catching-up`` with some member's time estimated (that member may be the slowest); never
for an ``unknown`` or ``caught-up`` drain, nor for the hot-partition remedy (today's drain).

Pure: no I/O, no Faust.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.drain_time import Drain, DrainState, drain_text, member_drain, slowest
from kagent.core.events import PartitionRef
from kagent.core.throughput import PartitionThroughput, group_throughput

__all__ = ["Remedy", "RemedyKind", "remedies", "remedy_drain_text", "remedy_text"]


class RemedyKind(str, Enum):
    """An option a recommendation weighs; the values of :class:`kagent.core.recommendation.RecommendationKind`."""

    REBALANCE = "rebalance"
    SCALE = "scale"
    HOT_PARTITION = "hot-partition"


class Remedy(BaseModel):
    """One option a recommendation weighed, and what it would give the group at today's rates (see
    :mod:`kagent.core.remedies`)."""

    # Open to fields added later, as the recommendation that carries it.
    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)

    kind: RemedyKind
    chosen: bool
    """Whether it is what the recommendation asks for (one remedy of a recommendation is)."""
    members: int = Field(ge=0)
    """Members the group would have: the ones it has, or for ``scale`` the members it needs."""
    skew: float | None
    """``rebalance``: the skew of the recommended assignment, in the trigger's metric (of the rest of the
    group when some partitions are hot); ``hot-partition``: the skew now (nothing moves); ``scale``: None
    (kagent assigns no member that does not exist yet)."""
    drain: Drain
    """When the group would catch up: ``caught-up``, ``catching-up`` in ``seconds``, ``falling-behind`` at
    ``falling_behind_rate`` records/s, or ``unknown``."""
    estimated: bool = False
    """Whether ``drain`` rests on a pace kagent has not measured (a member not saturated; the new members of a
    scale): then its time is an estimate. False for an unknown or caught-up drain."""
    partitions: tuple[PartitionRef, ...] = ()
    """For ``hot-partition``: the hot partitions, by topic and partition; empty otherwise."""


class _Basis(Enum):
    """How much a member's pace is known (see the module docstring)."""

    MEASURED = "measured"
    ESTIMATED = "estimated"
    LOWER_BOUND = "lower bound"


@dataclass(frozen=True)
class _Pace:
    rate: float
    """Records/s."""
    basis: _Basis


_NO_PACE = _Pace(0.0, _Basis.LOWER_BOUND)
"""The pace of a member that showed none (not in the current assignment): at least 0, which says nothing."""


@dataclass(frozen=True)
class _Predicted:
    drain: Drain
    estimated: bool


_UNKNOWN = _Predicted(Drain(), False)
_CAUGHT_UP = _Predicted(Drain(state=DrainState.CAUGHT_UP, seconds=0.0), False)


def remedies(
    *,
    current: Mapping[str, Sequence[TopicPartition]],
    recommended: Mapping[str, Sequence[TopicPartition]],
    offset_lags: Mapping[TopicPartition, int | None],
    throughput: Mapping[TopicPartition, PartitionThroughput] | None,
    skew_now: float,
    skew_after: float,
    chosen: RemedyKind,
    hot: Collection[TopicPartition] = (),
    members_needed: int | None = None,
) -> tuple[Remedy, ...]:
    """The remedies of one group's recommendation, in the module's order and by its rules.

    ``current`` and ``recommended`` map each member id to the partitions it holds now and under the
    strategy's assignment (of the rest, hot partitions left with their members); ``offset_lags`` maps every
    partition the group reads to its offset lag (None: not measured); ``throughput`` each partition's rates
    (None: not measured at all); ``skew_now`` and ``skew_after`` are the skews now and under
    ``recommended``; ``chosen`` the recommendation's kind; ``hot`` the hot partitions (each held by a member
    now); ``members_needed`` the count the scale evidence gives, None when the throughput does not say the
    group needs more members. A ``chosen`` option that is not among them (a scale without a count, a hot
    partition without partitions) raises ValueError.
    """
    rates = throughput or {}
    paces = _paces(current, rates)
    hot_partitions = sorted(set(hot))
    found = [
        _remedy(
            RemedyKind.REBALANCE,
            chosen,
            len(current),
            skew_after,
            _slowest(_assignment_drains(recommended, current, offset_lags, rates, paces)),
        )
    ]
    if members_needed is not None:
        pooled = _pooled(current, offset_lags, rates, set(hot_partitions), members_needed)
        alone = [
            _predicted(offset_lags.get(tp), _production([tp], rates), _holder(current, tp, paces))
            for tp in hot_partitions
        ]
        scaled = _slowest([pooled, *alone])
        found.append(_remedy(RemedyKind.SCALE, chosen, members_needed, None, scaled))
    if hot_partitions:
        today = _slowest(_assignment_drains(current, current, offset_lags, rates, paces))
        refs = tuple(PartitionRef(topic=tp.topic, partition=tp.partition) for tp in hot_partitions)
        found.append(_remedy(RemedyKind.HOT_PARTITION, chosen, len(current), skew_now, today, refs))
    if not any(remedy.chosen for remedy in found):
        raise ValueError(f"the chosen remedy {chosen.value!r} is not among the options: no count or no hot partition")
    return tuple(found)


def _remedy(
    kind: RemedyKind,
    chosen: RemedyKind,
    members: int,
    skew: float | None,
    predicted: _Predicted,
    partitions: tuple[PartitionRef, ...] = (),
) -> Remedy:
    return Remedy(
        kind=kind,
        chosen=kind is chosen,
        members=members,
        skew=skew,
        drain=predicted.drain,
        estimated=predicted.estimated,
        partitions=partitions,
    )


def _paces(
    current: Mapping[str, Sequence[TopicPartition]], rates: Mapping[TopicPartition, PartitionThroughput]
) -> dict[str, _Pace]:
    """Each member's pace, measured, estimated or a lower bound (the module's rules)."""
    group = group_throughput(current, rates)
    paces = {}
    for member in group.members:
        if member.saturated:
            paces[member.member_id] = _Pace(member.consumption_rate, _Basis.MEASURED)
        elif group.member_capacity is not None:
            paces[member.member_id] = _Pace(member.capacity, _Basis.ESTIMATED)
        else:
            paces[member.member_id] = _Pace(member.consumption_rate, _Basis.LOWER_BOUND)
    return paces


def _holder(current: Mapping[str, Sequence[TopicPartition]], tp: TopicPartition, paces: Mapping[str, _Pace]) -> _Pace:
    """The pace of the member holding ``tp`` now (a lower bound of 0 when none does)."""
    for member_id, partitions in current.items():
        if tp in partitions:
            return paces[member_id]
    return _NO_PACE


def _assignment_drains(
    assignment: Mapping[str, Sequence[TopicPartition]],
    current: Mapping[str, Sequence[TopicPartition]],
    offset_lags: Mapping[TopicPartition, int | None],
    rates: Mapping[TopicPartition, PartitionThroughput],
    paces: Mapping[str, _Pace],
) -> list[_Predicted]:
    """Each member's drain under ``assignment``, and that of the partitions of ``offset_lags`` no member holds
    in it: as today for an unchanged member and for those, predicted at its pace for the others."""
    drains = []
    for member_id, partitions in assignment.items():
        if set(partitions) == set(current.get(member_id, ())):
            drains.append(_today(partitions, offset_lags, rates))
        else:
            pace = paces.get(member_id, _NO_PACE)
            drains.append(_predicted(_lag(partitions, offset_lags), _production(partitions, rates), pace))
    held = {tp for partitions in assignment.values() for tp in partitions}
    unheld = [tp for tp in offset_lags if tp not in held]
    if unheld:
        drains.append(_today(unheld, offset_lags, rates))
    return drains


def _today(
    partitions: Sequence[TopicPartition],
    offset_lags: Mapping[TopicPartition, int | None],
    rates: Mapping[TopicPartition, PartitionThroughput],
) -> _Predicted:
    drain = member_drain(_lag(partitions, offset_lags), [rates.get(tp) for tp in partitions])
    return _Predicted(drain, False)


def _predicted(lag: int | None, production: float | None, pace: _Pace) -> _Predicted:
    """A lag's drain at ``pace`` less ``production`` (the module's rules for a member given other partitions)."""
    if lag is None:
        return _UNKNOWN
    if lag == 0:
        return _CAUGHT_UP
    if production is None:
        return _UNKNOWN
    estimated = pace.basis is not _Basis.MEASURED
    if pace.rate > production:
        return _Predicted(Drain(state=DrainState.CATCHING_UP, seconds=lag / (pace.rate - production)), estimated)
    if pace.basis is _Basis.LOWER_BOUND:
        return _UNKNOWN
    return _Predicted(Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=production - pace.rate), estimated)


def _pooled(
    current: Mapping[str, Sequence[TopicPartition]],
    offset_lags: Mapping[TopicPartition, int | None],
    rates: Mapping[TopicPartition, PartitionThroughput],
    hot: Collection[TopicPartition],
    members: int,
) -> _Predicted:
    """The drain of the group's partitions but ``hot`` at the capacity of ``members`` members (the module's
    rules for a scale)."""
    rest = [tp for tp in offset_lags if tp not in hot]
    group = group_throughput(
        {member_id: [tp for tp in partitions if tp not in hot] for member_id, partitions in current.items()},
        {tp: figures for tp, figures in rates.items() if tp not in hot},
    )
    if group.member_capacity is None:
        return _UNKNOWN
    capacity = group.capacity + max(0, members - len(current)) * group.member_capacity
    return _predicted(_lag(rest, offset_lags), _production(rest, rates), _Pace(capacity, _Basis.ESTIMATED))


def _lag(partitions: Iterable[TopicPartition], offset_lags: Mapping[TopicPartition, int | None]) -> int | None:
    """The offset lags of ``partitions`` added up; None when one is unknown (or missing)."""
    total = 0
    for tp in partitions:
        lag = offset_lags.get(tp)
        if lag is None:
            return None
        total += lag
    return total


def _production(
    partitions: Iterable[TopicPartition], rates: Mapping[TopicPartition, PartitionThroughput]
) -> float | None:
    """The production rates of ``partitions`` added up; None when one is unknown (or missing)."""
    produced = []
    for tp in partitions:
        figures = rates.get(tp)
        if figures is None or figures.production_rate is None:
            return None
        produced.append(figures.production_rate)
    return math.fsum(produced)


def _slowest(drains: Sequence[_Predicted]) -> _Predicted:
    """The group's drain (:func:`kagent.core.drain_time.slowest`): estimated when falling behind because of an
    estimated row, or catching up with one row's time estimated (it may be the slowest)."""
    drain = slowest(predicted.drain for predicted in drains)
    behind = drain.state is DrainState.FALLING_BEHIND
    counted = [p for p in drains if p.drain.state is DrainState.FALLING_BEHIND] if behind else drains
    known = drain.state not in (DrainState.UNKNOWN, DrainState.CAUGHT_UP)
    return _Predicted(drain, known and any(predicted.estimated for predicted in counted))


def remedy_text(remedy: Remedy) -> str:
    """How every interface names an option: ``rebalance the 3 members``, ``scale to 6 members``, ``no
    assignment helps: partition t-0 is hot`` (``partitions t-0, t-3 are hot``)."""
    members = f"{remedy.members} member" + ("" if remedy.members == 1 else "s")
    if remedy.kind is RemedyKind.REBALANCE:
        return f"rebalance the {members}"
    if remedy.kind is RemedyKind.SCALE:
        return f"scale to {members}"
    named = ", ".join(f"{ref.topic}-{ref.partition}" for ref in remedy.partitions)
    several = len(remedy.partitions) > 1
    return f"no assignment helps: partition{'s' if several else ''} {named} {'are' if several else 'is'} hot"


def remedy_drain_text(remedy: Remedy) -> str:
    """The remedy's drain as :func:`kagent.core.drain_time.drain_text` says it, ``(estimated)`` after it when
    it rests on a pace not measured."""
    return drain_text(remedy.drain) + (" (estimated)" if remedy.estimated else "")
