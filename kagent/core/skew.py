"""How unevenly an assignment spreads lag over a group's members.

Pure functions over plain data: per-member lag, the skew metrics of a
distribution, a lower bound on the largest member lag that balanced counts
allow, and the moves between two assignments.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple

from aiokafka.structs import TopicPartition


def member_lag(assignment: Mapping[str, Iterable[TopicPartition]], lag: Mapping[TopicPartition, int]) -> dict[str, int]:
    """Each member's total lag; a partition missing from `lag` counts 0."""
    return {member_id: sum(lag.get(tp, 0) for tp in tps) for member_id, tps in assignment.items()}


def peak_to_mean(values: Collection[float]) -> float:
    """Largest value over the mean: 1 is perfectly even, `len(values)` is all on one."""
    total = sum(values)
    return max(values) * len(values) / total if total else 1.0


def coefficient_of_variation(values: Collection[float]) -> float:
    """Population standard deviation over the mean: 0 is perfectly even."""
    total = sum(values)
    if not total:
        return 0.0
    mean = total / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean


def gini(values: Collection[float]) -> float:
    """Gini coefficient: 0 is perfectly even, `1 - 1/len(values)` is all on one."""
    total = sum(values)
    if not total:
        return 0.0
    n = len(values)
    weighted = sum(i * v for i, v in enumerate(sorted(values), start=1))
    return 2 * weighted / (n * total) - (n + 1) / n


def relative_range(values: Collection[float]) -> float:
    """(max - min) / total: 0 is perfectly even, 1 is all on one of several."""
    total = sum(values)
    return (max(values) - min(values)) / total if total else 0.0


def balanced_lag_lower_bound(lags: Iterable[int], members: int) -> int:
    """A lower bound on the largest member lag of any assignment of partitions
    with these lags to `members` members in which every member holds
    `n // members` or `n // members + 1` of the `n` partitions (what count-
    balanced assignors produce when subscriptions are identical).

    With lags sorted `l1 >= l2 >= ... >= ln`, `m` members and `q = n // m`,
    it is the largest of:
    - the mean, rounded up (someone carries at least the mean);
    - for each `k >= 0` with `k*m + 1 <= n`: some member holds `k + 1` of the
      `k*m + 1` largest partitions (pigeonhole), so at least the `k + 1`
      smallest of those, plus, as it holds at least `q` partitions, the
      `q - k - 1` smallest of the rest (`k = 0` is `l1` plus the `q - 1`
      smallest; `k = 1` gives `lm + l(m+1)`);
    - the `ceil(n / m)` smallest lags (a member holding that many).
    """
    if members <= 0:
        raise ValueError(f"members must be positive, not {members}")
    ordered = sorted(lags, reverse=True)
    n = len(ordered)
    if n == 0:
        return 0
    prefix = [0]
    for value in ordered:
        prefix.append(prefix[-1] + value)
    total = prefix[n]
    minimum = n // members

    def smallest(count: int) -> int:
        return total - prefix[n - count]

    bound = max(-(-total // members), smallest(-(-n // members)))
    for k in range(0, (n - 1) // members + 1):
        top = k * members + 1
        held = prefix[top] - prefix[top - k - 1]
        rest = max(0, minimum - k - 1)
        if rest <= n - top:
            held += smallest(rest)
        bound = max(bound, held)
    return bound


class Move(NamedTuple):
    """A partition whose member differs between two assignments (None: unassigned)."""

    partition: TopicPartition
    source: str | None
    target: str | None


def moves(before: Mapping[str, Iterable[TopicPartition]], after: Mapping[str, Iterable[TopicPartition]]) -> list[Move]:
    """Every partition whose member differs from `before` to `after`, sorted by partition."""
    old = {tp: member_id for member_id, tps in before.items() for tp in tps}
    new = {tp: member_id for member_id, tps in after.items() for tp in tps}
    return [Move(tp, old.get(tp), new.get(tp)) for tp in sorted(old.keys() | new.keys()) if old.get(tp) != new.get(tp)]
