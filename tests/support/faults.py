"""Faults the embedded broker cannot cause, made in the client instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

__all__ = ["fail_first_batch"]


def fail_first_batch(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> Callable[[], bool]:
    """Make the first record batch any producer of this process hands to aiokafka
    (``AIOKafkaProducer.send_batch``, what :mod:`kagent.worker.record_batches` sends through) raise
    ``error``, then send for real: a broker refusing a write is a fault the embedded broker cannot
    cause. Returns whether the fault has happened."""
    real_send_batch = AIOKafkaProducer.send_batch
    pending = [error]

    async def send_batch_failing_once(self: AIOKafkaProducer, *args: Any, **kwargs: Any) -> Any:
        if pending:
            raise pending.pop()
        return await real_send_batch(self, *args, **kwargs)

    monkeypatch.setattr(AIOKafkaProducer, "send_batch", send_batch_failing_once)
    return lambda: not pending
