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

What is kept between scrapes is every held group's layout (which also says
which partitions it reads), and the rendered text of the groups without lag: a
caught-up or idle group's series stay the same until it commits another
position or is rebalanced, and cost a scrape a join. A group with lag is
rendered at every scrape and its text let go of as it is written, family by
family (:meth:`LagExporter.exposition`): its time lag changes
with every poll, so keeping it would hold about 250 bytes a series of the
whole body between scrapes and save nothing. No figure, model or snapshot is
kept. A group whose figures cannot be read or rendered is left out of the
scrape and logged once (until it succeeds again); the other groups are
exported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Hashable, Sequence
from dataclasses import dataclass

from aiokafka.structs import TopicPartition

from kagent.core.collector import untrack
from kagent.core.lag_series import (
    EARLIEST_OFFSET,
    GROUP_FAMILIES,
    LATEST_OFFSET,
    Family,
    GroupLayout,
    RenderedGroup,
    families_at,
    render_group,
    render_partition_offsets,
)
from kagent.core.policy import EvaluationPolicy
from kagent.worker.group_state import GroupStateReader, LagClock
from kagent.worker.loop_slices import SLICE, LoopSlices
from kagent.worker.scrape import LoopHold, drop_pieces, family_blocks, let_go_of

__all__ = ["LagExporter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Rendered:
    """The rendered series of a group without lag, kept, and what they were rendered from."""

    version: Hashable
    """The group's :meth:`~GroupStateReader.lag_version` then."""
    stale: bool
    """Whether the clock was stale then."""
    pieces: tuple[bytes, ...]
    """A piece per family of :attr:`LagExporter.group_families`."""


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
        groups, lagging, partitions = await self._render(hold)
        offsets = (b"", b"")
        if LATEST_OFFSET in families or EARLIEST_OFFSET in families:
            clock = self._reader.lag_clock(self._clock())
            offsets = render_partition_offsets(
                self._cluster_name, self._reader.partition_offsets(sorted(partitions), clock)
            )
        for family in families:
            if family is LATEST_OFFSET or family is EARLIEST_OFFSET:
                yield family.header + (offsets[0] if family is LATEST_OFFSET else offsets[1])
                continue
            index = self.group_families.index(family)
            async for block in family_blocks(family.header, groups, index, hold):
                yield block
            await drop_pieces(lagging, index, hold, LoopSlices(self._slice))  # kept by nothing else
        await let_go_of(groups, hold, LoopSlices(self._slice))

    async def _render(self, hold: LoopHold) -> tuple[list[Sequence[bytes]], list[list[bytes]], set[TopicPartition]]:
        """Every held group's rendered series (a piece per family of :attr:`group_families`), those that
        may have changed rendered again; those of them with lag (not kept: the scrape frees their pieces
        as it writes them); and every partition they read, while partition series are exported. The held
        groups are gone over as the reader produces them (:meth:`~GroupStateReader.held_group_runs`), a
        slice at a time."""
        partitions: set[TopicPartition] = set()
        clock = self._reader.lag_clock(self._clock())
        rendered = self._rendered
        found: list[Sequence[bytes]] = []
        lagging: list[list[bytes]] = []
        layouts = self._layouts if self._offsets else None
        held: set[str] = set()
        # Of text and partitions alone, and growing over the whole render: left out of the collector's watch,
        # or each young collection meanwhile went over them (at 50,000 groups in process, 43-46 ms each).
        untrack([partitions, found, lagging, held])
        try:
            slices = LoopSlices(self._slice)
            for run in self._reader.held_group_runs():
                held.update(run)
                for group in run:
                    if slices.over():
                        clock = await self._pause(hold, slices)
                    pieces = self._known(group, clock)
                    if pieces is not None:
                        found.append(pieces)
                        if type(pieces) is list:
                            lagging.append(pieces)
                        if layouts is not None:
                            partitions.update(layouts[group].partitions)
                if slices.over():  # a run may hold none of its groups
                    clock = await self._pause(hold, slices)
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
        return found, lagging, partitions

    async def _pause(self, hold: LoopHold, slices: LoopSlices) -> LagClock:
        """Let the loop go once; the figures' clock after (a poll may have come meanwhile)."""
        await hold.pause(slices)
        return self._reader.lag_clock(self._clock())

    def _known(self, group: str, clock: LagClock) -> tuple[bytes, ...] | list[bytes] | None:
        """``group``'s series: kept (a tuple), or rendered again when they may have changed (a list when it
        has lag: not kept); None when it has none (gone) or they cannot be read (logged once until they
        can)."""
        rendered = self._rendered
        try:
            version = self._reader.lag_version(group)
            known = rendered.get(group)
            if known is not None and known.version == version and known.stale == clock.stale:
                pieces: tuple[bytes, ...] | list[bytes] | None = known.pieces
            else:
                made = self._render_group(group, clock)
                if made is None or made.lagging:  # gone, or with lag: not kept (see the module)
                    rendered.pop(group, None)
                    pieces = list(made.pieces) if made is not None else None
                    untrack([pieces])  # text alone, held until written (the scrape's young collections)
                else:
                    kept = rendered[group] = _Rendered(version, clock.stale, made.pieces)
                    untrack([kept, made.pieces])  # a count and text, kept per group without lag (kagent.core.collector)
                    pieces = made.pieces
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
        return pieces

    def _render_group(self, group: str, clock: LagClock) -> RenderedGroup | None:
        figures = self._reader.group_lag(group, clock)
        if figures is None:
            self._layouts.pop(group, None)
            return None
        self.renders += 1
        layout = self._layouts[group] = GroupLayout.of(
            figures, self._cluster_name, self.group_families, self._layouts.get(group)
        )
        return render_group(figures, layout, self._unit, self._metric)
