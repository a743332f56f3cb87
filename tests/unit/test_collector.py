"""What a worker keeps per group is out of the garbage collector's watch (kagent.core.collector): each
object named here, made as the worker makes it, is one the collector would otherwise go over at every
collection of its generation (279,000 of them in one middle collection at 5,000 groups a worker). The
compiled twin is built by the README's install (tests/unit/test_events_twins.py checks it is in use)."""

from __future__ import annotations

import gc

from kagent.core import collector
from kagent.core.group_listing import listed
from kagent.core.lag_series import FAMILIES, GroupLag, GroupLayout
from kagent.core.member_lag import Member
from kagent.worker.group_index import topic_partitions
from kagent.worker.group_overview import SkewHistory
from kagent.worker.lag_figures import GroupReads
from kagent.worker.metrics import GroupGauges, HotPartitionFigures, MemberDrain
from tests.unit.test_api_records import SNAPSHOT, summary_of


def watched(objects: list[object]) -> list[object]:
    """Those of ``objects`` the collector watches, but classes (an instance refers to its own)."""
    return [each for each in objects if gc.is_tracked(each) and not isinstance(each, type)]


def test_the_python_function_leaves_objects_as_they_are() -> None:
    """Python cannot untrack: without the compiled twin nothing changes."""
    kept = [[1], {2}]
    collector._untrack(kept)
    assert watched(kept) == kept


def test_what_an_assignment_says_a_group_reads_is_not_watched() -> None:
    reads = GroupReads.of(SNAPSHOT.assignment)
    gc.collect()
    assert watched([reads, reads.topics, reads.assigned, reads.members, *reads.members]) == []


def test_a_groups_scrape_layout_and_how_its_partitions_add_up_are_not_watched() -> None:
    partitions = topic_partitions("orders", 4)
    members = [
        Member("a", "client-a", "/10.0.0.1", partitions[:2]),
        Member("b", "client-b", "/10.0.0.2", partitions[2:]),
    ]
    figures = GroupLag("g", members, {"orders": 4}, list(partitions), [0, 1, 2, 3], lambda committed: [], shape=1)
    layout = GroupLayout.of(figures, "c", FAMILIES[:3])
    rows, labels = layout.rows, layout.labels
    assert labels is not None
    gc.collect()
    kept = [layout, rows, *rows, labels, *labels, *gc.get_referents(layout)]
    assert watched(kept) == []


def test_a_groups_gauge_figures_its_listing_and_its_skew_history_are_not_watched() -> None:
    gauges = GroupGauges()
    gauges.set_member_drain("c", "g", [MemberDrain("/10.0.0.1", "a", "client-a", 12.5)])
    gauges.set_hot_partitions("c", "g", [HotPartitionFigures("orders", 0, 50.0, 20.0)])
    gauges.set_open_incidents("c", "g", [])
    (figures,) = gauges._groups.values()
    entry = listed(summary_of())
    history = SkewHistory()
    history.add(1_700_000_000.0, 1.5)
    assert watched([figures, figures.drain, *figures.drain, figures.hot, *figures.hot, figures.open_incidents]) == []
    assert watched([entry, history, *gc.get_referents(history)]) == []
