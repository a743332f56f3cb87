"""The lag series of the held groups (:mod:`kagent.core.lag_series`), rendered once per change and joined at a scrape.

A scrape of a large cluster is millions of samples: formatted by
``prometheus_client`` at every scrape, and each group's figures rebuilt as
models first, they cost 18-30 µs of the event loop's time per sample, so one
scrape of 5,000 groups held a worker for 15 s (no ingest, no heartbeat) and
outlasted Prometheus' scrape timeout. So a :class:`LagExporter` keeps each
held group's series as rendered text, a piece per family, and a scrape:

1. takes the figures' clock (:meth:`~kagent.worker.group_state.GroupStateReader.lag_clock`):
   lag and time lag as of the latest end-offset poll, as kafka-lag-exporter
   computes them at its poll, so a group's figures change only with a
   commit that moves its position, an assignment, or a poll that moves what
   it reads (or, for a group with lag, any poll: its time lag grows);
2. renders the groups whose figures may have changed since their text was
   rendered (their :meth:`~kagent.worker.group_state.GroupStateReader.lag_version`),
   and every group with lag, from plain figures
   (:meth:`~kagent.worker.group_state.GroupStateReader.group_lag`), in slices
   of at most :data:`~kagent.worker.loop_slices.SLICE` seconds of the event loop,
   letting it go between them;
3. writes the families one after the other, each as the pieces of every
   group joined into blocks of about :data:`~kagent.worker.scrape.BLOCK` bytes, awaiting the
   client between blocks (:meth:`LagExporter.exposition`): no whole body is
   ever held, and a slow scraper slows only its own scrape.

Each group is rendered with its layout (:class:`~kagent.core.lag_series.GroupLayout`:
its series' labels, each partition's owner), made when the group is first
rendered and again only when its members, the partitions it reads or their
topics' partition counts change (the figures' :attr:`~kagent.core.lag_series.GroupLag.shape`):
a render then measures and writes figures, nothing else.

What is kept between scrapes is every held group's layout, and the rendered text of the groups without lag
(and, while partition series are exported, which partitions each reads): a
caught-up or idle group's series stay the same until it commits another
position or is rebalanced, and cost a scrape a join. A group with lag is
rendered at every scrape and its text dropped after: its time lag changes
with every poll, so keeping it would hold about 250 bytes a series of the
whole body between scrapes and save nothing. No figure, model or snapshot is
kept. A group whose figures cannot be read or rendered is left out of the
scrape and logged once (until it succeeds again); the other groups are
exported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Hashable, Iterator
from dataclasses import dataclass

from aiokafka.structs import TopicPartition

from kagent.core.lag_series import (
    EARLIEST_OFFSET,
    GROUP_FAMILIES,
    LATEST_OFFSET,
    Family,
    GroupLayout,
    families_at,
    render_group,
    render_partition_offsets,
)
from kagent.core.policy import EvaluationPolicy
from kagent.worker.group_state import GroupStateReader, LagClock
from kagent.worker.loop_slices import SLICE, LoopSlices
from kagent.worker.scrape import LoopHold, family_blocks

__all__ = ["LagExporter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, weakref_slot=True)  # weak references: a test sees when one is let go of
class _Rendered:
    """One group's rendered series, and what they were rendered from."""

    version: Hashable
    """The group's :meth:`~GroupStateReader.lag_version` then."""
    stale: bool
    """Whether the clock was stale then."""
    lagging: bool
    """Whether a partition had lag (its text changes with every poll: not kept)."""
    pieces: list[bytes]
    """A piece per family of :attr:`LagExporter.group_families`. A group with lag's pieces are dropped as
    they are written (its text is not kept, and freeing a whole scrape's text at its end held the event
    loop 86 ms at a million group-partitions)."""
    partitions: tuple[TopicPartition, ...]
    """The partitions it reads, while partition series are exported (empty otherwise)."""


def _pieces(groups: list[_Rendered], index: int, last: bool) -> Iterator[bytes]:
    """Each group's piece of family ``index``; a group with lag's is dropped as it is handed out (freed with
    its block, not all at the scrape's end). In the ``last`` family a scrape writes, each group is taken out
    of ``groups`` as it is handed out too (the list ends empty): at a million group-partitions, freeing the
    groups with lag (not kept) all at the scrape's end held the event loop 24-26 ms."""
    for rendered in _taken_out(groups) if last else groups:
        piece = rendered.pieces[index]
        if rendered.lagging:
            rendered.pieces[index] = b""
        yield piece


def _taken_out(groups: list[_Rendered]) -> Iterator[_Rendered]:
    """``groups`` in order, each taken out of the list as it is handed out."""
    groups.reverse()
    while groups:
        yield groups.pop()


class LagExporter:
    """Every held group's lag series, for ``/metrics`` (:meth:`exposition`).

    Call it from the thread that owns ``reader`` (the event loop's, where the view runs).
    """

    def __init__(
        self,
        reader: GroupStateReader,
        *,
        cluster_name: str,
        granularity: str,
        policy: EvaluationPolicy,
        clock: Callable[[], float] = time.time,
        slice_seconds: float = SLICE,
    ) -> None:
        """``granularity``: a ``KAGENT_METRICS_GRANULARITY`` value; raises ``ValueError`` for an unknown one."""
        self._reader = reader
        self._cluster_name = cluster_name
        self._families = families_at(granularity)
        self.group_families = tuple(family for family in self._families if family in GROUP_FAMILIES)
        """The families each group renders a piece of, in exposition order."""
        self._offsets = LATEST_OFFSET in self._families
        self._unit, self._metric = policy.lag_unit, policy.skew_metric
        self._clock = clock
        self._slice = slice_seconds
        self._rendered: dict[str, _Rendered] = {}
        self._layouts: dict[str, GroupLayout] = {}
        """Group -> the layout its series were last rendered with (its labels: see
        :class:`~kagent.core.lag_series.GroupLayout`), kept while its shape stays the same."""
        self._failing: set[str] = set()
        """Groups whose last rendering failed (logged once)."""
        self._listing_failed = False
        """Whether the last ``held_groups`` call failed (logged once)."""
        self.renders = 0
        """Groups rendered since the exporter was made (a scrape of groups that did not change renders none)."""

    @property
    def families(self) -> tuple[Family, ...]:
        """The families exported, in exposition order."""
        return self._families

    async def exposition(self, names: Collection[str] | None, hold: LoopHold) -> AsyncIterator[bytes]:
        """The text of every family exported (only those named in ``names``, when given), in blocks of
        about :data:`~kagent.worker.scrape.BLOCK` bytes, each family's header first even without samples. Renders what
        changed first, in slices, letting the loop go between them (``hold``); never raises for a
        group's sake."""
        families = [family for family in self._families if names is None or family.name in names]
        if not families:
            return
        groups, partitions = await self._render(hold)
        offsets = (b"", b"")
        if LATEST_OFFSET in families or EARLIEST_OFFSET in families:
            clock = self._reader.lag_clock(self._clock())
            offsets = render_partition_offsets(
                self._cluster_name, self._reader.partition_offsets(sorted(partitions), clock)
            )
        by_group = [family for family in families if family is not LATEST_OFFSET and family is not EARLIEST_OFFSET]
        for family in families:
            if family is LATEST_OFFSET or family is EARLIEST_OFFSET:
                yield family.header + (offsets[0] if family is LATEST_OFFSET else offsets[1])
                continue
            pieces = _pieces(groups, self.group_families.index(family), family is by_group[-1])
            async for block in family_blocks(family.header, pieces, hold):
                yield block

    async def _render(self, hold: LoopHold) -> tuple[list[_Rendered], set[TopicPartition]]:
        """Every held group's rendered series, those that may have changed rendered again; and every
        partition they read, while partition series are exported. The held groups are gone over as the
        reader produces them (:meth:`~GroupStateReader.each_held_group`), a slice at a time."""
        partitions: set[TopicPartition] = set()
        clock = self._reader.lag_clock(self._clock())
        rendered = self._rendered
        found: list[_Rendered] = []
        held: set[str] = set()
        try:
            groups = self._reader.each_held_group()
            slices = LoopSlices(self._slice)
            for group in groups:
                held.add(group)
                if slices.over():
                    await hold.pause(slices)
                    clock = self._reader.lag_clock(self._clock())  # a poll may have come meanwhile
                known = self._known(group, clock)
                if known is not None:
                    found.append(known)
                    partitions.update(known.partitions)
        except Exception:  # a scrape must not fail because the reader did
            if not self._listing_failed:
                self._listing_failed = True
                log.exception("lag exporter: could not list the held groups; lag series left out (logged once)")
        else:
            self._listing_failed = False
        for kept in (rendered, self._layouts):
            if len(kept) > len(held):  # groups no longer held
                for group in [group for group in kept if group not in held]:
                    del kept[group]
        self._failing &= held
        return found, partitions

    def _known(self, group: str, clock: LagClock) -> _Rendered | None:
        """``group``'s series: kept, or rendered again when they may have changed; None when it has none
        (gone) or they cannot be read (logged once until they can)."""
        rendered = self._rendered
        try:
            version = self._reader.lag_version(group)
            known = rendered.get(group)
            if known is None or known.version != version or known.stale != clock.stale:
                known = self._render_group(group, version, clock)
                if known is None or known.lagging:  # gone, or with lag: not kept (see the module)
                    rendered.pop(group, None)
                else:
                    rendered[group] = known
        except Exception:  # one broken group must not break the scrape
            rendered.pop(group, None)
            self._layouts.pop(group, None)
            if group not in self._failing:
                self._failing.add(group)
                log.exception("lag exporter: group %r left out of the scrape (logged once until it recovers)", group)
            return None
        if group in self._failing:
            self._failing.discard(group)
            log.info("lag exporter: group %r exports again", group)
        return known

    def _render_group(self, group: str, version: Hashable, clock: LagClock) -> _Rendered | None:
        figures = self._reader.group_lag(group, clock)
        if figures is None:
            self._layouts.pop(group, None)
            return None
        self.renders += 1
        layout = self._layouts[group] = GroupLayout.of(
            figures, self._cluster_name, self.group_families, self._layouts.get(group)
        )
        pieces, lagging = render_group(figures, layout, self._unit, self._metric)
        return _Rendered(
            version, clock.stale, lagging, list(pieces), tuple(figures.partitions) if self._offsets else ()
        )
