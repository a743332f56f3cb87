"""kagent.core.json_bytes.kept: orjson's bytes, in an allocation the size of their content."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import orjson

from kagent.core.json_bytes import kept

VALUE = {"offset": 123_456, "commit_timestamp": 1_700_000_000_000, "leader_epoch": 3, "commits": [[1, 2.5, None]]}


def _held_per_value(make: Callable[[], bytes], count: int = 200) -> float:
    """Bytes of memory still allocated per value after making ``count`` of them with ``make`` and keeping them."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = [make() for _ in range(count)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(held) == count
    return (after - before) / count


def test_the_same_bytes_as_orjson() -> None:
    assert kept(VALUE) == orjson.dumps(VALUE)
    assert type(kept(VALUE)) is bytes


def test_a_kept_value_holds_little_more_than_its_content() -> None:
    size = len(orjson.dumps(VALUE))
    assert _held_per_value(lambda: kept(VALUE)) < size + 100  # a bytes object's header, and the list's slot
