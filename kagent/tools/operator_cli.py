"""The operator's commands: the cluster's groups from a worker's HTTP API, and the recommendations topic.

- ``kagent groups``: a page of ``GET /api/groups`` as a table (or its JSON).
- ``kagent group NAME``: ``GET /api/groups/{group}``: summary, members, moves, partitions.
- ``kagent recommendations list|show|tail``: the records on ``<app id>-recommendations``, read without a
  consumer group (:mod:`kagent.tools.recommendations_topic`).

Answers come through :mod:`kagent.tools.api_client` and are drawn by :mod:`kagent.tools.terminal_views`.
Every failure (a worker or
cluster that does not answer, an error status, an answer that does not parse) is one line on stderr,
``kagent: ...`` naming the URL or the brokers and what failed, and exit code 1; invalid ``KAGENT_*``
settings exit 2, as every kagent command does. Tables go to a terminal with colours; elsewhere they are as
wide as they need, so that no cell is cut.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import click
from pydantic import BaseModel
from rich.console import Console

from kagent.core.api_records import (
    GroupDetail,
    GroupSort,
    GroupsPage,
    newest_recommendations,
)
from kagent.core.recommendation import Recommendation
from kagent.settings import Settings, SettingsError, load_settings
from kagent.tools.api_client import ApiClient, ApiFailure
from kagent.tools.recommendations_topic import (
    TopicReadError,
    follow_recommendations,
    read_recommendations,
    recommendations_topic,
)
from kagent.tools.terminal_views import (
    group_view,
    groups_table,
    missing_workers,
    recommendation_line,
    recommendation_view,
    recommendations_table,
    render_to,
)

__all__ = ["group", "groups", "recommendations"]


def _settings() -> Settings:
    """kagent's settings from the environment; an invalid one exits 2 with one line (as every command does)."""
    try:
        return load_settings(dict(os.environ))
    except SettingsError as exc:
        click.echo(f"kagent: {exc}", err=True)
        raise SystemExit(2) from None


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Turn the failures the commands expect into one line on stderr and exit code 1; a reader that closed
    the output early (``| head``) ends the command quietly, with exit code 0."""
    try:
        yield
    except (ApiFailure, TopicReadError) as exc:
        click.echo(f"kagent: {exc}", err=True)
        raise SystemExit(1) from None
    except BrokenPipeError:
        # Nothing more can be written; keep the interpreter's last flush of stdout from failing too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None


def _print_json(model: BaseModel) -> None:
    click.echo(model.model_dump_json(indent=2))


_url_option = click.option(
    "--url",
    metavar="URL",
    help="A worker's web root (any worker answers for the cluster) [default: KAGENT_PUBLIC_URL, or "
    "http://KAGENT_WEB_HOST:KAGENT_WEB_PORT].",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")


@click.command(short_help="List the cluster's consumer groups (from a worker's API).")
@_url_option
@click.option(
    "--sort",
    type=click.Choice([s.value for s in GroupSort]),
    default=GroupSort.SKEW.value,
    show_default=True,
    help="What to sort by.",
)
@click.option(
    "--order", type=click.Choice(["asc", "desc"]), help="[default: asc by group, desc (worst first) by any figure]"
)
@click.option("--filter", "query", default="", metavar="Q", help="Only groups whose name contains Q (any case).")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Skip this many groups.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="Show at most this many.")
@_json_option
def groups(url: str | None, sort: str, order: str | None, query: str, offset: int, limit: int, as_json: bool) -> None:
    """The cluster's consumer groups, from a worker's API: status, members, lag, skew, incidents.

    An incomplete answer (a worker did not answer) is said on stderr, naming the workers."""
    base = url or _settings().web_url
    chosen = GroupSort(sort)
    direction: Literal["asc", "desc"] = (
        "asc" if order == "asc" or (order is None and chosen is GroupSort.GROUP) else "desc"
    )
    with _one_line_errors():
        page = asyncio.run(_fetch_groups(base, chosen, direction, offset, limit, query))
        warning = missing_workers(page)
        if warning:
            click.echo(f"kagent: warning: {warning}", err=True)
        if as_json:
            _print_json(page)
        else:
            render_to(Console(highlight=False), groups_table(page, time.time()))


async def _fetch_groups(
    base: str, sort: GroupSort, order: Literal["asc", "desc"], offset: int, limit: int, query: str
) -> GroupsPage:
    async with ApiClient(base) as api:
        return await api.groups(sort=sort, order=order, offset=offset, limit=limit, query=query)


@click.command(short_help="Show one consumer group (from a worker's API).")
@click.argument("name")
@_url_option
@_json_option
def group(name: str, url: str | None, as_json: bool) -> None:
    """One consumer group, from a worker's API: summary, members, the latest recommendation's moves, partitions."""
    base = url or _settings().web_url
    with _one_line_errors():
        detail = asyncio.run(_fetch_group(base, name))
        if as_json:
            _print_json(detail)
        else:
            render_to(Console(highlight=False), group_view(detail, time.time()))


async def _fetch_group(base: str, name: str) -> GroupDetail:
    async with ApiClient(base) as api:
        return await api.group(name)


@click.group(short_help="List, show or follow recommendations (from their topic).")
def recommendations() -> None:
    """Recommendations, read from the topic <KAGENT_APP_ID>-recommendations (no consumer group, no commits)."""


@recommendations.command("list")
@click.option("--group", "group_name", metavar="G", help="Only the recommendations of group G.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Show at most this many.")
@_json_option
def list_recommendations(group_name: str | None, limit: int, as_json: bool) -> None:
    """The newest recommendations on the topic, newest first (each id once); --json prints a JSON array."""
    settings = _settings()
    with _one_line_errors(), _aiokafka_quiet():
        read = asyncio.run(read_recommendations(settings.kafka, recommendations_topic(settings.app_id)))
        _warn_skipped(read.skipped, settings)
        chosen = [r for r in read.recommendations if group_name is None or r.group == group_name]
        newest = newest_recommendations([chosen], limit)
        if as_json:
            click.echo(json.dumps([r.model_dump(mode="json") for r in newest], indent=2))
        else:
            render_to(Console(highlight=False), recommendations_table(newest, time.time()))


@recommendations.command("show")
@click.argument("recommendation_id", metavar="ID")
@_json_option
def show_recommendation(recommendation_id: str, as_json: bool) -> None:
    """The recommendation with id ID (or the one whose id starts with ID), whole."""
    settings = _settings()
    topic = recommendations_topic(settings.app_id)
    with _one_line_errors(), _aiokafka_quiet():
        read = asyncio.run(read_recommendations(settings.kafka, topic))
    _warn_skipped(read.skipped, settings)
    wanted = recommendation_id.lower()
    matches = {r.id: r for r in read.recommendations if r.id.startswith(wanted)}
    if wanted in matches:
        matches = {wanted: matches[wanted]}
    if len(matches) != 1:
        found = "no recommendation" if not matches else f"{len(matches)} recommendations"
        click.echo(f"kagent: {found} with id {recommendation_id} on {topic} at {settings.bootstrap_servers}", err=True)
        raise SystemExit(1)
    [chosen] = matches.values()
    with _one_line_errors():
        if as_json:
            _print_json(chosen)
        else:
            render_to(Console(highlight=False), recommendation_view(chosen, time.time()))


@recommendations.command("tail")
@click.option("--group", "group_name", metavar="G", help="Only the recommendations of group G.")
@_json_option
def tail_recommendations(group_name: str | None, as_json: bool) -> None:
    """Each new recommendation as it arrives, one line each (--json: one JSON document a line), until Ctrl-C."""
    settings = _settings()
    topic = recommendations_topic(settings.app_id)

    def show(recommendation: Recommendation) -> None:
        if group_name is None or recommendation.group == group_name:
            click.echo(recommendation.model_dump_json() if as_json else recommendation_line(recommendation))

    with _one_line_errors(), _aiokafka_quiet():
        asyncio.run(_tail(settings, topic, show))


async def _tail(settings: Settings, topic: str, show: Callable[[Recommendation], None]) -> None:
    """Show each new recommendation until SIGINT or SIGTERM; say on stderr once it follows the topic."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    def ready() -> None:
        click.echo(f"kagent: following {topic} at {settings.bootstrap_servers}; Ctrl-C stops", err=True)

    try:
        async for recommendation in follow_recommendations(settings.kafka, topic, stop, ready):
            show(recommendation)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _warn_skipped(skipped: int, settings: Settings) -> None:
    if skipped:
        topic = recommendations_topic(settings.app_id)
        click.echo(f"kagent: warning: skipped {skipped:,} records of {topic} that are not recommendations", err=True)


@contextmanager
def _aiokafka_quiet() -> Iterator[None]:
    """aiokafka logs nothing below CRITICAL meanwhile: the commands report failures in one line of their own."""
    logger = logging.getLogger("aiokafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
