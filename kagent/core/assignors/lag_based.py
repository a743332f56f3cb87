"""KAFKA-5337's lag-based assignor."""

from __future__ import annotations

from kagent.core.assignors.problem import Assignment, Group


class LagBasedAssignor:
    """KAFKA-5337's `lag` strategy: each topic on its own, lag spread by count first.

    Per topic, partitions are taken in decreasing lag (ties: lower partition
    first), each to the subscribed member with the fewest partitions of that
    topic, ties by the least total lag of that topic, then by member id.

    Balance: per topic, counts within one and lag spread greedily; totals
    across topics are not balanced. Stickiness: none.
    Determinism: the result depends only on the input.

    Because count comes first, the rule deals each topic in rounds: in every
    round each subscribed member takes one partition, the next largest going
    to the member with the least lag of the topic so far. Computing it round by
    round costs one sort per round instead of a heap operation per partition.
    """

    name = "lag"

    def assign(self, group: Group) -> Assignment:
        assignment = group.empty_assignment()
        for topic, subscribers in group.subscribers.items():
            lags = group.lag_by_topic[topic]
            tps = group.topic_partitions(topic)
            by_lag = sorted(range(len(lags)), key=lags.__getitem__, reverse=True)  # stable: ties by partition
            topic_lag = dict.fromkeys(subscribers, 0)
            for start in range(0, len(by_lag), len(subscribers)):
                # subscribers are in member id order and the sort is stable: ties by member id
                members = sorted(subscribers, key=topic_lag.__getitem__)
                for member_id, p in zip(members, by_lag[start : start + len(subscribers)], strict=False):
                    assignment[member_id].append(tps[p])
                    topic_lag[member_id] += lags[p]
        for tps in assignment.values():
            tps.sort()
        return assignment
