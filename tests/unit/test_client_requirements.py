"""The interop tests' clients (``tests/support/client_members.py``): pinned, installed, and required under CI."""

from __future__ import annotations

import sys

import pytest

from tests.support.client_members import CLIENTS, require_client


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_client_is_installed_by_the_test_extra(client: str) -> None:
    assert require_client(client).__name__ == CLIENTS[client][0]


def test_a_missing_client_skips_naming_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # an import of it raises ImportError
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_client("librdkafka")
    assert "confluent-kafka" in str(skipped.value)


def test_a_missing_client_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kafka", None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_client("kafka-python")
    assert "kafka-python" in str(failed.value) and "CI=true" in str(failed.value)
