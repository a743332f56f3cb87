"""`kagent.core.lag.partition_lag`: KAFKA-5337's rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kagent.core.lag import partition_lag


@pytest.mark.parametrize(
    ("committed", "begin", "end", "reset", "lag"),
    [
        (40, 0, 100, "latest", 60),  # a commit decides, whatever the reset policy
        (40, 0, 100, "earliest", 60),
        (100, 0, 100, "latest", 0),  # caught up
        (120, 0, 100, "earliest", 0),  # committed past the end (log truncated): never negative
        (5, 10, 100, "latest", 95),  # committed before the log start still counts from the commit
        (None, 10, 100, "latest", 0),  # no commit, starts at the end
        (None, 10, 100, "earliest", 90),  # no commit, starts at the log start
        (None, 10, 100, "none", 90),  # any other policy counts every record
        (None, 100, 100, "earliest", 0),
    ],
)
def test_kafka_5337_rule(committed: int | None, begin: int, end: int, reset: str, lag: int) -> None:
    assert partition_lag(committed, begin, end, reset) == lag


def test_latest_is_the_default() -> None:
    assert partition_lag(None, 0, 100) == 0


@given(
    st.none() | st.integers(0, 10**12),
    st.integers(0, 10**12),
    st.integers(0, 10**12),
    st.sampled_from(["latest", "earliest", "none"]),
)
def test_never_negative_and_never_more_than_the_log_holds_without_a_commit(
    committed: int | None, begin: int, end: int, reset: str
) -> None:
    lag = partition_lag(committed, begin, end, reset)
    assert lag >= 0
    if committed is None:
        assert lag <= max(0, end - begin)
