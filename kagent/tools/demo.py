"""What ``kagent run`` shows: recommendations as they arrive on the recommendations topic.

:func:`render` is pure: the latest recommendation of each group -> a table of
group, generation, skew now -> after, moves and largest member lag. The
watcher reads the topic and redraws the table on a terminal, or prints one
line per recommendation when the output is not a terminal (logs, pipes).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping

from kagent.connections import KafkaConnection
from kagent.core.recommendation import Recommendation

__all__ = ["render", "summary", "watch_recommendations"]

CLEAR_SCREEN = "\x1b[H\x1b[2J"
REDRAW_EVERY = 1.0
"""Seconds between redraws of the live table (its age column moves)."""


def summary(recommendation: Recommendation) -> str:
    """One line: group, generation, skew before -> after, moves, largest member lag before -> after."""
    before = max((m.current_lag for m in recommendation.members), default=0)
    after = max((m.recommended_lag for m in recommendation.members), default=0)
    return (
        f"recommendation for {recommendation.group} (generation {recommendation.generation}, "
        f"{recommendation.protocol or '?'} -> {recommendation.strategy}): "
        f"{recommendation.trigger.metric.value} {recommendation.skew_before:.2f} -> {recommendation.skew_after:.2f}, "
        f"{len(recommendation.moves)} moves, largest member lag {before:g} -> {after:g} {recommendation.lag_unit.value}"
    )


def render(latest: Mapping[str, Recommendation], now: float) -> str:
    """The table of each group's latest recommendation, groups by name."""
    header = ("group", "gen", "skew now -> after", "moves", "largest lag now -> after", "age")
    rows = [header]
    for group in sorted(latest):
        r = latest[group]
        before = max((m.current_lag for m in r.members), default=0)
        after = max((m.recommended_lag for m in r.members), default=0)
        rows.append(
            (
                group,
                str(r.generation),
                f"{r.skew_before:.2f} -> {r.skew_after:.2f}",
                str(len(r.moves)),
                f"{before:g} -> {after:g} {r.lag_unit.value}",
                f"{max(0.0, now - r.time):.0f} s",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    if len(rows) == 1:
        lines.append("(no recommendation yet)")
    return "\n".join(lines)


async def watch_recommendations(
    kafka: KafkaConnection,
    topic: str,
    stop: asyncio.Event,
    write: Callable[[str], None],
    live: bool,
    banner: str = "",
) -> dict[str, Recommendation]:
    """Read ``topic`` until ``stop`` is set, writing each recommendation as it arrives.

    ``live``: redraw ``banner`` and the table every second (a terminal);
    otherwise one :func:`summary` line each.
    Records that are not recommendations, and repeats of an id already shown, are skipped.
    Returns the latest recommendation per group.
    """
    latest: dict[str, Recommendation] = {}
    shown: set[str] = set()
    consumer = kafka.consumer(topic, auto_offset_reset="earliest")
    await consumer.start()
    try:
        drawn = 0.0
        while not stop.is_set():
            if live and time.monotonic() - drawn >= REDRAW_EVERY:
                write(CLEAR_SCREEN + banner + render(latest, time.time()) + "\n")
                drawn = time.monotonic()
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                for record in records:
                    try:
                        recommendation = Recommendation.model_validate(json.loads(record.value))
                    except ValueError:
                        continue
                    if recommendation.id in shown:
                        continue  # the same proposal for the same generation: not news
                    shown.add(recommendation.id)
                    latest[recommendation.group] = recommendation
                    if live:
                        drawn = 0.0
                    else:
                        write(summary(recommendation) + "\n")
    finally:
        await consumer.stop()
    return latest
