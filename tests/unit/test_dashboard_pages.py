"""`kagent.worker.dashboard`: the dashboard's routes, its static files, and how a group name reaches a page.

The routes are served here as a worker serves them (a Faust app's web server with the stage
registered), through aiohttp's test client: no broker, no browser. What the pages do in a browser
is tested in tests/integration/test_dashboard.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from importlib import resources
from urllib.parse import parse_qs, urljoin, urlsplit

import faust
import pytest
from aiohttp.test_utils import TestClient, TestServer
from faust.web.drivers.aiohttp import Web as AiohttpWeb

from kagent.core.alert_payloads import group_url
from kagent.worker.dashboard import (
    CONTENT_SECURITY_POLICY,
    Dashboard,
    DashboardPages,
    load_static_files,
    root_for,
)

BASE = "http://kagent.example:6066"

HOSTILE_NAMES = [
    "orders",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "a/b",
    "100%",
    "%2F",
    "{braces}",
    "q?x=1#frag",
    "tab\tand space",
    'it\'s "quoted" & <b>bold</b>',
    "日本語-グループ",
    "...",
]


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    """The dashboard's routes on a Faust app's web server (refreshing every 2.5 s), under aiohttp's test client."""
    app = faust.App("dashboard-unit", broker="kafka://127.0.0.1:1")
    Dashboard(refresh_interval=2.5).register(app)
    web = app.web
    assert isinstance(web, AiohttpWeb)
    web.init_server()  # Faust's own routes too, among them its index at "/"
    async with TestClient(TestServer(web.web_app)) as test_client:
        yield test_client


class _Page(HTMLParser):
    """What a test reads from a page: the body's data attributes, the h1's text, every href and src."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.h1 = ""
        self.links: list[str] = []
        self._in_h1 = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "body":
            self.body = found
        self._in_h1 = self._in_h1 or tag == "h1"
        self.links += [value for name, value in attrs if name in ("href", "src") and value is not None]

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1":
            self._in_h1 = False

    def handle_data(self, data: str) -> None:
        if self._in_h1:
            self.h1 += data


async def test_the_groups_page_is_html_that_loads_only_the_workers_own_files(client: TestClient) -> None:
    response = await client.get("/")
    html = await response.text()
    assert response.status == 200
    assert response.content_type == "text/html" and response.charset == "utf-8"
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    page = _Page(html)
    assert page.body["data-page"] == "groups"
    assert page.body["data-root"] == "./"
    assert page.body["data-refresh-ms"] == "2500"
    assert 'data-testid="groups-table"' in html and "<script>" not in html  # no inline script
    for link in page.links:  # relative, to this worker
        assert not urlsplit(link).scheme and not link.startswith("/"), link
    static = [link for link in page.links if "static/dashboard/" in link]
    assert {urlsplit(link).path.rsplit("/", 1)[1] for link in static} == {
        "dashboard.js",
        "dashboard.css",
        "favicon.svg",
    }
    for link in static:
        assert (await client.get(urljoin("/", link))).status == 200


async def test_groups_slash_redirects_to_the_groups_page_keeping_the_query(client: TestClient) -> None:
    for path, target in [
        ("/groups/", "/"),
        ("/groups/?sort=group&q=pay", "/?sort=group&q=pay"),
        ("/groups", "/"),
        ("/groups?q=a%2Fb", "/?q=a%2Fb"),
    ]:
        response = await client.get(path, allow_redirects=False)
        assert response.status == 302
        location = urlsplit(urljoin(f"{BASE}{path}", response.headers["Location"]))
        wanted = urlsplit(f"{BASE}{target}")
        assert (location.netloc, location.path) == (wanted.netloc, wanted.path)
        assert parse_qs(location.query) == parse_qs(wanted.query)
    followed = await client.get("/groups/")
    assert followed.status == 200 and _Page(await followed.text()).body["data-page"] == "groups"


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_a_group_page_at_the_url_alerts_link_to_shows_the_name_as_text(client: TestClient, name: str) -> None:
    url = group_url(BASE, name)
    path = url.removeprefix(BASE)
    response = await client.get(path)
    html = await response.text()
    assert response.status == 200, html
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    page = _Page(html)
    assert page.body["data-page"] == "group"
    assert page.body["data-group"] == name  # what the script asks the API for, exactly
    assert page.h1 == name
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>bold" not in html
    # Every link of the page resolves under the worker's root, however many '/' the name holds.
    assert urljoin(url, page.body["data-root"] or "") == f"{BASE}/"
    assert urljoin(url, next(link for link in page.links if "dashboard.js" in link)).startswith(
        f"{BASE}/static/dashboard/dashboard.js?v="
    )


async def test_a_slash_in_the_path_is_part_of_the_group_name(client: TestClient) -> None:
    """``/groups/a/b`` (a hand-typed URL) is group ``a/b``, like ``/groups/a%2Fb``; its links still reach the root."""
    page = _Page(await (await client.get("/groups/a/b")).text())
    assert page.body["data-group"] == "a/b"
    assert urljoin(f"{BASE}/groups/a/b", page.body["data-root"] or "") == f"{BASE}/"


async def test_static_files_are_served_with_their_content_type_and_cached_by_version(client: TestClient) -> None:
    files = load_static_files()
    assert set(files) == {"dashboard.js", "dashboard.css", "favicon.svg"}
    kinds = {"dashboard.js": "text/javascript", "dashboard.css": "text/css", "favicon.svg": "image/svg+xml"}
    for name, found in files.items():
        response = await client.get(f"/static/dashboard/{name}")
        assert response.status == 200
        assert response.content_type == kinds[name] and response.charset == "utf-8"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert await response.text() == found.text
        assert response.headers["Cache-Control"] == "no-cache"
        etag = response.headers["ETag"]
        assert etag == f'"{found.version}"'
        assert (await client.get(f"/static/dashboard/{name}", headers={"If-None-Match": etag})).status == 304
        versioned = await client.get(f"/static/dashboard/{name}?v={found.version}")
        assert "immutable" in versioned.headers["Cache-Control"]
        stale = await client.get(f"/static/dashboard/{name}?v=0000")
        assert stale.headers["Cache-Control"] == "no-cache"


@pytest.mark.parametrize(
    "path",
    [
        "/static/dashboard/nope.js",
        "/static/dashboard/DASHBOARD.JS",
        "/static/dashboard/dashboard.js.map",
        "/static/dashboard/..%2Fdashboard.py",
        "/static/dashboard/%2E%2E%2F%2E%2E%2Fapp.py",
        "/static/dashboard/../../app.py",
        "/static/dashboard/",
        "/static/other/dashboard.js",
    ],
)
async def test_only_the_dashboards_own_static_files_are_served(client: TestClient, path: str) -> None:
    assert (await client.get(path)).status == 404


@pytest.mark.parametrize("name", [".", "..", "a/b"])
async def test_any_group_page_can_be_asked_for_by_query(client: TestClient, name: str) -> None:
    """``.`` and ``..`` cannot be path segments (a browser resolves ``/groups/..`` to ``/``): the groups page
    links to them as ``/groups/?group=<name>``."""
    response = await client.get("/groups/", params={"group": name}, allow_redirects=False)
    assert response.status == 200
    page = _Page(await response.text())
    assert (page.body["data-page"], page.body["data-group"], page.h1) == ("group", name, name)
    assert urljoin(f"{BASE}/groups/?group=x", page.body["data-root"] or "") == f"{BASE}/"


def test_root_for_counts_the_encoded_paths_segments() -> None:
    assert root_for("/") == "./"
    assert root_for("/groups/orders") == "../"
    assert root_for("/groups/a%2Fb") == "../"
    assert root_for("/groups/a/b") == "../../"


def test_pages_refuse_a_refresh_interval_that_is_not_positive() -> None:
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="refresh_interval"):
            DashboardPages(bad, load_static_files())


def _script() -> str:
    return resources.files("kagent").joinpath("static", "dashboard", "dashboard.js").read_text(encoding="utf-8")


def test_the_script_puts_no_data_into_markup_and_fetches_nothing_from_elsewhere() -> None:
    """Group names are user-controlled: the script builds the DOM with text nodes only, and asks only its worker."""
    script = _script()
    code = re.sub(r"^\s*//.*$", "", script, flags=re.MULTILINE)  # comments may name what is forbidden
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc"):
        assert sink not in code, sink
    assert "encodeURIComponent(group)" in code and "encodeURIComponent(id)" in code
    urls = set(re.findall(r"https?://[^\s\"'`)]+", code))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace, not a request
    assert "import " not in code and "require(" not in code


def test_the_styles_and_templates_reference_nothing_outside_the_worker() -> None:
    folder = resources.files("kagent")
    texts = [folder.joinpath("static", "dashboard", "dashboard.css").read_text(encoding="utf-8")]
    texts += [
        entry.read_text(encoding="utf-8")
        for entry in folder.joinpath("templates", "dashboard").iterdir()
        if entry.name.endswith(".j2")
    ]
    for text in texts:
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, flags=re.IGNORECASE), text[:200]
        assert "@import" not in text
