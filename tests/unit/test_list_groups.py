"""ListGroups v5 as kagent declares it: the version aiokafka picks, its bytes, and what it lists."""

from __future__ import annotations

from io import BytesIO

from aiokafka.protocol.admin import ListGroupsRequest_v2, ListGroupsResponse_v0, ListGroupsResponse_v2

from kagent.core.list_groups import (
    ListedGroup,
    ListGroupsRequest_v5,
    ListGroupsResponse_v5,
    ListGroupsWithTypes,
    listed_groups,
)


def test_v5_is_asked_where_the_broker_has_it_and_v2_below() -> None:
    assert isinstance(ListGroupsWithTypes().prepare({16: (0, 5)}), ListGroupsRequest_v5)
    assert isinstance(ListGroupsWithTypes().prepare({16: (0, 4)}), ListGroupsRequest_v2)  # Kafka 2.6-3.6


def test_the_v5_request_filters_nothing() -> None:
    request = ListGroupsWithTypes().prepare({16: (0, 5)})
    # empty compact arrays (length + 1 = 1) of states and of types, no tagged fields
    assert request.encode() == b"\x01\x01\x00"
    assert ListGroupsRequest_v5.FLEXIBLE_VERSION


def test_a_v5_answer_says_each_groups_type() -> None:
    response = ListGroupsResponse_v5(
        0,
        0,
        [
            ("billing", "consumer", "Stable", "classic", {}),
            ("checkout", "consumer", "Stable", "consumer", {}),
            ("connect-sink", "connect", "Empty", "classic", {}),
        ],
        {},
    )
    decoded = ListGroupsResponse_v5.decode(BytesIO(response.encode()))  # through the wire format

    assert listed_groups([decoded]) == {
        "billing": ListedGroup("consumer", "classic"),
        "checkout": ListedGroup("consumer", "consumer"),
        "connect-sink": ListedGroup("connect", "classic"),
    }


def test_answers_below_v5_list_no_type_and_every_brokers_groups_are_merged() -> None:
    one = ListGroupsResponse_v0.decode(BytesIO(ListGroupsResponse_v0(0, [("billing", "consumer")]).encode()))
    two = ListGroupsResponse_v2.decode(BytesIO(ListGroupsResponse_v2(0, 0, [("legacy", "")]).encode()))

    assert listed_groups([one, two]) == {"billing": ListedGroup("consumer"), "legacy": ListedGroup("")}
