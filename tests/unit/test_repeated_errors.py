"""The limit on repeated errors of the client libraries (kagent.worker.shutdown)."""

from __future__ import annotations

import logging

from kagent.worker.shutdown import RepeatedErrorFilter


def record(name: str, msg: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, None, None)


def test_one_line_of_a_kind_per_interval_then_a_count_of_those_held_back() -> None:
    now = [0.0]
    limiter = RepeatedErrorFilter(interval=10, clock=lambda: now[0])
    assert limiter.filter(record("aiokafka.conn", "Unable connect to node %s"))
    passed = [limiter.filter(record("aiokafka.conn", "Unable connect to node %s")) for _ in range(150)]
    assert not any(passed)
    assert limiter.filter(record("aiokafka.client", "Unable connect to node %s"))  # another logger: its own kind
    now[0] = 10.0
    later = record("aiokafka.conn", "Unable connect to node %s")
    assert limiter.filter(later)
    assert later.msg.endswith("(and 150 more like it in the last 10 s)")


def test_kagent_lines_and_info_lines_are_never_held_back() -> None:
    limiter = RepeatedErrorFilter(interval=10, clock=lambda: 0.0)
    assert all(limiter.filter(record("kagent.worker.storage", "malformed at offset %d")) for _ in range(5))
    assert all(limiter.filter(record("aiokafka.conn", "connected", logging.INFO)) for _ in range(5))
