"""The core uses aiokafka's data types, never its network clients.

import-linter (``[tool.importlinter]`` in pyproject.toml) squashes external
packages to their top-level name, so it can forbid ``faust`` to the core but
not ``aiokafka.consumer`` while allowing ``aiokafka.structs``. This test does
that part: it parses every module of ``kagent/core`` and refuses any aiokafka
import outside :data:`ALLOWED`, naming the module and the line.
"""

from __future__ import annotations

import ast

import pytest

from tests.support import REPO

CORE = REPO / "kagent" / "core"

ALLOWED = (
    "aiokafka.structs",
    "aiokafka.protocol",
    "aiokafka.partitioner",
    "aiokafka.cluster",
    "aiokafka.coordinator.assignors",
    "aiokafka.coordinator.protocol",
    "aiokafka.errors",
)
"""The aiokafka modules (and their submodules) the core may import: data types, codecs and pure algorithms."""

CLIENT_NAMES = frozenset({"AIOKafkaConsumer", "AIOKafkaProducer", "AIOKafkaClient"})
"""Refused by name from whichever module they are imported (aiokafka re-exports them at its top)."""


def _allowed(module: str) -> bool:
    return any(module == allowed or module.startswith(f"{allowed}.") for allowed in ALLOWED)


def _is_aiokafka(module: str) -> bool:
    return module == "aiokafka" or module.startswith("aiokafka.")


def aiokafka_violations(source: str, filename: str) -> list[str]:
    """Each aiokafka import in `source` that the core may not make, as ``filename:line: statement``.

    Imports anywhere count, including inside functions and ``if TYPE_CHECKING:`` blocks.
    """
    refused: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            bad = [alias.name for alias in node.names if _is_aiokafka(alias.name) and not _allowed(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_aiokafka(node.module):
            names = {alias.name for alias in node.names}
            bad = [node.module] if not _allowed(node.module) or names & CLIENT_NAMES else []
        else:
            continue
        if bad:
            refused.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return refused


def test_the_core_imports_no_aiokafka_client() -> None:
    modules = sorted(CORE.rglob("*.py"))
    assert len(modules) > 20, f"expected the core's modules under {CORE}"
    refused = [v for path in modules for v in aiokafka_violations(path.read_text(), str(path.relative_to(REPO)))]
    assert not refused, "the core imports aiokafka's client (only data types are allowed):\n" + "\n".join(refused)


@pytest.mark.parametrize(
    "statement",
    [
        "import aiokafka",
        "from aiokafka import AIOKafkaConsumer",
        "from aiokafka.consumer import AIOKafkaConsumer",
        "from aiokafka.producer import AIOKafkaProducer",
        "from aiokafka.client import AIOKafkaClient",
        "import aiokafka.conn",
        "from aiokafka.admin import AIOKafkaAdminClient",
        "def f():\n    from aiokafka.structs import AIOKafkaClient",
    ],
)
def test_the_check_refuses_a_client_import(statement: str) -> None:
    assert aiokafka_violations(f"import os\n{statement}\n", "m.py") != []


@pytest.mark.parametrize(
    "statement",
    [
        "from aiokafka.structs import TopicPartition",
        "from aiokafka.protocol.types import Int32",
        "import aiokafka.protocol.api",
        "from aiokafka.coordinator.assignors.range import RangePartitionAssignor",
        "from aiokafka.errors import KafkaError",
        "from aiokafkax import thing",
    ],
)
def test_the_check_allows_data_types(statement: str) -> None:
    assert aiokafka_violations(statement, "m.py") == []
