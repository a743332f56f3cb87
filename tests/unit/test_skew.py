"""`kagent.core.skew`: per-member lag, skew metrics, the balanced lower bound, moves."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from aiokafka.structs import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from kagent.core.skew import (
    Move,
    balanced_lag_lower_bound,
    coefficient_of_variation,
    gini,
    member_lag,
    moves,
    peak_to_mean,
    relative_range,
)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def test_member_lag_sums_each_members_partitions() -> None:
    assignment = {"a": [tp("t", 0), tp("t", 1)], "b": [tp("t", 2)], "c": []}
    lag = {tp("t", 0): 5, tp("t", 2): 7, tp("other", 0): 100}
    assert member_lag(assignment, lag) == {"a": 5, "b": 7, "c": 0}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([5, 5, 5, 5], (1.0, 0.0, 0.0, 0.0)),
        ([4, 0, 0, 0], (4.0, math.sqrt(3), 0.75, 1.0)),
        ([1, 3], (1.5, 0.5, 0.25, 0.5)),
        ([0, 0], (1.0, 0.0, 0.0, 0.0)),  # no lag: nothing is uneven
    ],
)
def test_metrics_of_known_distributions(values: list[int], expected: tuple[float, float, float, float]) -> None:
    metrics = (peak_to_mean, coefficient_of_variation, gini, relative_range)
    assert tuple(metric(values) for metric in metrics) == pytest.approx(expected)


values = st.lists(st.integers(0, 10**9), min_size=1, max_size=30).filter(any)


@given(values)
def test_metrics_against_their_definitions(xs: list[int]) -> None:
    mean = statistics.fmean(xs)
    assert peak_to_mean(xs) == pytest.approx(max(xs) / mean)
    assert coefficient_of_variation(xs) == pytest.approx(statistics.pstdev(xs) / mean, abs=1e-9)
    mean_difference = sum(abs(x - y) for x in xs for y in xs) / len(xs) ** 2
    assert gini(xs) == pytest.approx(mean_difference / (2 * mean), abs=1e-9)
    assert relative_range(xs) == pytest.approx((max(xs) - min(xs)) / sum(xs))
    assert 1 <= peak_to_mean(xs) <= len(xs) + 1e-9
    assert 0 <= gini(xs) <= 1 - 1 / len(xs) + 1e-9


def best_balanced_peak(lags: list[int], members: int) -> int:
    """The smallest largest-member lag over every count-balanced assignment, by brute force."""
    low = len(lags) // members
    best = math.inf
    for owners in itertools.product(range(members), repeat=len(lags)):
        counts = [owners.count(m) for m in range(members)]
        if min(counts) >= low and max(counts) <= low + 1:
            best = min(
                best,
                max(sum(lag for lag, o in zip(lags, owners, strict=True) if o == m) for m in range(members)),
            )
    return int(best)


@given(st.lists(st.integers(0, 100), max_size=7), st.integers(1, 3))
def test_lower_bound_is_a_lower_bound(lags: list[int], members: int) -> None:
    bound = balanced_lag_lower_bound(lags, members)
    assert bound <= best_balanced_peak(lags, members)
    assert bound >= max([0, *lags])
    assert bound >= math.ceil(sum(lags) / members)


@pytest.mark.parametrize(
    ("lags", "members", "bound"),
    [
        ([], 3, 0),
        ([10, 10, 10, 10], 2, 20),  # the mean
        ([100, 1, 1, 1], 2, 101),  # the largest plus the one other partition its member must hold
        ([10, 9, 8], 2, 17),  # two of the three largest share a member: l2 + l3
        ([0, 0, 0, 1000], 3, 1000),
    ],
)
def test_lower_bound_examples(lags: list[int], members: int, bound: int) -> None:
    assert balanced_lag_lower_bound(lags, members) == bound


def test_lower_bound_needs_members() -> None:
    with pytest.raises(ValueError, match="members must be positive"):
        balanced_lag_lower_bound([1], 0)


def test_moves_lists_every_partition_whose_member_changed() -> None:
    before = {"a": [tp("t", 0), tp("t", 1)], "b": [tp("t", 2)], "gone": [tp("t", 3)]}
    after = {"a": [tp("t", 0)], "b": [tp("t", 1), tp("t", 3)], "c": [tp("t", 2), tp("t", 4)]}
    assert moves(before, after) == [
        Move(tp("t", 1), "a", "b"),
        Move(tp("t", 2), "b", "c"),
        Move(tp("t", 3), "gone", "b"),
        Move(tp("t", 4), None, "c"),
    ]
    assert moves(after, after) == []
    assert moves({"a": [tp("t", 0)]}, {"a": []}) == [Move(tp("t", 0), "a", None)]
