"""Drain time: will a group catch up with its producers, and when, at today's rates.

Lag says how far behind a group is; :mod:`kagent.core.throughput` says how
fast its producers write and its members read. This module puts the two
together: for each partition, each member and the group, the time the lag
takes to fall to 0 if the rates measured over the rate window hold
(``lag / (consumption - production)``), or the rate at which it grows
instead. The worker computes it where the lag is shown (the API's group
page, the dashboard, ``kagent group``), at each evaluation (the metric
``kagent_group_member_drain_seconds`` and the incidents' alerts), all from
:func:`group_drain`.

A :class:`Drain` is one of four states (:class:`DrainState`):

- ``caught-up``: no lag (``seconds`` 0);
- ``catching-up``: ``seconds`` > 0, the time to catch up;
- ``falling-behind``: the lag does not shrink at these rates; ``falling_behind_rate``, at least 0, is
  how many records/s it grows by (0: it holds steady, never closing);
- ``unknown``: the lag or a rate it needs is not measured. Unknown is never 0 and nothing is computed
  from it (a member's drain with one partition unknown is unknown: its pace over the others is not
  its pace).

The rules, for a partition (:func:`partition_drain`), over its offset lag and its
:class:`~kagent.core.throughput.PartitionThroughput` (the partition's own measured production rate,
and the group's consumption rate on it):

1. Its offset lag unknown: ``unknown``. Its offset lag 0: ``caught-up``, whatever the rates (an idle
   partition read to its end is caught up).
2. Its production or consumption rate unknown (too few commits in the window, just after a rebalance;
   no end-offset history): ``unknown``.
3. Consumption above production: ``catching-up`` in ``lag / (consumption - production)`` seconds.
4. Consumption at or below production, and the partition *busy* (the group was behind at every
   commit of the window, :func:`kagent.core.throughput.partition_consumption`: it read as fast as it
   could and did not gain): ``falling-behind`` at ``production - consumption`` records/s.
5. Consumption at or below production, and the partition not busy: at some commit inside the window
   the group had read what was written by its previous one, so it keeps pace with its producers, and
   the difference of two rates measured over slightly different spans is noise, not a shortfall (a
   consumer reading 120/s of 120/s measures 119 one window and 121 the next; calling that "falling
   behind" would alarm on every healthy group). Its lag is then the records in flight, read at its pace:
   ``catching-up`` in ``lag / consumption`` seconds; ``unknown`` when it read nothing in the window
   (a consumer that stopped after catching up: the health check's STOP, not a drain time).

For a member (:func:`member_drain`): the same rules over its partitions taken together, its lag
added up (unknown when one partition's is), its consumption and production added up (unknown when one
partition's is), busy when one of its partitions is. A member shares its pace among its partitions,
so its lag drains at its total pace less the production of all it holds: a partition it catches up
on frees time for the others. The partitions no member holds are one more such row, as the lag
figures count them (:data:`kagent.core.member_lag.NO_MEMBER`).

For a group (:func:`slowest`): the group catches up when its last member does, so its drain is its
slowest member's: ``falling-behind`` when one member is (at the sum of the rates of those that are,
which involves none of the unknown ones); otherwise ``unknown`` when one member's is; otherwise the
largest ``seconds`` (``caught-up`` when every member is, and for a group without rows).

Rates are records/s and lags records whatever the evaluation's lag unit: a drain time in seconds of
time lag would need the producers' rate in seconds per second, which is 1.

Pure: no I/O, no Faust.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Protocol

from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.throughput import PartitionThroughput

__all__ = [
    "Drain",
    "DrainState",
    "GroupDrain",
    "LagRow",
    "drain_text",
    "duration_text",
    "group_drain",
    "member_drain",
    "partition_drain",
    "rate_text",
    "slowest",
]


class DrainState(str, Enum):
    """Where a lag is heading at today's rates."""

    CAUGHT_UP = "caught-up"
    CATCHING_UP = "catching-up"
    FALLING_BEHIND = "falling-behind"
    UNKNOWN = "unknown"


class Drain(BaseModel):
    """The time a lag takes to close at today's rates, or how fast it grows (see :mod:`kagent.core.drain_time`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    state: DrainState = DrainState.UNKNOWN
    seconds: float | None = Field(default=None, ge=0)
    """Seconds to catch up: 0 when ``caught-up``, above 0 when ``catching-up``; None when ``falling-behind``
    (it never catches up at these rates) or ``unknown``."""
    falling_behind_rate: float | None = Field(default=None, ge=0)
    """Records/s the lag grows by when ``falling-behind`` (0: it holds steady); None otherwise."""

    @property
    def metric_value(self) -> float | None:
        """The value exported as ``kagent_group_member_drain_seconds``: ``seconds``, ``+Inf`` when falling
        behind, None (no series) when unknown."""
        if self.state is DrainState.FALLING_BEHIND:
            return math.inf
        return self.seconds


UNKNOWN = Drain()
CAUGHT_UP = Drain(state=DrainState.CAUGHT_UP, seconds=0.0)


def _catching_up(seconds: float) -> Drain:
    return Drain(state=DrainState.CATCHING_UP, seconds=seconds)


def _falling_behind(rate: float) -> Drain:
    return Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=max(0.0, rate))


def _drain(lag: int | None, production: float | None, consumption: float | None, busy: bool) -> Drain:
    """The module's rules 1-5 over one row's figures (a partition's, or a member's added up)."""
    if lag is None:
        return UNKNOWN
    if lag == 0:
        return CAUGHT_UP
    if production is None or consumption is None:
        return UNKNOWN
    if consumption > production:
        return _catching_up(lag / (consumption - production))
    if busy:
        return _falling_behind(production - consumption)
    return _catching_up(lag / consumption) if consumption > 0 else UNKNOWN


def partition_drain(offset_lag: int | None, figures: PartitionThroughput | None) -> Drain:
    """One partition's drain from its offset lag (None: not measured) and its rates (None: none measured);
    the module's rules 1-5."""
    if figures is None:
        return _drain(offset_lag, None, None, False)
    return _drain(offset_lag, figures.production_rate, figures.consumption_rate, figures.busy)


def member_drain(offset_lag: int | None, partitions: Sequence[PartitionThroughput | None]) -> Drain:
    """A member's drain from its offset lag (its partitions' added up; None when one is unknown) and the rates
    of each partition it holds (None for one without figures): rules 1-5 over the partitions' production
    and consumption added up (unknown when one of them is), busy when one partition is."""
    production = consumption = 0.0
    busy = False
    for figures in partitions:
        if figures is None or figures.production_rate is None or figures.consumption_rate is None:
            return _drain(offset_lag, None, None, False)
        production += figures.production_rate
        consumption += figures.consumption_rate
        busy = busy or figures.busy
    return _drain(offset_lag, production, consumption, busy)


def slowest(drains: Iterable[Drain]) -> Drain:
    """The group's drain from its members' (and the row of the partitions no member holds): the group catches
    up when its last member does. ``falling-behind`` when one is, at the sum of those rates; else ``unknown``
    when one is; else the largest time (``caught-up`` for none)."""
    rows = list(drains)
    behind = [d.falling_behind_rate or 0.0 for d in rows if d.state is DrainState.FALLING_BEHIND]
    if behind:
        return _falling_behind(math.fsum(behind))
    if any(d.state is DrainState.UNKNOWN for d in rows):
        return UNKNOWN
    longest = max((d.seconds or 0.0 for d in rows), default=0.0)
    return _catching_up(longest) if longest > 0 else CAUGHT_UP


class LagRow(Protocol):
    """One row of a group's lag: a member's, or that of the partitions no member holds
    (:class:`kagent.core.member_lag.MemberLag` is one; named structurally so that the records that carry a
    :class:`Drain`, the recommendation's among them, need not import the lag figures)."""

    @property
    def member_id(self) -> str: ...

    @property
    def partitions(self) -> tuple[TopicPartition, ...] | None:
        """None when the member's assignment is unknown (its lag is then unknown too, and so is its drain)."""

    @property
    def offset_lag(self) -> int | None: ...


class GroupDrain(BaseModel):
    """Every drain of one group (see :func:`group_drain`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: Drain
    members: dict[str, Drain]
    """By member id; the partitions no member holds under :data:`kagent.core.member_lag.NO_MEMBER`."""
    partitions: dict[TopicPartition, Drain]


def group_drain(
    rows: Sequence[LagRow],
    offset_lags: Mapping[TopicPartition, int | None],
    throughput: Mapping[TopicPartition, PartitionThroughput],
) -> GroupDrain:
    """The drain of each partition of ``offset_lags`` (every partition the group reads, with its offset lag),
    of each of ``rows`` (the members' lag, :func:`kagent.core.member_lag.member_lags`' rows and the row of
    no member, which name the partitions each adds up) and of the group (:func:`slowest` of the rows),
    from each partition's ``throughput`` (a partition missing from it has unknown rates)."""
    partitions = {tp: partition_drain(lag, throughput.get(tp)) for tp, lag in offset_lags.items()}
    members = {
        row.member_id: member_drain(row.offset_lag, [throughput.get(tp) for tp in row.partitions or ()]) for row in rows
    }
    return GroupDrain(group=slowest(members.values()), members=members, partitions=partitions)


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: ``45 s``, ``4 min``, ``2 h 5 min``, ``3 d 4 h`` (rounded to the unit
    shown; under a second reads ``1 s``)."""
    if seconds < 59.5:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(round(seconds / 3600), 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def rate_text(rate: float) -> str:
    """Records/s as a person reads it: ``120/s``, ``1,250/s``, one decimal below 10 (``4.5/s``)."""
    return f"{rate:,.0f}/s" if rate >= 9.95 else f"{rate:.1f}/s"


def drain_text(drain: Drain) -> str:
    """``caught up``, ``catches up in 4 min``, ``falling behind at 120/s`` (``not catching up`` when the lag
    holds steady), or ``unknown``: how every interface says a :class:`Drain`."""
    if drain.state is DrainState.CAUGHT_UP:
        return "caught up"
    if drain.state is DrainState.CATCHING_UP and drain.seconds is not None:
        return f"catches up in {duration_text(drain.seconds)}"
    if drain.state is DrainState.FALLING_BEHIND:
        rate = drain.falling_behind_rate or 0.0
        return f"falling behind at {rate_text(rate)}" if rate >= 0.05 else "not catching up"
    return "unknown"
