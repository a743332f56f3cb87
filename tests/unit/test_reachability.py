"""Nothing in ``kagent/`` is reached only by tests (issue 35): every module, and every public function and
class of it, is reached from an entry point users run, or is a public import path the README names.

Entry points, each read from where it is declared rather than listed by hand:

- the Faust app, ``kagent.app`` (``faust -A kagent.app worker``, which ``kagent worker`` runs);
- the console scripts of ``pyproject.toml`` (``kagent``), with the commands their CLI loads by name;
- the modules the README tells users or developers to run with ``python -m``;
- ``setup.py``, which builds the codec's compiled twins at install;
- the public import paths the README names (``from kagent.x import y``, and its list of public import
  paths): what they export is for users' own code (the client assignors, the codec, the embedded broker).

The reading is :mod:`tests.support.reachability`'s (static, :mod:`ast`): a function only tests call, or a
module nothing imports, fails the test with its name. Delete it, or wire it where it was meant to be used.
"""

from __future__ import annotations

import re
import tomllib

from tests.support import REPO
from tests.support.reachability import Package, public_names, reach, unreached

README = (REPO / "README.md").read_text()


def console_script_modules() -> list[str]:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    return sorted({target.partition(":")[0] for target in scripts.values()})


def readme_run_modules(package: Package) -> list[str]:
    """Modules the README says to run with ``python -m``."""
    return sorted({m for m in re.findall(r"python -m (kagent[\w.]*)", README) if m in package.modules})


def readme_import_paths(package: Package) -> list[str]:
    """Modules the README names as import paths: in ``from kagent.x import ...`` lines, and in its list of
    "the public import paths `a`, `b` and `c`" (modules of the package itself)."""
    named = set(re.findall(r"from (kagent[\w.]*) import", README))
    listed = re.search(r"public import paths((?:,? (?:and )?`\w+`)+)", " ".join(README.split()))
    if listed is not None:
        named |= {f"kagent.{name}" for name in re.findall(r"`(\w+)`", listed.group(1))}
    return sorted(m for m in named if m in package.modules)


def test_every_module_and_public_function_is_reached_from_an_entry_point() -> None:
    package = Package(REPO / "kagent", ("setup", REPO / "setup.py"))
    paths = readme_import_paths(package)
    assert {"kagent.assignors", "kagent.consumer_offsets", "kagent.embedded"} <= set(paths), paths
    entry_modules = ["kagent.app", "setup", *console_script_modules(), *readme_run_modules(package), *paths]
    exported = {name for path in paths for name in public_names(package, path)}

    modules, defs = unreached(package, reach(package, entry_modules, exported))

    assert modules == [], f"modules no entry point imports: {modules}"
    assert defs == [], "public functions and classes no entry point reaches: " + ", ".join(
        f"{module}.{name}" for module, name in defs
    )
