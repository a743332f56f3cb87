"""Every ``KAGENT_*`` variable the project reads is a setting: exporting one never stops the worker.

The settings loader refuses unknown ``KAGENT_*`` variables (to catch typos),
so a variable read anywhere else (a click ``envvar``, the codec, a deployment
file) must also be a field of :class:`kagent.settings.Settings`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from kagent.settings import ENV_PREFIX, Settings, SettingsError, load_settings
from kagent.tools.cli import main
from tests.support import REPO

#: Where the project (not its tests, which spell bad names on purpose) names its variables.
SOURCES = [
    *sorted((REPO / "kagent").rglob("*.py")),
    *sorted((REPO / "benchmarks").rglob("*.py")),
    REPO / "setup.py",
    REPO / "Dockerfile",
    REPO / "docker-compose.yml",
    REPO / "README.md",
]
VARIABLE = re.compile(rf"\b{ENV_PREFIX}[A-Z0-9_]*[A-Z0-9]\b")


def _named_in_sources() -> set[str]:
    return {name for path in SOURCES for name in VARIABLE.findall(path.read_text())}


def _click_envvars(command: click.Command, ctx: click.Context) -> Iterator[str]:
    """The environment variables of every option of ``command`` and its subcommands, lazy ones included."""
    for param in command.params:
        envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
        yield from envvars
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from _click_envvars(sub, click.Context(sub, parent=ctx, info_name=name))


def _read_by_cli() -> set[str]:
    return {
        name for name in _click_envvars(main, click.Context(main, info_name="kagent")) if name.startswith(ENV_PREFIX)
    }


def test_the_scans_see_the_variables_read_outside_the_settings_module() -> None:
    assert {"KAGENT_CODEC", "KAGENT_SPARK_MASTER", "KAGENT_WEB_HOST"} <= _named_in_sources()
    assert "KAGENT_BROKER" in _read_by_cli()


@pytest.mark.parametrize("variable", sorted(_named_in_sources() | _read_by_cli()))
def test_every_variable_the_project_reads_is_accepted_by_the_settings_loader(variable: str) -> None:
    field = variable.removeprefix(ENV_PREFIX).lower()
    assert field in Settings.model_fields, f"{variable} is read somewhere but is no setting"
    default = Settings.model_fields[field].default
    if default is None:
        # an optional setting (a security file or credential) has no default to export, and makes sense
        # only with its companions: test_security_settings covers each combination
        return
    value = default.value if hasattr(default, "value") else default
    load_settings({variable: str(value)})


def test_an_unknown_variable_is_still_refused() -> None:
    with pytest.raises(SettingsError, match="unknown setting KAGENT_SPARK_MASTR; did you mean KAGENT_SPARK_MASTER"):
        load_settings({"KAGENT_SPARK_MASTR": "local[1]"})


def test_the_pipeline_takes_its_master_from_the_setting() -> None:
    pytest.importorskip("pyspark")
    from kagent.tools.pipeline.session import DEFAULT_MASTER

    assert Settings().spark_master == DEFAULT_MASTER  # the setting's default is the session's

    seen: list[str] = []
    probe = click.Command("probe", callback=click.pass_context(lambda ctx: seen.append(ctx.obj.master)))
    from kagent.tools.pipeline.cli import pipeline

    pipeline.add_command(probe)
    try:
        runner = CliRunner()
        assert runner.invoke(pipeline, ["probe"], env={"KAGENT_SPARK_MASTER": "local[3]"}).exit_code == 0
        assert (
            runner.invoke(pipeline, ["--master", "local[1]", "probe"], env={"KAGENT_SPARK_MASTER": "yarn"}).exit_code
            == 0
        )
        assert runner.invoke(pipeline, ["probe"], env={"KAGENT_SPARK_MASTER": None}).exit_code == 0
        refused = runner.invoke(pipeline, ["probe"], env={"KAGENT_SPARK_MASTR": "yarn"})
    finally:
        pipeline.commands.pop("probe")
    assert seen == ["local[3]", "local[1]", DEFAULT_MASTER]
    assert refused.exit_code == 1 and "unknown setting KAGENT_SPARK_MASTR" in refused.output
