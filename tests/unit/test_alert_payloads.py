"""`kagent.core.alert_payloads`: what Alertmanager, PagerDuty and the webhooks receive for each transition."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import jinja2
import pytest
from aiokafka.structs import TopicPartition
from jsonschema import Draft202012Validator, FormatChecker

from kagent.core.alert_payloads import (
    ALERTNAME,
    MAX_LINES,
    PAGERDUTY_SUMMARY_MAX,
    WebhookFormat,
    WebhookTemplates,
    alertmanager_alert,
    alertmanager_open_alert,
    builtin_templates,
    compile_template,
    description,
    group_url,
    incident_summary,
    pagerduty_event,
    render_webhook,
    rfc3339,
    summary,
)
from kagent.core.drain_time import Drain, DrainState, slowest
from kagent.core.group_health import GroupHealth, PartitionHealth, PartitionStatus, group_status
from kagent.core.incidents import (
    SEVERITY,
    CulpritPartition,
    Incident,
    IncidentAction,
    IncidentKind,
    IncidentObservation,
    IncidentsState,
    IncidentTransition,
    incident_id,
    step,
)
from kagent.core.policy import LagUnit
from kagent.core.recommendation import PartitionMove, Recommendation
from tests.support.incidents import recommendation

T0 = 1_700_000_000.0
"""2023-11-14T22:13:20Z."""
GROUP = "payments-orders"
CLUSTER = "prod-eu"
WEB = "https://kagent.example.com"
MEMBER_LAG = {"consumer-1-aaa": 9000.0, "consumer-2-bbb": 300.0, "consumer-3-ccc": 0.0}

# -- transitions, as kagent.core.incidents.step makes them ----------------------------------------


def health(status: PartitionStatus, partitions: Sequence[int] = (3,)) -> GroupHealth:
    judged: dict[TopicPartition, PartitionHealth | PartitionStatus] = {
        TopicPartition("orders", p): PartitionHealth(status, f"no commit for 300 s on {p}", 1200 + p)
        for p in partitions
    }
    judged[TopicPartition("orders", 9)] = PartitionHealth(PartitionStatus.OK, "caught up: lag 0", 0)
    return group_status(judged, False)


def observe(
    group: str = GROUP,
    *,
    rec: Recommendation | None = None,
    skew: float | None = 2.8,
    status: PartitionStatus = PartitionStatus.OK,
    partitions: Sequence[int] = (3,),
) -> IncidentObservation:
    return IncidentObservation(
        group=group,
        lag_unit=LagUnit.MESSAGES,
        member_lag=MEMBER_LAG,
        gone=False,
        skew=skew,
        rearm_below=1.2,
        recommendation=rec,
        health=health(status, partitions),
    )


def skew_lifecycle(group: str = GROUP, move_count: int = 2) -> list[IncidentTransition]:
    """A lag-skew incident's open, update and resolve, from step."""
    state = IncidentsState(group=group)
    emitted: list[IncidentTransition] = []
    for at, observation in (
        (T0, observe(group, rec=recommendation("r1", T0, group, move_count))),
        (T0 + 60, observe(group, rec=recommendation("r2", T0 + 60, group, move_count))),
        (T0 + 3720, observe(group, skew=1.0)),
    ):
        state, transitions = step(state, observation, at)
        emitted += transitions
    assert [t.action for t in emitted] == [IncidentAction.OPEN, IncidentAction.UPDATE, IncidentAction.RESOLVE]
    return emitted


def health_lifecycle(status: PartitionStatus, group: str = GROUP) -> list[IncidentTransition]:
    """A health incident's open and resolve, from step."""
    state = IncidentsState(group=group)
    state, opened = step(state, observe(group, status=status, partitions=(3, 5)), T0)
    state, resolved = step(state, observe(group), T0 + 125)
    return opened + resolved


# -- Alertmanager ----------------------------------------------------------------------------------

# The shapes of Alertmanager API v2's openapi.yaml (postableAlerts, postableAlert, alert, labelSet) in
# JSON Schema, with what Alertmanager checks on top: label names of the classic charset, no empty label.
LABEL_SET = {"type": "object", "additionalProperties": {"type": "string"}}
POSTABLE_ALERTS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "labels": {
                **LABEL_SET,
                "minProperties": 1,
                "propertyNames": {"pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"},
                "additionalProperties": {"type": "string", "minLength": 1},
            },
            "annotations": LABEL_SET,
            "startsAt": {"type": "string", "format": "date-time"},
            "endsAt": {"type": "string", "format": "date-time"},
            "generatorURL": {"type": "string"},
        },
        "required": ["labels"],
        "additionalProperties": False,
    },
}


def assert_postable(alerts: list[dict[str, Any]]) -> None:
    """``alerts`` is a valid ``POST /api/v2/alerts`` body, its times in order, its generatorURL absolute."""
    Draft202012Validator(POSTABLE_ALERTS, format_checker=FormatChecker()).validate(alerts)
    for alert in alerts:
        assert _time(alert["startsAt"]) <= _time(alert["endsAt"])
        url = urlsplit(alert["generatorURL"])
        assert url.scheme in ("http", "https") and url.netloc


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_the_alertmanager_alert_of_a_lag_skew_open_identifies_the_incident_by_its_labels_only() -> None:
    opened = skew_lifecycle()[0]
    alert = alertmanager_alert(opened, cluster=CLUSTER, web_url=WEB, now=T0 + 5, ends_after=300)
    assert_postable([alert])
    assert alert["labels"] == {
        "alertname": "KagentLagSkew",
        "group": GROUP,
        "kind": "lag-skew",
        "severity": "warning",
        "cluster": CLUSTER,
    }
    annotations = alert["annotations"]
    assert set(annotations) == {
        "summary",
        "description",
        "incident_id",
        "recommendation_id",
        "skew_before",
        "skew_after",
        "moves",
    }
    assert annotations["summary"] == f"{GROUP}: {opened.reason}"
    assert annotations["incident_id"] == opened.incident.id
    assert annotations["recommendation_id"] == "r1"
    assert (annotations["skew_before"], annotations["skew_after"]) == ("2.8", "1.1")
    assert (
        annotations["moves"] == "orders-0: consumer-1-aaa -> consumer-2-bbb\norders-1: consumer-1-aaa -> consumer-2-bbb"
    )
    assert alert["startsAt"] == "2023-11-14T22:13:20.000Z"
    assert alert["endsAt"] == rfc3339(T0 + 305)
    assert alert["generatorURL"] == f"{WEB}/groups/{GROUP}"


def test_the_description_gives_member_lag_the_top_members_the_skew_and_the_moves() -> None:
    text = alertmanager_alert(skew_lifecycle()[0], cluster=CLUSTER, web_url=WEB, now=T0, ends_after=300)["annotations"][
        "description"
    ]
    lines = text.splitlines()
    assert lines[0] == (
        "Member lag (messages): 9,300 over 3 members; "
        "largest: consumer-1-aaa 9,000, consumer-2-bbb 300, consumer-3-ccc 0"
    )
    assert "Skew 2.8 -> 1.1 (peak-to-mean, threshold 1.5)" in lines[1] and "r1 (lag-sticky)" in lines[1]
    assert lines[2:] == [
        "orders-0: consumer-1-aaa -> consumer-2-bbb",
        "orders-1: consumer-1-aaa -> consumer-2-bbb",
    ]


MEMBER_DRAIN = {
    "consumer-1-aaa": Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=120.0),
    "consumer-2-bbb": Drain(state=DrainState.CATCHING_UP, seconds=240.0),
    "consumer-3-ccc": Drain(state=DrainState.CAUGHT_UP, seconds=0.0),
}


def test_every_lag_alert_says_when_the_group_and_its_members_catch_up_or_how_fast_they_fall_behind() -> None:
    drained = observe(rec=recommendation("r1", T0, GROUP))._replace(
        drain=slowest(MEMBER_DRAIN.values()), member_drain=MEMBER_DRAIN
    )
    _, [opened] = step(IncidentsState(group=GROUP), drained, T0)
    assert opened.incident.drain == Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=120.0)
    text = alertmanager_alert(opened, cluster=CLUSTER, web_url=WEB, now=T0, ends_after=300)["annotations"][
        "description"
    ]
    lines = text.splitlines()
    assert lines[0] == (
        "Member lag (messages): 9,300 over 3 members; largest: consumer-1-aaa 9,000 (falling behind at 120/s), "
        "consumer-2-bbb 300 (catches up in 4 min), consumer-3-ccc 0 (caught up)"
    )
    assert lines[1] == "Drain time at today's rates: falling behind at 120/s (when its slowest member catches up)"
    event = pagerduty_event(opened, routing_key="R" * 32, cluster=CLUSTER, web_url=WEB)
    assert event["payload"]["custom_details"]["drain"] == "falling behind at 120/s"
    # A health incident's description says it too, and so does the re-send of an open one.
    stop = drained._replace(recommendation=None, health=health(PartitionStatus.STOP))
    _, [stopped] = step(IncidentsState(group=GROUP), stop, T0)
    assert "Drain time at today's rates: falling behind at 120/s" in description(stopped.incident)
    resent = alertmanager_open_alert(opened.incident, cluster=CLUSTER, web_url=WEB, now=T0 + 60, ends_after=300)
    assert "(catches up in 4 min)" in resent["annotations"]["description"]


def test_an_incident_without_drain_times_says_nothing_of_them_rather_than_unknown_or_zero() -> None:
    opened = skew_lifecycle()[0]
    assert opened.incident.drain is None and opened.incident.member_drain == {}
    text = description(opened.incident)
    assert "Drain" not in text and "catches up" not in text and "unknown" not in text
    assert (
        "drain"
        not in pagerduty_event(opened, routing_key="R" * 32, cluster=CLUSTER, web_url=WEB)["payload"]["custom_details"]
    )


def test_an_update_keeps_the_labels_and_a_resolve_ends_the_alert_at_resolved_at() -> None:
    opened, updated, resolved = skew_lifecycle()
    alerts = [
        alertmanager_alert(t, cluster=CLUSTER, web_url=WEB, now=T0 + 3720, ends_after=300)
        for t in (opened, updated, resolved)
    ]
    assert_postable(alerts)
    assert alerts[0]["labels"] == alerts[1]["labels"] == alerts[2]["labels"]
    assert alerts[1]["annotations"]["recommendation_id"] == "r2"
    assert alerts[1]["startsAt"] == alerts[0]["startsAt"] == rfc3339(T0)
    assert alerts[1]["endsAt"] == rfc3339(T0 + 3720 + 300)
    assert alerts[2]["endsAt"] == rfc3339(T0 + 3720) == rfc3339(resolved.incident.resolved_at or 0)
    assert alerts[2]["annotations"]["summary"] == f"{GROUP}: {resolved.reason}"


@pytest.mark.parametrize(
    ("status", "alertname", "severity"),
    [
        (PartitionStatus.STOP, "KagentConsumerStopped", "critical"),
        (PartitionStatus.STALL, "KagentConsumerStalled", "critical"),
        (PartitionStatus.REWIND, "KagentConsumerRewound", "error"),
    ],
)
def test_a_health_incident_names_its_kind_and_lists_the_culprit_partitions(
    status: PartitionStatus, alertname: str, severity: str
) -> None:
    opened, resolved = health_lifecycle(status)
    alerts = [
        alertmanager_alert(t, cluster=CLUSTER, web_url=WEB, now=T0 + 10, ends_after=300) for t in (opened, resolved)
    ]
    assert_postable(alerts)
    assert alerts[0]["labels"] == {
        "alertname": alertname,
        "group": GROUP,
        "kind": opened.incident.kind.value,
        "severity": severity,
        "cluster": CLUSTER,
    }
    assert set(alerts[0]["annotations"]) == {"summary", "description", "incident_id"}
    lines = alerts[0]["annotations"]["description"].splitlines()
    assert lines[1:] == [
        f"Partitions at {opened.incident.kind.value} (2):",
        "orders-3: no commit for 300 s on 3 (lag 1,203)",
        "orders-5: no commit for 300 s on 5 (lag 1,205)",
    ]
    assert alerts[1]["endsAt"] == rfc3339(T0 + 125)


def test_every_kind_has_an_alertname() -> None:
    assert set(ALERTNAME) == set(IncidentKind)
    assert len(set(ALERTNAME.values())) == len(IncidentKind)


def test_the_generator_url_quotes_the_group_and_ignores_a_trailing_slash() -> None:
    opened = skew_lifecycle("team a/orders?x=1")[0]
    alert = alertmanager_alert(opened, cluster=CLUSTER, web_url=WEB + "/", now=T0, ends_after=300)
    assert alert["generatorURL"] == f"{WEB}/groups/team%20a%2Forders%3Fx%3D1"
    assert group_url(WEB, "g") == f"{WEB}/groups/g"


def test_a_re_sent_open_incident_has_the_same_labels_and_annotations_with_a_later_ends_at() -> None:
    opened = skew_lifecycle()[0]
    first = alertmanager_alert(opened, cluster=CLUSTER, web_url=WEB, now=T0, ends_after=300)
    again = alertmanager_open_alert(opened.incident, cluster=CLUSTER, web_url=WEB, now=T0 + 60, ends_after=300)
    assert_postable([again])
    assert again["labels"] == first["labels"]
    assert again["annotations"] == first["annotations"]  # the summary rebuilt from the incident is the same
    assert again["startsAt"] == first["startsAt"]
    assert again["endsAt"] == rfc3339(T0 + 360)


def test_a_re_sent_health_incident_summarises_its_culprits() -> None:
    incident = health_lifecycle(PartitionStatus.STOP)[0].incident
    again = alertmanager_open_alert(incident, cluster=CLUSTER, web_url=WEB, now=T0 + 60, ends_after=300)
    assert (
        again["annotations"]["summary"]
        == f"{GROUP}: stop on 2 partitions, orders-3: no commit for 300 s on 3 (lag 1,203)"
    )
    assert incident_summary(incident) == again["annotations"]["summary"]


def test_ends_at_is_never_before_starts_at_even_with_a_clock_behind_the_recommendation() -> None:
    opened = skew_lifecycle()[0]
    alert = alertmanager_alert(opened, cluster=CLUSTER, web_url=WEB, now=T0 - 1000, ends_after=300)
    assert alert["endsAt"] == alert["startsAt"]


def test_a_description_lists_at_most_max_lines_moves_and_counts_the_rest() -> None:
    incident = skew_lifecycle(move_count=MAX_LINES + 7)[0].incident
    lines = description(incident).splitlines()
    assert len(lines) == 2 + MAX_LINES + 1
    assert lines[-1] == "... and 7 more"


def test_a_move_of_a_partition_nobody_holds_says_none() -> None:
    incident = skew_lifecycle()[0].incident
    skew = incident.skew
    assert skew is not None
    lone = PartitionMove(topic="t", partition=0, from_member=None, to_member="m", lag=1)
    changed = incident.model_copy(update={"skew": skew.model_copy(update={"moves": (lone,)})})
    assert description(changed).splitlines()[-1] == "t-0: (none) -> m"


def test_seconds_lag_is_shown_in_seconds_and_no_members_is_said() -> None:
    incident = health_lifecycle(PartitionStatus.STOP)[0].incident
    in_seconds = incident.model_copy(update={"lag_unit": LagUnit.SECONDS, "member_lag": {"m": 12.25}})
    assert description(in_seconds).splitlines()[0] == "Member lag (seconds): 12.2 s over 1 member; largest: m 12.2 s"
    empty = incident.model_copy(update={"member_lag": {}})
    assert description(empty).splitlines()[0] == "Member lag (messages): no members"


# -- PagerDuty ------------------------------------------------------------------------------------


def test_pagerduty_triggers_on_open_and_update_and_resolves_with_the_incident_id_as_dedup_key() -> None:
    opened, updated, resolved = skew_lifecycle()
    events = [
        pagerduty_event(t, routing_key="R" * 32, cluster=CLUSTER, web_url=WEB) for t in (opened, updated, resolved)
    ]
    assert [e["event_action"] for e in events] == ["trigger", "trigger", "resolve"]
    assert {e["dedup_key"] for e in events} == {opened.incident.id}
    assert all(e["routing_key"] == "R" * 32 for e in events)
    event = events[1]
    assert set(event) == {"routing_key", "event_action", "dedup_key", "payload", "client", "client_url", "links"}
    payload = event["payload"]
    assert payload == {
        "summary": f"{GROUP}: {updated.reason}",
        "source": CLUSTER,
        "severity": "warning",
        "timestamp": rfc3339(T0 + 60),
        "component": GROUP,
        "group": CLUSTER,
        "class": "lag-skew",
        "custom_details": payload["custom_details"],
    }
    details = payload["custom_details"]
    assert details["incident_id"] == opened.incident.id and details["recommendation_id"] == "r2"
    assert details["moves"] == [
        "orders-0: consumer-1-aaa -> consumer-2-bbb",
        "orders-1: consumer-1-aaa -> consumer-2-bbb",
    ]
    assert (details["skew_before"], details["skew_after"], details["metric"]) == (2.8, 1.1, "peak-to-mean")
    assert details["member_lag"] == MEMBER_LAG and details["total_lag"] == 9300
    assert event["links"] == [{"href": f"{WEB}/groups/{GROUP}", "text": f"Consumer group {GROUP} in kagent"}]
    assert events[2]["payload"]["custom_details"]["resolved_at"] == rfc3339(T0 + 3720)
    json.dumps(events)  # plain JSON


@pytest.mark.parametrize("status", [PartitionStatus.STOP, PartitionStatus.STALL, PartitionStatus.REWIND])
def test_pagerduty_health_events_carry_the_kind_severity_and_culprits(status: PartitionStatus) -> None:
    opened = health_lifecycle(status)[0]
    payload = pagerduty_event(opened, routing_key="k", cluster=CLUSTER, web_url=WEB)["payload"]
    assert payload["severity"] == SEVERITY[opened.incident.kind].value
    assert payload["severity"] in ("critical", "error", "warning", "info")
    assert payload["class"] == opened.incident.kind.value
    assert payload["custom_details"]["culprits"] == [
        "orders-3: no commit for 300 s on 3 (lag 1,203)",
        "orders-5: no commit for 300 s on 5 (lag 1,205)",
    ]


def test_pagerduty_summary_is_cut_to_1024_characters() -> None:
    opened = health_lifecycle(PartitionStatus.STOP)[0]
    long = opened.model_copy(update={"reason": "x" * 5000})
    text = pagerduty_event(long, routing_key="k", cluster=CLUSTER, web_url=WEB)["payload"]["summary"]
    assert len(text) == PAGERDUTY_SUMMARY_MAX == 1024
    assert text.startswith(f"{GROUP}: xxx") and text.endswith("…")
    short = pagerduty_event(opened, routing_key="k", cluster=CLUSTER, web_url=WEB)["payload"]["summary"]
    assert short == summary(opened)


# -- webhooks -------------------------------------------------------------------------------------


def test_the_json_format_is_the_transition_record_exactly() -> None:
    assert builtin_templates(WebhookFormat.JSON) is None
    for transition in skew_lifecycle():
        body = render_webhook(None, transition, cluster=CLUSTER, web_url=WEB)
        assert body == transition.model_dump_json().encode()
        assert IncidentTransition.model_validate_json(body) == transition


def slack(transition: IncidentTransition) -> dict[str, Any]:
    templates = builtin_templates(WebhookFormat.SLACK)
    return json.loads(render_webhook(templates, transition, cluster=CLUSTER, web_url=WEB))  # type: ignore[no-any-return]


def texts(value: Any) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in texts(item)]
    return []


def test_slack_messages_have_a_text_and_blocks_with_the_group_and_the_moves() -> None:
    opened, updated, _ = skew_lifecycle()
    message = slack(opened)
    assert set(message) == {"text", "blocks"}
    assert message["text"].startswith(":warning: WARNING payments-orders: skew 2.8")
    assert [block["type"] for block in message["blocks"]] == ["header", "section", "section", "section", "context"]
    assert message["blocks"][0]["text"] == {
        "type": "plain_text",
        "emoji": True,
        "text": f"KagentLagSkew opened: {GROUP}",
    }
    everything = "\n".join(texts(message))
    assert f"<{WEB}/groups/{GROUP}|{GROUP}>" in everything
    assert "orders-0: consumer-1-aaa -&gt; consumer-2-bbb" in everything  # mrkdwn-escaped
    assert opened.incident.id in everything
    assert slack(updated)["blocks"][0]["text"]["text"] == f"KagentLagSkew updated: {GROUP}"


def test_slack_marks_a_resolve_clearly() -> None:
    resolved = skew_lifecycle()[2]
    message = slack(resolved)
    assert message["text"].startswith(":white_check_mark: RESOLVED payments-orders: skew 1")
    assert message["blocks"][0]["text"]["text"] == f"RESOLVED: KagentLagSkew: {GROUP}"
    assert ":white_check_mark: *Resolved* after 1h 02m" in message["blocks"][1]["text"]["text"]
    assert rfc3339(T0 + 3720) in "\n".join(texts(message))


def test_slack_text_is_escaped_and_kept_within_slack_limits() -> None:
    opened = skew_lifecycle("<!channel> & co", move_count=400)[0]
    long = opened.model_copy(update={"reason": "<" * 4000})
    message = slack(long)
    header = message["blocks"][0]["text"]["text"]
    assert len(header) <= 150
    for block in message["blocks"][1:]:
        if "text" in block:
            assert len(block["text"]["text"]) <= 3000
        for field in block.get("fields", []):
            assert len(field["text"]) <= 2000
    # mrkdwn is escaped (plain_text, the header, is never parsed for mentions or links).
    everything = "\n".join(texts([message["text"], message["blocks"][1:]]))
    assert "<!channel>" not in everything and "&lt;!channel&gt; &amp; co" in everything
    assert not re.search(r"&[a-z]*…", everything), "an escape was cut"


def test_slack_health_messages_name_the_culprits() -> None:
    opened, resolved = health_lifecycle(PartitionStatus.STALL)
    message = slack(opened)
    assert message["text"].startswith(":rotating_light: CRITICAL payments-orders:")
    assert "orders-5: no commit for 300 s on 5 (lag 1,205)" in "\n".join(texts(message))
    assert slack(resolved)["blocks"][0]["text"]["text"] == f"RESOLVED: KagentConsumerStalled: {GROUP}"


def teams(transition: IncidentTransition) -> dict[str, Any]:
    templates = builtin_templates(WebhookFormat.TEAMS)
    return json.loads(render_webhook(templates, transition, cluster=CLUSTER, web_url=WEB))  # type: ignore[no-any-return]


def test_teams_messages_carry_one_adaptive_card_with_the_group_and_the_moves() -> None:
    opened = skew_lifecycle()[0]
    message = teams(opened)
    assert message["type"] == "message"
    (attachment,) = message["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert attachment["contentUrl"] is None
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    assert card["body"][0]["style"] == "warning"
    facts = {fact["title"]: fact["value"] for fact in card["body"][1]["facts"]}
    assert facts["Group"] == GROUP and facts["Kind"] == "lag-skew" and facts["Incident"] == opened.incident.id
    lines = [block["text"] for block in card["body"][2:]]
    assert lines == description(opened.incident).splitlines()
    assert card["actions"] == [
        {"type": "Action.OpenUrl", "title": "Open the group in kagent", "url": f"{WEB}/groups/{GROUP}"}
    ]


def test_teams_marks_a_resolve_clearly() -> None:
    opened, resolved = health_lifecycle(PartitionStatus.STOP)
    assert teams(opened)["attachments"][0]["content"]["body"][0]["style"] == "attention"
    card = teams(resolved)["attachments"][0]["content"]
    assert card["body"][0]["style"] == "good"
    assert card["body"][0]["items"][0]["text"] == "RESOLVED: KagentConsumerStopped"
    facts = {fact["title"]: fact["value"] for fact in card["body"][1]["facts"]}
    assert facts["Resolved"] == f"{rfc3339(T0 + 125)} (after 2m 05s)"


def test_quotes_and_newlines_in_a_group_still_give_valid_json() -> None:
    opened = skew_lifecycle('we"ird\\group\nname')[0]
    for fmt in (WebhookFormat.SLACK, WebhookFormat.TEAMS):
        body = render_webhook(builtin_templates(fmt), opened, cluster=CLUSTER, web_url=WEB)
        assert 'we"ird\\group' in "\n".join(texts(json.loads(body)))


# -- custom templates ------------------------------------------------------------------------------


def custom(open_source: str, resolve_source: str = "{}") -> WebhookTemplates:
    return WebhookTemplates(
        open=compile_template(open_source, "open.j2"), resolve=compile_template(resolve_source, "r.j2")
    )


def test_a_custom_template_sees_the_documented_context() -> None:
    source = (
        '{"action": {{ action | tojson }}, "group": {{ group | tojson }}, "kind": {{ incident.kind | tojson }},'
        ' "id": {{ id | tojson }}, "url": {{ group_url | tojson }}, "cluster": {{ cluster | tojson }},'
        ' "moves": {{ move_lines | tojson }}, "skew": {{ skew | tojson }},'
        ' "opened": {{ opened_at | rfc3339 | tojson }}, "summary": {{ summary | tojson }},'
        ' "transition": {{ transition | tojson }}, "resolved": {{ resolved | tojson }}}'
    )
    opened = skew_lifecycle()[0]
    body = json.loads(render_webhook(custom(source), opened, cluster=CLUSTER, web_url=WEB))
    assert body["action"] == "open" and body["group"] == GROUP and body["kind"] == "lag-skew"
    assert body["id"] == opened.incident.id and body["url"] == f"{WEB}/groups/{GROUP}" and body["cluster"] == CLUSTER
    assert body["moves"] == ["orders-0: consumer-1-aaa -> consumer-2-bbb", "orders-1: consumer-1-aaa -> consumer-2-bbb"]
    assert body["skew"]["recommendation_id"] == "r1"
    assert body["opened"] == rfc3339(T0)
    assert body["summary"] == summary(opened)
    assert IncidentTransition.model_validate(body["transition"]) == opened
    assert body["resolved"] is False


def test_the_resolve_template_renders_resolves() -> None:
    templates = custom('{"open": true}', '{"resolved": {{ resolved | tojson }}, "at": {{ resolved_at | tojson }}}')
    resolved = skew_lifecycle()[2]
    assert json.loads(render_webhook(templates, resolved, cluster=CLUSTER, web_url=WEB)) == {
        "resolved": True,
        "at": T0 + 3720,
    }


def test_a_template_using_a_missing_name_fails_to_render() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render_webhook(custom("{{ nope }}"), skew_lifecycle()[0], cluster=CLUSTER, web_url=WEB)


def test_templates_cannot_change_what_they_are_given() -> None:
    with pytest.raises(jinja2.exceptions.SecurityError):
        render_webhook(custom("{{ member_lag.clear() }}"), skew_lifecycle()[0], cluster=CLUSTER, web_url=WEB)


def test_a_template_that_does_not_compile_names_its_line() -> None:
    with pytest.raises(ValueError, match=r"^mine\.j2:3: unexpected '}'$"):
        compile_template('{\n  "a": 1,\n  "b": {{ group }\n}', "mine.j2")


def test_a_hand_built_incident_renders_in_every_format() -> None:
    incident = Incident(
        id=incident_id("g", IncidentKind.REWIND, T0, 0),
        kind=IncidentKind.REWIND,
        severity=SEVERITY[IncidentKind.REWIND],
        group="g",
        opened_at=T0,
        updated_at=T0,
        lag_unit=LagUnit.MESSAGES,
        member_lag={},
        culprits=(CulpritPartition(topic="t", partition=0, reason="offset went back", lag=None),),
    )
    transition = IncidentTransition(action=IncidentAction.OPEN, incident=incident, reason="REWIND on 1 partition")
    for fmt in WebhookFormat:
        body = render_webhook(builtin_templates(fmt), transition, cluster=CLUSTER, web_url=WEB)
        assert "t-0: offset went back" in "\n".join(texts(json.loads(body))) or fmt is WebhookFormat.JSON
    assert alertmanager_alert(transition, cluster=CLUSTER, web_url=WEB, now=T0, ends_after=1)["labels"]["severity"] == (
        "error"
    )


def test_rfc3339_is_utc_with_milliseconds() -> None:
    assert rfc3339(0.25) == "1970-01-01T00:00:00.250Z"
    assert rfc3339(T0) == "2023-11-14T22:13:20.000Z"
