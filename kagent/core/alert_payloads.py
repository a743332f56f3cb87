"""What each alert sink sends for an incident transition: pure functions of the transition.

- Alertmanager (API v2, ``POST /api/v2/alerts``): :func:`alertmanager_alert`
  for a transition and :func:`alertmanager_open_alert` for the periodic
  re-send of an open incident, each one *postable alert* (the request body
  is a JSON list of them). The labels identify the incident's alert and
  nothing else (``alertname``, ``group``, ``kind``, ``severity``,
  ``cluster``), so an update changes the annotations of the same alert and
  a resolve ends it; everything descriptive is an annotation.
- PagerDuty (Events API v2, ``POST /v2/enqueue``): :func:`pagerduty_event`,
  ``trigger`` on open and update, ``resolve`` on resolve, the incident id as
  ``dedup_key``.
- Webhooks: :func:`render_webhook`, the transition record as it is on the
  incidents topic (the ``json`` format), or a Jinja2 template's output: the
  built-in ``slack`` (incoming webhook) and ``teams`` (incoming webhook or
  Workflows, an Adaptive Card) sets under ``kagent/templates/alerts/``, or
  the operator's own (compiled by :func:`compile_template`).

Times are RFC 3339 in UTC with milliseconds (:func:`rfc3339`). Pure, but for
reading the built-in templates from the package once (:func:`builtin_templates`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import Enum
from importlib import resources
from typing import Any, NamedTuple
from urllib.parse import quote

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from kagent.core.drain_time import drain_text
from kagent.core.hot_partitions import hot_partition_text
from kagent.core.incidents import CulpritPartition, Incident, IncidentAction, IncidentKind, IncidentTransition
from kagent.core.policy import LagUnit
from kagent.core.recommendation import PartitionMove

__all__ = [
    "ALERTNAME",
    "PAGERDUTY_SUMMARY_MAX",
    "WebhookFormat",
    "WebhookTemplates",
    "alertmanager_alert",
    "alertmanager_open_alert",
    "builtin_templates",
    "compile_template",
    "culprit_line",
    "description",
    "group_url",
    "incident_summary",
    "move_line",
    "pagerduty_event",
    "render_webhook",
    "rfc3339",
    "summary",
    "webhook_context",
]

ALERTNAME: Mapping[IncidentKind, str] = {
    IncidentKind.LAG_SKEW: "KagentLagSkew",
    IncidentKind.STOP: "KagentConsumerStopped",
    IncidentKind.STALL: "KagentConsumerStalled",
    IncidentKind.REWIND: "KagentConsumerRewound",
    IncidentKind.HOT_PARTITION: "KagentHotPartition",
}
"""The Alertmanager ``alertname`` (and the webhooks' title) of each kind."""

PAGERDUTY_SUMMARY_MAX = 1024
"""PagerDuty's limit on ``payload.summary``, in characters."""

TOP_MEMBERS = 5
"""Members named in a description, the most lagging first."""
MAX_LINES = 50
"""Moves or culprit partitions listed in a description, at most (the rest are counted)."""
PAGERDUTY_MEMBERS = 20
"""Members in a PagerDuty event's ``custom_details.member_lag``, the most lagging first."""
PAGERDUTY_LINES = 100
"""Moves or culprits in a PagerDuty event's ``custom_details``, at most."""
NO_MEMBER = "(none)"
"""How a move shows a partition no member holds now, or none is left to hold."""


class WebhookFormat(str, Enum):
    """A webhook sink's built-in body format (its ``template`` setting)."""

    JSON = "json"
    """The transition record exactly as on the incidents topic (``IncidentTransition.model_dump_json()``)."""
    SLACK = "slack"
    """A Slack incoming-webhook message: a notification ``text`` and Block Kit ``blocks``."""
    TEAMS = "teams"
    """A Microsoft Teams incoming-webhook (or Workflows) message with one Adaptive Card attachment."""


class WebhookTemplates(NamedTuple):
    """The two templates of a webhook's body: one for open and update, one for resolve."""

    open: jinja2.Template
    resolve: jinja2.Template

    def for_action(self, action: IncidentAction) -> jinja2.Template:
        """The template of a transition doing ``action``."""
        return self.resolve if action is IncidentAction.RESOLVE else self.open


# -- text ----------------------------------------------------------------------------------------


def rfc3339(seconds: float) -> str:
    """``seconds`` since the epoch as an RFC 3339 UTC time with milliseconds, ``2024-05-01T12:00:00.250Z``."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def group_url(web_url: str, group: str) -> str:
    """The group's page on kagent's web server: ``<web_url>/groups/<group, percent-encoded>``."""
    return f"{web_url.rstrip('/')}/groups/{quote(group, safe='')}"


def summary(transition: IncidentTransition) -> str:
    """The transition's one-line summary: ``<group>: <reason>``."""
    return _one_line(f"{transition.incident.group}: {transition.reason}")


def incident_summary(incident: Incident) -> str:
    """A one-line summary of ``incident`` alone, for a re-send that has no transition at hand.

    For ``lag-skew`` it is the summary of the transition that opened or last
    updated it (the reason :func:`kagent.core.incidents.step` gives is built
    from the recommendation, which the incident keeps); for a health kind it
    names the kind, the number of culprit partitions and the first one's reason.
    """
    group, skew = incident.group, incident.skew
    if skew is not None and incident.kind is IncidentKind.HOT_PARTITION and skew.hot is not None:
        return _one_line(
            f"{group}: {hot_partition_text(skew.hot)}: recommendation {skew.recommendation_id} moves nothing"
        )
    if skew is not None:
        above = "at or above" if skew.skew_before >= skew.threshold else "below"
        return _one_line(
            f"{group}: skew {skew.skew_before:.3g} ({skew.metric.value}) {above} {skew.threshold:.3g}: "
            f"recommendation {skew.recommendation_id} moves {len(skew.moves)} partitions, "
            f"skew after {skew.skew_after:.3g}"
        )
    if not incident.culprits:
        return f"{group}: group status {incident.kind.value}"
    count = len(incident.culprits)
    return _one_line(
        f"{group}: {incident.kind.value} on {count} partition{'' if count == 1 else 's'}, "
        f"{culprit_line(incident.culprits[0])}"
    )


def move_line(move: PartitionMove) -> str:
    """``<topic>-<partition>: <from member> -> <to member>`` (``(none)`` for a missing member)."""
    return f"{move.topic}-{move.partition}: {move.from_member or NO_MEMBER} -> {move.to_member or NO_MEMBER}"


def culprit_line(culprit: CulpritPartition) -> str:
    """``<topic>-<partition>: <reason>``, and its lag when known."""
    lag = "" if culprit.lag is None else f" (lag {culprit.lag:,})"
    return f"{culprit.topic}-{culprit.partition}: {culprit.reason}{lag}"


def description(incident: Incident) -> str:
    """Several lines on ``incident``: its members' lag, its drain time, then its moves (``lag-skew``) or its
    culprit partitions.

    The first line gives the group's lag added up, the number of members and
    the :data:`TOP_MEMBERS` most lagging, each with its drain time when the
    incident has one (``catches up in 4 min``, ``falling behind at 120/s``,
    :func:`kagent.core.drain_time.drain_text`); the next, the group's drain
    time (when its slowest member catches up), when the incident has one
    (records of workers that did not measure it have none). For ``lag-skew`` the next gives the
    skew before -> after, the metric, the threshold, the recommendation and
    its strategy, followed by one :func:`move_line` per move; for a health
    kind, one :func:`culprit_line` per partition. At most :data:`MAX_LINES`
    moves or partitions are listed; a last line counts the others.
    """
    lines = [_member_lag_line(incident)]
    if incident.drain is not None:
        lines.append(f"Drain time at today's rates: {drain_text(incident.drain)} (when its slowest member catches up)")
    skew = incident.skew
    if skew is not None and skew.hot is not None:
        lines.append(f"{hot_partition_text(skew.hot).capitalize()}. {skew.hot.remedy}")
    if skew is not None and incident.kind is IncidentKind.HOT_PARTITION:
        lines.append(f"Recommendation {skew.recommendation_id} moves nothing.")
    elif skew is not None:
        count = len(skew.moves)
        lines.append(
            f"Skew {skew.skew_before:.3g} -> {skew.skew_after:.3g} ({skew.metric.value}, threshold "
            f"{skew.threshold:.3g}); recommendation {skew.recommendation_id} ({skew.strategy}) moves "
            f"{count} partition{'' if count == 1 else 's'}:"
        )
        lines += _bounded([move_line(move) for move in skew.moves], MAX_LINES)
    else:
        count = len(incident.culprits)
        lines.append(f"Partitions at {incident.kind.value} ({count}):")
        lines += _bounded([culprit_line(culprit) for culprit in incident.culprits], MAX_LINES)
    return "\n".join(lines)


def _member_lag_line(incident: Incident) -> str:
    unit = incident.lag_unit
    lags = _largest_first(incident.member_lag)
    if not lags:
        return f"Member lag ({unit.value}): no members"
    total = math.fsum(lags.values())
    drains = incident.member_drain
    top = ", ".join(
        f"{member} {_lag(lag, unit)}" + (f" ({drain_text(drains[member])})" if member in drains else "")
        for member, lag in list(lags.items())[:TOP_MEMBERS]
    )
    count = len(lags)
    return (
        f"Member lag ({unit.value}): {_lag(total, unit)} over {count} member{'' if count == 1 else 's'}; largest: {top}"
    )


def _largest_first(member_lag: Mapping[str, float]) -> dict[str, float]:
    return dict(sorted(member_lag.items(), key=lambda item: (-item[1], item[0])))


def _lag(value: float, unit: LagUnit) -> str:
    return f"{value:,.0f}" if unit is LagUnit.MESSAGES else f"{value:,.1f} s"


def _bounded(lines: list[str], limit: int) -> list[str]:
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"... and {len(lines) - limit} more"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- Alertmanager --------------------------------------------------------------------------------


def alertmanager_alert(
    transition: IncidentTransition, *, cluster: str, web_url: str, now: float, ends_after: float
) -> dict[str, Any]:
    """The postable alert (Alertmanager API v2) of ``transition``, sent at ``now``.

    ``labels``: ``alertname`` (:data:`ALERTNAME`), ``group``, ``kind``,
    ``severity``, ``cluster``: the same for every transition of an incident.
    ``annotations``: ``summary`` (:func:`summary`), ``description``
    (:func:`description`), ``incident_id``, and for ``lag-skew``
    ``recommendation_id``, ``skew_before``, ``skew_after`` and ``moves`` (one
    :func:`move_line` a line, all of them). ``startsAt`` is the incident's
    ``opened_at``; ``endsAt`` is ``now + ends_after`` for an open or update
    (the alert stays firing that long unless sent again) and ``resolved_at``
    for a resolve (it ends the alert), never before ``startsAt``.
    ``generatorURL`` is the group's page (:func:`group_url`).
    """
    resolved = transition.action is IncidentAction.RESOLVE
    return _alert(transition.incident, summary(transition), resolved, cluster, web_url, now, ends_after)


def alertmanager_open_alert(
    incident: Incident, *, cluster: str, web_url: str, now: float, ends_after: float
) -> dict[str, Any]:
    """The postable alert re-sending ``incident`` at ``now``: as :func:`alertmanager_alert` gives for its
    latest open or update, with ``endsAt`` ``now + ends_after``, and the summary :func:`incident_summary`.
    An incident with ``resolved_at`` set gives its resolved alert."""
    resolved = incident.resolved_at is not None
    return _alert(incident, incident_summary(incident), resolved, cluster, web_url, now, ends_after)


def _alert(
    incident: Incident, text: str, resolved: bool, cluster: str, web_url: str, now: float, ends_after: float
) -> dict[str, Any]:
    ends = incident.resolved_at if resolved and incident.resolved_at is not None else now + ends_after
    annotations = {"summary": text, "description": description(incident), "incident_id": incident.id}
    skew = incident.skew
    if skew is not None:
        annotations |= {
            "recommendation_id": skew.recommendation_id,
            "skew_before": f"{skew.skew_before:.6g}",
            "skew_after": f"{skew.skew_after:.6g}",
            "moves": "\n".join(move_line(move) for move in skew.moves),
        }
    if skew is not None and skew.hot is not None:
        annotations["hot_partitions"] = hot_partition_text(skew.hot)
    return {
        "labels": {
            "alertname": ALERTNAME[incident.kind],
            "group": incident.group,
            "kind": incident.kind.value,
            "severity": incident.severity.value,
            "cluster": cluster,
        },
        "annotations": annotations,
        "startsAt": rfc3339(incident.opened_at),
        "endsAt": rfc3339(max(ends, incident.opened_at)),
        "generatorURL": group_url(web_url, incident.group),
    }


# -- PagerDuty -----------------------------------------------------------------------------------


def pagerduty_event(transition: IncidentTransition, *, routing_key: str, cluster: str, web_url: str) -> dict[str, Any]:
    """The PagerDuty Events API v2 event of ``transition``.

    ``event_action`` is ``trigger`` for an open or update (PagerDuty adds an
    update to the alert of the same ``dedup_key``) and ``resolve`` for a
    resolve; ``dedup_key`` is the incident id. ``payload``: ``summary``
    (:func:`summary`, cut to :data:`PAGERDUTY_SUMMARY_MAX` characters with an
    ellipsis), ``source`` and ``group`` the cluster, ``severity`` the
    incident's, ``timestamp`` the transition's time (``updated_at``),
    ``component`` the consumer group, ``class`` the kind, and
    ``custom_details``: the incident id, action, reason, times, lag unit,
    member count, total lag and the :data:`PAGERDUTY_MEMBERS` most lagging
    members' lag, the group's drain time (``drain``, when the incident has
    one); for ``lag-skew`` the recommendation (id, strategy, metric,
    threshold, skew before and after) and its moves, for a health kind its
    culprit partitions (:data:`PAGERDUTY_LINES` lines at most). ``client``,
    ``client_url`` and ``links`` point to the group's page.
    """
    incident = transition.incident
    url = group_url(web_url, incident.group)
    lags = _largest_first(incident.member_lag)
    details: dict[str, Any] = {
        "incident_id": incident.id,
        "action": transition.action.value,
        "reason": transition.reason,
        "opened_at": rfc3339(incident.opened_at),
        "lag_unit": incident.lag_unit.value,
        "members": len(lags),
        "total_lag": math.fsum(lags.values()),
        "member_lag": dict(list(lags.items())[:PAGERDUTY_MEMBERS]),
    }
    if incident.drain is not None:
        details["drain"] = drain_text(incident.drain)
    if incident.resolved_at is not None:
        details["resolved_at"] = rfc3339(incident.resolved_at)
    skew = incident.skew
    if skew is not None:
        details |= {
            "recommendation_id": skew.recommendation_id,
            "strategy": skew.strategy,
            "metric": skew.metric.value,
            "threshold": skew.threshold,
            "skew_before": skew.skew_before,
            "skew_after": skew.skew_after,
            "moves": _bounded([move_line(move) for move in skew.moves], PAGERDUTY_LINES),
        }
        if skew.hot is not None:
            details["hot_partitions"] = hot_partition_text(skew.hot)
    else:
        details["culprits"] = _bounded([culprit_line(culprit) for culprit in incident.culprits], PAGERDUTY_LINES)
    return {
        "routing_key": routing_key,
        "event_action": "resolve" if transition.action is IncidentAction.RESOLVE else "trigger",
        "dedup_key": incident.id,
        "payload": {
            "summary": _truncate(summary(transition), PAGERDUTY_SUMMARY_MAX),
            "source": cluster,
            "severity": incident.severity.value,
            "timestamp": rfc3339(incident.updated_at),
            "component": incident.group,
            "group": cluster,
            "class": incident.kind.value,
            "custom_details": details,
        },
        "client": "kagent",
        "client_url": url,
        "links": [{"href": url, "text": f"Consumer group {incident.group} in kagent"}],
    }


# -- webhooks ------------------------------------------------------------------------------------


def _tojson(value: Any) -> str:
    """A JSON value of ``value`` (strings quoted and escaped), for a template that writes JSON."""
    return json.dumps(value, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _slack(value: Any, limit: int | None = None) -> str:
    """``value`` as text for Slack's mrkdwn: ``&``, ``<`` and ``>`` escaped (Slack's control characters),
    cut to ``limit`` characters once escaped (ending in an ellipsis, never inside an escape)."""
    pieces = [_SLACK_ESCAPES.get(char, char) for char in str(value)]
    if limit is None or sum(len(piece) for piece in pieces) <= limit:
        return "".join(pieces)
    kept: list[str] = []
    size = 0
    for piece in pieces:
        if size + len(piece) > limit - 1:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept) + "…"


_SLACK_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _duration(seconds: float) -> str:
    """``seconds`` as ``1h 02m``, ``3m 05s`` or ``12s``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


_FILTERS: Mapping[str, Callable[..., Any]] = {
    "tojson": _tojson,
    "slack": _slack,
    "rfc3339": rfc3339,
    "duration": _duration,
}


@functools.cache
def _environment() -> jinja2.Environment:
    environment = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    environment.filters.update(_FILTERS)
    return environment


def compile_template(source: str, name: str) -> jinja2.Template:
    """``source`` compiled as a webhook body template.

    The environment: Jinja2's sandbox (templates read data, never change
    it), ``StrictUndefined`` (a name the context lacks is an error, not an
    empty string), no autoescaping, and the filters ``tojson`` (a JSON value:
    ``{"text": {{ summary | tojson }}}``), ``slack`` (mrkdwn-escaped text,
    optionally cut: ``{{ description | slack(2900) }}``), ``rfc3339`` (of
    seconds since the epoch) and ``duration`` (of seconds, ``1h 02m``).
    Raises ValueError ``<name>:<line>: <problem>`` when it does not compile.
    """
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"{name}:{exc.lineno}: {_one_line(exc.message or 'syntax error')}") from None


@functools.cache
def builtin_templates(template_format: WebhookFormat) -> WebhookTemplates | None:
    """The built-in templates of ``template_format``; None for ``json``, which needs none.

    They are ``kagent/templates/alerts/<format>-open.json.j2`` (open and update)
    and ``<format>-resolve.json.j2`` (resolve), package data read once.
    """
    if template_format is WebhookFormat.JSON:
        return None
    folder = resources.files("kagent").joinpath("templates", "alerts")
    compiled = [
        compile_template(folder.joinpath(name).read_text(encoding="utf-8"), name)
        for name in (f"{template_format.value}-open.json.j2", f"{template_format.value}-resolve.json.j2")
    ]
    return WebhookTemplates(open=compiled[0], resolve=compiled[1])


def webhook_context(transition: IncidentTransition, *, cluster: str, web_url: str) -> dict[str, Any]:
    """What a webhook template sees, all plain JSON data (strings, numbers, lists, mappings).

    ``transition`` and ``incident`` (the records, as in the ``json`` format),
    each of the incident's fields by name (``id``, ``kind``, ``severity``,
    ``group``, ``opened_at``, ``updated_at``, ``resolved_at``, ``lag_unit``,
    ``member_lag``, ``drain``, ``member_drain``, ``skew``, ``culprits``), ``action`` (``open``, ``update``
    or ``resolve``), ``resolved`` (a resolve), ``reason``, ``cluster``,
    ``group_url`` (:func:`group_url`), ``alertname`` (:data:`ALERTNAME`),
    ``summary`` (:func:`summary`), ``description`` (:func:`description`),
    ``move_lines`` (one :func:`move_line` a move) and ``culprit_lines`` (one
    :func:`culprit_line` a culprit partition).
    """
    record = transition.model_dump(mode="json")
    incident = transition.incident
    fields = record["incident"]
    return {
        **fields,
        "transition": record,
        "incident": fields,
        "action": transition.action.value,
        "resolved": transition.action is IncidentAction.RESOLVE,
        "reason": transition.reason,
        "cluster": cluster,
        "group_url": group_url(web_url, incident.group),
        "alertname": ALERTNAME[incident.kind],
        "summary": summary(transition),
        "description": description(incident),
        "move_lines": [move_line(move) for move in incident.skew.moves] if incident.skew is not None else [],
        "culprit_lines": [culprit_line(culprit) for culprit in incident.culprits],
    }


def render_webhook(
    templates: WebhookTemplates | None, transition: IncidentTransition, *, cluster: str, web_url: str
) -> bytes:
    """The webhook body of ``transition``, UTF-8.

    With ``templates`` None (the ``json`` format) it is the transition record
    exactly as on the incidents topic, ``transition.model_dump_json()``;
    otherwise the open or the resolve template (:meth:`WebhookTemplates.for_action`)
    rendered with :func:`webhook_context`. Raises ``jinja2.TemplateError``
    when a template fails (a name it uses is missing, say).
    """
    if templates is None:
        return transition.model_dump_json().encode()
    context = webhook_context(transition, cluster=cluster, web_url=web_url)
    return templates.for_action(transition.action).render(context).encode()
