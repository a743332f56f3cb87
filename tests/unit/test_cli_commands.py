"""The kagent command group: every command listed, and the pipeline loaded only when used."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from kagent.tools.cli import _Commands, main


def test_every_command_is_listed() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == {"group", "groups", "pipeline", "recommendations", "run", "schemas", "simulate", "worker"}


def test_a_command_whose_extra_is_missing_is_listed_and_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Commands, "LAZY", {"pipeline": ("kagent.not_installed", "pipeline", "pipeline")})
    listing = CliRunner().invoke(main, ["--help"])
    assert listing.exit_code == 0 and re.search(r"pipeline +\(needs the 'pipeline' extra\)", listing.output)
    result = CliRunner().invoke(main, ["pipeline", "backfill", "--broker", "x"])
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: 'kagent pipeline' needs the 'pipeline' extra: pip install 'kagent[pipeline]'"
    )
