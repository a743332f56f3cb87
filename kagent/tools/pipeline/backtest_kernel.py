"""The backtest's kernels: what each strategy would have done to a group's lag, snapshot by snapshot.

Pure, over pandas frames (no Spark, no I/O): Spark runs :func:`backtest_group`
once per group with ``applyInPandas``, and a single process can run it over
``DataFrame.groupby`` (the tests and ``benchmarks/bench_pipeline.py`` do, with
the per-(group, strategy) summary in pandas beside Spark's,
``tests/support/backtest_summary.py``).

Input rows (:data:`SNAPSHOT_COLUMNS`): one per (group, snapshot, partition),
with the partition's lag and the member that held it under the group's
actual assignment (null: nobody). Within a snapshot, every member that holds
a partition is a member of the group, every member subscribes to every topic
of the group's snapshot, and a topic has as many partitions as its highest
partition number + 1.

Output rows (:data:`RESULT_COLUMNS`): per snapshot, one for the actual
assignment (strategy ``actual``, no moves) and one per strategy, each run
with the actual assignment as the members' owned partitions (so sticky
strategies stick to it) and with the snapshot's lags; ``moves`` counts the
partitions whose member differs from the actual one, and ``skew`` is
``kagent.core.recommendation.skew`` of the members' total lags.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from aiokafka.structs import TopicPartition

from kagent.core.assignors import Member, assign
from kagent.core.policy import SkewMetric
from kagent.core.recommendation import skew
from kagent.core.skew import member_lag, moves

__all__ = ["ACTUAL", "RESULT_COLUMNS", "SNAPSHOT_COLUMNS", "STRATEGIES", "backtest_group"]

STRATEGIES = ("range", "roundrobin", "sticky", "fair", "lag", "lag-sticky")
"""The strategies a backtest compares, by ``kagent.core.assignors`` name."""

ACTUAL = "actual"
"""The strategy name of the group's actual assignment in the results."""

SNAPSHOT_COLUMNS = {
    "group": "string",
    "snapshot": "datetime64[us, UTC]",
    "topic": "string",
    "partition": "int32",
    "lag": "int64",
    "member": "string",
}
"""The input rows' columns and their pandas types."""

RESULT_COLUMNS = {
    "group": "string",
    "snapshot": "datetime64[us, UTC]",
    "strategy": "string",
    "members": "int32",
    "total_lag": "int64",
    "max_member_lag": "int64",
    "skew": "float64",
    "moves": "int32",
}
"""The result rows' columns and their pandas types."""


def backtest_group(
    rows: pd.DataFrame, strategies: Sequence[str] = STRATEGIES, metric: SkewMetric = SkewMetric.PEAK_TO_MEAN
) -> pd.DataFrame:
    """The :data:`RESULT_COLUMNS` rows of one group's :data:`SNAPSHOT_COLUMNS` rows.

    ``snapshot`` keeps the input's type (Spark hands over naive UTC times).
    Snapshots where no member holds a partition are left out. Rows come out
    in snapshot order, ``actual`` first, then ``strategies`` in order.
    """
    rows = rows.sort_values(["snapshot", "topic", "partition"], kind="stable")
    snapshots = rows["snapshot"].to_numpy()
    starts = np.flatnonzero(np.r_[True, snapshots[1:] != snapshots[:-1]]) if len(rows) else np.array([], int)
    topics, partitions = rows["topic"].to_numpy(object), rows["partition"].to_numpy(np.int64)
    lags, members = rows["lag"].to_numpy(np.int64), rows["member"].to_numpy(object)
    out: dict[str, list[object]] = {name: [] for name in RESULT_COLUMNS}
    group = rows["group"].iloc[0] if len(rows) else None
    for start, stop in zip(starts, np.r_[starts[1:], len(rows)], strict=True):
        tps = [TopicPartition(t, int(p)) for t, p in zip(topics[start:stop], partitions[start:stop], strict=True)]
        holders = members[start:stop]
        actual: dict[str, list[TopicPartition]] = {}
        for tp, holder in zip(tps, holders, strict=True):
            if isinstance(holder, str):
                actual.setdefault(holder, []).append(tp)
        if not actual:
            continue
        lag = dict(zip(tps, lags[start:stop].tolist(), strict=True))
        counts = {topic: 0 for topic in topics[start:stop]}
        for tp in tps:
            counts[tp.topic] = max(counts[tp.topic], tp.partition + 1)
        subscribed = tuple(counts)
        group_members = {member_id: Member(topics=subscribed, owned=owned) for member_id, owned in actual.items()}
        proposals: list[tuple[str, dict[str, list[TopicPartition]]]] = [(ACTUAL, actual)]
        proposals += [(name, assign(name, counts, group_members, lag)) for name in strategies]
        for name, assignment in proposals:
            per_member = list(member_lag(assignment, lag).values())
            out["group"].append(group)
            out["snapshot"].append(snapshots[start])
            out["strategy"].append(name)
            out["members"].append(len(per_member))
            out["total_lag"].append(sum(per_member))
            out["max_member_lag"].append(max(per_member))
            out["skew"].append(skew(metric, per_member))
            out["moves"].append(0 if name == ACTUAL else len(moves(actual, assignment)))
    return pd.DataFrame(out).astype({**RESULT_COLUMNS, "snapshot": rows["snapshot"].dtype})
