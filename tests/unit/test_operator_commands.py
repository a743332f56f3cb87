"""The operator's commands against a real local HTTP server playing a worker's API: the tables they print, the
JSON they pass through, and the one line they say when the worker does not give a usable answer."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from urllib.parse import unquote, urlsplit

import pytest
from click.testing import CliRunner, Result
from pydantic import BaseModel
from rich.console import Console

from kagent.core.api_records import (
    GroupDetail,
    GroupSort,
    GroupsPage,
    GroupSummary,
    IncidentRef,
    MemberView,
    PartitionView,
    RecommendationRef,
    WorkerAnswer,
)
from kagent.core.drain_time import Drain, DrainState
from kagent.core.events import PartitionRef
from kagent.core.group_health import GroupStatus
from kagent.core.incidents import IncidentKind, Severity
from kagent.core.policy import LagUnit, SkewMetric
from kagent.core.recommendation import MemberRecommendation, PartitionMove, Recommendation
from kagent.core.snapshot import LagFlag
from kagent.tools import recommendations_topic
from kagent.tools.api_client import ApiClient, ApiFailure
from kagent.tools.cli import main
from kagent.tools.embedded import free_port
from kagent.tools.recommendations_topic import parse_recommendation
from kagent.tools.terminal_views import (
    format_age,
    format_lag,
    format_partitions,
    group_view,
    groups_table,
    recommendation_line,
    recommendation_view,
    recommendations_table,
    render_to,
)
from tests.support.incidents import recommendation

NOW = 1_700_000_000.0
WORKER = "http://127.0.0.1:6066"


def summary(group: str, **changes: object) -> GroupSummary:
    """A skewed group of 3 members: 12,345 records behind, the largest partition 6,000, skew 2.93."""
    values: dict[str, object] = {
        "group": group,
        "state": "Stable",
        "status": GroupStatus.WARN,
        "generation": 7,
        "protocol": "range",
        "members": 3,
        "partitions": 6,
        "total_lag": 12345.0,
        "max_lag": 6000.0,
        "total_lag_seconds": 4321.5,
        "max_lag_seconds": 1234.5,
        "skew": 2.93,
        "skew_metric": SkewMetric.PEAK_TO_MEAN,
        "lag_unit": LagUnit.MESSAGES,
        "min_total_lag": 1000.0,
        "open_incidents": (
            IncidentRef(id="i1", kind=IncidentKind.LAG_SKEW, severity=Severity.WARNING, opened_at=NOW - 120),
        ),
        "last_recommendation_id": "ab" * 16,
        "last_recommendation_at": NOW - 90,
        "evaluated_at": NOW - 1,
        "worker": WORKER,
    }
    return GroupSummary.model_validate({**values, **changes})


def page(*groups: GroupSummary, complete: bool = True) -> GroupsPage:
    workers = [WorkerAnswer(url=WORKER, ok=True)]
    if not complete:
        workers.append(WorkerAnswer(url="http://10.0.0.9:6066", ok=False, error="timed out after 5 s"))
    return GroupsPage(
        groups=groups,
        total=len(groups) + 10,
        offset=0,
        limit=100,
        sort=GroupSort.GROUP,
        order="asc",
        workers=tuple(workers),
        complete=complete,
    )


def detail(group: str) -> GroupDetail:
    """Members a (partitions 0, 1: 9,000 records) and b (partition 2: 100); the recommendation moves 1 to b."""
    p0, p1, p2 = (PartitionRef(topic="orders", partition=p) for p in range(3))
    move = PartitionMove(topic="orders", partition=1, from_member="a-1", to_member="b-1", lag=3000)
    return GroupDetail(
        summary=summary(group),
        members=(
            MemberView(
                member_id="a-1",
                client_id="a",
                client_host="/10.0.0.1",
                partitions=(p0, p1),
                offset_lag=9000,
                time_lag=None,
                lag=9000,
                recommended_partitions=(p0,),
                recommended_lag=6000,
                drain=Drain(state=DrainState.CATCHING_UP, seconds=240.0),
            ),
            MemberView(
                member_id="b-1",
                client_id="b",
                client_host="/10.0.0.2",
                partitions=(p2,),
                offset_lag=100,
                time_lag=2.5,
                lag=100,
                recommended_partitions=(p1, p2),
                recommended_lag=3100,
                drain=Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=120.0),
            ),
        ),
        partitions=(
            PartitionView(
                topic="orders",
                partition=0,
                member_id="a-1",
                committed=1000,
                log_start=0,
                log_end=7000,
                offset_lag=6000,
                time_lag=None,
                flags=(LagFlag.STALE_END_OFFSET,),
                polled_at=NOW,
                drain=Drain(state=DrainState.CATCHING_UP, seconds=45.0),
            ),
            PartitionView(
                topic="orders",
                partition=1,
                member_id="a-1",
                committed=None,
                log_start=0,
                log_end=3000,
                offset_lag=3000,
                time_lag=None,
                flags=(LagFlag.NO_COMMIT,),
                polled_at=NOW,
            ),
            PartitionView(
                topic="orders",
                partition=2,
                member_id="b-1",
                committed=1_234_500,
                log_start=0,
                log_end=1_234_600,
                offset_lag=100,
                time_lag=2.5,
                polled_at=NOW,
            ),
        ),
        recommendation=RecommendationRef(
            id="ab" * 16,
            time=NOW - 90,
            generation=7,
            current=True,
            strategy="lag-sticky",
            skew_before=1.98,
            skew_after=1.31,
            moves=(move,),
            url="/api/recommendations/" + "ab" * 16,
        ),
        skew_history=(),
    )


def text(*renderables: object) -> str:
    """What :func:`render_to` prints for a pipe (no terminal, no colours)."""
    out = StringIO()
    render_to(Console(file=out, highlight=False), *renderables)  # type: ignore[arg-type]
    return out.getvalue()


# --- a worker's API, played by a real HTTP server --------------------------------------------------------------


@dataclass
class FakeApi:
    """Answers ``GET path`` (decoded, without the query) with ``answers[path] = (status, body)``; 404 with an
    ``error`` otherwise. Remembers every request's path and query as sent."""

    url: str
    answers: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def answer(self, path: str, body: BaseModel | dict[str, object] | bytes, status: int = 200) -> None:
        """Answer ``GET path`` with ``body`` (a model or a dict as JSON, bytes as they are) and ``status``."""
        if isinstance(body, BaseModel):
            raw = body.model_dump_json().encode()
        elif isinstance(body, bytes):
            raw = body
        else:
            raw = json.dumps(body).encode()
        self.answers[path] = (status, raw)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    """A :class:`FakeApi` listening on a free loopback port for the test's duration."""
    answers: dict[str, tuple[int, bytes]] = {}
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            missing = (404, json.dumps({"error": "no such path"}).encode())
            status, body = answers.get(unquote(urlsplit(self.path).path), missing)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test's output is the command's

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield FakeApi(f"http://127.0.0.1:{server.server_address[1]}", answers, requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def kagent(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


@pytest.fixture(autouse=True)
def no_kagent_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands read KAGENT_* variables: the test's own environment must not leak in."""
    for name in list(os.environ):
        if name.startswith("KAGENT_"):
            monkeypatch.delenv(name)


# --- formatting and rendering -----------------------------------------------------------------------------------


def test_figures_have_thousands_separators_and_say_unknown_in_words() -> None:
    assert format_lag(5423.0, LagUnit.MESSAGES) == "5,423"
    assert format_lag(1234.56, LagUnit.SECONDS) == "1,234.6 s"
    assert format_lag(None, LagUnit.MESSAGES) == "unknown"
    assert [format_age(s) for s in (-3, 42, 720, 3 * 3600 + 5, 2 * 86400)] == ["0 s", "42 s", "12 min", "3 h", "2 d"]
    refs = [PartitionRef(topic=t, partition=p) for t, p in (("orders", 5), ("audit", 2), ("orders", 0))]
    assert format_partitions(refs) == "audit[2] orders[0,5]"
    assert format_partitions([]) == "-"


def test_the_groups_table_has_a_row_a_group_in_the_pages_order_with_every_column() -> None:
    shown = text(groups_table(page(summary("payments"), summary("billing", status=GroupStatus.OK)), NOW))
    lines = shown.splitlines()
    header = next(line for line in lines if "group" in line and "status" in line)
    for column in ("state", "members", "gen", "assignor", "total lag", "max lag", "max lag s", "skew", "incidents"):
        assert column in header
    rows = [line for line in lines if "payments" in line or "billing" in line]
    assert [("payments" in row) for row in rows] == [True, False]
    assert all(figure in rows[0] for figure in ("WARN", "Stable", "12,345", "6,000", "1,234.5", "2.93", "lag-skew"))
    assert "1 min ago (abababab)" in rows[0]
    assert "OK" in rows[1]
    assert "2 of 12 groups, from 0" in shown


def test_unknown_figures_say_unknown_and_absent_ones_a_dash() -> None:
    quiet = summary(
        "quiet",
        total_lag=None,
        max_lag=None,
        max_lag_seconds=None,
        skew=None,
        open_incidents=(),
        last_recommendation_id=None,
        last_recommendation_at=None,
        protocol=None,
        generation=None,
        status=GroupStatus.UNKNOWN,
    )
    [row] = [line for line in text(groups_table(page(quiet), NOW)).splitlines() if "quiet" in line]
    cells = [cell.strip() for cell in row.strip(" │┃|").split("│")]
    assert cells[1] == "UNKNOWN"
    assert cells[4:] == ["unknown", "?", "unknown", "unknown", "unknown", "unknown", "-", "-"]


def test_a_group_shows_its_summary_members_moves_and_partitions() -> None:
    shown = text(group_view(detail("payments"), NOW))
    assert "payments" in shown and "WARN" in shown and "generation 7, assignor range" in shown
    assert "lag-skew (warning, 2 min)" in shown
    assert "ab" * 16 in shown and "skew 1.98 -> 1.31, 1 move" in shown
    [member_a] = [line for line in shown.splitlines() if "a-1" in line and "/10.0.0.1" in line]
    assert "orders[0,1]" in member_a and "9,000" in member_a and "6,000" in member_a and "orders[0]" in member_a
    [move] = [line for line in shown.splitlines() if "orders[1]" in line and "b-1" in line and "3,000" in line]
    assert move.index("a-1") < move.index("b-1")
    [p2] = [line for line in shown.splitlines() if "1,234,600" in line]
    assert "1,234,500" in p2 and "2.5" in p2 and "b-1" in p2
    assert any("no-commit" in line and "3,000" in line for line in shown.splitlines())
    assert any("stale-end-offset" in line and "7,000" in line for line in shown.splitlines())


def test_a_group_whose_members_are_unknown_says_so() -> None:
    """A group the cluster does not describe (a KIP-848 group through a broker without
    ConsumerGroupDescribe): its member count is unknown, not 0."""
    undescribed = detail("payments").model_copy(
        update={"summary": summary("payments", state="Unknown", members=None, generation=None)}
    )
    shown = text(group_view(undescribed, NOW))
    assert "unknown, reading" in shown and "generation unknown" in shown
    [row] = [line for line in text(groups_table(page(undescribed.summary), NOW)).splitlines() if "payments" in line]
    assert [cell.strip() for cell in row.strip(" │┃|").split("│")][3] == "unknown"


def test_a_group_shows_the_drain_time_of_the_group_each_member_and_each_partition() -> None:
    shown = text(
        group_view(
            detail("payments").model_copy(
                update={"drain": Drain(state=DrainState.FALLING_BEHIND, falling_behind_rate=120.0)}
            ),
            NOW,
        )
    )
    lines = shown.splitlines()
    [fact] = [line for line in lines if line.startswith("drain time")]
    assert "falling behind at 120/s (its slowest member" in fact
    assert "drain time" in next(line for line in lines if "lag if applied" in line)
    [member_a] = [line for line in lines if "a-1" in line and "/10.0.0.1" in line]
    [member_b] = [line for line in lines if "b-1" in line and "/10.0.0.2" in line]
    assert "catches up in 4 min" in member_a and "falling behind at 120/s" in member_b
    [p0] = [line for line in lines if "stale-end-offset" in line]
    [p1] = [line for line in lines if "no-commit" in line]
    assert "catches up in 45 s" in p0 and "unknown" in p1


def test_a_recommendation_line_and_table_and_view_say_what_it_changes() -> None:
    r = _recommendation("c0ffee" + "0" * 26)
    line = recommendation_line(r)
    assert f"{r.id}  orders-app  generation 4, range -> lag-sticky: peak-to-mean 2.80 -> 1.10, 2 moves" in line
    assert line.endswith("largest member lag 12,000 -> 6,200 messages")
    table = text(recommendations_table([r], r.time + 30))
    [row] = [line for line in table.splitlines() if r.id in line]
    assert "orders-app" in row and "2.80 -> 1.10" in row and "12,000 -> 6,200" in row and "30 s" in row
    view = text(recommendation_view(r, r.time + 30))
    assert "peak-to-mean 2.80 >= 1.5 for 3 evaluations, total lag 9,300 messages, improvement 60%" in view
    assert any("a-1" in line and "12,000" in line and "6,200" in line for line in view.splitlines())


def test_a_record_that_is_not_a_recommendation_parses_as_none() -> None:
    r = _recommendation("1" * 32)
    assert parse_recommendation(r.model_dump_json().encode()) == r
    assert parse_recommendation(b'{"id": "x"}') is None
    assert parse_recommendation(b"\x00\x01") is None
    assert parse_recommendation(None) is None


def _recommendation(rec_id: str) -> Recommendation:
    base = recommendation(rec_id, time=NOW, group="orders-app")
    p = [PartitionRef(topic="orders", partition=i) for i in range(3)]
    members = (
        MemberRecommendation(
            member_id="a-1",
            client_id="a",
            client_host="/h",
            current=(p[0], p[1]),
            current_lag=12000,
            recommended=(p[0],),
            recommended_lag=6200,
        ),
        MemberRecommendation(
            member_id="b-1",
            client_id="b",
            client_host="/h",
            current=(p[2],),
            current_lag=100,
            recommended=(p[1], p[2]),
            recommended_lag=5900,
        ),
    )
    return base.model_copy(update={"members": members})


# --- the commands against the server ----------------------------------------------------------------------------


def test_groups_prints_the_table_and_asks_for_the_page_it_was_told(api: FakeApi) -> None:
    api.answer("/api/groups", page(summary("payments-app")))
    result = kagent("groups", "--url", api.url + "/", "--sort", "max_lag", "--filter", "pay", "--limit", "5")
    assert result.exit_code == 0, result.output
    assert "payments-app" in result.stdout and "12,345" in result.stdout
    assert result.stderr == ""
    assert api.requests == ["/api/groups?sort=max_lag&order=desc&offset=0&limit=5&q=pay"]


def test_groups_json_is_the_apis_answer(api: FakeApi) -> None:
    served = page(summary("payments-app"), summary("billing-app"))
    api.answer("/api/groups", served)
    result = kagent("groups", "--url", api.url, "--json")
    assert result.exit_code == 0, result.output
    assert GroupsPage.model_validate_json(result.stdout) == served
    assert api.requests == ["/api/groups?sort=skew&order=desc&offset=0&limit=100"]
    kagent("groups", "--url", api.url, "--sort", "group", "--json")
    kagent("groups", "--url", api.url, "--sort", "group", "--order", "desc", "--json")
    assert api.requests[1:] == [
        "/api/groups?sort=group&order=asc&offset=0&limit=100",
        "/api/groups?sort=group&order=desc&offset=0&limit=100",
    ]


def test_groups_says_on_stderr_which_workers_did_not_answer(api: FakeApi) -> None:
    api.answer("/api/groups", page(summary("payments-app"), complete=False))
    for args in ([], ["--json"]):
        result = kagent("groups", "--url", api.url, *args)
        assert result.exit_code == 0, result.output
        assert result.stderr.splitlines() == [
            "kagent: warning: incomplete answer: the groups of workers that did not answer are missing: "
            "http://10.0.0.9:6066 (timed out after 5 s)"
        ]
        assert "payments-app" in result.stdout


def test_groups_asks_the_worker_the_settings_name_without_url(api: FakeApi) -> None:
    api.answer("/api/groups", page(summary("payments-app")))
    port = api.url.rsplit(":", 1)[1]
    result = kagent("groups", "--json", env={"KAGENT_WEB_HOST": "127.0.0.1", "KAGENT_WEB_PORT": port})
    assert result.exit_code == 0, result.output
    result = kagent("groups", "--json", env={"KAGENT_PUBLIC_URL": api.url + "/"})
    assert result.exit_code == 0, result.output
    assert len(api.requests) == 2


def test_an_invalid_setting_exits_2_with_one_line() -> None:
    result = kagent("groups", env={"KAGENT_WEB_PORT": "many"})
    assert result.exit_code == 2
    assert result.stderr.startswith("kagent: invalid KAGENT_WEB_PORT='many'") and result.stderr.count("\n") == 1


def test_group_escapes_the_name_and_prints_summary_members_moves_and_partitions(api: FakeApi) -> None:
    name = "orders/eu west%1"
    api.answer(f"/api/groups/{name}", detail(name))
    result = kagent("group", name, "--url", api.url)
    assert result.exit_code == 0, result.output
    assert api.requests == ["/api/groups/orders%2Feu%20west%251"]
    for expected in (name, "members", "moves of the latest recommendation", "partitions", "1,234,600"):
        assert expected in result.stdout
    json_result = kagent("group", name, "--url", api.url, "--json")
    assert GroupDetail.model_validate_json(json_result.stdout) == detail(name)


@pytest.mark.parametrize(
    ("answer", "status", "expected"),
    [
        ({"error": "unknown group 'ghost'"}, 404, "/api/groups/ghost: HTTP 404 Not Found: unknown group 'ghost'"),
        (b"<html>oops</html>", 500, "/api/groups/ghost: HTTP 500 Internal Server Error: <html>oops</html>"),
        (b"", 502, "/api/groups/ghost: HTTP 502 Bad Gateway: (empty body)"),
        (b"not json", 200, "/api/groups/ghost: malformed answer: Invalid JSON: expected ident at line 1 column 2"),
        ({"summary": {}}, 200, "/api/groups/ghost: malformed answer: summary.group: Field required (and "),
    ],
    ids=["404", "500 html", "502 empty", "not json", "wrong shape"],
)
def test_a_bad_answer_is_one_line_naming_the_url_and_exit_1(
    api: FakeApi, answer: dict[str, object] | bytes, status: int, expected: str
) -> None:
    api.answer("/api/groups/ghost", answer, status)
    result = kagent("group", "ghost", "--url", api.url)
    assert result.exit_code == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"kagent: {api.url}{expected}"), line


def test_an_unreachable_worker_is_one_line_and_exit_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (["groups", "--url", url], ["group", "g", "--url", url, "--json"]):
        result = kagent(*args)
        assert result.exit_code == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(f"kagent: cannot reach the worker at {url}/api/groups") and "connection refused" in line


def test_a_malformed_url_is_one_line_and_exit_1() -> None:
    result = kagent("groups", "--url", "localhost:6066")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["kagent: localhost:6066: not an http:// or https:// URL"]


def test_recommendations_with_an_unreachable_cluster_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recommendations_topic, "REACH_TIMEOUT", 0.5)
    broker = f"127.0.0.1:{free_port()}"
    for args in (["list"], ["show", "abc"], ["tail"]):
        result = kagent("recommendations", *args, env={"KAGENT_BROKER": broker})
        assert result.exit_code == 1
        assert result.stderr.splitlines() == [
            f"kagent: cannot reach the Kafka cluster at {broker} within 0.5 s (no broker accepted a connection)"
        ]


async def test_a_worker_that_does_not_answer_in_time_is_one_line() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        async with ApiClient(url, timeout=0.3) as api:
            with pytest.raises(ApiFailure) as failure:
                await api.group("g")
    assert str(failure.value) == f"{url}/api/groups/g: no answer within 0.3 s"
