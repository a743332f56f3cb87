"""`kagent.worker.alert_sinks` against a real HTTP server on loopback: what each sink sends, and how it
classifies each answer (accepted, retry, rejected), a timeout and a refused connection.

The server (aiohttp, in the test's event loop) answers by the first segment of the path: ``/s<code>/...``
answers ``<code>`` (429 with ``Retry-After: 7``, 3xx with a ``Location``, 400 and 500 with a body),
``/date/...`` a 429 whose ``Retry-After`` is an HTTP date, and ``/slow/...`` nothing until the test ends.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from email.utils import formatdate
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import pytest
from aiohttp import web

from kagent import __version__
from kagent.core.alert_config import AlertmanagerSinkConfig, AlertsConfig, parse_alerts_config
from kagent.core.alert_payloads import alertmanager_alert, alertmanager_open_alert, pagerduty_event
from kagent.core.group_health import PartitionStatus
from kagent.core.incidents import IncidentTransition
from kagent.worker.alert_sinks import (
    AlertmanagerSink,
    AlertSink,
    Delivery,
    PagerDutySink,
    WebhookSink,
    build_sinks,
    public_url,
)
from tests.unit.test_alert_payloads import health_lifecycle, skew_lifecycle

CLUSTER = "prod-eu"
WEB = "https://kagent.example.com"
KEY = "K" * 32


class Received(NamedTuple):
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    header_list: list[tuple[str, str]]

    def json(self) -> Any:
        return json.loads(self.body)


class Server:
    """Records each request; answers as the module docstring says."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.release = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append(
            Received(
                request.method,
                request.path,
                request.query_string,
                dict(request.headers),
                body,
                list(request.headers.items()),
            )
        )
        first = request.path.strip("/").split("/")[0]
        if first == "slow":
            await self.release.wait()
            return web.Response(status=200)
        if first == "date":
            return web.Response(status=429, headers={"Retry-After": formatdate(time.time() + 120, usegmt=True)})
        status = int(first[1:]) if first.startswith("s") and first[1:].isdigit() else 404
        headers = {}
        text = "ok"
        if status == 429:
            headers["Retry-After"] = "7"
        elif 300 <= status < 400:
            headers["Location"] = "/s200/elsewhere"
        elif status == 400:
            text = '{"status": "invalid event", "errors": ["routing_key is wrong"]}'
        elif status >= 500:
            text = "x" * 1000
        return web.Response(status=status, headers=headers, text=text)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    recorder = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    recorder.url = f"http://{host}:{port}"
    try:
        yield recorder
    finally:
        recorder.release.set()
        await runner.cleanup()


@pytest.fixture
async def sinks() -> AsyncIterator[Callable[..., list[AlertSink]]]:
    """``sinks(yaml_text, **build_kwargs)``: the sinks of an alerting file, closed at the end of the test."""
    built: list[AlertSink] = []

    def make(text: str, **kwargs: Any) -> list[AlertSink]:
        made = build_sinks(config(text), cluster=CLUSTER, web_url=WEB, **kwargs)
        built.extend(made)
        return made

    yield make
    for sink in built:
        await sink.close()


def config(text: str) -> AlertsConfig:
    return parse_alerts_config(text, "alerts.yaml", Path("/nonexistent"), {"PD_KEY": KEY, "TOKEN": "t0ken"})


def one_sink(kind: str, url: str, *, timeout: float = 10.0) -> str:
    """An alerting file with one sink of ``kind`` at ``url``."""
    key = "    routing_key: ${PD_KEY}\n" if kind == "pagerduty" else ""
    return f"retry: {{timeout: {timeout}}}\nsinks:\n  - name: {kind}-sink\n    type: {kind}\n    url: {url}\n{key}"


OPENED, UPDATED, RESOLVED = skew_lifecycle()
STOP_OPENED, _ = health_lifecycle(PartitionStatus.STOP)

# -- what each sink sends -------------------------------------------------------------------------


async def test_alertmanager_posts_a_list_of_one_postable_alert_to_api_v2_alerts(server: Server) -> None:
    (sink_config,) = config(
        "sinks:\n  - name: am\n    type: alertmanager\n"
        f"    url: {server.url}/s200/prefix\n"
        "    headers: {Authorization: 'Bearer ${TOKEN}'}\n"
    ).sinks
    assert isinstance(sink_config, AlertmanagerSinkConfig)
    sink = AlertmanagerSink(
        sink_config, config(one_sink("webhook", "http://x")).retry, cluster=CLUSTER, web_url=WEB, clock=lambda: 1e9
    )
    try:
        result = await sink.deliver(UPDATED)
    finally:
        await sink.close()
    assert (result.delivery, result.status) == (Delivery.ACCEPTED, 200)
    (request,) = server.received
    assert (request.method, request.path, request.query) == ("POST", "/s200/prefix/api/v2/alerts", "")
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Authorization"] == "Bearer t0ken"
    assert request.headers["User-Agent"] == f"kagent/{__version__}"
    assert request.json() == [alertmanager_alert(UPDATED, cluster=CLUSTER, web_url=WEB, now=1e9, ends_after=300)]


async def test_alertmanager_re_sends_the_open_incidents_in_one_request(server: Server, sinks: Any) -> None:
    (sink,) = sinks(one_sink("alertmanager", f"{server.url}/s200"))
    incidents = [OPENED.incident, STOP_OPENED.incident]
    result = await sink.resend(incidents, 2e9)
    assert result.delivery is Delivery.ACCEPTED
    (request,) = server.received
    assert request.path == "/s200/api/v2/alerts"
    assert request.json() == [
        alertmanager_open_alert(incident, cluster=CLUSTER, web_url=WEB, now=2e9, ends_after=300)
        for incident in incidents
    ]
    assert (await sink.resend([], 2e9)).delivery is Delivery.ACCEPTED
    assert len(server.received) == 1, "nothing to re-send, no request"


async def test_a_json_webhook_posts_the_transition_record_exactly(server: Server, sinks: Any) -> None:
    (sink,) = sinks(one_sink("webhook", f"{server.url}/s202/hook?token=s3cret"))
    assert isinstance(sink, WebhookSink)
    result = await sink.deliver(OPENED)
    assert (result.delivery, result.status) == (Delivery.ACCEPTED, 202)
    (request,) = server.received
    assert (request.method, request.path, request.query) == ("POST", "/s202/hook", "token=s3cret")
    assert request.headers["Content-Type"] == "application/json"
    assert request.body == OPENED.model_dump_json().encode()
    assert result.detail == f"webhook-sink: POST {server.url}/s202/… -> 202: ok"
    assert await sink.resend([OPENED.incident], 0) == (
        Delivery.ACCEPTED,
        None,
        "webhook-sink: nothing to re-send",
        None,
    )
    assert len(server.received) == 1


async def test_slack_and_teams_webhooks_post_their_messages(server: Server, sinks: Any) -> None:
    slack, teams = sinks(
        "sinks:\n"
        f"  - {{name: slack, type: webhook, url: '{server.url}/s200/slack', template: slack}}\n"
        f"  - {{name: teams, type: webhook, url: '{server.url}/s202/teams', template: teams}}\n"
    )
    assert (await slack.deliver(RESOLVED)).delivery is Delivery.ACCEPTED
    assert (await teams.deliver(OPENED)).delivery is Delivery.ACCEPTED
    to_slack, to_teams = server.received
    assert to_slack.path == "/s200/slack" and to_slack.json()["text"].startswith(":white_check_mark: RESOLVED")
    assert to_teams.json()["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert "orders-1: consumer-1-aaa -> consumer-2-bbb" in to_teams.body.decode()


async def test_a_webhook_template_that_fails_is_rejected_without_a_request(
    server: Server, sinks: Any, tmp_path: Path
) -> None:
    (tmp_path / "open.j2").write_text('{"x": {{ no_such_name | tojson }}}')
    (tmp_path / "resolve.j2").write_text("{}")
    text = (
        f"sinks:\n  - {{name: mine, type: webhook, url: '{server.url}/s200', "
        "open_template: open.j2, resolve_template: resolve.j2}\n"
    )
    (sink,) = build_sinks(parse_alerts_config(text, "alerts.yaml", tmp_path, {}), cluster=CLUSTER, web_url=WEB)
    try:
        result = await sink.deliver(OPENED)
        assert (result.delivery, result.status) == (Delivery.REJECTED, None)
        assert result.detail.startswith("mine: the template failed: UndefinedError(")
        assert "no_such_name" in result.detail
        assert not server.received
        assert (await sink.deliver(RESOLVED)).delivery is Delivery.ACCEPTED
    finally:
        await sink.close()


async def test_pagerduty_posts_the_event_with_the_routing_key(server: Server, sinks: Any) -> None:
    (sink,) = sinks(one_sink("pagerduty", f"{server.url}/s202/v2/enqueue"))
    assert isinstance(sink, PagerDutySink)
    for transition in (OPENED, RESOLVED):
        assert (await sink.deliver(transition)).delivery is Delivery.ACCEPTED
    trigger, resolve = server.received
    assert trigger.path == "/s202/v2/enqueue" and trigger.headers["Content-Type"] == "application/json"
    assert trigger.json() == pagerduty_event(OPENED, routing_key=KEY, cluster=CLUSTER, web_url=WEB)
    assert resolve.json()["event_action"] == "resolve" and resolve.json()["dedup_key"] == OPENED.incident.id
    assert (await sink.resend([OPENED.incident], 0)).delivery is Delivery.ACCEPTED
    assert len(server.received) == 2
    assert KEY not in (await sink.deliver(OPENED)).detail


async def test_build_sinks_makes_one_sink_per_entry_in_file_order(sinks: Any) -> None:
    built = sinks(
        "sinks:\n"
        "  - {name: a, type: pagerduty, routing_key: k}\n"
        "  - {name: b, type: alertmanager, url: 'http://am:9093'}\n"
        "  - {name: c, type: webhook, url: 'http://h/x'}\n"
    )
    assert [(type(sink), sink.name) for sink in built] == [
        (PagerDutySink, "a"),
        (AlertmanagerSink, "b"),
        (WebhookSink, "c"),
    ]
    assert [sink.config.name for sink in built] == ["a", "b", "c"]
    assert getattr(built[1].config, "resend_interval", None) == 60
    assert getattr(built[0].config, "resend_interval", None) is None


async def test_the_file_s_headers_replace_the_sink_s_whatever_their_case(server: Server, sinks: Any) -> None:
    (hook,) = sinks(
        f"sinks:\n  - {{name: h, type: webhook, url: '{server.url}/s200', headers: {{content-type: text/plain}}}}\n"
    )
    assert (await hook.deliver(OPENED)).delivery is Delivery.ACCEPTED
    (request,) = server.received
    assert [value for name, value in request.header_list if name.lower() == "content-type"] == ["text/plain"]


async def test_a_session_passed_in_is_used_and_left_open(server: Server) -> None:
    async with aiohttp.ClientSession() as session:
        built = build_sinks(
            config(one_sink("webhook", f"{server.url}/s200/a")), cluster=CLUSTER, web_url=WEB, session=session
        )
        assert (await built[0].deliver(OPENED)).delivery is Delivery.ACCEPTED
        await built[0].close()
        assert not session.closed
        assert (await built[0].deliver(OPENED)).delivery is Delivery.ACCEPTED
    assert len(server.received) == 2


# -- classification --------------------------------------------------------------------------------

KINDS = ["alertmanager", "webhook", "pagerduty"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("status", "delivery", "retry_after"),
    [
        (200, Delivery.ACCEPTED, None),
        (202, Delivery.ACCEPTED, None),
        (400, Delivery.REJECTED, None),
        (404, Delivery.REJECTED, None),
        (302, Delivery.REJECTED, None),
        (429, Delivery.RETRY, 7.0),
        (500, Delivery.RETRY, None),
        (503, Delivery.RETRY, None),
    ],
)
async def test_each_sink_classifies_each_answer(
    server: Server, sinks: Any, kind: str, status: int, delivery: Delivery, retry_after: float | None
) -> None:
    (sink,) = sinks(one_sink(kind, f"{server.url}/s{status}"))
    result = await sink.deliver(OPENED)
    assert (result.delivery, result.status, result.retry_after) == (delivery, status, retry_after)
    assert result.detail.startswith(f"{kind}-sink: POST {server.url}/s{status}")
    assert f" -> {status}" in result.detail
    assert len(server.received) == 1, "one attempt, no redirect followed"


async def test_a_rejection_quotes_the_answer(server: Server, sinks: Any) -> None:
    (sink,) = sinks(one_sink("pagerduty", f"{server.url}/s400/v2/enqueue"))
    result = await sink.deliver(OPENED)
    assert result.detail == (
        f"pagerduty-sink: POST {server.url}/s400/v2/enqueue -> 400: "
        '{"status": "invalid event", "errors": ["routing_key is wrong"]}'
    )


async def test_a_long_answer_is_quoted_to_300_characters(server: Server, sinks: Any) -> None:
    (sink,) = sinks(one_sink("alertmanager", f"{server.url}/s500"))
    result = await sink.deliver(OPENED)
    assert result.detail == f"alertmanager-sink: POST {server.url}/s500/api/v2/alerts -> 500: " + "x" * 300


async def test_a_retry_after_date_is_counted_from_now(server: Server, sinks: Any) -> None:
    (sink,) = sinks(one_sink("webhook", f"{server.url}/date"))
    result = await sink.deliver(OPENED)
    assert (result.delivery, result.status) == (Delivery.RETRY, 429)
    assert result.retry_after is not None and 60 < result.retry_after <= 121


@pytest.mark.parametrize("kind", KINDS)
async def test_an_answer_past_the_timeout_is_retried_without_a_status(server: Server, sinks: Any, kind: str) -> None:
    (sink,) = sinks(one_sink(kind, f"{server.url}/slow", timeout=0.2))
    result = await sink.deliver(OPENED)
    assert (result.delivery, result.status, result.retry_after) == (Delivery.RETRY, None, None)
    assert result.detail.startswith(f"{kind}-sink: POST {server.url}/slow")
    assert result.detail.endswith("no answer within 0.2 s")
    assert len(server.received) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_closed_port_is_retried_without_a_status(sinks: Any, kind: str) -> None:
    with socket.socket() as bound:  # bound but not listening: connections to it are refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        (sink,) = sinks(one_sink(kind, f"http://127.0.0.1:{port}/s200"))
        result = await sink.deliver(OPENED)
    assert (result.delivery, result.status, result.retry_after) == (Delivery.RETRY, None, None)
    assert result.detail.startswith(f"{kind}-sink: POST http://127.0.0.1:{port}/s200")
    assert "ClientConnectorError: Cannot connect to host" in result.detail


async def test_details_name_no_secret_of_the_url(server: Server, sinks: Any) -> None:
    host = server.url.removeprefix("http://")
    (hook,) = sinks(one_sink("webhook", f"http://user:pa55@{host}/s400/T000/B000/t0ps3cret?sig=abc#frag"))
    result = await hook.deliver(OPENED)
    assert result.delivery is Delivery.REJECTED
    assert result.detail.startswith(f"webhook-sink: POST {server.url}/s400/… -> 400")
    for secret in ("user", "pa55", "t0ps3cret", "sig", "abc", "frag"):
        assert secret not in result.detail
    (request,) = server.received
    assert (request.path, request.query) == ("/s400/T000/B000/t0ps3cret", "sig=abc")


def test_public_url() -> None:
    assert public_url("https://u:p@h:8443/a/b?q=1#f") == "https://h:8443/a/b"
    assert public_url("https://hooks.slack.com/services/T/B/X", keep_path=False) == "https://hooks.slack.com/services/…"
    assert public_url("http://h/hook", keep_path=False) == "http://h/hook"
    assert public_url("http://h/", keep_path=False) == "http://h/"
    assert public_url("http://[::1]:9/x") == "http://[::1]:9/x"


async def test_exception_texts_lose_the_url_secrets_too(sinks: Any) -> None:
    (hook,) = sinks(one_sink("webhook", "https://u:pa55word@hooks.example.com/services/T0/B0/t0ps3cret?sig=abcdef"))
    assert isinstance(hook, WebhookSink)
    text = hook._scrub("failed on https://u:pa55word@hooks.example.com/services/T0/B0/t0ps3cret?sig=abcdef:\n ok")
    assert text == "failed on …: ok"
    assert hook._scrub("pa55word /services/T0/B0/t0ps3cret sig=abcdef") == "… … …"


async def test_concurrent_deliveries_share_the_sink(server: Server, sinks: Any) -> None:
    (sink,) = sinks(one_sink("webhook", f"{server.url}/s202/many"))
    transitions: list[IncidentTransition] = [OPENED, UPDATED, RESOLVED] * 10
    deliveries: list[Awaitable[Any]] = [sink.deliver(t) for t in transitions]
    results = await asyncio.gather(*deliveries)
    assert {result.delivery for result in results} == {Delivery.ACCEPTED}
    assert sorted(r.body for r in server.received) == sorted(t.model_dump_json().encode() for t in transitions)
