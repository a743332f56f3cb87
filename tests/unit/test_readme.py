"""The README stays true: its test command is what CI runs, and its settings table is complete."""

from __future__ import annotations

import re

from kagent.core.alert_config import parse_alerts_config
from kagent.settings import Settings
from tests.support import REPO

README = (REPO / "README.md").read_text()


def _shell_blocks() -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", README, re.S)]


def test_readme_gives_exactly_two_commands_one_runs_one_tests() -> None:
    blocks = _shell_blocks()
    assert len(blocks) == 2
    run, test = blocks
    assert run.startswith("python3 -m venv .venv") and run.endswith("kagent run")
    assert test.startswith("python3 -m venv .venv") and "pytest" in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert _shell_blocks()[1] in ci


def test_every_setting_is_in_the_readme_with_its_default() -> None:
    for name, field in Settings.model_fields.items():
        variable = f"KAGENT_{name.upper()}"
        row = re.search(rf"^\| `{variable}` \| `([^`]*)` \|", README, re.M)
        assert row, f"{variable} is missing from the README's settings table"
        default = field.default.value if hasattr(field.default, "value") else field.default
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        assert row[1] == shown, f"README says {variable} defaults to {row[1]}, the code says {shown}"


def test_the_alerting_file_example_is_valid() -> None:
    [example] = re.findall(r"```yaml\n(.*?)```", README, re.S)
    config = parse_alerts_config(
        example,
        "README.md",
        REPO,
        {"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/x", "PD_ROUTING_KEY": "k"},
    )
    assert [(sink.name, sink.type) for sink in config.sinks] == [
        ("alertmanager", "alertmanager"),
        ("slack", "webhook"),
        ("pagerduty", "pagerduty"),
    ]
