"""`kagent.worker.list_offsets`, its pure part: routing by leader, the request, and each error path
of an answer, without a broker.

The metadata is aiokafka's real ``ClusterMetadata`` fed a Metadata response, and
the ListOffsets answers are aiokafka's real response structs, encoded to wire
bytes and decoded back, so field names and versions are what a broker sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from io import BytesIO

import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol.api import Response
from aiokafka.protocol.metadata import MetadataResponse_v1
from aiokafka.protocol.offset import (
    OffsetRequest_v0,
    OffsetRequest_v1,
    OffsetRequest_v3,
    OffsetResponse_v0,
    OffsetResponse_v1,
    OffsetResponse_v3,
)
from aiokafka.structs import TopicPartition as TP

from kagent.worker.list_offsets import (
    EARLIEST,
    LATEST,
    ListOffsetsResult,
    OffsetAnswer,
    Offsets,
    Reason,
    Unavailable,
    combine,
    offset_request,
    parse_response,
    partition_counts,
    route,
    send_order,
    suspects_after,
    unavailable_for,
    wants_fresh_metadata,
)

LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
FENCED_LEADER_EPOCH = 74
TOPIC_AUTHORIZATION_FAILED = 29


def cluster(topics: Sequence[tuple[int, str, Sequence[tuple[int, int]]]]) -> ClusterMetadata:
    """aiokafka's metadata after a Metadata v1 answer of brokers 1 and 2 and ``topics``:
    (error code, name, [(partition, leader)])."""
    response = MetadataResponse_v1(
        [(1, "127.0.0.1", 9092, None), (2, "127.0.0.1", 9093, None)],
        1,
        [
            (error, name, False, [(0, p, leader, [leader], [leader]) for p, leader in partitions])
            for error, name, partitions in topics
        ],
    )
    metadata = ClusterMetadata()
    metadata.update_metadata(MetadataResponse_v1.decode(BytesIO(response.encode())))
    return metadata


def wire(response: Response) -> Response:
    """``response`` through its wire bytes, as aiokafka hands it over."""
    return type(response).decode(BytesIO(response.encode()))


METADATA = cluster(
    [
        (0, "orders", [(0, 1), (1, 2), (2, 1)]),
        (0, "billing", [(0, 2), (1, -1)]),
        (LEADER_NOT_AVAILABLE, "creating", []),
    ]
)


def test_partitions_are_grouped_by_leader_and_the_impossible_ones_are_answered_without_asking() -> None:
    routing = route(
        [
            TP("orders", 2),
            TP("orders", 0),
            TP("orders", 1),
            TP("billing", 0),
            TP("orders", 0),
            TP("orders", 5),
            TP("missing", 0),
            TP("billing", 1),
            TP("creating", 0),
        ],
        METADATA,
    )

    assert routing.by_leader == {1: [TP("orders", 0), TP("orders", 2)], 2: [TP("billing", 0), TP("orders", 1)]}
    assert routing.unavailable == {
        TP("orders", 5): Unavailable(Reason.UNKNOWN_PARTITION, "topic has 3 partitions"),
        TP("missing", 0): Unavailable(Reason.UNKNOWN_PARTITION, "topic not in the cluster's metadata"),
        TP("creating", 0): Unavailable(Reason.UNKNOWN_PARTITION, "topic not in the cluster's metadata"),
        TP("billing", 1): Unavailable(Reason.NO_LEADER, "no leader in the cluster's metadata"),
    }


def test_nothing_asked_routes_nothing() -> None:
    routing = route([], METADATA)
    assert routing.by_leader == {} and routing.unavailable == {}


def test_the_request_names_each_topic_once_with_its_partitions_in_order() -> None:
    request = offset_request([TP("orders", 2), TP("billing", 0), TP("orders", 0)], LATEST)

    v3 = request.prepare({2: (0, 9)})  # the broker speaks v0-v9: aiokafka's highest is v3
    assert isinstance(v3, OffsetRequest_v3)
    assert v3.to_object() == {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"topic": "billing", "partitions": [{"partition": 0, "timestamp": -1}]},
            {"topic": "orders", "partitions": [{"partition": 0, "timestamp": -1}, {"partition": 2, "timestamp": -1}]},
        ],
    }
    assert isinstance(request.prepare({2: (1, 1)}), OffsetRequest_v1)
    v0 = offset_request([TP("orders", 0)], EARLIEST).prepare({2: (0, 0)})
    assert isinstance(v0, OffsetRequest_v0)
    assert v0.to_object()["topics"] == [
        {"topic": "orders", "partitions": [{"partition": 0, "timestamp": -2, "max_offsets": 1}]}
    ]


@pytest.mark.parametrize(
    ("error_code", "expected"),
    [
        (UNKNOWN_TOPIC_OR_PARTITION, Unavailable(Reason.UNKNOWN_PARTITION, "UnknownTopicOrPartitionError")),
        (NOT_LEADER_OR_FOLLOWER, Unavailable(Reason.NO_LEADER, "NotLeaderForPartitionError")),
        (LEADER_NOT_AVAILABLE, Unavailable(Reason.NO_LEADER, "LeaderNotAvailableError")),
        (TOPIC_AUTHORIZATION_FAILED, Unavailable(Reason.ERROR_CODE, "TopicAuthorizationFailedError (29)")),
        (FENCED_LEADER_EPOCH, Unavailable(Reason.ERROR_CODE, "UnknownError (74)")),
    ],
)
def test_each_error_code_means_what_it_says_for_its_partition(error_code: int, expected: Unavailable) -> None:
    assert unavailable_for(error_code) == expected


def test_an_answer_gives_each_partition_its_offset_or_its_own_error() -> None:
    response = wire(
        OffsetResponse_v3(
            0,
            [
                (
                    "orders",
                    [(0, 0, -1, 42), (1, NOT_LEADER_OR_FOLLOWER, -1, -1), (2, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)],
                ),
                ("billing", [(0, TOPIC_AUTHORIZATION_FAILED, -1, -1), (7, 0, -1, 99)]),  # 7 was not asked
            ],
        )
    )
    asked = {TP("orders", 0), TP("orders", 1), TP("orders", 2), TP("billing", 0), TP("billing", 1)}

    assert parse_response(response, asked) == {
        TP("orders", 0): 42,
        TP("orders", 1): Unavailable(Reason.NO_LEADER, "NotLeaderForPartitionError"),
        TP("orders", 2): Unavailable(Reason.UNKNOWN_PARTITION, "UnknownTopicOrPartitionError"),
        TP("billing", 0): Unavailable(Reason.ERROR_CODE, "TopicAuthorizationFailedError (29)"),
        TP("billing", 1): Unavailable(Reason.ERROR_CODE, "left out of its leader's answer"),
    }


def test_v1_and_v0_answers_read_alike() -> None:
    v1 = wire(OffsetResponse_v1([("orders", [(0, 0, -1, 42)])]))
    v0 = wire(OffsetResponse_v0([("orders", [(0, 0, [42]), (1, 0, [])])]))

    assert parse_response(v1, {TP("orders", 0)}) == {TP("orders", 0): 42}
    assert parse_response(v0, {TP("orders", 0), TP("orders", 1)}) == {
        TP("orders", 0): 42,
        TP("orders", 1): Unavailable(Reason.ERROR_CODE, "answered without an offset"),
    }


def test_a_partition_has_offsets_only_when_both_timestamps_gave_one() -> None:
    no_leader = Unavailable(Reason.NO_LEADER, "NotLeaderForPartitionError")
    failed = Unavailable(Reason.REQUEST_FAILED, "node 2 did not answer within 5 s")
    earliest: dict[TP, OffsetAnswer] = {TP("t", 0): 3, TP("t", 1): no_leader, TP("t", 2): 0, TP("t", 3): no_leader}
    latest: dict[TP, OffsetAnswer] = {TP("t", 0): 10, TP("t", 1): 8, TP("t", 2): failed, TP("t", 3): failed}

    assert combine(earliest, latest) == {
        TP("t", 0): Offsets(log_start=3, log_end=10),
        TP("t", 1): no_leader,
        TP("t", 2): failed,
        TP("t", 3): failed,  # the latest answer's reason first
    }
    with pytest.raises(ValueError, match="different partitions"):
        combine({TP("t", 0): 3}, {TP("t", 1): 4})


@pytest.mark.parametrize(
    ("reason", "stale"),
    [
        (Reason.UNKNOWN_PARTITION, True),
        (Reason.NO_LEADER, True),
        (Reason.REQUEST_FAILED, True),
        (Reason.ERROR_CODE, False),
    ],
)
def test_what_calls_for_fresh_metadata(reason: Reason, stale: bool) -> None:
    assert wants_fresh_metadata([Offsets(0, 1), Unavailable(reason)]) is stale
    assert not wants_fresh_metadata([Offsets(0, 1)])


def test_the_result_splits_into_figures_and_failures() -> None:
    gone = Unavailable(Reason.UNKNOWN_PARTITION, "topic has 2 partitions")
    result = ListOffsetsResult({TP("t", 0): Offsets(2, 9), TP("t", 5): gone}, {"t": 2})

    assert result.log_start == {TP("t", 0): 2}
    assert result.log_end == {TP("t", 0): 9}
    assert result.unavailable == {TP("t", 5): gone}


def test_partition_counts_are_those_the_metadata_knows() -> None:
    assert partition_counts(["orders", "billing", "missing"], METADATA) == {"orders": 3, "billing": 2}


def test_suspected_leaders_are_sent_to_last() -> None:
    assert send_order({7: [], 3: [], 5: []}, suspects=()) == [3, 5, 7]
    assert send_order([7, 3, 5], suspects={3}) == [5, 7, 3]


def test_the_first_leader_to_fail_is_suspected_not_those_queued_behind_it() -> None:
    # 5 hung while being connected to; 7, queued behind it for aiokafka's connection lock, failed too
    assert suspects_after([1, 5, 7], failed={5, 7}, suspects=()) == {5}
    # 5, sent last, failed again; 7 went first and answered
    assert suspects_after([1, 7, 5], failed={5}, suspects={5}) == {5}
    # a second hung leader, 9, is found the next call
    assert suspects_after([1, 7, 9, 5], failed={9, 5}, suspects={5}) == {5, 9}
    # a suspect that answers is one no more
    assert suspects_after([1, 7, 5], failed=set(), suspects={5}) == frozenset()
