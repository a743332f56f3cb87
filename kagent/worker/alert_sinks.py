"""The alert sinks: one HTTP request per delivery to Alertmanager, a webhook or PagerDuty.

Each sink makes exactly one attempt per call and says how it went in a
:class:`DeliveryResult`; the alerting stage (``kagent.worker.alerting``)
decides what to do about it (try again after
:func:`kagent.core.backoff.backoff_delay`, dead-letter, go on). The
classification:

- ``2xx``: :attr:`Delivery.ACCEPTED`.
- ``429`` and ``5xx``: :attr:`Delivery.RETRY`, with the response's
  ``Retry-After`` (seconds or an HTTP date) in ``retry_after`` when it has one.
- Any other status, ``3xx`` included (redirects are not followed: an
  endpoint that moved is a configuration to fix, and following it would
  resend a secret-bearing body elsewhere): :attr:`Delivery.REJECTED`.
- A timeout (the ``retry:`` section's ``timeout``, for the whole request) or
  a connection error: :attr:`Delivery.RETRY` with ``status`` None.
- A webhook template that fails to render: :attr:`Delivery.REJECTED` with
  ``status`` None (sending it again would fail the same way).

HTTP and network failures never raise. ``detail`` is one line naming the
sink, the URL without its secrets (no credentials, query or fragment; a
webhook's path only up to its first segment, since Slack and Teams put
their secret in the path) and the response's status and first 300
characters, or the exception.

Each sink POSTs with the :class:`aiohttp.ClientSession` given to
:func:`build_sinks`, or else with one of its own, made on first use and
closed by :meth:`AlertSink.close`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import jinja2
from multidict import CIMultiDict

from kagent import __version__
from kagent.core.alert_config import (
    AlertmanagerSinkConfig,
    AlertsConfig,
    PagerDutySinkConfig,
    SinkConfig,
    WebhookSinkConfig,
)
from kagent.core.alert_payloads import (
    WebhookTemplates,
    alertmanager_alert,
    alertmanager_open_alert,
    builtin_templates,
    compile_template,
    pagerduty_event,
    render_webhook,
)
from kagent.core.backoff import RetryPolicy, parse_retry_after
from kagent.core.incidents import Incident, IncidentTransition

__all__ = [
    "BODY_EXCERPT",
    "AlertSink",
    "AlertmanagerSink",
    "Delivery",
    "DeliveryResult",
    "PagerDutySink",
    "WebhookSink",
    "build_sinks",
    "public_url",
]

BODY_EXCERPT = 300
"""Characters of a response's body quoted in :attr:`DeliveryResult.detail`."""

_READ_LIMIT = 4 * BODY_EXCERPT
"""Bytes of a response's body read, at most (enough for the excerpt in any UTF-8)."""

USER_AGENT = f"kagent/{__version__}"


class Delivery(str, Enum):
    """How one attempt went."""

    ACCEPTED = "accepted"
    """The sink has it."""
    RETRY = "retry"
    """Not delivered, and worth trying again (429, 5xx, a timeout, a connection error)."""
    REJECTED = "rejected"
    """Refused for good: sending the same again will not help (4xx other than 429, 3xx, a template error)."""


class DeliveryResult(NamedTuple):
    """The outcome of one attempt."""

    delivery: Delivery
    status: int | None
    """The HTTP status; None when there was no response."""
    detail: str
    """One line for logs and dead letters (module docstring)."""
    retry_after: float | None = None
    """Seconds the server asked to wait (``Retry-After``), with a RETRY."""


class AlertSink(Protocol):
    """A destination of incident transitions."""

    @property
    def name(self) -> str:
        """The sink's ``name`` in the alerting file."""
        ...

    @property
    def config(self) -> SinkConfig:
        """The sink's section of the alerting file."""
        ...

    async def deliver(self, transition: IncidentTransition) -> DeliveryResult:
        """One attempt to deliver ``transition``."""
        ...

    async def resend(self, incidents: Sequence[Incident], now: float) -> DeliveryResult:
        """One attempt to send the open ``incidents`` again at ``now`` (Alertmanager only; the others
        accept at once without I/O)."""
        ...

    async def close(self) -> None:
        """Release the sink's own HTTP session, if it made one."""
        ...


def public_url(url: str, *, keep_path: bool = True) -> str:
    """``url`` fit for logs: no credentials, query or fragment; with ``keep_path`` False, the path only up
    to its first segment (``https://hooks.slack.com/services/…``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    path = parts.path
    if not keep_path:
        segments = path.split("/")
        if len(segments) > 2 and any(segments[2:]):
            path = "/".join(segments[:2]) + "/…"
    return urlunsplit((parts.scheme, netloc, path, "", ""))


class _HttpSink:
    """What the three sinks share: the session, the request and its classification."""

    def __init__(
        self,
        config: AlertmanagerSinkConfig | WebhookSinkConfig | PagerDutySinkConfig,
        retry: RetryPolicy,
        session: aiohttp.ClientSession | None,
        url: str,
        public: str,
    ) -> None:
        self._config = config
        self._timeout = aiohttp.ClientTimeout(total=retry.timeout)
        self._session = session
        self._owns_session = session is None
        self._url = url
        self._public = public
        parts = urlsplit(url)
        hidden = [parts.query, parts.password or ""]
        if urlsplit(public).path != parts.path:
            hidden.append(parts.path)
        # Very short ones are left: replacing them would garble the message, and they guard nothing.
        self._secrets = sorted({url, *(secret for secret in hidden if len(secret) >= 4)}, key=len, reverse=True)
        self._headers = CIMultiDict({"Content-Type": "application/json", "User-Agent": USER_AGENT})
        self._headers.update(config.headers)  # the file's replace the sink's, whatever their case

    @property
    def name(self) -> str:
        return self._config.name

    async def resend(self, incidents: Sequence[Incident], now: float) -> DeliveryResult:
        return DeliveryResult(Delivery.ACCEPTED, None, f"{self.name}: nothing to re-send")

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _scrub(self, text: str) -> str:
        """``text`` (an exception's) on one line, without the parts of the URL :func:`public_url` leaves out."""
        for secret in self._secrets:
            text = text.replace(secret, "…")
        return _one_line(text)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
            self._owns_session = True
        return self._session

    async def _post(self, body: bytes) -> DeliveryResult:
        """POST ``body`` to the sink's URL once and classify the outcome (module docstring)."""
        where = f"{self.name}: POST {self._public}"
        try:
            async with self._client().post(
                self._url, data=body, headers=self._headers, timeout=self._timeout, allow_redirects=False
            ) as response:
                status = response.status
                excerpt = await _excerpt(response)
                retry_after = response.headers.get("Retry-After")
        except TimeoutError:
            return DeliveryResult(Delivery.RETRY, None, f"{where}: no answer within {self._timeout.total:g} s")
        except (aiohttp.ClientError, OSError) as exc:
            return DeliveryResult(Delivery.RETRY, None, f"{where}: {type(exc).__name__}: {self._scrub(str(exc))}")
        detail = f"{where} -> {status}" + (f": {excerpt}" if excerpt else "")
        if 200 <= status < 300:
            return DeliveryResult(Delivery.ACCEPTED, status, detail)
        if status == 429 or 500 <= status < 600:
            return DeliveryResult(Delivery.RETRY, status, detail, parse_retry_after(retry_after, time.time()))
        return DeliveryResult(Delivery.REJECTED, status, detail)


async def _excerpt(response: aiohttp.ClientResponse) -> str:
    """The first :data:`BODY_EXCERPT` characters of the response's body, on one line."""
    try:
        raw = await response.content.read(_READ_LIMIT)
    except (aiohttp.ClientError, OSError, TimeoutError):
        return ""
    return _one_line(raw.decode("utf-8", errors="replace"))[:BODY_EXCERPT]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _json(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


class AlertmanagerSink(_HttpSink):
    """Alertmanager API v2: each delivery and each re-send POSTs a list of postable alerts to
    ``<url>/api/v2/alerts`` (see :func:`kagent.core.alert_payloads.alertmanager_alert`)."""

    def __init__(
        self,
        config: AlertmanagerSinkConfig,
        retry: RetryPolicy,
        *,
        cluster: str,
        web_url: str,
        session: aiohttp.ClientSession | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        url = config.alerts_url
        super().__init__(config, retry, session, url, public_url(url))
        self.config = config
        self._cluster = cluster
        self._web_url = web_url
        self._clock = clock

    async def deliver(self, transition: IncidentTransition) -> DeliveryResult:
        alert = alertmanager_alert(
            transition,
            cluster=self._cluster,
            web_url=self._web_url,
            now=self._clock(),
            ends_after=self.config.ends_after,
        )
        return await self._post(_json([alert]))

    async def resend(self, incidents: Sequence[Incident], now: float) -> DeliveryResult:
        """POST every one of ``incidents`` again, in one request, ``endsAt`` ``ends_after`` past ``now``."""
        if not incidents:
            return DeliveryResult(Delivery.ACCEPTED, None, f"{self.name}: nothing to re-send")
        alerts = [
            alertmanager_open_alert(
                incident, cluster=self._cluster, web_url=self._web_url, now=now, ends_after=self.config.ends_after
            )
            for incident in incidents
        ]
        return await self._post(_json(alerts))


class WebhookSink(_HttpSink):
    """Any HTTP endpoint: each delivery POSTs the body :func:`kagent.core.alert_payloads.render_webhook`
    makes from the sink's template (the built-in ``json``, ``slack`` or ``teams``, or the file's own)."""

    def __init__(
        self,
        config: WebhookSinkConfig,
        retry: RetryPolicy,
        *,
        cluster: str,
        web_url: str,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        url = str(config.url)
        super().__init__(config, retry, session, url, public_url(url, keep_path=False))
        self.config = config
        self._cluster = cluster
        self._web_url = web_url
        self._templates = _templates(config)

    async def deliver(self, transition: IncidentTransition) -> DeliveryResult:
        try:
            body = render_webhook(self._templates, transition, cluster=self._cluster, web_url=self._web_url)
        except jinja2.TemplateError as exc:
            return DeliveryResult(Delivery.REJECTED, None, f"{self.name}: the template failed: {_one_line(f'{exc!r}')}")
        return await self._post(body)


def _templates(config: WebhookSinkConfig) -> WebhookTemplates | None:
    if config.open_template is not None and config.resolve_template is not None:
        return WebhookTemplates(
            open=compile_template(config.open_template.source, config.open_template.path.name),
            resolve=compile_template(config.resolve_template.source, config.resolve_template.path.name),
        )
    return builtin_templates(config.template)


class PagerDutySink(_HttpSink):
    """PagerDuty Events API v2: each delivery POSTs one event
    (:func:`kagent.core.alert_payloads.pagerduty_event`); nothing is re-sent (PagerDuty keeps an alert
    triggered until it is resolved)."""

    def __init__(
        self,
        config: PagerDutySinkConfig,
        retry: RetryPolicy,
        *,
        cluster: str,
        web_url: str,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        url = str(config.url)
        super().__init__(config, retry, session, url, public_url(url))
        self.config = config
        self._cluster = cluster
        self._web_url = web_url

    async def deliver(self, transition: IncidentTransition) -> DeliveryResult:
        event = pagerduty_event(transition, routing_key=self.config.key, cluster=self._cluster, web_url=self._web_url)
        return await self._post(_json(event))


def build_sinks(
    config: AlertsConfig,
    *,
    cluster: str,
    web_url: str,
    session: aiohttp.ClientSession | None = None,
) -> list[AlertSink]:
    """One sink per entry of ``config.sinks``, in file order.

    With ``session`` every sink POSTs with it (and :meth:`AlertSink.close`
    leaves it open: it is the caller's); without, each makes its own on first
    use (in the running event loop) and closes it in :meth:`AlertSink.close`.
    ``cluster`` is the ``cluster`` label, PagerDuty's ``source``; ``web_url``
    the base of the links to a group's page.
    """
    sinks: list[AlertSink] = []
    for sink in config.sinks:
        if isinstance(sink, AlertmanagerSinkConfig):
            sinks.append(AlertmanagerSink(sink, config.retry, cluster=cluster, web_url=web_url, session=session))
        elif isinstance(sink, WebhookSinkConfig):
            sinks.append(WebhookSink(sink, config.retry, cluster=cluster, web_url=web_url, session=session))
        else:
            sinks.append(PagerDutySink(sink, config.retry, cluster=cluster, web_url=web_url, session=session))
    return sinks
