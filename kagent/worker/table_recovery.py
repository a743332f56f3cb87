"""Faust's table recovery, asking whether it is still needed at a cost independent of the partitions.

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
exact at every call. :class:`TableManager` is Faust's, with this recovery
(the app's ``TableManager`` setting).
"""

from __future__ import annotations

from faust.tables import TableManager as FaustTableManager
from faust.tables.recovery import Recovery as FaustRecovery
from faust.types import TP

__all__ = ["Recovery", "TableManager"]


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
    """Faust's table manager, recovering with :class:`Recovery`."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
