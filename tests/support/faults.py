"""Faults the embedded broker cannot cause, made in the client instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["fail_first_send"]


def fail_first_send(monkeypatch: pytest.MonkeyPatch, producer: Any, error: BaseException) -> Callable[[], bool]:
    """Make ``producer.send`` raise ``error`` once, then send for real: a broker refusing a write
    is a fault the embedded broker cannot cause. Returns whether the fault has happened."""
    real_send = producer.send
    pending = [error]

    async def send_failing_once(*args: Any, **kwargs: Any) -> Any:
        if pending:
            raise pending.pop()
        return await real_send(*args, **kwargs)

    monkeypatch.setattr(producer, "send", send_failing_once)
    return lambda: not pending
