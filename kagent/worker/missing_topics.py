"""Topics gone from the cluster: when their partitions stop being polled, and when they are asked again.

A group may go on reading a topic the cluster no longer has: it was deleted
while the group still holds an assignment (or commits) on it. Each poll then
answers its partitions ``unknown-partition`` with the topic absent from the
cluster's metadata. Kept, such a topic would be asked for at every poll and
hold figures that can never be measured again; so a topic found missing at
every poll that asked for it for :data:`DROP_AFTER_POLLS` poll intervals is
*dropped*: its partitions are no longer polled nor among the group's
partitions, and its figures are forgotten
(:class:`~kagent.worker.lag_figures.LagFigures`). A dropped topic is asked
for again every :data:`RECHECK_AFTER_POLLS` poll intervals while some group
still reads it; a poll that finds it in the metadata (the topic was
re-created) makes it an ordinary topic again at once, and a dropped topic
that no group has read for two re-check periods is forgotten.

A partition answered ``unknown-partition`` whose topic *is* in the metadata
(partition 5 of a 2-partition topic) is never dropped here: it is a real
assignment of a real group, shown as unknown for as long as the group holds it.

Pure: no I/O, no clock of its own (times are the polls' and the caller's, in
seconds since the epoch).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from aiokafka.structs import TopicPartition

from kagent.worker.list_offsets import Reason

__all__ = ["DROP_AFTER_POLLS", "RECHECK_AFTER_POLLS", "MissingTopics", "missing_topics"]

DROP_AFTER_POLLS = 12
"""Poll intervals a topic must be missing at every poll that asks for it before it is dropped (a minute at
the default interval of 5 s: longer than the 10 s within which a topic just created reaches the poller's
metadata, so a new topic is not dropped while the metadata catches up)."""

RECHECK_AFTER_POLLS = 12
"""Poll intervals between two polls that ask again for a dropped topic."""


def missing_topics(unavailable: Mapping[TopicPartition, Reason], partition_counts: Mapping[str, int]) -> set[str]:
    """The topics of the partitions a poll answered ``unknown-partition`` that are not in the cluster's
    metadata (``partition_counts`` holds every topic asked that it knows)."""
    return {
        tp.topic
        for tp, reason in unavailable.items()
        if reason is Reason.UNKNOWN_PARTITION and tp.topic not in partition_counts
    }


class MissingTopics:
    """Which topics are missing from the cluster, since when, and which are dropped (see the module)."""

    def __init__(self, poll_interval: float) -> None:
        self._drop_after = DROP_AFTER_POLLS * poll_interval
        self._recheck_after = RECHECK_AFTER_POLLS * poll_interval
        self._missing_since: dict[str, float] = {}
        """Topic not dropped -> the time of the first of the consecutive polls that found it missing."""
        self._dropped: dict[str, float] = {}
        """Dropped topic -> when it was last asked for (when it was dropped, or re-checked)."""

    @property
    def dropped(self) -> AbstractSet[str]:
        """The topics dropped now."""
        return self._dropped.keys()

    def observe(self, present: Iterable[str], missing: Iterable[str], at: float) -> tuple[set[str], set[str]]:
        """One poll at ``at``, which found the topics ``present`` in the cluster's metadata and ``missing``
        (:func:`missing_topics`) not in it; the topics it dropped, and the dropped ones it brought back.

        A topic not dropped is dropped once it has been missing at every poll that asked for it since a poll
        at least ``DROP_AFTER_POLLS`` intervals before ``at``; a poll that asks for it and finds it, or that
        does not ask for it, starts its count again."""
        back = {topic for topic in present if topic in self._dropped}
        for topic in back:
            del self._dropped[topic]
        dropped = set()
        since = {}
        for topic in missing:
            if topic in self._dropped:
                continue
            first = self._missing_since.get(topic, at)
            if at - first >= self._drop_after:
                self._dropped[topic] = at
                dropped.add(topic)
            else:
                since[topic] = first
        self._missing_since = since
        forgotten = [topic for topic, asked in self._dropped.items() if at - asked > 2 * self._recheck_after]
        for topic in forgotten:
            del self._dropped[topic]
        return dropped, back

    def recheck(self, topics: Iterable[str], now: float) -> set[str]:
        """Of ``topics`` (those some group reads now), the dropped ones to ask for again at ``now``: those
        last asked for at least ``RECHECK_AFTER_POLLS`` intervals before ``now``, counted as asked now."""
        due = set()
        for topic in topics:
            asked = self._dropped.get(topic)
            if asked is not None and now - asked >= self._recheck_after:
                self._dropped[topic] = now
                due.add(topic)
        return due
