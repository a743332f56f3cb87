"""`kagent.tools.simulator.key_skew`: Zipf-skewed keys on the partitions murmur2 gives them."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kagent.tools.simulator.key_skew import KeySampler, key_space, zipf_weights
from kagent.tools.simulator.partitioners import key_partition
from kagent.tools.simulator.scenario import TrafficSpec, default_scenario
from tests.support.key_shares import partition_shares

SKEWED = TrafficSpec("orders", rate=100, keys=600, zipf_exponent=1.0, hot_partitions=(0, 1, 2, 3))
UNIFORM = TrafficSpec("payments", rate=100, keys=600)


def test_zipf_weights() -> None:
    assert zipf_weights(4, 0.0) == (1.0, 1.0, 1.0, 1.0)
    assert zipf_weights(4, 1.0) == (1.0, 1 / 2, 1 / 3, 1 / 4)
    assert zipf_weights(3, 2.0) == (1.0, 1 / 4, 1 / 9)


def test_key_space_is_deterministic_distinct_and_even_over_partitions() -> None:
    keys = key_space(SKEWED, 12)
    assert keys == key_space(SKEWED, 12)
    assert len(keys) == len(set(keys)) == 600
    assert set(Counter(key_partition(key, 12) for key in keys).values()) == {50}


def test_popular_keys_sit_on_the_hot_partitions_in_turn() -> None:
    keys = key_space(SKEWED, 12)
    ranks_on_hot = [key_partition(key, 12) for key in keys[:200]]
    assert ranks_on_hot[:8] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert set(ranks_on_hot) == {0, 1, 2, 3}
    assert all(key_partition(key, 12) not in SKEWED.hot_partitions for key in keys[200:])


def test_fewer_keys_than_partitions() -> None:
    keys = key_space(TrafficSpec("t", rate=1, keys=3, hot_partitions=(5,)), 12)
    assert len(keys) == 3
    assert key_partition(keys[0], 12) == 5


def test_skewed_shares_favour_every_hot_partition() -> None:
    shares = partition_shares(SKEWED, 12)
    assert sum(shares) == pytest.approx(1.0)
    assert min(shares[:4]) > 5 * max(shares[4:])
    assert sum(shares[:4]) > 0.8


def test_uniform_shares_are_equal() -> None:
    assert partition_shares(UNIFORM, 12) == pytest.approx([1 / 12] * 12)


def test_default_scenario_skews_one_range_member() -> None:
    scenario = default_scenario()
    orders = next(t for t in scenario.traffic if t.topic == "orders")
    shares = partition_shares(orders, scenario.partitions("orders"))
    # range over 3 members gives the first member partitions 0-3, the hot ones
    members = [sum(shares[0:4]), sum(shares[4:8]), sum(shares[8:12])]
    assert members[0] > 10 * max(members[1:])


def test_sampler_draws_by_weight_and_repeats_with_its_seed() -> None:
    draws = KeySampler(SKEWED, 12, random.Random(7)).draw(20_000)
    assert draws[:100] == KeySampler(SKEWED, 12, random.Random(7)).draw(100)
    per_partition = Counter(key_partition(key, 12) for key in draws)
    expected = partition_shares(SKEWED, 12)
    for partition in range(12):
        assert per_partition[partition] / len(draws) == pytest.approx(expected[partition], abs=0.015)
