"""The share of a simulated traffic's records each partition should get: the expectation the simulator's
key sampler (:mod:`kagent.tools.simulator.key_skew`) is tested against."""

from __future__ import annotations

from kagent.tools.simulator.key_skew import key_space, zipf_weights
from kagent.tools.simulator.partitioners import key_partition
from kagent.tools.simulator.scenario import TrafficSpec

__all__ = ["partition_shares"]


def partition_shares(traffic: TrafficSpec, partitions: int) -> tuple[float, ...]:
    """The expected fraction of the traffic's records on each partition
    (index = partition), from its key space and Zipf weights; sums to 1."""
    shares = [0.0] * partitions
    keys = key_space(traffic, partitions)
    weights = zipf_weights(len(keys), traffic.zipf_exponent)
    for key, weight in zip(keys, weights, strict=True):
        shares[key_partition(key, partitions)] += weight
    total = sum(weights)
    return tuple(share / total for share in shares)
