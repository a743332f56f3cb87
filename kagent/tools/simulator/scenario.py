"""A simulation scenario as data: topics, keyed traffic, consumer groups.

Every class is frozen and validates itself on construction, raising
`ScenarioError` naming the bad field; a `Scenario` also checks that what it
refers to exists (topics of traffic and groups, partitions of hot keys).
`default_scenario()` is the built-in one: a clearly skewed group, a
balanced one for contrast, a group with a hot partition no assignment fixes,
and, given a kagent worker's URL, a skewed group that applies kagent's
recommendations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "AssignorName",
    "GroupSpec",
    "MemberSpec",
    "Scenario",
    "ScenarioError",
    "TopicSpec",
    "TrafficSpec",
    "default_scenario",
]

#: The assignors a group can use: the names aiokafka's (and Kafka's)
#: RangePartitionAssignor and RoundRobinPartitionAssignor announce, and
#: `kagent`, kagent's RecommendedAssignor (`kagent.client.applying`), which
#: applies the recommendations of the kagent worker at the group's `kagent_url`.
AssignorName = Literal["range", "roundrobin", "kagent"]


class ScenarioError(ValueError):
    """A scenario, or a part of it, is not valid."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ScenarioError(message)


def _unique(names: list[str], what: str) -> None:
    duplicates = sorted({name for name in names if names.count(name) > 1})
    _require(not duplicates, f"duplicate {what}: {', '.join(duplicates)}")


@dataclass(frozen=True)
class TopicSpec:
    """A topic the simulation creates (replication 1) with `partitions` partitions."""

    name: str
    partitions: int

    def __post_init__(self) -> None:
        _require(bool(self.name), "a topic needs a name")
        _require(not self.name.startswith("__"), f"topic {self.name!r}: names starting '__' are Kafka's own")
        _require(self.partitions >= 1, f"topic {self.name!r}: partitions must be >= 1, not {self.partitions}")


@dataclass(frozen=True)
class TrafficSpec:
    """Keyed records produced to `topic` at `rate` records per second.

    Keys are drawn from `keys` distinct keys with Zipf popularity: the key of
    rank r (from 1) has weight 1 / r**zipf_exponent, so 0 is uniform. The most
    popular keys are chosen among those that murmur2 places on
    `hot_partitions` (none: no preference), which makes those partitions hot.
    """

    topic: str
    rate: float
    keys: int
    zipf_exponent: float = 0.0
    hot_partitions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        where = f"traffic to {self.topic!r}"
        _require(self.rate > 0, f"{where}: rate must be > 0 records/s, not {self.rate}")
        _require(self.keys >= 1, f"{where}: keys must be >= 1, not {self.keys}")
        _require(self.zipf_exponent >= 0, f"{where}: zipf_exponent must be >= 0, not {self.zipf_exponent}")
        _require(
            len(set(self.hot_partitions)) == len(self.hot_partitions),
            f"{where}: hot_partitions repeat a partition: {self.hot_partitions}",
        )


@dataclass(frozen=True)
class MemberSpec:
    """One consumer of a group; it takes `processing_delay_ms` per record, its polls and commits included: while
    it has lag it reads 1000 / `processing_delay_ms` records/s, unless the machine cannot keep that pace."""

    name: str
    processing_delay_ms: float = 0.0

    def __post_init__(self) -> None:
        _require(bool(self.name), "a member needs a name")
        _require(
            self.processing_delay_ms >= 0,
            f"member {self.name!r}: processing_delay_ms must be >= 0, not {self.processing_delay_ms}",
        )


@dataclass(frozen=True)
class GroupSpec:
    """A classic consumer group: its members subscribe to `topics` and the
    leader assigns partitions with `assignor`.

    Members commit what they processed every `commit_interval_ms`, on
    revocation and on stop. Each member's client id is `<group>-<member
    name>`; brokers make member ids `<client id>-<uuid>`, so members sort
    (for range and round-robin) in the order of their names.

    With assignor `kagent`, each member's assignor reads the group's
    recommendations and lag from the kagent worker API at `kagent_url`
    (polled every `kagent_refresh_ms`); with `apply_recommendations`, each
    member also runs a RecommendationFollower, which makes the group
    rebalance for a new recommendation at most once per
    `min_apply_interval_ms`.
    """

    group: str
    topics: tuple[str, ...]
    assignor: AssignorName
    members: tuple[MemberSpec, ...]
    commit_interval_ms: int = 1000
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 2000
    rebalance_timeout_ms: int = 10000
    kagent_url: str | None = None
    kagent_refresh_ms: int = 1000
    apply_recommendations: bool = False
    min_apply_interval_ms: int = 60000

    def __post_init__(self) -> None:
        where = f"group {self.group!r}"
        _require(bool(self.group), "a group needs a group id")
        _require(bool(self.topics), f"{where}: subscribes to no topic")
        _unique(list(self.topics), f"topics in {where}")
        _require(
            self.assignor in get_args(AssignorName),
            f"{where}: assignor must be one of {', '.join(get_args(AssignorName))}, not {self.assignor!r}",
        )
        _require(bool(self.members), f"{where}: has no member")
        _unique([member.name for member in self.members], f"member names in {where}")
        _require(self.commit_interval_ms > 0, f"{where}: commit_interval_ms must be > 0")
        _require(
            0 < self.heartbeat_interval_ms < self.session_timeout_ms,
            f"{where}: needs 0 < heartbeat_interval_ms < session_timeout_ms",
        )
        _require(self.rebalance_timeout_ms > 0, f"{where}: rebalance_timeout_ms must be > 0")
        kagent = self.assignor == "kagent"
        _require(
            kagent == (self.kagent_url is not None),
            f"{where}: assignor 'kagent' needs a kagent_url, and only it takes one",
        )
        _require(kagent or not self.apply_recommendations, f"{where}: apply_recommendations needs assignor 'kagent'")
        _require(self.kagent_refresh_ms > 0, f"{where}: kagent_refresh_ms must be > 0")
        _require(self.min_apply_interval_ms >= 0, f"{where}: min_apply_interval_ms must be >= 0")

    def client_id(self, member: MemberSpec) -> str:
        """The client id of `member` in this group."""
        return f"{self.group}-{member.name}"


@dataclass(frozen=True)
class Scenario:
    """Topics, the traffic produced to them and the groups consuming them.

    `seed` makes the key draws reproducible.
    """

    topics: tuple[TopicSpec, ...]
    traffic: tuple[TrafficSpec, ...]
    groups: tuple[GroupSpec, ...]
    seed: int = 0

    def __post_init__(self) -> None:
        _require(bool(self.topics), "a scenario needs a topic")
        _unique([topic.name for topic in self.topics], "topic names")
        _unique([group.group for group in self.groups], "group ids")
        partitions = {topic.name: topic.partitions for topic in self.topics}
        for traffic in self.traffic:
            _require(traffic.topic in partitions, f"traffic to unknown topic {traffic.topic!r}")
            outside = [p for p in traffic.hot_partitions if not 0 <= p < partitions[traffic.topic]]
            _require(
                not outside,
                f"traffic to {traffic.topic!r}: hot partitions {outside} are not partitions of the topic "
                f"(0-{partitions[traffic.topic] - 1})",
            )
        for group in self.groups:
            unknown = [topic for topic in group.topics if topic not in partitions]
            _require(not unknown, f"group {group.group!r} subscribes to unknown topics {unknown}")

    def partitions(self, topic: str) -> int:
        """The partition count of `topic`; KeyError if the scenario has no such topic."""
        for spec in self.topics:
            if spec.name == topic:
                return spec.partitions
        raise KeyError(topic)


def default_scenario(kagent_url: str | None = None) -> Scenario:
    """The built-in scenario: one skewed group, one balanced group and one with
    a hot partition, and with `kagent_url` a skewed group that applies
    kagent's recommendations.

    - `orders` (12 partitions) gets 250 records/s over 1200 keys with Zipf
      popularity (exponent 1.0); the most popular keys land on partitions
      0-3, which take about 86 % of the traffic.
    - `orders-processors` reads it with the range assignor: its first member
      (`c0`, whose member id sorts first) gets partitions 0-3, all the hot
      ones, and is also the slowest (6 ms per record, about 165 records/s
      against about 215 arriving), so its lag grows while the others idle.
      Three members as fast as `c0` would read about 500 records/s, well
      above the traffic with kagent's default 20 % headroom (300/s), so
      what kagent recommends is a rebalance, not more members, even when a
      busy machine slows the simulator by a third (at 8 ms per record the
      margin was a fifth, and a CI machine running the tests beside two busy
      loops measured `c0` at under 100 records/s and got `scale`).
    - `payments` (12 partitions) gets 150 records/s over 1200 keys, uniform;
      `payments-processors` reads it with round-robin, three equal members
      with spare capacity: balanced, lag near zero.
    - `clicks` (3 partitions) gets 40 records/s over 12 keys with Zipf
      popularity (exponent 1.5); the most popular keys land on partition 0,
      which takes about 82 % of the traffic (about 33 records/s).
      `clicks-processors` reads it with round-robin, three members of 50 ms
      per record (20 records/s each), one partition each: whichever member
      holds partition 0 falls behind, and no assignment or member count
      helps (each member already holds one partition, and partition 0 alone
      is more than any member reads), so what kagent recommends is
      `hot-partition`. Light on purpose: 40 records/s in all.

    With `kagent_url` (the API of the kagent worker watching the cluster):

    - `shipments` (6 partitions) gets 80 records/s on each of partitions 0
      and 3 (one key each) and 5 records/s on every partition (60 keys).
    - `shipments-processors` reads it with assignor `kagent`, applying the
      recommendations of the worker at `kagent_url`. Its first assignment,
      with no recommendation or lag known yet, is sticky's, as round-robin's
      for a new group: `c0` (the slowest, 8 ms per record, 125 records/s)
      gets partitions 0 and 3, about 170 records/s, so its lag grows, and
      the others only cold partitions. A recommendation that lowers the
      largest member lag moves one of `c0`'s hot partitions to another
      member, which can only give a cold one back: `c0` is left with about
      90 records/s, which it keeps up with, whatever the lags of the cold
      partitions when kagent recommends. Its follower makes the group
      rebalance to it. The members' capacity, each as fast as `c0`, stays
      above the traffic with kagent's default 20 % headroom, so what kagent
      recommends is a rebalance, not more members.
    """
    topics = [TopicSpec("orders", 12), TopicSpec("payments", 12), TopicSpec("clicks", 3)]
    traffic = [
        TrafficSpec("orders", rate=250, keys=1200, zipf_exponent=1.0, hot_partitions=(0, 1, 2, 3)),
        TrafficSpec("payments", rate=150, keys=1200),
        TrafficSpec("clicks", rate=40, keys=12, zipf_exponent=1.5, hot_partitions=(0,)),
    ]
    groups = [
        GroupSpec(
            "orders-processors",
            topics=("orders",),
            assignor="range",
            members=(MemberSpec("c0", 6.0), MemberSpec("c1", 2.0), MemberSpec("c2", 2.0)),
        ),
        GroupSpec(
            "payments-processors",
            topics=("payments",),
            assignor="roundrobin",
            members=(MemberSpec("c0", 2.0), MemberSpec("c1", 2.0), MemberSpec("c2", 2.0)),
        ),
        GroupSpec(
            "clicks-processors",
            topics=("clicks",),
            assignor="roundrobin",
            members=(MemberSpec("c0", 50.0), MemberSpec("c1", 50.0), MemberSpec("c2", 50.0)),
        ),
    ]
    if kagent_url is not None:
        topics.append(TopicSpec("shipments", 6))
        traffic += [
            TrafficSpec("shipments", rate=160, keys=2, hot_partitions=(0, 3)),
            TrafficSpec("shipments", rate=30, keys=60),
        ]
        groups.append(
            GroupSpec(
                "shipments-processors",
                topics=("shipments",),
                assignor="kagent",
                members=(MemberSpec("c0", 8.0), MemberSpec("c1", 2.0), MemberSpec("c2", 2.0)),
                kagent_url=kagent_url,
                apply_recommendations=True,
            )
        )
    return Scenario(topics=tuple(topics), traffic=tuple(traffic), groups=tuple(groups))
