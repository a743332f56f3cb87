"""Consumer lag of one partition, by KAFKA-5337's rule."""

from __future__ import annotations


def partition_lag(committed: int | None, begin: int, end: int, auto_offset_reset: str = "latest") -> int:
    """The lag of a group on a partition, in records.

    `committed` is the group's committed offset (None: nothing committed),
    `begin` the log-start offset, `end` the log-end offset. A committed offset
    gives `max(0, end - committed)`. With no commit the group's
    `auto.offset.reset` decides where it would start: `latest` means at the
    end, so lag 0; any other value (`earliest`, `none`, ...) counts every
    record still in the log, `max(0, end - begin)`.
    """
    if committed is not None:
        return max(0, end - committed)
    if auto_offset_reset == "latest":
        return 0
    return max(0, end - begin)
