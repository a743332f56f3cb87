"""`kagent.core.alert_config` (the alerting file: its model, its loader's one-line errors, routing) and
`kagent.core.backoff` (the retry section's delays)."""

from __future__ import annotations

import math
import re
from email.utils import formatdate
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kagent.core.alert_config import (
    PAGERDUTY_URL,
    AlertmanagerSinkConfig,
    AlertsConfig,
    AlertsConfigError,
    PagerDutySinkConfig,
    SinkFilter,
    WebhookSinkConfig,
    load_alerts_config,
    parse_alerts_config,
)
from kagent.core.alert_payloads import WebhookFormat
from kagent.core.backoff import RetryPolicy, backoff_delay, parse_retry_after
from kagent.core.incidents import SEVERITY, Incident, IncidentKind, Severity, SkewDetail, incident_id
from kagent.core.policy import LagUnit, SkewMetric

ENV = {
    "AM_TOKEN": "am-secret",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXX",
    "PD_ROUTING_KEY": "R" * 32,
}

# Line numbers in the comments: the tests below point at them.
EXAMPLE = """\
retry:
  initial_backoff: 0.25
  max_backoff: 10
sinks:
  - name: alertmanager
    type: alertmanager
    url: http://alertmanager:9093
    resend_interval: 30
    ends_after: 120
    filter: {groups: "^payments-", kinds: [lag-skew, stop], min_severity: warning}
    headers: {Authorization: "Bearer ${AM_TOKEN}"}
  - name: slack
    type: webhook
    url: ${SLACK_WEBHOOK_URL}
    template: slack
  - name: pagerduty
    type: pagerduty
    routing_key: ${PD_ROUTING_KEY}
    filter:
      min_severity: critical
"""
# line 7: sinks[0].url; line 12: sinks[1] (its name); line 14: sinks[1].url; line 18: sinks[2].routing_key


def parse(text: str, base_dir: Path = Path("/nonexistent"), environ: dict[str, str] | None = None) -> AlertsConfig:
    return parse_alerts_config(text, "alerts.yaml", base_dir, ENV if environ is None else environ)


def error_of(text: str, base_dir: Path = Path("/nonexistent"), environ: dict[str, str] | None = None) -> str:
    with pytest.raises(AlertsConfigError) as caught:
        parse(text, base_dir, environ)
    message = str(caught.value)
    assert "\n" not in message, "the message is one line"
    assert isinstance(caught.value, ValueError)
    return message


# -- a valid file ---------------------------------------------------------------------------------


def test_a_valid_file_with_all_three_sinks() -> None:
    config = parse(EXAMPLE)
    assert config.retry == RetryPolicy(initial_backoff=0.25, max_backoff=10)
    assert (config.retry.multiplier, config.retry.jitter, config.retry.timeout) == (2.0, 0.2, 10.0)
    am, hook, pd = config.sinks
    assert isinstance(am, AlertmanagerSinkConfig)
    assert am.name == "alertmanager" and am.alerts_url == "http://alertmanager:9093/api/v2/alerts"
    assert (am.resend_interval, am.ends_after) == (30.0, 120.0)
    assert am.headers == {"Authorization": "Bearer am-secret"}
    assert am.filter.groups is not None and am.filter.groups.pattern == "^payments-"
    assert am.filter.kinds == (IncidentKind.LAG_SKEW, IncidentKind.STOP)
    assert am.filter.min_severity is Severity.WARNING
    assert isinstance(hook, WebhookSinkConfig)
    assert str(hook.url) == ENV["SLACK_WEBHOOK_URL"] and hook.template is WebhookFormat.SLACK
    assert hook.filter == SinkFilter()
    assert isinstance(pd, PagerDutySinkConfig)
    assert pd.key == "R" * 32 and str(pd.url) == PAGERDUTY_URL
    assert "R" * 32 not in repr(config), "the routing key stays out of reprs"
    assert pd.filter.min_severity is Severity.CRITICAL


def test_defaults() -> None:
    config = parse("sinks:\n  - {name: am, type: alertmanager, url: 'http://am:9093/prefix/'}\n")
    assert config.retry == RetryPolicy()
    assert (config.retry.initial_backoff, config.retry.max_backoff, config.retry.max_retry_after) == (0.5, 30, 300)
    (am,) = config.sinks
    assert isinstance(am, AlertmanagerSinkConfig)
    assert (am.resend_interval, am.ends_after) == (60.0, 300.0)
    assert am.alerts_url == "http://am:9093/prefix/api/v2/alerts"
    hook = parse("sinks:\n  - {name: h, type: webhook, url: 'http://h/x'}\n").sinks[0]
    assert isinstance(hook, WebhookSinkConfig) and hook.template is WebhookFormat.JSON


def test_load_reads_the_file_and_its_templates_relative_to_its_folder(tmp_path: Path) -> None:
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "open.j2").write_text('{"group": {{ group | tojson }}}')
    (tmp_path / "tpl" / "resolve.j2").write_text('{"resolved": true}')
    (tmp_path / "pd-key").write_text("  K\n")
    path = tmp_path / "alerts.yaml"
    path.write_text(
        "sinks:\n"
        "  - {name: hook, type: webhook, url: 'http://h/x',\n"
        "     open_template: tpl/open.j2, resolve_template: tpl/resolve.j2}\n"
        "  - {name: pd, type: pagerduty, routing_key_file: pd-key}\n"
    )
    hook, pd = load_alerts_config(path, {}).sinks
    assert isinstance(hook, WebhookSinkConfig) and isinstance(pd, PagerDutySinkConfig)
    assert hook.open_template is not None and hook.open_template.path == tmp_path / "tpl" / "open.j2"
    assert hook.open_template.source == '{"group": {{ group | tojson }}}'
    assert hook.resolve_template is not None and hook.resolve_template.source == '{"resolved": true}'
    assert pd.key == "K"


# -- environment variables ------------------------------------------------------------------------


def test_environment_variables_are_expanded_in_any_string_and_an_escape_keeps_one() -> None:
    config = parse(
        "sinks:\n"
        "  - name: ${NAME}\n"
        "    type: alertmanager\n"
        "    url: http://${HOST}:9093\n"
        "    resend_interval: ${EVERY}\n"
        "    headers: {X-Literal: '$${NOT_EXPANDED} and $HOME'}\n",
        environ={"NAME": "am", "HOST": "am.internal", "EVERY": "15"},
    )
    (am,) = config.sinks
    assert isinstance(am, AlertmanagerSinkConfig)
    assert (am.name, str(am.url), am.resend_interval) == ("am", "http://am.internal:9093/", 15.0)
    assert am.headers == {"X-Literal": "${NOT_EXPANDED} and $HOME"}


def test_an_unset_environment_variable_names_the_field_and_its_line() -> None:
    environ = {k: v for k, v in ENV.items() if k != "PD_ROUTING_KEY"}
    assert error_of(EXAMPLE, environ=environ) == (
        "alerts.yaml:18: sinks[2].routing_key: environment variable PD_ROUTING_KEY is not set"
    )
    assert error_of("sinks:\n  - name: x\n    type: webhook\n    url: http://h/${1BAD}\n") == (
        "alerts.yaml:4: sinks[0].url: ${1BAD} is not an environment variable reference "
        "(${NAME}, NAME of letters, digits, _)"
    )


# -- errors: one line, the file, the line and the field --------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("url: ${SLACK_WEBHOOK_URL}", "url: not a url"),
            "alerts.yaml:14: sinks[1].url: Input should be a valid URL, relative URL without a base",
        ),
        (
            ("type: webhook", "type: slak"),
            "alerts.yaml:13: sinks[1].type: unknown sink type 'slak' (alertmanager, webhook, pagerduty)",
        ),
        (
            ("    type: webhook\n", ""),
            "alerts.yaml:12: sinks[1].type: missing sink type (alertmanager, webhook, pagerduty)",
        ),
        (("    url: ${SLACK_WEBHOOK_URL}\n", ""), "alerts.yaml:12: sinks[1].url: missing (required)"),
        (
            ("ends_after: 120", "ends_after: 59"),
            "alerts.yaml:9: sinks[0].ends_after: must be at least 2 x resend_interval (60 s), not 59",
        ),
        (
            ("resend_interval: 30", "resend_interval: -1"),
            "alerts.yaml:8: sinks[0].resend_interval: Input should be greater than 0",
        ),
        (
            ('"^payments-"', '"(payments"'),
            "alerts.yaml:10: sinks[0].filter.groups: invalid regular expression '(payments': "
            "missing ), unterminated subpattern at position 0",
        ),
        (
            ("kinds: [lag-skew, stop]", "kinds: [lag-skew, stopped]"),
            "alerts.yaml:10: sinks[0].filter.kinds[1]: Input should be 'lag-skew', 'stop', 'stall', 'rewind' or "
            "'hot-partition'",
        ),
        (
            ("kinds: [lag-skew, stop]", "kinds: []"),
            "alerts.yaml:10: sinks[0].filter.kinds: Tuple should have at least 1 item after validation, not 0",
        ),
        (
            ("min_severity: critical", "min_severity: page"),
            "alerts.yaml:20: sinks[2].filter.min_severity: Input should be 'critical', 'error', 'warning' or 'info'",
        ),
        (
            ("  - name: pagerduty", "  - name: slack"),
            "alerts.yaml:16: sinks[2].name: 'slack' is already the name of sinks[1]",
        ),
        (
            ("    routing_key: ${PD_ROUTING_KEY}\n", ""),
            "alerts.yaml:16: sinks[2].routing_key: set either routing_key or routing_key_file (one of them)",
        ),
        (
            ("template: slack", "template: html"),
            "alerts.yaml:15: sinks[1].template: Input should be 'json', 'slack' or 'teams'",
        ),
        (("template: slack", "tempalte: slack"), "alerts.yaml:15: sinks[1].tempalte: Extra inputs are not permitted"),
        (
            ("  max_backoff: 10", "  max_backoff: 0.1"),
            "alerts.yaml:2: retry: max_backoff (0.1) is below initial_backoff (0.25)",
        ),
        (("  max_backoff: 10", "  max_backof: 10"), "alerts.yaml:3: retry.max_backof: Extra inputs are not permitted"),
        (
            ("  initial_backoff: 0.25", "  initial_backoff: soon"),
            "alerts.yaml:2: retry.initial_backoff: Input should be a valid number, unable to parse string as a number",
        ),
        (
            ("headers: {Authorization:", "headers: {'Bad Name':"),
            "alerts.yaml:11: sinks[0].headers: 'Bad Name' is not an HTTP header name",
        ),
        (
            ("name: alertmanager", "name: 'has space'"),
            "alerts.yaml:5: sinks[0].name: String should match pattern '^[A-Za-z0-9][A-Za-z0-9_.-]*$'",
        ),
    ],
)
def test_each_problem_is_one_line_naming_the_file_line_and_field(change: tuple[str, str], expected: str) -> None:
    assert change[0] in EXAMPLE
    assert error_of(EXAMPLE.replace(*change, 1)) == expected


def test_several_problems_give_the_first_in_file_order_and_count_the_others() -> None:
    text = EXAMPLE.replace("ends_after: 120", "ends_after: 1").replace("template: slack", "template: html")
    assert error_of(text) == (
        "alerts.yaml:9: sinks[0].ends_after: must be at least 2 x resend_interval (60 s), not 1 (and 1 more problem)"
    )


def test_yaml_syntax_errors_give_their_line() -> None:
    message = error_of("sinks:\n  - name: a\n    type: [webhook\n    url: http://h\n")
    assert re.fullmatch(r"alerts\.yaml:\d+: while parsing a flow sequence: expected ',' or '\]', but got .*", message)
    assert error_of("sinks:\n  - name: a\n   type: webhook\n").startswith("alerts.yaml:3: ")
    assert error_of("a: 1\n---\nb: 2\n").startswith("alerts.yaml:")


def test_a_duplicate_key_is_an_error() -> None:
    assert (
        error_of("sinks:\n  - name: a\n    type: webhook\n    name: b\n")
        == "alerts.yaml:4: sinks[0].name: duplicate key"
    )


def test_sinks_can_merge_an_anchor_under_an_x_key_and_override_its_keys() -> None:
    text = (
        "x-am: &am\n"
        "  type: alertmanager\n"
        "  url: http://am:9093\n"
        "  resend_interval: 30\n"
        "sinks:\n"
        "  - <<: *am\n"
        "    name: a\n"
        "  - <<: *am\n"
        "    name: b\n"
        "    resend_interval: 10\n"
        "    ends_after: 5\n"
    )
    assert error_of(text) == "alerts.yaml:11: sinks[1].ends_after: must be at least 2 x resend_interval (20 s), not 5"
    a, b = parse(text.replace("ends_after: 5", "ends_after: 20")).sinks
    assert isinstance(a, AlertmanagerSinkConfig) and isinstance(b, AlertmanagerSinkConfig)
    assert (a.name, a.resend_interval, b.name, b.resend_interval) == ("a", 30, "b", 10)


def test_the_document_must_be_a_mapping_with_at_least_one_sink() -> None:
    assert error_of("") == "alerts.yaml:1: sinks: missing (required)"
    assert error_of("retry: {}\n") == "alerts.yaml:1: sinks: missing (required)"
    assert error_of("sinks: []\n") == "alerts.yaml:1: sinks: at least one sink is needed"
    assert (
        error_of("- name: a\n")
        == "alerts.yaml:1: (top level): the alerting file is a mapping (retry:, sinks:), not list"
    )
    assert error_of("retry: {}\nsinks:\n  - 3\n").startswith("alerts.yaml:3: sinks[0]: ")


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AlertsConfigError) as caught:
        load_alerts_config(tmp_path / "alerts.yaml", {})
    assert str(caught.value) == f"{tmp_path / 'alerts.yaml'}: cannot read the alerting file: No such file or directory"


def test_template_problems_name_the_template_and_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "open.j2").write_text('{\n  "group": {{ group | tojson }},\n  "kind": {{ kind }\n}\n')
    (tmp_path / "ok.j2").write_text("{}")
    sink = "sinks:\n  - name: hook\n    type: webhook\n    url: http://h/x\n"
    assert error_of(sink + "    open_template: open.j2\n    resolve_template: ok.j2\n", tmp_path) == (
        "alerts.yaml:5: sinks[0].open_template: open.j2:3: unexpected '}'"
    )
    assert error_of(sink + "    open_template: ok.j2\n    resolve_template: nope.j2\n", tmp_path) == (
        f"alerts.yaml:6: sinks[0].resolve_template: cannot read the template {tmp_path / 'nope.j2'}: "
        "No such file or directory"
    )
    assert error_of(sink + "    open_template: ok.j2\n", tmp_path) == (
        "alerts.yaml:2: sinks[0].resolve_template: open_template and resolve_template go together: set both or neither"
    )
    assert error_of(
        sink + "    template: teams\n    open_template: ok.j2\n    resolve_template: ok.j2\n", tmp_path
    ) == ("alerts.yaml:5: sinks[0].template: set either template or open_template and resolve_template, not both")


def test_key_file_problems(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n")
    sink = "sinks:\n  - name: pd\n    type: pagerduty\n"
    assert error_of(sink + "    routing_key_file: missing\n", tmp_path) == (
        f"alerts.yaml:4: sinks[0].routing_key_file: cannot read {tmp_path / 'missing'}: No such file or directory"
    )
    assert error_of(sink + "    routing_key_file: empty\n", tmp_path) == (
        f"alerts.yaml:4: sinks[0].routing_key_file: {tmp_path / 'empty'} is empty"
    )
    assert error_of(sink + "    routing_key: k\n    routing_key_file: empty\n", tmp_path).startswith("alerts.yaml:5: ")


# -- filters and routing ---------------------------------------------------------------------------


def incident(group: str, kind: IncidentKind) -> Incident:
    skew = None
    if kind in (IncidentKind.LAG_SKEW, IncidentKind.HOT_PARTITION):
        skew = SkewDetail(
            recommendation_id="r",
            strategy="lag-sticky",
            metric=SkewMetric.PEAK_TO_MEAN,
            threshold=1.5,
            skew_before=2,
            skew_after=1,
            moves=(),
        )
    return Incident(
        id=incident_id(group, kind, 0.0, 0),
        kind=kind,
        severity=SEVERITY[kind],
        group=group,
        opened_at=0.0,
        updated_at=0.0,
        lag_unit=LagUnit.MESSAGES,
        member_lag={},
        skew=skew,
    )


def test_filters_take_groups_by_regular_expression_kinds_and_a_least_severity() -> None:
    am = SinkFilter.model_validate({"groups": "^payments-", "kinds": ["lag-skew", "stop"], "min_severity": "warning"})
    assert am.matches(incident("payments-orders", IncidentKind.LAG_SKEW))
    assert am.matches(incident("payments-orders", IncidentKind.STOP))
    assert not am.matches(incident("payments-orders", IncidentKind.STALL)), "kind not listed"
    assert not am.matches(incident("shipping-payments-x", IncidentKind.STOP)), "anchored expression"
    assert SinkFilter.model_validate({"groups": "payments"}).matches(incident("shipping-payments-x", IncidentKind.STOP))
    critical = SinkFilter(min_severity=Severity.CRITICAL)
    assert critical.matches(incident("g", IncidentKind.STOP)) and critical.matches(incident("g", IncidentKind.STALL))
    assert not critical.matches(incident("g", IncidentKind.REWIND)), "error < critical"
    assert not critical.matches(incident("g", IncidentKind.LAG_SKEW)), "warning < critical"
    error = SinkFilter(min_severity=Severity.ERROR)
    assert error.matches(incident("g", IncidentKind.REWIND)) and not error.matches(incident("g", IncidentKind.LAG_SKEW))
    assert all(SinkFilter().matches(incident("any", kind)) for kind in IncidentKind)


def test_routes_are_the_matching_sinks_in_file_order() -> None:
    config = parse(EXAMPLE)

    def routed(group: str, kind: IncidentKind) -> list[str]:
        return [sink.name for sink in config.routes(incident(group, kind))]

    assert routed("payments-orders", IncidentKind.STOP) == ["alertmanager", "slack", "pagerduty"]
    assert routed("payments-orders", IncidentKind.LAG_SKEW) == ["alertmanager", "slack"]
    assert routed("payments-orders", IncidentKind.REWIND) == ["slack"]
    assert routed("search", IncidentKind.STALL) == ["slack", "pagerduty"]


# -- retry delays (kagent.core.backoff) -------------------------------------------------------------

POLICY = RetryPolicy(initial_backoff=0.5, max_backoff=30, multiplier=2, jitter=0.2)


def test_the_delay_doubles_from_the_initial_backoff_up_to_the_cap_without_jitter_at_draw_zero() -> None:
    assert [backoff_delay(POLICY, attempt, 0.0) for attempt in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_delay(POLICY, 10_000, 0.0) == 30, "no overflow"
    assert backoff_delay(RetryPolicy(multiplier=1), 10_000, 0.0) == 0.5


def test_jitter_takes_up_to_its_fraction_off() -> None:
    assert backoff_delay(POLICY, 0, 0.5) == pytest.approx(0.45)
    assert backoff_delay(POLICY, 20, 0.999999) == pytest.approx(24.0, abs=1e-4)
    assert backoff_delay(RetryPolicy(jitter=0), 3, 0.7) == 4


@given(
    attempt=st.integers(min_value=0, max_value=2000),
    draw=st.floats(min_value=0, max_value=1, exclude_max=True),
    retry_after=st.none() | st.floats(min_value=-10, max_value=10_000, allow_nan=False),
)
def test_delays_stay_within_the_jittered_cap_and_honour_retry_after_up_to_its_limit(
    attempt: int, draw: float, retry_after: float | None
) -> None:
    delay = backoff_delay(POLICY, attempt, draw, retry_after)
    backoff = min(30.0, 0.5 * 2.0 ** min(attempt, 100))
    assert math.isfinite(delay)
    if retry_after is None or retry_after <= 0:
        assert backoff * 0.8 - 1e-9 <= delay <= backoff <= 30
    else:
        assert delay >= min(retry_after, POLICY.max_retry_after)
        assert delay <= max(backoff, min(retry_after, POLICY.max_retry_after))


def test_retry_after_is_a_floor_up_to_max_retry_after() -> None:
    assert backoff_delay(POLICY, 0, 0.0, retry_after=7) == 7
    assert backoff_delay(POLICY, 6, 0.0, retry_after=7) == 30, "a later backoff is longer than Retry-After"
    assert backoff_delay(POLICY, 0, 0.0, retry_after=86_400) == 300
    assert backoff_delay(POLICY, 0, 0.0, retry_after=0) == 0.5


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="attempt"):
        backoff_delay(POLICY, -1, 0.0)
    with pytest.raises(ValueError, match="draw"):
        backoff_delay(POLICY, 0, 1.0)


def test_retry_after_values_are_parsed_in_both_forms() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("120", now) == 120
    assert parse_retry_after(" 1.5 ", now) == 1.5
    assert parse_retry_after(formatdate(now + 90, usegmt=True), now) == 90
    assert parse_retry_after(formatdate(now - 90, usegmt=True), now) == 0
    for bad in (None, "", "-3", "soon", "nan", "inf"):
        assert parse_retry_after(bad, now) is None
