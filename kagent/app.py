"""The Faust application: a thin shell that wires kagent's topics and tables to its cores.

Start a worker with ``faust -A kagent.app worker -l info`` (or ``kagent worker``).
Settings come from ``KAGENT_*`` variables (:mod:`kagent.settings`); an invalid
one stops the import with a one-line message and exit code 2.
"""

from __future__ import annotations

import sys

import faust
from faust.web import Request, Response, View

from kagent.settings import Settings, SettingsError, load_settings

__all__ = ["app", "create_app", "settings"]


def _load_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"kagent: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def create_app(settings: Settings) -> faust.App:
    """Build the Faust app for ``settings`` (no I/O until a worker starts it)."""
    return faust.App(
        settings.app_id,
        broker=settings.broker_url,
        store="memory://",
        datadir=str(settings.data_dir),
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        broker_session_timeout=settings.session_timeout,
        broker_heartbeat_interval=settings.heartbeat_interval,
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
    )


settings = _load_or_exit()
settings.data_dir.mkdir(parents=True, exist_ok=True)
app = create_app(settings)

derived_events_topic = app.topic(
    f"{settings.app_id}-derived-events",
    partitions=settings.topic_partitions,
    internal=True,
    key_type=bytes,
    value_type=bytes,
    key_serializer="raw",
    value_serializer="raw",
)
"""Events derived from ``__consumer_offsets``, keyed by group."""

events_per_group = app.Table("events-per-group", default=int, key_type=str, value_type=int)
"""Derived events seen per group (changelog-backed)."""


@app.agent(derived_events_topic)
async def count_events(stream: faust.StreamT[bytes]) -> None:
    """Count the derived events of each group into :data:`events_per_group`."""
    async for key, _event in stream.items():
        events_per_group[key.decode(errors="replace")] += 1


@app.page("/groups/")
class GroupsView(View):
    """``GET /groups/``: the groups this worker holds and their event counts."""

    async def get(self, request: Request) -> Response:
        return self.json({"groups": dict(events_per_group.items())})
