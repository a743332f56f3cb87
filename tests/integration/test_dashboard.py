"""The dashboard in headless Chromium.

Against real parts first: two real workers of one app on the embedded broker, a skewed group and a
balanced one whose name is full of markup, ``/`` and ``%``. A group's page opened before its group
exists says so, and fills in without a reload once the group's records arrive and its
recommendation is made: one bar pair per member, the moves, the recommendation's id. The groups
page lists both groups, sorts on a header's click and keeps its view in the URL; the hostile name
is shown as text and its link reaches its page. Screenshots of both pages go to
``build/screenshots/``.

Then against :class:`tests.support.browser.StandInApi` (canned answers of the API's contract, beside
the real dashboard stage), what real workers seldom answer: 10,000 groups to page and filter, an
incomplete listing, an API that fails and recovers.

Every wait has a deadline (Playwright's ``expect`` timeouts, ``wait_until``); nothing sleeps.
"""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from aiokafka.structs import TopicPartition
from playwright.sync_api import Browser, Page, expect

from kagent.core.api_records import WorkerAnswer, group_detail, summarize
from kagent.core.evaluation import evaluate
from kagent.core.group_health import GroupStatus
from kagent.core.recommendation import RecommendationKind
from kagent.tools.embedded import EmbeddedBroker
from tests.support import REPO
from tests.support.browser import StandInApi, chromium, require_chromium, summaries
from tests.support.coordinator import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    group_metadata,
    offset_commit,
    produce,
    publish,
)
from tests.support.waiting import wait_until
from tests.support.web import get_answer
from tests.support.worker import FAST, Worker
from tests.unit.test_evaluation import BALANCED as EVEN_SNAPSHOT
from tests.unit.test_evaluation import POLICY
from tests.unit.test_rebalance_or_scale import every

pytestmark = pytest.mark.integration

APP = "dashboard-e2e"
SKEWED = "dash-e2e-skewed"
SKEWED_TOPIC = "dash-e2e-orders"
BALANCED = 'dash-e2e-balanced <img src=x onerror="window.pwned=1"> & "q"/100%'
BALANCED_TOPIC = "dash-e2e-even"
SCREENSHOTS = REPO / "build" / "screenshots"

T = TypeVar("T")

WAIT_MS = 60_000
"""Deadline of a wait on a page fed by real workers (they refresh every 5 s, and CI has two busy cores)."""


class Cluster:
    """Two real workers of :data:`APP` (each with its own log and data dir) and the broker they share."""

    def __init__(self, broker: EmbeddedBroker, workdir: Path) -> None:
        self.broker = broker
        self.workers: list[Worker] = []
        for n in range(2):
            worker = Worker(broker.bootstrap_servers, workdir, APP, data_dir=str(workdir / f"data-{n}"), **FAST)
            worker.log_path = workdir / f"worker-{n}.log"
            self.workers.append(worker)
        self._skewed_published = False

    def logs(self) -> str:
        return "\n".join(worker.log_tail(80) for worker in self.workers)

    def ask(self, worker: Worker, path: str) -> tuple[int, Any] | None:
        """``worker``'s status and JSON body at ``path``; None while it does not answer."""
        worker.check_alive()
        try:
            return get_answer(worker.url + path.lstrip("/"), timeout=5)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def both_answer(self) -> bool:
        """Whether the first worker lists the groups of both, each of them answering."""
        answer = self.ask(self.workers[0], "/api/groups?limit=1")
        return answer is not None and answer[0] == 200 and answer[1]["complete"] and len(answer[1]["workers"]) == 2

    def check_dashboard(self, worker: Worker) -> None:
        """Fail, saying why, unless ``worker`` serves the dashboard at ``/`` (its stage is registered)."""
        with urllib.request.urlopen(worker.url, timeout=10) as response:
            kind, body = response.headers.get_content_type(), response.read().decode()
        if kind != "text/html" or 'data-page="groups"' not in body:
            pytest.fail(
                f"{worker.url} answers {kind} {body[:200]!r}, not the dashboard: kagent.app does not register "
                "kagent.worker.dashboard.Dashboard (add Dashboard() to the stages of kagent.app.build_stages)",
                pytrace=False,
            )

    def publish_skewed(self) -> None:
        """The skewed group (once): range puts the hot partitions 0 and 1 on its first member, whose lag is
        1,200 records against 200 and 200 (peak-to-mean 2.25, total 1,600 >= the 1,000 floor)."""
        if self._skewed_published:
            return
        members = {
            f"{SKEWED}-{m}": [TopicPartition(SKEWED_TOPIC, 2 * m), TopicPartition(SKEWED_TOPIC, 2 * m + 1)]
            for m in range(3)
        }
        records: list[Any] = [
            group_metadata(SKEWED, 1, members),
            *(offset_commit(SKEWED, SKEWED_TOPIC, p, 0) for p in range(6)),
        ]
        run(publish(self.broker.bootstrap_servers, records))
        self._skewed_published = True

    def group(self, name: str) -> dict[str, Any] | None:
        """``GET /api/groups/{name}`` from the first worker, when it answers 200."""
        answer = self.ask(self.workers[0], "/api/groups/" + quote(name, safe=""))
        return answer[1] if answer is not None and answer[0] == 200 else None

    def recommended(self, name: str) -> dict[str, Any] | None:
        """:meth:`group` once it has a recommendation."""
        found = self.group(name)
        return found if found is not None and found["recommendation"] is not None else None


@pytest.fixture(scope="module")
def cluster(
    kafka_broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    """Two real workers sharing the groups; the balanced group published, the skewed one's traffic
    produced (its coordinator records come from :meth:`Cluster.publish_skewed`). Their logs are printed
    when a test of the module failed."""
    require_chromium()  # before minutes of set-up for tests that would skip
    bootstrap = kafka_broker.bootstrap_servers
    balanced = {f"{BALANCED_TOPIC}-{m}": [TopicPartition(BALANCED_TOPIC, m)] for m in range(2)}

    async def prepare() -> None:
        await kafka_broker.create_topics({OFFSETS_TOPIC: OFFSETS_TOPIC_PARTITIONS, SKEWED_TOPIC: 6, BALANCED_TOPIC: 2})
        await produce(bootstrap, SKEWED_TOPIC, {0: 600, 1: 600, 2: 100, 3: 100, 4: 100, 5: 100})
        await produce(bootstrap, BALANCED_TOPIC, {0: 50, 1: 50})
        await publish(
            bootstrap,
            [
                group_metadata(BALANCED, 3, balanced),
                *(offset_commit(BALANCED, BALANCED_TOPIC, p, 10) for p in range(2)),
            ],
        )

    run(prepare())
    found = Cluster(kafka_broker, tmp_path_factory.mktemp("dashboard"))
    failed_before = request.session.testsfailed
    try:
        for worker in found.workers:
            worker.start()
        wait_until(
            found.both_answer, 120, "both workers to answer /api/groups together", interval=0.3, detail=found.logs
        )
        for worker in found.workers:
            found.check_dashboard(worker)
        yield found
    finally:
        if request.session.testsfailed > failed_before:
            print(found.logs())
        for worker in found.workers:
            worker.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page of a fresh browser context; a script error on it fails the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, f"script errors on the page: {errors}"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine`` run to its end on a loop of its own, in a thread: Playwright's sync API keeps a loop
    running in the test's thread, where ``asyncio.run`` refuses to start another."""
    with ThreadPoolExecutor(1, thread_name_prefix="dashboard-test") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


# ---- against real workers ------------------------------------------------------------------------------------


def test_a_group_page_fills_in_live_when_its_group_and_recommendation_arrive(cluster: Cluster, page: Page) -> None:
    first = cluster.workers[0]
    page.goto(f"{first.url}groups/{SKEWED}")
    # The worker serves the page whatever the group; the API says it knows no such group yet.
    expect(page.get_by_test_id("group-not-found")).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_test_id("group-not-found")).to_contain_text(SKEWED)
    page.evaluate("window.kagentTestMarker = 'same page'")  # gone if the page reloaded

    cluster.publish_skewed()
    bars = page.get_by_test_id("member-bar")
    expect(bars).to_have_count(3, timeout=WAIT_MS)
    link = page.get_by_test_id("recommendation-link")
    expect(link).to_be_visible(timeout=WAIT_MS)
    assert page.evaluate("window.kagentTestMarker") == "same page"

    detail = wait_until(
        lambda: cluster.recommended(SKEWED),
        WAIT_MS / 1000,
        "the API to show the skewed group's recommendation",
        detail=cluster.logs,
    )
    recommendation = detail["recommendation"]
    expect(link).to_have_text(recommendation["id"])
    assert link.get_attribute("href") == f"../api/recommendations/{recommendation['id']}"
    assert recommendation["moves"]
    moves = page.get_by_test_id("move-row")
    expect(moves).to_have_count(len(recommendation["moves"]))
    for row, move in zip(moves.all(), recommendation["moves"], strict=True):
        cells = row.locator("td").all_inner_texts()
        assert cells[:3] == [f"{move['topic']}-{move['partition']}", move["from_member"], move["to_member"]]
        assert cells[3] == f"{move['lag']:,.0f} records"

    # One bar pair per member, on one scale: the hot member's "now" is the longest bar; the numbers are labelled.
    members = {m["member_id"]: m for m in detail["members"]}
    assert set(members) == {f"{SKEWED}-{m}" for m in range(3)}
    for bar in bars.all():
        member = members[bar.get_attribute("data-member") or ""]
        now = bar.get_by_test_id("member-lag-now")
        recommended = bar.get_by_test_id("member-lag-recommended")
        assert float(now.get_attribute("data-value") or "nan") == member["lag"]
        assert float(recommended.get_attribute("data-value") or "nan") == member["recommended_lag"]
        expect(bar).to_contain_text(f"{member['lag']:,.0f} records")
    hot = page.locator(f'[data-testid="member-bar"][data-member="{SKEWED}-0"]')
    assert float(hot.get_by_test_id("member-lag-now").get_attribute("data-value") or "nan") == 1200
    widths = page.eval_on_selector_all(
        '[data-testid="member-lag-now"], [data-testid="member-lag-recommended"]',
        "bars => bars.map(bar => bar.getBoundingClientRect().width)",
    )
    hot_box = hot.get_by_test_id("member-lag-now").bounding_box()
    assert hot_box is not None and max(widths) == pytest.approx(hot_box["width"])

    expect(page.get_by_test_id("partition-row")).to_have_count(6)
    expect(page.get_by_test_id("group-status")).to_have_text(re.compile(r"^(OK|WARN|STOP|STALL|REWIND)$"))
    expect(page.get_by_test_id("skew-sparkline")).to_be_visible()
    expect(page.get_by_test_id("incident")).to_contain_text("lag-skew")
    expect(page.get_by_test_id("as-of")).not_to_be_empty()
    screenshot(page, "dashboard-group.png")


def test_the_groups_page_lists_both_groups_sorts_and_links_to_a_hostile_names_page(
    cluster: Cluster, page: Page
) -> None:
    cluster.publish_skewed()
    second = cluster.workers[1]
    page.goto(f"{second.url}?q=dash-e2e")
    rows = page.get_by_test_id("group-row")
    expect(rows).to_have_count(2, timeout=WAIT_MS)
    # By skew, largest first (the default): the skewed group, then the balanced one, its name as text.
    expect(rows.get_by_test_id("group-link")).to_have_text([SKEWED, BALANCED])
    expect(page.get_by_test_id("groups-count")).to_have_text("1\u20132 of 2 groups matching “dash-e2e”")
    skewed_row = rows.nth(0)
    expect(skewed_row.get_by_test_id("group-members")).to_have_text("3")
    expect(skewed_row.get_by_test_id("group-total-lag")).to_have_text("1,600")
    expect(skewed_row.get_by_test_id("group-skew")).to_have_text("2.25")
    expect(skewed_row.get_by_test_id("recommendation-link")).to_have_attribute(
        "href", re.compile(r"^\./api/recommendations/[0-9a-f]+$"), timeout=WAIT_MS
    )
    expect(page.get_by_test_id("incomplete-banner")).to_be_hidden()

    # A header's click sorts on the server and keeps the view in the URL; a reload shows the same view.
    page.get_by_test_id("sort-group").click()
    expect(rows.get_by_test_id("group-link")).to_have_text([BALANCED, SKEWED])
    assert "sort=group" in page.url and "q=dash-e2e" in page.url
    expect(page.locator('th[data-sort="group"]')).to_have_attribute("aria-sort", "ascending")
    page.reload()
    expect(rows.get_by_test_id("group-link")).to_have_text([BALANCED, SKEWED], timeout=WAIT_MS)
    page.get_by_test_id("sort-skew").click()
    expect(rows.get_by_test_id("group-link")).to_have_text([SKEWED, BALANCED])
    screenshot(page, "dashboard-groups.png")

    # The hostile name: shown as text, nothing of it ran, its link percent-encoded and reaching its page.
    link = rows.nth(1).get_by_test_id("group-link")
    assert link.get_attribute("href") == "./groups/" + quote(BALANCED, safe="!*'()")  # encodeURIComponent's
    link.click()
    expect(page.get_by_test_id("group-name")).to_have_text(BALANCED)
    expect(page.get_by_test_id("member-bar")).to_have_count(2, timeout=WAIT_MS)
    expect(page.get_by_test_id("no-recommendation")).to_be_visible()
    assert page.evaluate("window.pwned") is None
    page.go_back()
    expect(rows).to_have_count(2, timeout=WAIT_MS)
    assert "q=dash-e2e" in page.url


# ---- against a stand-in API: what real workers seldom answer ----------------------------------------------------


def test_ten_thousand_groups_page_and_filter_on_the_server_and_an_incomplete_answer_names_the_silent_worker(
    page: Page,
) -> None:
    names = [f"group-{n:05d}" for n in range(10_000)]
    with StandInApi(groups=summaries(names)) as api:
        page.goto(f"{api.url}?sort=group&order=asc")
        rows = page.get_by_test_id("group-row")
        expect(rows).to_have_count(50)
        expect(page.get_by_test_id("groups-count")).to_have_text("1\u201350 of 10,000 groups")
        expect(rows.first.get_by_test_id("group-link")).to_have_text("group-00000")
        page.get_by_test_id("groups-next").click()
        expect(rows.first.get_by_test_id("group-link")).to_have_text("group-00050")
        assert "offset=50" in page.url
        expect(page.get_by_test_id("groups-prev")).to_be_enabled()
        asked = api.asked[-1]
        assert (asked["sort"], asked["order"], asked["offset"], asked["limit"]) == ("group", "asc", "50", "50")

        # The other way round, kept in the URL across a reload (and the page back to the first).
        page.get_by_test_id("sort-group").click()
        expect(rows.first.get_by_test_id("group-link")).to_have_text("group-09999")
        assert "order=desc" in page.url and "offset" not in page.url
        page.reload()
        expect(rows.first.get_by_test_id("group-link")).to_have_text("group-09999")

        page.get_by_test_id("groups-filter").fill("group-0999")
        expect(rows).to_have_count(10)
        expect(page.get_by_test_id("groups-count")).to_have_text("1\u201310 of 10 groups matching “group-0999”")
        assert "offset" not in page.url and "q=group-0999" in page.url
        expect(page.get_by_test_id("groups-next")).to_be_disabled()

        # A worker stops answering: the page says the listing is incomplete, and whose groups are missing.
        api.workers = [
            WorkerAnswer(url="http://10.0.0.1:6066", ok=True),
            WorkerAnswer(url="http://10.0.0.2:6066", ok=False, error="timed out after 5 s"),
        ]
        banner = page.get_by_test_id("incomplete-banner")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("1 of 2 workers did not answer")
        expect(banner).to_contain_text("http://10.0.0.2:6066 (timed out after 5 s)")
        api.workers = []
        expect(banner).to_be_hidden()

        # The API fails: the rows stay, a banner says why; it recovers on its own.
        api.failing = "this worker has no assignment yet"
        expect(page.get_by_test_id("fetch-error")).to_contain_text("503: this worker has no assignment yet")
        expect(rows).to_have_count(10)
        api.failing = None
        expect(page.get_by_test_id("fetch-error")).to_be_hidden()


def test_a_page_polls_only_while_visible(page: Page) -> None:
    """Timers on Playwright's clock, moved on by the test; ``fetch`` counted as the page calls it (a poll
    calls it at once, in the timer's or the event's own turn)."""
    page.add_init_script(
        "window.fetches = 0; const f = window.fetch; window.fetch = (...a) => (window.fetches++, f(...a));"
    )
    page.clock.install()

    def fetches() -> int:
        return int(page.evaluate("window.fetches"))

    def set_hidden(hidden: bool) -> int:
        """Make the page hidden or shown, as a browser does; the fetches so far, read in the same turn."""
        return int(
            page.evaluate(
                """(hidden) => {
                    Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
                    document.dispatchEvent(new Event("visibilitychange"));
                    return window.fetches;
                }""",
                hidden,
            )
        )

    with StandInApi(groups=summaries(["only"]), refresh_interval=1.0) as api:
        page.goto(api.url)
        expect(page.get_by_test_id("group-row")).to_have_count(1)
        before = fetches()
        page.clock.run_for(1_000)
        wait_until(lambda: fetches() > before, 10, "a poll a second later")
        hidden = set_hidden(True)
        page.clock.run_for(60_000)
        assert fetches() == hidden  # a minute hidden: nothing asked
        assert set_hidden(False) == hidden + 1  # shown again: asked at once
        wait_until(lambda: len(api.asked) == hidden + 1, 10, "the stand-in to get that request")


def test_a_scale_recommendation_says_how_many_members_the_group_needs(page: Page) -> None:
    """A group no assignment of whose members keeps up: its page says the count instead of listing moves."""
    state, recommendation, evaluation = None, None, None
    for now in (0.0, 5.0, 10.0):
        evaluation = evaluate(EVEN_SNAPSHOT, state, POLICY, now, every(EVEN_SNAPSHOT, (100.0, 50.0, True)))
        state, recommendation = evaluation.state, evaluation.recommendation or recommendation
    assert evaluation is not None and evaluation.proposal is not None and recommendation is not None
    assert recommendation.kind is RecommendationKind.SCALE
    summary = summarize(
        EVEN_SNAPSHOT,
        status=GroupStatus.OK,
        skew=evaluation.skew,
        skew_metric=POLICY.skew_metric,
        lag_unit=POLICY.lag_unit,
        state=state,
        incidents=(),
        worker="http://stand-in",
    )
    with StandInApi(
        groups=[summary], details={"g": group_detail(summary, evaluation.proposal, recommendation, ())}
    ) as api:
        page.goto(api.url + "groups/g")
        expect(page.get_by_test_id("no-moves")).to_have_text(
            "No moves: the members cannot keep up whatever their assignment; the group needs 6 members (it has 3)."
        )
        expect(page.get_by_test_id("move-row")).to_have_count(0)
