"""Skewed key distributions, placed with Kafka's murmur2 rule.

Pure functions (and a seeded sampler), no I/O. A traffic's keys get Zipf
popularity by rank; `key_space` decides which key holds which rank so that
the popular ones sit on the traffic's hot partitions.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence

from kagent.tools.simulator.partitioners import key_partition
from kagent.tools.simulator.scenario import TrafficSpec

__all__ = ["KeySampler", "key_space", "zipf_weights"]


def zipf_weights(count: int, exponent: float) -> tuple[float, ...]:
    """The unnormalised Zipf weights of ranks 1..count: `1 / rank**exponent`
    (all 1.0 for exponent 0, the uniform distribution)."""
    return tuple(1.0 / rank**exponent for rank in range(1, count + 1))


def _interleave(columns: Iterable[Sequence[bytes]]) -> list[bytes]:
    """First of each column, then second of each, and so on."""
    return [key for row in itertools.zip_longest(*columns) for key in row if key is not None]


def key_space(traffic: TrafficSpec, partitions: int) -> tuple[bytes, ...]:
    """The `traffic.keys` keys of a traffic to a topic with `partitions`
    partitions, most popular (rank 1) first.

    Candidate keys are `<topic>-key-<n>` for n = 0, 1, ...; each partition
    gets the same number of them (ceil(keys / partitions)), so only their
    popularity differs between partitions. Ranks go first to the keys of the
    hot partitions, then to the others, each time alternating between
    partitions so that neighbours in rank spread over them. Deterministic.
    """
    quota = math.ceil(traffic.keys / partitions)
    buckets: list[list[bytes]] = [[] for _ in range(partitions)]
    missing = partitions
    for n in itertools.count():
        key = f"{traffic.topic}-key-{n}".encode()
        bucket = buckets[key_partition(key, partitions)]
        if len(bucket) < quota:
            bucket.append(key)
            missing -= len(bucket) == quota
            if not missing:
                break
    hot = [buckets[p] for p in traffic.hot_partitions]
    cold = [buckets[p] for p in range(partitions) if p not in traffic.hot_partitions]
    return tuple((_interleave(hot) + _interleave(cold))[: traffic.keys])


class KeySampler:
    """Draws keys of a traffic by their Zipf weights from a seeded `random.Random`."""

    def __init__(self, traffic: TrafficSpec, partitions: int, rng: random.Random) -> None:
        self.keys = key_space(traffic, partitions)
        self._cumulative = tuple(itertools.accumulate(zipf_weights(len(self.keys), traffic.zipf_exponent)))
        self._rng = rng

    def draw(self, count: int) -> list[bytes]:
        """`count` keys, independently drawn."""
        return self._rng.choices(self.keys, cum_weights=self._cumulative, k=count)
