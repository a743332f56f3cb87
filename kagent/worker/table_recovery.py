"""Faust's table recovery, with changelog partitions restored in bulk first, and asking whether it is
still needed at a cost independent of the partitions.

:class:`TableManager` is Faust's (the app's ``TableManager`` setting), which
at each rebalance first restores the changelog partitions that became active
here in bulk (:mod:`kagent.worker.changelog_restore`), all tables' with one
consumer, then lets Faust's recovery read what was written since.

Faust's :class:`faust.tables.recovery.Recovery` asks, after each changelog
record it applies, whether recovery is still needed: ``need_recovery``
builds a ``Counter`` of the records left on every active changelog
partition. With kagent's tables on 8 partitions each that is about 12 µs a
record, 13 % of a restarted worker's samples at 5,000 groups
(``benchmarks/bench_hold.py --profile-restart``).

:class:`Recovery` gives the same answer (some active changelog partition has
a highwater above its offset) by looking first at the partition that was
behind at the last answer, which during a recovery usually still is, and
only then at the others, stopping at the first one behind. The answer is
exact at every call.
"""

from __future__ import annotations

import logging
import time

from aiokafka.structs import TopicPartition
from faust.tables import TableManager as FaustTableManager
from faust.tables.recovery import Recovery as FaustRecovery
from faust.types import TP

from kagent.connections import KafkaConnection
from kagent.worker.changelog_restore import BulkRestoredStore, read_partitions

__all__ = ["Recovery", "TableManager"]

log = logging.getLogger(__name__)


def _behind(highwater: int | None, offset: int | None) -> bool:
    """Faust's test for a partition with records left: both known, and the highwater above the offset."""
    return highwater is not None and offset is not None and highwater - offset > 0


class Recovery(FaustRecovery):  # type: ignore[misc]
    """Faust's recovery, with :meth:`need_recovery` in constant time while one partition stays behind."""

    _behind_at_last: TP | None = None
    """The active changelog partition found behind at the last call (None: none was)."""

    def need_recovery(self) -> bool:
        highwaters, offsets = self.active_highwaters, self.active_offsets
        last = self._behind_at_last
        if last is not None and _behind(highwaters.get(last), offsets[last]):
            return True
        for tp, highwater in highwaters.items():
            if _behind(highwater, offsets[tp]):
                self._behind_at_last = tp
                return True
        self._behind_at_last = None
        return False


class TableManager(FaustTableManager):  # type: ignore[misc]
    r"""Faust's table manager, restoring newly active changelog partitions in bulk at each rebalance
    (when the app has a ``kafka`` connection and the tables :class:`BulkRestoredStore`\ s), then
    recovering with :class:`Recovery`."""

    _active_changelogs: frozenset[TP] = frozenset()
    """The changelog partitions active here after the last rebalance."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0
    ) -> None:
        if generation_id == self.app.consumer_generation_id:  # a stale rebalance changes nothing here
            await self._restore_in_bulk()
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    async def _restore_in_bulk(self) -> None:
        kafka: KafkaConnection | None = getattr(self.app, "kafka", None)
        stores: dict[str, BulkRestoredStore] = {
            topic: table.data for topic, table in self._changelogs.items() if isinstance(table.data, BulkRestoredStore)
        }
        if kafka is None or not stores:
            return
        active = frozenset(tp for tp in self.app.assignor.assigned_actives() if tp.topic in stores)
        fresh, self._active_changelogs = active - self._active_changelogs, active
        for store in stores.values():
            store.forget_restored(set(active))
        if not fresh:
            return
        # Not ready while it reads (readiness asks Faust's recovery, which sets and clears this next).
        self.recovery.in_recovery = True
        started = time.monotonic()
        applied = 0

        def apply(tp: TopicPartition, key: bytes | None, value: bytes | None) -> None:
            nonlocal applied
            applied += 1
            stores[tp.topic].apply(tp, key, value)

        partitions = sorted(TopicPartition(tp.topic, tp.partition) for tp in fresh)
        restored = await read_partitions(kafka, partitions, apply)
        for tp, offset in restored.items():
            stores[tp.topic].restored(tp, offset)
        log.info(
            "%d changelog records of %d partitions restored in bulk in %.1f s",
            applied,
            len(fresh),
            time.monotonic() - started,
        )
