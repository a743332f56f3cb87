"""How fast kagent can measure a simulated member reading: the bound the real-traffic tests of hot and heavy
partitions hold its measured capacity to."""

from __future__ import annotations

from kagent.tools.simulator.member import PACING_SLACK

__all__ = ["PACE_SETTINGS", "fastest_read"]

HEALTH_COMMITS = 30
MIN_DISTANCE = 1.0
PACE_SETTINGS = {"health_commits": str(HEALTH_COMMITS), "health_min_distance": str(MIN_DISTANCE)}
"""A worker's settings under which a member's rate is measured over at least 14 s: at least half of 30
commits, merged to one a second. Under the default 10, a member committing twice a second is measured over
as little as 4 s, where a rate can be a quarter off (:func:`fastest_read`)."""


def fastest_read(delay_ms: float, commits: int = HEALTH_COMMITS, min_distance: float = MIN_DISTANCE) -> float:
    """The most records/s kagent can measure a simulated member reading at its pace, ``1000 / delay_ms``, when
    the worker keeps ``commits`` per partition (``health_commits``) and merges a commit less than
    ``min_distance`` s after the last it kept into it (``health_min_distance``). A rate is measured over at
    least half of the commits, so over a span ``S`` of at least ``(commits // 2 - 1) * min_distance``, and over
    ``S`` it may read high by:

    - the simulator's member reading up to ``PACING_SLACK`` s of work ahead of its pace (it catches up after a
      stall);
    - a window entry's offset committed up to ``min_distance`` after its timestamp (a commit that soon after
      an entry is merged into it);
    - 5 % for the broker's commit timestamps (taken when each commit arrives: a slow round trip moves one).

    46.5/s at 25 ms a record under :data:`PACE_SETTINGS` (the pace: 40/s). Once measured: 44.4/s over the 4 s
    of the default 10 commits, where this bound would be 58/s."""
    span = (commits // 2 - 1) * min_distance
    return 1000 / delay_ms * (span + PACING_SLACK + min_distance) / span * 1.05
