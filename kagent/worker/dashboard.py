"""The operator dashboard: two HTML pages and their static files, served by every worker.

- ``GET /``: the cluster's groups, sortable, filtered and paged by the query string
  (``sort``, ``order``, ``q``, ``offset``, ``limit``: those of ``GET /api/groups``), so a link
  reproduces a view.
- ``GET /groups/{group}``: one group (the page alerts link to,
  :func:`kagent.core.alert_payloads.group_url`), all from one measurement whose time it shows: each
  member's lag now beside its lag under the latest recommendation (and the partitions no member
  holds), the moves, the partitions, the skew of the last hour.
- ``GET /groups/`` (and ``/groups``): a 302 to ``/`` (its query string kept); with
  ``?group=<name>``, that group's page (for the names ``.`` and ``..``, which no path can carry).
- ``GET /static/dashboard/{name}``: the files of ``kagent/static/dashboard/`` (only those).

The pages are shells rendered with Jinja2 (autoescaped) from ``kagent/templates/dashboard/``;
``dashboard.js`` fills them from the JSON API (:mod:`kagent.core.api_records`) and polls it
every ``refresh_interval`` seconds while the page is visible. Nothing is fetched from anywhere but
the worker: the pages forbid it (``Content-Security-Policy``), and no data is ever put into HTML
by the script (DOM text only). Every URL a page makes is relative to the page, so the dashboard
also works behind a proxy that serves the workers under a path (``KAGENT_PUBLIC_URL``). A figure the
API gives as null reads "unknown", never 0 or blank; an estimate is marked as one; a skew over less
lag than the trigger's minimum (the summary's ``min_total_lag``) is marked, not shown as an alarm.

The stage reads no state of its own: any worker answers the API for the whole cluster.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Final

import faust
import jinja2
from faust.web import Request, Response, View

from kagent.worker.request_view import RequestView
from kagent.worker.stage import Stage

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_REFRESH_INTERVAL",
    "Dashboard",
    "DashboardPages",
    "StaticFile",
    "load_static_files",
    "root_for",
]

DEFAULT_REFRESH_INTERVAL: Final = 5.0
"""Seconds between two polls of the API by an open page."""

CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
"""What the pages may load: their own worker's scripts, styles, images and API, nothing inline
(a group name that slipped into markup could not run), nothing from elsewhere, no framing."""

_CONTENT_TYPES: Final[Mapping[str, str]] = MappingProxyType(
    {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
)
"""The content type of each kind of static file; a file of any other kind is not served."""

_PAGE_HEADERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-cache",
    }
)

_IMMUTABLE = "public, max-age=31536000, immutable"


@dataclass(frozen=True)
class StaticFile:
    """One file of ``kagent/static/dashboard/``, as served."""

    text: str
    """Its content (every servable kind is UTF-8 text)."""
    content_type: str
    """Its media type; it is served with ``; charset=utf-8``."""
    version: str
    """The first 16 hex digits of the body's SHA-256: its ETag, and the ``?v=`` of the pages' links to it."""


def load_static_files() -> Mapping[str, StaticFile]:
    """The servable files of ``kagent/static/dashboard/`` by name: those of a known kind
    (``.js``, ``.css``, ``.svg``) directly in it. Read once, from the installed package."""
    folder = resources.files("kagent").joinpath("static", "dashboard")
    found: dict[str, StaticFile] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2] if "." in entry.name else ""
        content_type = _CONTENT_TYPES.get(suffix)
        if content_type is None or not entry.is_file():
            continue
        body = entry.read_bytes()
        found[entry.name] = StaticFile(
            text=body.decode("utf-8"),
            content_type=content_type,
            version=hashlib.sha256(body).hexdigest()[:16],
        )
    return MappingProxyType(found)


def root_for(raw_path: str) -> str:
    """The web root relative to a page at ``raw_path`` (still percent-encoded): ``./`` for ``/``,
    ``../`` for ``/groups/a%2Fb``, ``../../`` for ``/groups/a/b``. Pages link to everything through
    it, so they work wherever a proxy mounts the workers."""
    depth = raw_path.count("/") - 1
    return "../" * depth if depth > 0 else "./"


class DashboardPages:
    """The pages' HTML, rendered from ``kagent/templates/dashboard/`` with autoescaping on (a group
    name is data, never markup) and ``StrictUndefined`` (a name a template lacks is an error)."""

    def __init__(self, refresh_interval: float, static: Mapping[str, StaticFile]) -> None:
        """``refresh_interval``: seconds between the pages' polls (> 0). ``static``: what
        :func:`load_static_files` gives, whose versions the links carry."""
        if not refresh_interval > 0:
            raise ValueError(f"refresh_interval must be > 0, not {refresh_interval!r}")
        self._refresh_ms = max(1, round(refresh_interval * 1000))
        self._static = static
        self._environment = jinja2.Environment(
            loader=jinja2.PackageLoader("kagent", "templates/dashboard"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def _static_url(self, root: str, name: str) -> str:
        found = self._static.get(name)
        if found is None:
            raise LookupError(f"no static file {name!r} in kagent/static/dashboard/")
        return f"{root}static/dashboard/{name}?v={found.version}"

    def _render(self, template: str, root: str, **context: object) -> str:
        return self._environment.get_template(template).render(
            root=root,
            refresh_ms=self._refresh_ms,
            static=lambda name: self._static_url(root, name),
            **context,
        )

    def groups(self, root: str) -> str:
        """The groups page, for a page whose web root is ``root`` (:func:`root_for`)."""
        return self._render("groups.html.j2", root)

    def group(self, group: str, root: str) -> str:
        """The page of ``group`` (any string: it is escaped), for a page whose web root is ``root``."""
        return self._render("group.html.j2", root, group=group)


class Dashboard(Stage):
    """The dashboard's pages and static files on the worker's web server (see the module)."""

    name = "dashboard"

    def __init__(self, refresh_interval: float = DEFAULT_REFRESH_INTERVAL) -> None:
        """``refresh_interval``: seconds between an open page's polls of the API (> 0)."""
        self._static = load_static_files()
        self._pages = DashboardPages(refresh_interval, self._static)

    def register(self, app: faust.App) -> None:
        """Add ``/``, ``/groups/``, ``/groups/{group}`` and ``/static/dashboard/{name}`` to ``app``'s
        web server. ``/`` goes first: Faust mounts its own index there later, and the first route wins."""
        _routes(app, self._pages, self._static)


def _routes(app: faust.App, pages: DashboardPages, static: Mapping[str, StaticFile]) -> None:
    @app.page("/")
    class GroupsPage(RequestView):
        """``GET /``: the groups page."""

        async def get(self, request: Request) -> Response:
            return self.html(pages.groups(root_for(request.rel_url.raw_path)), headers=dict(_PAGE_HEADERS))

    @app.page("/groups/")
    class GroupsRedirect(RequestView):
        """``GET /groups/``: 302 to the groups page, with the same query string. ``GET /groups/?group=<name>``
        is the page of that group: how the groups page links to ``.`` and ``..``, which a browser would
        resolve away from a path (``/groups/..`` is ``/``)."""

        async def get(self, request: Request) -> Response:
            group = request.rel_url.query.get("group")
            if group is not None:
                return self.html(pages.group(group, root_for(request.rel_url.raw_path)), headers=dict(_PAGE_HEADERS))
            return _redirect(self, "../", request)

    @app.page("/groups")
    class GroupsRedirectBare(RequestView):
        """``GET /groups``: 302 to the groups page, with the same query string."""

        async def get(self, request: Request) -> Response:
            return _redirect(self, "./", request)

    # ``.+``: a group name may hold any character; aiohttp matches the path with ``%2F`` and ``%25``
    # still encoded and decodes the match, so ``/groups/a%2Fb`` is group ``a/b`` (and so is ``/groups/a/b``).
    @app.page("/groups/{group:.+}")
    class GroupPage(RequestView):
        """``GET /groups/<group, percent-encoded>``: the group's page (200 whether or not the group is
        known: the page asks the API, and says so when it is not)."""

        async def get(self, request: Request, group: str) -> Response:
            return self.html(pages.group(group, root_for(request.rel_url.raw_path)), headers=dict(_PAGE_HEADERS))

    @app.page("/static/dashboard/{name}")
    class StaticFiles(RequestView):
        """``GET /static/dashboard/<name>``: a file of ``kagent/static/dashboard/``; 404 for any other name.
        Cached for good when asked for by its version (``?v=``), else revalidated by ETag."""

        async def get(self, request: Request, name: str) -> Response:
            found = static.get(name)
            if found is None:
                return self.text(f"no static file {name!r}\n", status=404)
            etag = f'"{found.version}"'
            cache = _IMMUTABLE if request.rel_url.query.get("v") == found.version else "no-cache"
            headers = {"ETag": etag, "Cache-Control": cache, "X-Content-Type-Options": "nosniff"}
            if etag in request.headers.get("If-None-Match", ""):
                return self.bytes(b"", status=304, headers=headers)
            return self.text(found.text, content_type=found.content_type, headers=headers)


def _redirect(view: View, root: str, request: Request) -> Response:
    """302 to the web root (``root``, relative to the request's page), keeping the request's query string."""
    query = request.rel_url.raw_query_string
    location = root + (f"?{query}" if query else "")
    return view.text("", status=302, headers={"Location": location, "Cache-Control": "no-cache"})
