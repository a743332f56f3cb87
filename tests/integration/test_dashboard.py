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
import time
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from aiokafka.structs import TopicPartition
from playwright.sync_api import Browser, Page, expect

from kagent.core.api_records import GroupDetail, GroupSummary, WorkerAnswer, group_detail, summarize
from kagent.core.evaluation import evaluate
from kagent.core.events import GroupAssigned, MemberAssignment, PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.member_lag import current_skew
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import Recommendation, RecommendationKind, skew
from kagent.core.remedies import Remedy, remedy_drain_text
from kagent.core.snapshot import GroupSnapshot, PartitionLag
from kagent.core.throughput import PartitionThroughput
from kagent.core.time_lag import partition_lag_values
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
from tests.support.worker import STEADY, Worker
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
            worker = Worker(broker.bootstrap_servers, workdir, APP, data_dir=str(workdir / f"data-{n}"), **STEADY)
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
        """:meth:`group` once it has a recommendation and every member's lag, now and under it, is known (a
        busy machine may delay an end-offsets poll past staleness, when the figures are rightly unknown)."""
        found = self.group(name)
        if found is None or found["recommendation"] is None:
            return None
        known = all(m["lag"] is not None and m["recommended_lag"] is not None for m in found["members"])
        return found if known else None


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
        "the API to show the skewed group's recommendation and its members' lag",
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
    # The remedies compared, as the worker's evaluation made them: the rebalance, chosen, with its skew.
    [remedy] = recommendation["remedies"]
    assert remedy["kind"] == "rebalance" and remedy["chosen"] and remedy["members"] == 3
    assert remedy_rows(page) == [["rebalance the 3 members", f"{remedy['skew']:.2f}", drain_words(remedy), "chosen"]]

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

    # One screen, one measurement: the headline skew is the skew of the bars shown, each bar is its label's
    # figure, every part says the measurement's time, and no log end is below its committed offset.
    screen = page.evaluate(READ_SCREEN)
    values = [bar["now"]["value"] for bar in screen["bars"]]
    assert screen["skew"] == f"{skew(SkewMetric.PEAK_TO_MEAN, values):.2f} (peak-to-mean)", screen
    assert len(set(screen["measuredAt"])) == 1 and screen["asOf"].startswith(screen["measuredAt"][0]), screen
    scale = max(value for bar in screen["bars"] for value in (bar["now"]["value"], bar["recommended"]["value"]))
    for bar in screen["bars"]:
        for kind in ("now", "recommended"):
            drawn = bar[kind]
            assert drawn["width"] == pytest.approx(max(1, drawn["track"] * drawn["value"] / scale), abs=1.5), screen
    for row in screen["partitions"]:
        assert int(row[4].replace(",", "")) >= int(row[3].replace(",", "")), screen["partitions"]
    screenshot(page, "dashboard-group.png")


def test_the_groups_page_lists_both_groups_sorts_and_links_to_a_hostile_names_page(
    cluster: Cluster, page: Page
) -> None:
    cluster.publish_skewed()
    second = cluster.workers[1]
    page.goto(f"{second.url}?q=dash-e2e")
    rows = page.get_by_test_id("group-row")
    expect(rows).to_have_count(2, timeout=WAIT_MS)
    # By skew, largest first (the default): the skewed group, then the balanced one, its name as text. The lag
    # figures are waited for as long as the rows: a page shows its last answer for a refresh interval (5 s), and
    # that answer may have come while a figure was unknown (not yet polled, or a poll delayed past staleness).
    expect(rows.get_by_test_id("group-link")).to_have_text([SKEWED, BALANCED], timeout=WAIT_MS)
    expect(page.get_by_test_id("groups-count")).to_have_text("1\u20132 of 2 groups matching “dash-e2e”")
    skewed_row = rows.nth(0)
    expect(skewed_row.get_by_test_id("group-members")).to_have_text("3")
    expect(skewed_row.get_by_test_id("group-total-lag")).to_have_text("1,600", timeout=WAIT_MS)
    expect(skewed_row.get_by_test_id("group-skew")).to_have_text("2.25", timeout=WAIT_MS)
    expect(skewed_row.get_by_test_id("group-evaluated")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    # 80 records of lag, below the trigger's minimum of 1,000: its skew is marked, not an alarm.
    expect(rows.nth(1).get_by_test_id("skew-below-minimum")).to_have_text("low lag", timeout=WAIT_MS)
    expect(skewed_row.get_by_test_id("recommendation-link")).to_have_attribute(
        "href", re.compile(r"^\./api/recommendations/[0-9a-f]+$"), timeout=WAIT_MS
    )
    expect(page.get_by_test_id("incomplete-banner")).to_be_hidden()

    # A header's click sorts on the server and keeps the view in the URL; a reload shows the same view. Each
    # click's answer comes from the real workers, as slow as a page's first load on a busy machine (WAIT_MS).
    page.get_by_test_id("sort-group").click()
    expect(rows.get_by_test_id("group-link")).to_have_text([BALANCED, SKEWED], timeout=WAIT_MS)
    assert "sort=group" in page.url and "q=dash-e2e" in page.url
    expect(page.locator('th[data-sort="group"]')).to_have_attribute("aria-sort", "ascending")
    page.reload()
    expect(rows.get_by_test_id("group-link")).to_have_text([BALANCED, SKEWED], timeout=WAIT_MS)
    page.get_by_test_id("sort-skew").click()
    expect(rows.get_by_test_id("group-link")).to_have_text([SKEWED, BALANCED], timeout=WAIT_MS)
    screenshot(page, "dashboard-groups.png")

    # The hostile name: shown as text, nothing of it ran, its link percent-encoded and reaching its page.
    link = rows.nth(1).get_by_test_id("group-link")
    assert link.get_attribute("href") == "./groups/" + quote(BALANCED, safe="!*'()")  # encodeURIComponent's
    link.click()
    expect(page.get_by_test_id("group-name")).to_have_text(BALANCED, timeout=WAIT_MS)
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
    recommendation, summary = recommended(EVEN_SNAPSHOT, every(EVEN_SNAPSHOT, (100.0, 50.0, True)))
    assert recommendation.kind is RecommendationKind.SCALE
    with StandInApi(
        groups=[summary], details={"g": group_detail(summary, EVEN_SNAPSHOT, POLICY.lag_unit, recommendation, (), {})}
    ) as api:
        page.goto(api.url + "groups/g")
        expect(page.get_by_test_id("no-moves")).to_have_text(
            "No moves: the members cannot keep up whatever their assignment; the group needs 6 members (it has 3)."
        )
        expect(page.get_by_test_id("move-row")).to_have_count(0)
        # Six members, one a partition, only keep pace (600/s of 600/s, at the typical 100/s); the rebalance of
        # the three falls behind.
        assert remedy_rows(page) == [
            ["rebalance the 3 members", "1.00", "falling behind at 300/s", ""],
            ["scale to 6 members", "n/a", "not catching up (estimated)", "chosen"],
        ]


def test_a_hot_partition_recommendation_names_the_partition_its_rate_and_the_fastest_members(page: Page) -> None:
    """A partition written faster than any member reads: its page says so, with the remedy, and moves nothing."""
    from tests.unit.test_hot_partition_evaluation import HOT_ALONE, HOT_ALONE_RATES

    recommendation, summary = recommended(HOT_ALONE, HOT_ALONE_RATES)
    assert recommendation.kind is RecommendationKind.HOT_PARTITION
    detail = group_detail(summary, HOT_ALONE, POLICY.lag_unit, recommendation, (), HOT_ALONE_RATES)
    with StandInApi(groups=[summary], details={"g": detail}) as api:
        page.goto(api.url + "groups/g")
        expect(page.get_by_test_id("no-moves")).to_have_text(
            "No moves: no assignment and no number of members keeps up with a hot partition."
        )
        hot = page.get_by_test_id("recommendation-hot")
        expect(hot).to_be_visible()
        expect(hot).to_contain_text(
            "Hot partition t-0 written at 300/s (its member a reads 100/s); the fastest member reads 100/s."
        )
        expect(hot).to_contain_text("spread its keys over more partitions")
        expect(page.get_by_test_id("move-row")).to_have_count(0)
        assert remedy_rows(page) == [
            ["rebalance the 3 members", "1.50", "falling behind at 200/s", ""],
            ["no assignment helps: partition t-0 is hot", "2.98", "falling behind at 200/s", "chosen"],
        ]
        screenshot(page, "dashboard-hot-partition.png")


def test_a_rebalance_that_isolates_a_heavy_partition_names_it_its_rate_and_the_member_it_is_left_alone_on(
    page: Page,
) -> None:
    """A partition within a member's pace that overloads any member it shares: the rebalance's page says which
    partition it leaves alone, on which member, and why."""
    from tests.unit.test_heavy_partition_evaluation import CROWDED, CROWDED_RATES

    recommendation, summary = recommended(CROWDED, CROWDED_RATES)
    assert recommendation.isolated is not None
    detail = group_detail(summary, CROWDED, POLICY.lag_unit, recommendation, (), CROWDED_RATES)
    with StandInApi(groups=[summary], details={"g": detail}) as api:
        page.goto(api.url + "groups/g")
        isolated = page.get_by_test_id("recommendation-isolated")
        expect(isolated).to_be_visible()
        expect(isolated).to_have_text(
            "Heavy partition t-0 written at 28/s, alone on a "
            "(a member reads 40/s, less than 28/s plus the lightest other partition's 17/s)."
        )
        expect(page.get_by_test_id("recommendation-hot")).to_be_hidden()
        expect(page.get_by_test_id("move-row")).to_have_count(1)
        screenshot(page, "dashboard-heavy-partition.png")


def test_the_remedies_compared_say_what_each_option_gives_and_an_older_record_says_it_was_not_compared(
    page: Page,
) -> None:
    """A rebalance of the rest beside a hot partition: both options, the chosen one marked; the same
    recommendation as a worker of an earlier version wrote it (no remedies) says so instead of an empty table."""
    from tests.unit.test_hot_partition_evaluation import HOT_AND_SKEW, HOT_AND_SKEW_RATES

    recommendation, summary = recommended(HOT_AND_SKEW, HOT_AND_SKEW_RATES, GroupStatus.WARN)
    assert recommendation.kind is RecommendationKind.REBALANCE
    compared = group_detail(summary, HOT_AND_SKEW, POLICY.lag_unit, recommendation, (), HOT_AND_SKEW_RATES)
    older = recommendation.model_copy(update={"remedies": ()})
    before = group_detail(summary, HOT_AND_SKEW, POLICY.lag_unit, older, (), HOT_AND_SKEW_RATES)
    rebalance, hot = recommendation.remedies
    with StandInApi(groups=[summary], details={"g": compared, "h": before}) as api:
        page.goto(api.url + "groups/g")
        expect(page.get_by_test_id("remedy-row")).to_have_count(2)
        assert remedy_rows(page) == [
            ["rebalance the 3 members", f"{rebalance.skew:.2f}", drain_words(rebalance.model_dump()), "chosen"],
            ["no assignment helps: partition t-0 is hot", f"{hot.skew:.2f}", drain_words(hot.model_dump()), ""],
        ]
        assert rebalance.drain.state.value == "falling-behind"
        chosen = page.locator('[data-testid="remedy-row"].chosen')
        expect(chosen).to_have_count(1)
        expect(chosen).to_have_attribute("data-kind", "rebalance")
        expect(page.get_by_test_id("no-remedies")).to_be_hidden()
        screenshot(page, "dashboard-remedies.png")

        page.goto(api.url + "groups/h")
        expect(page.get_by_test_id("no-remedies")).to_be_visible()
        expect(page.get_by_test_id("no-remedies")).to_contain_text("made before kagent compared remedies")
        expect(page.get_by_test_id("remedies-table")).to_be_hidden()


def recommended(
    snapshot: GroupSnapshot,
    throughput: Mapping[TopicPartition, PartitionThroughput],
    status: GroupStatus = GroupStatus.OK,
) -> tuple[Recommendation, GroupSummary]:
    """The recommendation three evaluations of ``snapshot`` 5 s apart make with each partition's rates
    ``throughput`` (``POLICY`` holds for two), and the group's summary as the API answers it after the last."""
    state, recommendation, evaluation = None, None, None
    for now in (0.0, 5.0, 10.0):
        evaluation = evaluate(snapshot, state, POLICY, now, throughput)
        state, recommendation = evaluation.state, evaluation.recommendation or recommendation
    assert evaluation is not None and recommendation is not None
    summary = summarize(
        snapshot,
        status=status,
        skew=evaluation.skew,
        skew_metric=POLICY.skew_metric,
        lag_unit=POLICY.lag_unit,
        min_total_lag=POLICY.min_total_lag,
        state=state,
        incidents=(),
        worker="http://stand-in",
    )
    return recommendation, summary


def remedy_rows(page: Page) -> list[list[str]]:
    """The cells of the remedies table, row by row, once it has rows."""
    expect(page.get_by_test_id("remedy-row").first).to_be_visible(timeout=WAIT_MS)
    return [row.locator("td").all_inner_texts() for row in page.get_by_test_id("remedy-row").all()]


def drain_words(remedy: Mapping[str, Any]) -> str:
    """A remedy's drain time as the page says it: :func:`kagent.core.remedies.remedy_drain_text`."""
    return remedy_drain_text(Remedy.model_validate(remedy))


# ---- what one screen shows: unknown figures, estimates, and one measurement with its time ----------------------
#
# Canned answers made by the API's own functions (summarize, group_detail) from snapshots whose partition figures
# are made as a worker makes them (partition_lag_values): the unknown states a real cluster takes minutes or faults
# to reach.

STALE_AFTER = 10.0
"""Seconds after which an end-offset answer is stale, in these snapshots."""


def partition(
    group: str,
    number: int,
    committed: int | None,
    log_end: int | None,
    *,
    now: float,
    polled_ago: float = 1.0,
    topic: str = "t",
    committed_after_poll: bool = False,
) -> PartitionLag:
    """``group``'s figures on ``topic``-``number`` as a worker makes them: a log from offset 0 to ``log_end``
    polled ``polled_ago`` s before ``now`` (never polled when ``log_end`` is None), ``auto.offset.reset``
    earliest; ``committed_after_poll``: the commit came after that poll."""
    polled = None if log_end is None else now - polled_ago
    values = partition_lag_values(
        group,
        topic,
        number,
        committed,
        None if log_end is None else 0,
        log_end,
        None,
        now,
        polled,
        "earliest",
        STALE_AFTER,
        committed_after_poll=committed_after_poll,
    )
    return PartitionLag(**values)


def members_holding(group: str, *held: tuple[str, list[int]], generation: int = 3) -> GroupAssigned:
    return GroupAssigned(
        group=group,
        generation=generation,
        protocol="range",
        leader=held[0][0] if held else None,
        members=tuple(
            MemberAssignment(
                member_id=member_id,
                client_id=f"client-{member_id}",
                client_host="/10.0.0.1",
                topics=("t",),
                partitions=tuple(PartitionRef(topic="t", partition=p) for p in partitions),
            )
            for member_id, partitions in held
        ),
    )


def measured(
    snapshot: GroupSnapshot,
    status: GroupStatus = GroupStatus.OK,
    min_total_lag: float = 1000,
    throughput: Mapping[TopicPartition, PartitionThroughput] | None = None,
) -> tuple[GroupSummary, GroupDetail]:
    """The group's summary and page as the API answers them when ``snapshot`` is measured (skew as the
    evaluation computes it), with each partition's rates ``throughput`` (none: every rate unknown)."""
    summary = summarize(
        snapshot,
        status=status,
        skew=current_skew(snapshot, LagUnit.MESSAGES, SkewMetric.PEAK_TO_MEAN),
        skew_metric=SkewMetric.PEAK_TO_MEAN,
        lag_unit=LagUnit.MESSAGES,
        min_total_lag=min_total_lag,
        state=None,
        incidents=(),
        worker="http://stand-in",
    )
    return summary, group_detail(summary, snapshot, LagUnit.MESSAGES, None, (), throughput or {})


def three_members(group: str, committed: tuple[int, int, int], log_end: int, now: float) -> GroupSnapshot:
    """Members x, y, z holding partitions 0, 1, 2 of a log ending at ``log_end``, committed at ``committed``."""
    return GroupSnapshot(
        assignment=members_holding(group, ("x", [0]), ("y", [1]), ("z", [2])),
        partition_counts={"t": 3},
        lag={TopicPartition("t", p): partition(group, p, c, log_end, now=now) for p, c in enumerate(committed)},
        taken_at=now,
    )


def clock_of(page: Page, epoch_seconds: float) -> str:
    """``epoch_seconds`` as the page shows a time (local HH:MM:SS in the browser's zone)."""
    return str(
        page.evaluate(
            """(s) => { const d = new Date(s * 1000), p = (n) => String(n).padStart(2, "0");
                        return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`; }""",
            epoch_seconds,
        )
    )


READ_SCREEN = """() => {
  const text = (node) => (node ? node.textContent.trim() : null);
  const bars = [...document.querySelectorAll('[data-testid="member-bar"]')].map((member) => {
    const read = (kind) => {
      const bar = member.querySelector(`[data-testid="member-lag-${kind}"]`);
      const track = bar.parentElement;
      return {
        value: bar.dataset.value === "" ? null : Number(bar.dataset.value),
        state: bar.dataset.state,
        label: text(member.querySelector(`[data-testid="member-lag-${kind}-value"]`)),
        width: bar.getBoundingClientRect().width,
        track: track.getBoundingClientRect().width,
        trackClass: track.className,
        visible: bar.getClientRects().length > 0,
        rowHidden: bar.closest(".bar-row").hidden,
      };
    };
    return { member: member.dataset.member, unassigned: member.dataset.unassigned === "true",
             now: read("now"), recommended: read("recommended") };
  });
  const partitions = [...document.querySelectorAll('[data-testid="partition-row"]')].map(
    (row) => [...row.children].map((cell) => cell.textContent.trim()));
  return {
    skew: text(document.querySelector('[data-field="skew"]')),
    asOf: text(document.querySelector('[data-testid="as-of"]')),
    measuredAt: [...document.querySelectorAll('[data-testid="measured-at"]')].map(text),
    bars,
    partitions,
  };
}"""
"""The group page's headline skew, its times, each bar (figure, label, width, track) and each partition row's
cells, read in one turn of the page's script: what one screen shows at one moment."""


def watch_screen_once(page: Page, label: str) -> None:
    """Arm the page to read itself (:data:`READ_SCREEN`) in the very turn in which a member's label first reads
    ``label`` (a MutationObserver, before any later frame): ``window.screenRead`` resolves to that reading."""
    page.evaluate(
        """([label, read]) => {
            const reader = eval(read);
            const box = document.querySelector('[data-testid="members"]');
            window.screenRead = new Promise((resolve) => {
              const seen = () => [...box.querySelectorAll('[data-testid="member-lag-now-value"]')]
                .some((node) => node.textContent === label);
              const observer = new MutationObserver(() => {
                if (seen()) { observer.disconnect(); resolve(reader()); }
              });
              observer.observe(box, { subtree: true, childList: true, characterData: true });
            });
        }""",
        [label, READ_SCREEN],
    )


def test_unknown_figures_read_unknown_and_an_estimate_is_marked_as_one(page: Page) -> None:
    now = time.time()
    group = "partly-known"
    snapshot = GroupSnapshot(
        assignment=members_holding(group, ("a", [0, 1]), ("b", [2, 3])),
        partition_counts={"t": 5},
        lag={
            TopicPartition("t", 0): partition(group, 0, 100, 600, now=now),  # measured: 500
            TopicPartition("t", 1): partition(group, 1, 50, None, now=now),  # no poll answered yet
            TopicPartition("t", 2): partition(group, 2, None, 120, now=now),  # no commit: an estimate of 120
            TopicPartition("t", 3): partition(group, 3, 10, 90, now=now, polled_ago=100),  # stale end offsets
            TopicPartition("t", 4): partition(group, 4, 70, 100, now=now),  # measured, 30, and no member holds it
        },
        taken_at=now,
    )
    summary, detail = measured(snapshot, GroupStatus.WARN)
    nothing = GroupSnapshot(  # a group known only by its commits, whose partitions no poll answered for yet
        assignment=GroupAssigned(group="commits-only", generation=-1, protocol=None, leader=None),
        partition_counts={},
        lag={TopicPartition("t", p): partition("commits-only", p, 5, None, now=now) for p in range(2)},
        taken_at=now,
        described=False,
    )
    nothing_summary, nothing_detail = measured(nothing, GroupStatus.UNKNOWN)
    assert (summary.total_lag, summary.partitions_unknown, summary.skew) == (530, 3, None)
    assert detail.unassigned is not None and nothing_detail.unassigned is not None
    groups = [summary, nothing_summary]
    with StandInApi(groups=groups, details={group: detail, "commits-only": nothing_detail}) as api:
        # The list: every figure kagent does not know reads "unknown"; UNKNOWN is a badge of its own.
        page.goto(api.url + "?sort=group")
        row = page.locator('[data-testid="group-row"][data-group="commits-only"]')
        expect(row.get_by_test_id("group-status")).to_have_text("UNKNOWN")
        expect(row.get_by_test_id("group-status")).to_have_class("status status-UNKNOWN")
        expect(row.get_by_test_id("group-state")).to_have_text("Unknown")
        for cell in ("members", "generation", "protocol", "total-lag-value", "max-lag", "max-lag-seconds", "skew"):
            expect(row.get_by_test_id(f"group-{cell}")).to_have_text("unknown")
        expect(row.get_by_test_id("partitions-unknown")).to_have_text("2 of 2 unknown")
        known_row = page.locator(f'[data-testid="group-row"][data-group="{group}"]')
        expect(known_row.get_by_test_id("group-total-lag-value")).to_have_text("530")  # the measured ones only
        expect(known_row.get_by_test_id("partitions-unknown")).to_have_text("3 of 5 unknown")
        expect(known_row.get_by_test_id("group-skew")).to_have_text("unknown")

        page.goto(api.url + f"groups/{group}")
        expect(page.get_by_test_id("partition-row")).to_have_count(5)
        facts = page.get_by_test_id("group-facts")
        expect(facts.locator('[data-field="partitions"]')).to_have_text("5 (3 unknown)")
        expect(facts.locator('[data-field="total_lag"]')).to_have_text("530 records (of 2 measured)")
        expect(facts.locator('[data-field="skew"]')).to_have_text("unknown (peak-to-mean)")
        screen = page.evaluate(READ_SCREEN)
        bars = {bar["member"]: bar for bar in screen["bars"]}
        assert list(bars) == ["a", "b", "unknown"]  # the members, then the partitions no member holds
        for member in ("a", "b"):  # each holds a partition of unknown lag: its lag is unknown, not a bar of 0
            now_bar = bars[member]["now"]
            assert now_bar["label"] == "unknown" and now_bar["value"] is None, now_bar
            assert not now_bar["visible"] and "unknown" in now_bar["trackClass"], now_bar
            assert bars[member]["recommended"]["label"] == "no recommendation"
        unassigned = bars["unknown"]
        assert unassigned["unassigned"] and unassigned["recommended"]["rowHidden"]
        assert (unassigned["now"]["value"], unassigned["now"]["label"]) == (30, "30 records")
        assert unassigned["now"]["width"] == pytest.approx(unassigned["now"]["track"], abs=1)  # the largest known
        hatched = page.locator('[data-member="a"] .track.unknown').evaluate("t => getComputedStyle(t).backgroundImage")
        assert "gradient" in hatched
        expect(page.locator('[data-member="a"] .member-name')).to_contain_text("2 partitions (1 not measured) now")
        # topic, partition, member, committed, log end, offset lag, time lag, drain, end polled, flags
        rows = {int(cells[1]): cells for cells in screen["partitions"]}
        assert rows[0][3:8] == ["100", "600", "500", "unknown", "unknown"]  # no rates here: drain unknown
        assert rows[1][3:] == ["50", "unknown", "unknown", "unknown", "unknown", "unknown", "not-polled"]
        assert rows[2][3:6] == ["none", "120", "~120 (estimate)"] and rows[2][9] == "no-commit"
        assert rows[3][5] == "unknown" and rows[3][9] == "stale-end-offset"
        # A drain time kagent cannot state reads "unknown" beside the lag, never "caught up" or 0.
        for member in ("a", "b", "unknown"):
            expect(page.locator(f'[data-member="{member}"]').get_by_test_id("member-drain")).to_have_text("unknown")
        expect(facts.get_by_test_id("group-drain")).to_have_text("unknown")
        assert rows[4][2:6] == ["unknown", "70", "100", "30"]
        expect(page.get_by_test_id("partition-row").nth(1).locator("td").last).to_have_attribute(
            "title", re.compile("^not-polled: no end-offset poll of this worker has answered")
        )

        # A group without members, nothing measured: UNKNOWN, and its one row of partitions no member holds.
        page.goto(api.url + "groups/commits-only")
        expect(page.get_by_test_id("group-status")).to_have_text("UNKNOWN")
        expect(page.locator('[data-field="generation"]')).to_have_text("unknown")
        expect(page.locator('[data-field="total_lag"]')).to_have_text("unknown")
        expect(page.get_by_test_id("member-bar")).to_have_count(1)
        only = page.get_by_test_id("member-bar")
        expect(only).to_have_attribute("data-unassigned", "true")
        expect(only.get_by_test_id("member-lag-now-value")).to_have_text("unknown")
        expect(only.get_by_test_id("member-lag-now")).to_be_hidden()


def test_each_members_drain_time_is_beside_its_lag_and_the_groups_is_its_slowest_members(page: Page) -> None:
    """x catches up (120/s read of 40/s written, 9,600 records: 2 min), y falls behind (read 40/s of 160/s), z
    has no lag; each partition's drain in its row, the group's (falling behind) in its headline."""
    now = time.time()
    snapshot = three_members("draining", (400, 8000, 10_000), 10_000, now)
    rates = {
        TopicPartition("t", 0): PartitionThroughput(production_rate=40.0, consumption_rate=120.0, busy=True),
        TopicPartition("t", 1): PartitionThroughput(production_rate=160.0, consumption_rate=40.0, busy=True),
        TopicPartition("t", 2): PartitionThroughput(production_rate=0.0, consumption_rate=0.0, busy=False),
    }
    summary, detail = measured(snapshot, throughput=rates)
    with StandInApi(groups=[summary], details={"draining": detail}) as api:
        page.goto(api.url + "groups/draining")
        drains = {member: page.locator(f'[data-member="{member}"]').get_by_test_id("member-drain") for member in "xyz"}
        expect(drains["x"]).to_have_text("catches up in 2 min")
        expect(drains["y"]).to_have_text("falling behind at 120/s")
        expect(drains["z"]).to_have_text("caught up")
        expect(drains["y"]).to_have_attribute("data-state", "falling-behind")
        # Beside the lag: in the same row as the member's "now" bar, after its figure.
        row = page.locator('[data-member="x"] .bar-row.now')
        expect(row.get_by_test_id("member-lag-now-value")).to_have_text("9,600 records")
        expect(row.get_by_test_id("member-drain")).to_have_text("catches up in 2 min")
        expect(page.get_by_test_id("group-drain")).to_have_text("falling behind at 120/s")
        cells = page.get_by_test_id("partition-drain")
        expect(cells).to_have_text(["catches up in 2 min", "falling behind at 120/s", "caught up"])
        colour = drains["y"].evaluate("node => getComputedStyle(node).color")
        assert colour != drains["x"].evaluate("node => getComputedStyle(node).color")  # falling behind stands out


def test_bars_figures_and_headline_are_one_measurements_and_say_its_time(page: Page) -> None:
    """The issue's screen: after an answer in which x held most of the lag, one in which x has 0 records and y 18.
    Read in the very turn the new labels appear, each bar is its own label's figure (a bar still sliding from
    the last answer would show x's 0 as the longest); the headline skew is the skew of those bars, and the
    facts, the bars and the partitions all say the one measurement's time. The list, whose figures are the last
    evaluation's, says that evaluation's time."""
    now = time.time()
    group = "shipments"
    before = three_members(group, (0, 990, 992), 1000, now - 30)  # x 1,000, y 10, z 8
    after = three_members(group, (1000, 982, 1000), 1000, now)  # x 0, y 18, z 0
    listed, first = measured(before)
    _, second = measured(after)
    assert second.summary.skew == pytest.approx(3.0)
    with StandInApi(groups=[listed], details={group: first}) as api:
        page.goto(api.url + f"groups/{group}")
        expect(page.locator('[data-member="x"]').get_by_test_id("member-lag-now-value")).to_have_text("1,000 records")
        watch_screen_once(page, "18 records")
        api.details = {group: second}
        screen = page.evaluate("window.screenRead")

        bars = {bar["member"]: bar["now"] for bar in screen["bars"]}
        assert [bars[m]["label"] for m in "xyz"] == ["0 records", "18 records", "0 records"]
        largest = max(bar["value"] for bar in bars.values())
        for member, bar in bars.items():
            assert bar["width"] == pytest.approx(bar["track"] * bar["value"] / largest, abs=1.5), (member, bars)
        headline = skew(SkewMetric.PEAK_TO_MEAN, [bars[m]["value"] for m in "xyz"])
        assert screen["skew"] == f"{headline:.2f} (peak-to-mean)"
        measured_at = clock_of(page, second.summary.evaluated_at)
        assert screen["asOf"].startswith(measured_at) and screen["measuredAt"] == [measured_at, measured_at], screen

        page.goto(api.url)
        row = page.locator(f'[data-testid="group-row"][data-group="{group}"]')
        expect(row.get_by_test_id("group-skew")).to_have_text(f"{listed.skew:.2f}")
        expect(row.get_by_test_id("group-evaluated")).to_have_text(clock_of(page, listed.evaluated_at))


def test_a_log_end_is_never_shown_below_a_committed_offset(page: Page) -> None:
    """A commit newer than the last end-offset poll is beyond the log end that poll saw (6,506 against 6,445):
    the worker raises the log end to the committed offset, and the page shows that, with 0 records to read."""
    now = time.time()
    group = "fast-committer"
    snapshot = GroupSnapshot(
        assignment=members_holding(group, ("a", [0]), ("b", [1])),
        partition_counts={"t": 2},
        lag={
            TopicPartition("t", 0): partition(group, 0, 6506, 6445, now=now, committed_after_poll=True),
            TopicPartition("t", 1): partition(group, 1, 6300, 6445, now=now),
        },
        taken_at=now,
    )
    summary, detail = measured(snapshot)
    with StandInApi(groups=[summary], details={group: detail}) as api:
        page.goto(api.url + f"groups/{group}")
        expect(page.get_by_test_id("partition-row")).to_have_count(2)
        rows = page.evaluate(READ_SCREEN)["partitions"]
        assert [row[3:6] for row in rows] == [["6,506", "6,506", "0"], ["6,300", "6,445", "145"]]
        for row in rows:
            assert int(row[4].replace(",", "")) >= int(row[3].replace(",", ""))


def test_a_skew_over_less_lag_than_the_triggers_minimum_is_shown_as_such(page: Page) -> None:
    """3.00 over 18 records (the trigger's minimum is 1,000) is marked low lag on the list and said to be too
    little to act on in the group's headline; 2.25 over 1,600 records is not marked."""
    now = time.time()
    small_summary, small = measured(three_members("small", (1000, 982, 1000), 1000, now))
    big_summary, big = measured(three_members("big", (0, 800, 800), 1000, now))
    assert (small_summary.skew, small_summary.total_lag) == (pytest.approx(3.0), 18)
    assert big_summary.total_lag == 1400 and big_summary.skew is not None and big_summary.skew > 2
    with StandInApi(groups=[small_summary, big_summary], details={"small": small, "big": big}) as api:
        page.goto(api.url)
        small_row = page.locator('[data-testid="group-row"][data-group="small"]')
        big_row = page.locator('[data-testid="group-row"][data-group="big"]')
        expect(small_row.get_by_test_id("skew-below-minimum")).to_have_text("low lag")
        expect(small_row.get_by_test_id("group-skew")).to_have_class(re.compile(r"\bbelow-minimum\b"))
        expect(small_row.get_by_test_id("group-skew")).to_have_attribute(
            "title", re.compile("18 records of lag, below the trigger's minimum of 1,000 records")
        )
        expect(big_row.get_by_test_id("group-skew")).to_have_text(f"{big_summary.skew:.2f}")
        expect(big_row.get_by_test_id("skew-below-minimum")).to_be_hidden()

        page.goto(api.url + "groups/small")
        banner = page.get_by_test_id("skew-below-minimum")
        expect(banner).to_have_text(
            "Skew over too little lag to act on: 18 records of lag, below the trigger's minimum of 1,000 records: "
            "no rebalance is recommended at any skew."
        )
        expect(page.locator('[data-field="skew"]')).to_have_class(re.compile(r"\bbelow-minimum\b"))
        page.goto(api.url + "groups/big")
        expect(page.locator('[data-field="skew"]')).to_have_text(f"{big_summary.skew:.2f} (peak-to-mean)")
        expect(page.get_by_test_id("skew-below-minimum")).to_be_hidden()
