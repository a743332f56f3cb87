"""Groups of real librdkafka (confluent-kafka) and kafka-python consumers, watched by real workers.

Each case starts a consumer group of two real members of one client with one
of its built-in assignors, each member in a thread of its own
(:mod:`tests.support.client_members`), on a topic of 6 partitions the test
writes 20 records to per partition once the group has formed. One member
reads and commits everything; the other reads the first 2 records of each of
its partitions and stops there (it has fallen behind): a skewed group.

What the embedded broker (Tansu 0.6) lets a watcher see of such a group, and
what these tests assert of each side:

- **The ``admin-api`` source, as users run it against a cluster.** Tansu's
  DescribeGroups names the members (their real ids) and nothing else: client
  id, host, protocol, subscription and assignment come back empty for every
  client and every request version (its storage layer answers so; measured
  with librdkafka 2.16 joining with JoinGroup v5 / SyncGroup v3, and with v0 /
  v0 under ``api.version.request=false`` and ``broker.version.fallback=0.9.0``,
  kafka-python 2.3 with v5 / v3 (3.0 with v7 / v5), and aiokafka with v5 / v3). So the
  worker shows the real member ids, each member's partitions and lag unknown
  (null, never "none" and 0), no skew and no recommendation, and every
  partition with its committed offset and its lag (end offset minus committed,
  as the test computes) on the unknown member. A member leaving and another
  joining shows as the new set of members (DescribeGroups says no generation).
- **The clients' own bytes, taken on the wire.** A recording relay in front of
  the broker (:mod:`tests.support.wire_capture`) keeps each JoinGroup and
  SyncGroup. Their subscription and assignment blobs decode through kagent's
  codec to exactly what each client reports holding; the DescribeGroups answer
  a Kafka broker would give with them decodes through the ``admin-api``
  source's own function to the same; and the ``GroupMetadataValue`` record a
  coordinator writes for that generation (encoded from Kafka's schema with
  aiokafka's types, not kagent's codec, the blobs as sent) goes to
  ``__consumer_offsets`` with the group's commits, where a second real worker
  (source ``offsets-topic``) shows the group's generation, assignor, member
  ids, client ids, hosts, each member's partitions and lag, and a rebalance
  recommendation whose moves take real partitions from the member that fell
  behind to the other.

Both workers and the broker are shared by the module's cases.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from kagent.core.consumer_offsets import GroupMetadata, decode, decode_assignment, decode_subscription
from kagent.core.events import GroupAssigned
from kagent.core.group_polling import DescribedGroup, DescribedMember, group_assigned
from kagent.core.ingest import checked_events
from kagent.tools.embedded import EmbeddedBroker
from tests.support.client_members import ClientMember, MemberState
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    OffsetsTopicMessage,
    offset_commit,
    produce,
    publish,
)
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.wire_capture import CapturedGeneration, WireRecorder, generations, recorded_broker
from tests.support.worker import FAST, Worker, running_workers

pytestmark = pytest.mark.integration

PARTITIONS = 6
RECORDS = 20
"""Records per partition, written once the group has formed."""
BEHIND_AT = 2
"""The offset the member that falls behind stops at, on each partition it holds."""
CASES = [
    ("librdkafka", "range"),
    ("librdkafka", "roundrobin"),
    ("librdkafka", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
]


@dataclass(frozen=True)
class Cluster:
    """The module's broker behind its recording relay, and the two workers watching it."""

    broker: EmbeddedBroker
    bootstrap: str
    relay: WireRecorder
    admin: Worker
    """Source ``admin-api``: what a user of a cluster without ``__consumer_offsets`` access runs."""
    offsets: Worker
    """Source ``offsets-topic``: fed the records a coordinator would write from the clients' bytes."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory: Path = tmp_path_factory.mktemp("interop")
    with recorded_broker(directory) as (broker, relay):
        asyncio.run(broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS}))
        bootstrap = relay.bootstrap_servers
        with running_workers(bootstrap, directory) as start:
            admin = start("interop-admin", **FAST, source="admin-api")
            offsets = start("interop-offsets", **FAST, min_total_lag="10")
            admin.wait_ready()
            offsets.wait_ready()
            yield Cluster(broker, bootstrap, relay, admin, offsets)
            relay.exchanges()  # raises if the relay could not decode a group request or answer


def members_of(
    client: str, strategy: str, bootstrap: str, group: str, topic: str, limits: list[int | None]
) -> list[ClientMember]:
    return [
        ClientMember(client, bootstrap, group, topic, f"{group}-{index}", strategy, limit)
        for index, limit in enumerate(limits)
    ]


def states(members: list[ClientMember]) -> list[MemberState]:
    return [member.state() for member in members]


def wait_holding(members: list[ClientMember], partitions: int, timeout: float = 60) -> list[MemberState]:
    """Until ``members`` hold ``partitions`` partitions between them, each some, each once; their states."""

    def holding() -> list[MemberState] | None:
        now = states(members)
        held = [tp for state in now for tp in state.assignment]
        settled = len(held) == len(set(held)) == partitions and all(s.assignment and s.member_id for s in now)
        return now if settled else None

    return wait_until(holding, timeout, f"{len(members)} members to hold {partitions} partitions", interval=0.2)


def api(worker: Worker, path: str, predicate: Callable[[Any], bool], timeout: float, what: str) -> Any:
    """``worker``'s answer at ``path`` once ``predicate`` holds of it."""
    seen: list[Any] = []

    def answered() -> Any:
        worker.check_alive()
        body = get_json(worker.url + path, timeout=2)
        seen[:] = [body]
        return body if body is not None and predicate(body) else None

    return wait_until(
        answered, timeout, what, interval=0.3, detail=lambda: f"last answer: {seen}\n{worker.log_tail(60)}"
    )


def last_generation(relay: WireRecorder, group: str, clients: dict[str, MemberState]) -> CapturedGeneration:
    """The latest generation of ``group`` on the wire, once it is the one ``clients`` (by member id) hold.

    A member can hold its partitions a moment before the leader's SyncGroup answer is through the relay
    (the generation is complete only then); and a cooperative rebalance has a first generation of
    the same members in which the newcomer holds nothing: hence the wait for what the clients hold.
    """

    def settled() -> CapturedGeneration | None:
        seen = generations(relay.exchanges(group=group), group)
        if not seen or {m.member_id for m in seen[-1].members} != set(clients):
            return None
        holds = {m.member_id: set(decode_assignment(m.assignment).partitions) for m in seen[-1].members}
        return seen[-1] if holds == {i: set(state.assignment) for i, state in clients.items()} else None

    return wait_until(settled, 30, f"the generation of {sorted(clients)} on the wire", interval=0.2)


def held(state: MemberState) -> list[tuple[str, int]]:
    return sorted((tp.topic, tp.partition) for tp in state.assignment)


def refs(partitions: Any) -> list[tuple[str, int]]:
    return sorted((p["topic"], p["partition"]) for p in partitions)


def the_decoded_group_is_what_the_clients_hold(
    generation: CapturedGeneration, clients: dict[str, MemberState], topic: str
) -> OffsetsTopicMessage:
    """The wire's blobs decode through kagent's codec, the ``admin-api`` source's decoding and the
    coordinator record's, each to what the clients hold; returns that record's ``__consumer_offsets`` message."""
    assert {m.member_id for m in generation.members} == set(clients)
    for member in generation.members:
        assert decode_subscription(member.subscription).topics == (topic,)
        assert member.received == member.assignment  # what the leader gave is what the member got
        assert sorted(decode_assignment(member.assignment).partitions) == sorted(clients[member.member_id].assignment)
    # As a Kafka broker's DescribeGroups would answer with these bytes, through the admin-api source's decoding.
    described = DescribedGroup(
        group=generation.group,
        state="Stable",
        protocol_type="consumer",
        protocol=generation.protocol,
        members=tuple(
            DescribedMember(m.member_id, m.client_id, m.client_host, m.subscription, m.assignment)
            for m in generation.members
        ),
    )
    described_assignment, malformed = group_assigned(described)
    assert malformed == []
    # As a coordinator writes them to __consumer_offsets, through the offsets-topic source's decoding.
    message = generation.message(int(time.time() * 1000))
    record = decode(message.key, message.value)
    assert isinstance(record, GroupMetadata) and record.generation == generation.generation
    (event,) = checked_events(record)
    assert isinstance(event, GroupAssigned)
    for assigned in (described_assignment, event):
        assert {m.member_id: refs(p.model_dump() for p in m.partitions or ()) for m in assigned.members} == {
            member_id: held(state) for member_id, state in clients.items()
        }
        assert assigned.protocol == generation.protocol
    return message


@pytest.mark.parametrize(("client", "strategy"), CASES)
def test_a_real_group_is_watched_and_decoded_from_its_own_bytes(
    cluster: Cluster, client: str, strategy: str, drill_figures: Callable[[str], None]
) -> None:
    group = f"interop-{client}-{strategy}"
    topic = f"{group}-orders"
    asyncio.run(cluster.broker.create_topics({topic: PARTITIONS}))
    members = members_of(client, strategy, cluster.bootstrap, group, topic, [None, BEHIND_AT])
    for member in members:
        member.start()
    try:
        wait_holding(members, PARTITIONS)
        asyncio.run(produce(cluster.bootstrap, topic, dict.fromkeys(range(PARTITIONS), RECORDS)))

        def committed_all() -> list[MemberState] | None:
            now = states(members)
            expected = [{tp: RECORDS for tp in now[0].assignment}, {tp: BEHIND_AT for tp in now[1].assignment}]
            return now if [state.committed for state in now] == expected else None

        now = wait_until(committed_all, 60, "the members' commits", interval=0.2)
        clients = {state.member_id: state for state in now if state.member_id is not None}
        committed = {tp.partition: offset for state in now for tp, offset in state.committed.items()}
        lag = {partition: RECORDS - offset for partition, offset in committed.items()}
        behind, ahead = now[1].member_id, now[0].member_id

        # The admin-api worker: the real member ids; their partitions and lag unknown; every partition's lag.
        def described(body: dict[str, Any]) -> bool:
            return sorted(m["member_id"] for m in body["members"]) == sorted(clients) and [
                (p["partition"], p["committed"], p["offset_lag"]) for p in body["partitions"]
            ] == [(p, committed[p], lag[p]) for p in range(PARTITIONS)]

        shown = api(cluster.admin, f"api/groups/{group}", described, 60, f"{group} on the admin-api worker")
        assert [(m["partitions"], m["offset_lag"], m["lag"]) for m in shown["members"]] == [(None, None, None)] * 2
        assert [(m["client_id"], m["client_host"]) for m in shown["members"]] == [("", "")] * 2  # Tansu's answer
        assert [p["member_id"] for p in shown["partitions"]] == [None] * PARTITIONS
        unassigned = shown["unassigned"]
        assert unassigned["member_id"] == "unknown" and unassigned["offset_lag"] == sum(lag.values())
        assert refs(unassigned["partitions"]) == [(topic, p) for p in range(PARTITIONS)]
        summary = shown["summary"]
        assert (summary["members"], summary["generation"], summary["skew"]) == (2, None, None)
        assert summary["total_lag"] == sum(lag.values()) and shown["recommendation"] is None

        # The clients' own bytes, from the wire: decoded, and written as a coordinator writes them.
        generation = last_generation(cluster.relay, group, clients)
        if client == "kafka-python":
            assert {state.generation for state in now} == {generation.generation}
        message = the_decoded_group_is_what_the_clients_hold(generation, clients, topic)
        commits = [offset_commit(group, topic, p, offset) for p, offset in sorted(committed.items())]
        asyncio.run(publish(cluster.bootstrap, [message, *commits], by_group=True))

        def recommended(body: dict[str, Any]) -> bool:
            # The lag is read once known: a busy machine may delay an end-offsets poll past staleness (1.5 s at
            # FAST's 0.5 s polls), when the figures are rightly unknown until the next.
            return (
                body["summary"]["generation"] == generation.generation
                and body["recommendation"] is not None
                and all(p["offset_lag"] is not None for p in body["partitions"])  # so the members' and the total
            )

        shown = api(cluster.offsets, f"api/groups/{group}", recommended, 60, f"{group}'s recommendation, lag known")
        summary = shown["summary"]
        assert (summary["protocol"], summary["members"], summary["total_lag"]) == (strategy, 2, sum(lag.values()))
        by_id = {m.member_id: m for m in generation.members}
        assert [
            (m["member_id"], m["client_id"], m["client_host"], refs(m["partitions"])) for m in shown["members"]
        ] == [
            (member_id, by_id[member_id].client_id, "/127.0.0.1", held(clients[member_id]))
            for member_id in sorted(clients)
        ]
        assert {m["client_id"] for m in shown["members"]} == {member.client_id for member in members}
        member_lag = {m["member_id"]: m["offset_lag"] for m in shown["members"]}
        assert member_lag == {
            member_id: sum(lag[tp.partition] for tp in state.assignment) for member_id, state in clients.items()
        }
        owner = {tp.partition: member_id for member_id, state in clients.items() for tp in state.assignment}
        assert [(p["partition"], p["member_id"], p["committed"], p["offset_lag"]) for p in shown["partitions"]] == [
            (p, owner[p], committed[p], lag[p]) for p in range(PARTITIONS)
        ]
        assert shown["unassigned"] is None
        recommendation = shown["recommendation"]
        assert recommendation["kind"] == "rebalance" and recommendation["moves"]
        for move in recommendation["moves"]:  # real members, and partitions the one it moves from holds
            assert {move["from_member"], move["to_member"]} == {behind, ahead}
            assert TopicPartition(move["topic"], move["partition"]) in clients[move["from_member"]].assignment
        assert any(move["from_member"] == behind and lag[move["partition"]] for move in recommendation["moves"])
        drill_figures(
            f"{client} {strategy}: members {sorted(clients)}; committed {committed}; lag {lag}; "
            f"admin-api showed members' partitions and lag null and {unassigned['offset_lag']} records unknown-held; "
            f"offsets-topic showed generation {summary['generation']}, member lag {member_lag}, moves "
            f"{[(m['partition'], m['from_member'], m['to_member']) for m in recommendation['moves']]}"
        )
    finally:
        for member in members:
            member.stop()


@pytest.mark.parametrize(("client", "strategy"), [("librdkafka", "cooperative-sticky"), ("kafka-python", "range")])
def test_a_member_leaving_and_another_joining_show_as_the_new_generation(
    cluster: Cluster, client: str, strategy: str, drill_figures: Callable[[str], None]
) -> None:
    group = f"interop-churn-{client}-{strategy}"
    topic = f"{group}-orders"
    asyncio.run(cluster.broker.create_topics({topic: PARTITIONS}))
    # Records to read and commit: the API shows a group by what it reads, and Tansu says not what its members do.
    asyncio.run(produce(cluster.bootstrap, topic, dict.fromkeys(range(PARTITIONS), RECORDS)))
    first, second, third = members_of(client, strategy, cluster.bootstrap, group, topic, [None, None, None])
    started = [first, second]
    for member in started:
        member.start()
    try:
        shown_members: list[list[str]] = []

        def admin_members(expected: list[MemberState]) -> None:
            ids = sorted(str(state.member_id) for state in expected)
            api(
                cluster.admin,
                f"api/groups/{group}",
                lambda body: sorted(m["member_id"] for m in body["members"]) == ids,
                60,
                f"members {ids} of {group} on the admin-api worker",
            )
            shown_members.append(ids)

        both = wait_holding([first, second], PARTITIONS)
        admin_members(both)
        before = last_generation(cluster.relay, group, {str(s.member_id): s for s in both})

        second.stop()
        (alone,) = wait_holding([first], PARTITIONS)
        admin_members([alone])
        third.start()
        started.append(third)
        after = wait_holding([first, third], PARTITIONS)
        admin_members(after)

        clients = {str(state.member_id): state for state in after}
        generation = last_generation(cluster.relay, group, clients)
        assert generation.generation > before.generation
        if client == "kafka-python":
            assert {state.generation for state in after} == {generation.generation}
        seen = generations(cluster.relay.exchanges(group=group), group)
        ids = [g.generation for g in seen]
        assert before.generation in ids and ids[-1] == generation.generation  # every one completed, in order
        the_decoded_group_is_what_the_clients_hold(generation, clients, topic)
        if strategy == "cooperative-sticky":
            # The member that stayed says in its subscription what it owned before the last rebalance.
            (stayed,) = [m for m in generation.members if m.member_id == alone.member_id]
            owned = decode_subscription(stayed.subscription).owned_partitions
            previous = {
                tp
                for member in seen[-2].members
                if member.member_id == alone.member_id
                for tp in decode_assignment(member.assignment).partitions
            }
            assert owned is not None and set(owned) == previous
        asyncio.run(publish(cluster.bootstrap, [g.message(int(time.time() * 1000)) for g in seen], by_group=True))
        shown = api(
            cluster.offsets,
            f"api/groups/{group}",
            lambda body: body["summary"]["generation"] == generation.generation,
            60,
            f"generation {generation.generation} of {group} on the offsets-topic worker",
        )
        assert {m["member_id"]: refs(m["partitions"]) for m in shown["members"]} == {
            member_id: held(state) for member_id, state in clients.items()
        }
        drill_figures(
            f"{client} {strategy} churn: admin-api members {shown_members}; generations on the wire {ids}; "
            f"offsets-topic shows generation {shown['summary']['generation']}"
        )
    finally:
        for member in started:
            member.stop()
