"""Changelog keys keep the bytes kagent has always written: a compacted topic keeps one record per key's bytes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kagent.core.table_keys import partition_key
from kagent.worker.changelog import json_key


@given(st.text() | st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_a_key_is_written_as_json_dumps_writes_it_whatever_its_characters(key: str) -> None:
    assert json_key(key) == json.dumps(key).encode()


def test_a_group_partition_key_round_trips_through_its_changelog_bytes() -> None:
    key = partition_key("billing\x7f-ü", "orders", 3)
    assert json.loads(json_key(key)) == key
