"""How the suite's tests are shared out among pytest-xdist's processes (``-n`` in pyproject's addopts).

A test file is one unit of work, sent whole to one process (its module-scoped servers start once), and
the units go out in the order collected, except the drills of :data:`CPU_HEAVY_FILES`: each keeps both
cores busy for minutes, so they are one unit, run one after another by one process, and first (the
longest chain starts first), rather than beside each other, where each would starve the others and the
tests beside them of CPU. ``tests/conftest.py`` applies this through :class:`FileScheduling`.

(pytest-xdist's own ``--dist loadgroup`` would do it with ``xdist_group`` marks, but its 3.8 sets the
group on a test id attribute that pytest 9.2 no longer reads, so the marks are ignored.)
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

__all__ = ["CPU_HEAVY", "CPU_HEAVY_FILES", "FileScheduling", "unit_of"]

CPU_HEAVY = "cpu-heavy drills"
"""The unit of the drills that keep both cores busy for minutes."""

CPU_HEAVY_FILES = (
    "tests/integration/test_semantic_fuzz_drill.py",  # a million records through one worker
    "tests/integration/test_prometheus_scrape.py",  # 5,000 groups, 700,000 samples a scrape
    "tests/integration/test_failover_drill.py",  # ten SIGKILLs of a worker under traffic
)


def unit_of(nodeid: str) -> str:
    """The unit of work of the test ``nodeid``: :data:`CPU_HEAVY`, or its file."""
    path = nodeid.partition("::")[0]
    return CPU_HEAVY if path in CPU_HEAVY_FILES else path


class FileScheduling(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, where the scope of a test is :func:`unit_of` it."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
