"""Offset specifications of the Kafka source: parsing, resolution, ranges, checkpoints."""

from __future__ import annotations

import pytest
from aiokafka.structs import TopicPartition

from kagent.tools.pipeline.kafka_offsets import (
    EARLIEST,
    LATEST,
    Bounds,
    OffsetRange,
    SourceOptionError,
    from_checkpoint,
    parse_offsets,
    ranges,
    resolve,
    to_checkpoint,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
BOUNDS = {A0: Bounds(5, 20), A1: Bounds(0, 0), B0: Bounds(0, 7)}


def test_parse_keywords_default_and_json() -> None:
    assert parse_offsets(None, "startingOffsets", "earliest") == "earliest"
    assert parse_offsets(" latest ", "startingOffsets", "earliest") == "latest"
    assert parse_offsets('{"a": {"0": 7, "1": -2}, "b": {"0": -1}}', "x", "latest") == {A0: 7, A1: EARLIEST, B0: LATEST}


@pytest.mark.parametrize(
    "text", ["newest", "[1]", '{"a": 3}', '{"a": {"x": 1}}', '{"a": {"0": -3}}', '{"a": {"0": 1.5}}']
)
def test_parse_rejects_naming_the_option(text: str) -> None:
    with pytest.raises(SourceOptionError, match="endingOffsets"):
        parse_offsets(text, "endingOffsets", "latest")


def test_resolve_keywords() -> None:
    assert resolve("earliest", BOUNDS, "startingOffsets", EARLIEST) == {A0: 5, A1: 0, B0: 0}
    assert resolve("latest", BOUNDS, "endingOffsets", LATEST) == {A0: 20, A1: 0, B0: 7}


def test_resolve_per_partition_clamps_and_fills_unnamed() -> None:
    spec = {A0: 2, B0: 99}
    assert resolve(spec, BOUNDS, "startingOffsets", EARLIEST) == {A0: 5, A1: 0, B0: 7}
    assert resolve({A0: 10}, BOUNDS, "endingOffsets", LATEST) == {A0: 10, A1: 0, B0: 7}
    assert resolve({A0: EARLIEST, B0: LATEST}, BOUNDS, "startingOffsets", EARLIEST) == {A0: 5, A1: 0, B0: 7}


def test_resolve_rejects_unknown_partitions() -> None:
    with pytest.raises(SourceOptionError, match=r"startingOffsets: no such partitions a\[9\]"):
        resolve({TopicPartition("a", 9): 0}, BOUNDS, "startingOffsets", EARLIEST)


def test_resolve_by_time_uses_lookup_and_latest_for_none() -> None:
    at_time = {A0: 12, A1: None, B0: None}
    assert resolve("earliest", BOUNDS, "startingOffsets", EARLIEST, at_time) == {A0: 12, A1: 0, B0: 7}


def test_ranges_are_non_empty_and_ordered() -> None:
    start = {A0: 5, A1: 0, B0: 7}
    end = {B0: 7, A1: 0, A0: 20, TopicPartition("c", 0): 3}
    assert ranges(start, end) == [OffsetRange("a", 0, 5, 20), OffsetRange("c", 0, 0, 3)]


def test_checkpoint_roundtrip_is_json_shaped() -> None:
    offsets = {B0: 7, A1: 0, A0: 20}
    checkpoint = to_checkpoint(offsets)
    assert checkpoint == {"a": {"0": 20, "1": 0}, "b": {"0": 7}}
    assert from_checkpoint(checkpoint) == offsets
