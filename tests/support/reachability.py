"""Which modules, functions and classes of a package its entry points reach, read from the source.

A static reading with :mod:`ast`, no import: from the roots (modules whose top-level code runs, and
named top-level functions or classes), a module is reached when reached code imports it (at its top
level or inside a reached function), and a top-level function or class when reached code names it:
by its name in its own module, through an import of it (``from m import f``, ``import m`` then
``m.f``, a ``from m import *`` of a module that exports it), or through a chain of such re-exports.
A class reached is reached whole (its methods are what the frameworks call), and so is a decorated
top-level function of a reached module (its decorator registers it: a click command, a Faust agent,
a route). Names in ``__all__``
lists do not count as references (listing a name does not run it), nor does a function's own
definition.

Approximate in the safe direction for the question asked ("is anything only tests reach?"): a name
used anywhere in reached code counts, so something that looks used may not run; nothing that runs
from an entry point is called unreached.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Package", "Reach", "public_names", "reach", "unreached"]

Def = tuple[str, str]
"""(module, top-level name)."""


@dataclass
class _Module:
    name: str
    tree: ast.Module
    is_package: bool
    defs: dict[str, ast.AST] = field(default_factory=dict)
    """Top-level functions and classes by name."""
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Local name -> (module, name in it) or (module, None) for a module bound to the name; imports
    anywhere in the module."""
    star: list[str] = field(default_factory=list)
    """Modules imported with ``*``."""
    exported: list[str] | None = None
    """``__all__``, when it is a plain list of strings (a star-export of another's ``__all__`` adds its names)."""


class Package:
    """Every module of the package rooted at ``root`` (a directory with ``__init__.py``)."""

    def __init__(self, root: Path, *scripts: tuple[str, Path]) -> None:
        """``scripts``: files outside the package that are entry points too (``setup.py``), by the
        module name they are given here."""
        self.root = root
        self.modules: dict[str, _Module] = {}
        base = root.parent
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            module = _Module(name, ast.parse(path.read_text(), str(path)), is_package)
            self.modules[name] = module
        for name, path in scripts:
            self.modules[name] = _Module(name, ast.parse(path.read_text(), str(path)), False)
        for module in self.modules.values():
            self._read_top_level(module)

    def _absolute(self, module: _Module, level: int, target: str | None) -> str:
        if level == 0:
            return target or ""
        package = module.name if module.is_package else module.name.rpartition(".")[0]
        for _ in range(level - 1):
            package = package.rpartition(".")[0]
        return f"{package}.{target}" if target else package

    def _read_top_level(self, module: _Module) -> None:
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                module.defs[node.name] = node
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                module.exported = _string_list(node.value)
        # Names bound by imports anywhere in the module (inside functions too) resolve module-wide: a
        # local import's name is used only where it is in scope, and over-resolving errs towards reached.
        for node in _imports(module.tree.body, top_level=False):
            self._bind(module, node)

    def _bind(self, module: _Module, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    module.imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.partition(".")[0]
                    module.imports[top] = (top, None)
            return
        source = self._absolute(module, node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                module.star.append(source)
                continue
            submodule = f"{source}.{alias.name}"
            bound = (submodule, None) if submodule in self.modules else (source, alias.name)
            module.imports[alias.asname or alias.name] = bound

    def imported_modules(self, module: _Module, nodes: Iterable[ast.AST]) -> set[str]:
        """The package's modules ``nodes`` (import statements) import, with their parent packages."""
        found = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = self._absolute(module, node.level, node.module)
                names = [source, *(f"{source}.{alias.name}" for alias in node.names)]
            else:
                continue
            for name in names:
                while name:
                    if name in self.modules:
                        found.add(name)
                    name = name.rpartition(".")[0]
        return found

    def resolve(self, module: str, name: str, seen: frozenset[Def] = frozenset()) -> Def | str | None:
        """What ``name`` in ``module`` is: a top-level def (module, name), a module (its name), or None
        (something else: a constant, a builtin, another package's)."""
        if (module, name) in seen or module not in self.modules:
            return None
        seen = seen | {(module, name)}
        found = self.modules[module]
        if name in found.defs:
            return (module, name)
        if name in found.imports:
            source, attr = found.imports[name]
            if attr is None:
                return source if source in self.modules else None
            return self.resolve(source, attr, seen)
        if f"{module}.{name}" in self.modules:
            return f"{module}.{name}"
        for source in found.star:
            hit = self.resolve(source, name, seen)
            if hit is not None:
                return hit
        return None


def _string_list(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def _imports(body: Iterable[ast.stmt], *, top_level: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements of ``body``: at its top level (``top_level``, including inside ``if`` and ``try``
    blocks) or anywhere (nested functions included)."""
    for statement in body:
        nodes = ast.walk(statement) if not top_level else _top_level_nodes(statement)
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node


def _top_level_nodes(statement: ast.stmt) -> Iterator[ast.AST]:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return
    if isinstance(statement, ast.If | ast.Try):
        for block in (
            getattr(statement, "body", []),
            getattr(statement, "orelse", []),
            getattr(statement, "finalbody", []),
        ):
            for inner in block:
                yield from _top_level_nodes(inner)
        for handler in getattr(statement, "handlers", []):
            for inner in handler.body:
                yield from _top_level_nodes(inner)
        return
    yield statement


def _references(nodes: Iterable[ast.AST]) -> Iterator[list[str]]:
    """Each name or dotted attribute chain read in ``nodes`` (``a``, ``a.b.c`` as [a, b, c]), outside
    ``__all__`` assignments and import statements."""
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                continue
            if isinstance(node, ast.Attribute):
                chain = []
                current: ast.AST = node
                while isinstance(current, ast.Attribute):
                    chain.append(current.attr)
                    current = current.value
                if isinstance(current, ast.Name):
                    yield [current.id, *reversed(chain)]
            elif isinstance(node, ast.Name):
                yield [node.id]


def _module_level(module: _Module) -> list[ast.AST]:
    """What runs when the module is imported, but the bodies of its functions and classes' methods
    (decorators, base classes, class-level statements and defaults run; bodies do not)."""
    nodes: list[ast.AST] = []
    for statement in module.tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            nodes += [*statement.decorator_list, *statement.args.defaults, *statement.args.kw_defaults]
        elif isinstance(statement, ast.ClassDef):
            nodes += [*statement.decorator_list, *statement.bases, *statement.keywords]
        elif isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in statement.targets
        ):
            continue
        elif not isinstance(statement, ast.Import | ast.ImportFrom):
            nodes.append(statement)
    return [n for n in nodes if n is not None]


@dataclass
class Reach:
    """What the roots reach."""

    modules: set[str]
    defs: set[Def]


def reach(package: Package, modules: Iterable[str], defs: Iterable[Def]) -> Reach:
    """Everything reached from running the top level of ``modules`` and calling ``defs``."""
    reached_modules: set[str] = set()
    reached_defs: set[Def] = set()
    module_queue = list(modules)
    def_queue = list(defs)

    def follow(module: _Module, nodes: list[ast.AST]) -> None:
        for node in (n for root in nodes for n in ast.walk(root)):
            # A module named in a string is imported by name (a lazy command table); a (module, name)
            # pair of strings names what is taken from it.
            if isinstance(node, ast.Constant) and node.value in package.modules:
                module_queue.append(node.value)
            elif isinstance(node, ast.Tuple) and len(node.elts) >= 2:
                first, second = node.elts[0], node.elts[1]
                if (
                    isinstance(first, ast.Constant)
                    and isinstance(second, ast.Constant)
                    and isinstance(second.value, str)
                    and first.value in package.modules
                    and second.value in package.modules[first.value].defs
                ):
                    def_queue.append((first.value, second.value))
        for chain in _references(nodes):
            target = package.resolve(module.name, chain[0])
            for attr in chain[1:]:
                if isinstance(target, str):
                    module_queue.append(target)
                    target = package.resolve(target, attr)
                else:
                    break
            if isinstance(target, str):
                module_queue.append(target)
            elif target is not None:
                def_queue.append(target)

    while module_queue or def_queue:
        while module_queue:
            name = module_queue.pop()
            while name:
                if name in package.modules and name not in reached_modules:
                    reached_modules.add(name)
                    module = package.modules[name]
                    module_queue.extend(package.imported_modules(module, _imports(module.tree.body, top_level=True)))
                    follow(module, _module_level(module))
                    # A decorated function is handed to its decorator when the module is imported: a
                    # click command, a Faust agent or timer, a route; whoever holds it may call it.
                    def_queue.extend(
                        (name, def_name)
                        for def_name, node in module.defs.items()
                        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.decorator_list
                    )
                name = name.rpartition(".")[0]
        while def_queue:
            item = def_queue.pop()
            if item in reached_defs or item[0] not in package.modules:
                continue
            reached_defs.add(item)
            module = package.modules[item[0]]
            module_queue.append(module.name)
            node = module.defs[item[1]]
            module_queue.extend(package.imported_modules(module, _imports([node], top_level=False)))  # type: ignore[list-item]
            follow(module, [node])
    return Reach(reached_modules, reached_defs)


def public_names(package: Package, module: str) -> set[Def]:
    """The top-level defs a public import path ``module`` offers: its ``__all__`` (or its public names),
    star re-exports followed, each resolved to where it is defined."""
    found = package.modules[module]
    names = set(found.exported or ())
    names.update(n for n in [*found.defs, *found.imports] if not n.startswith("_"))
    for source in found.star:
        star = package.modules.get(source)
        if star is not None:
            names.update(star.exported or [n for n in star.defs if not n.startswith("_")])
    defs: set[Def] = set()
    for name in names:
        target = package.resolve(module, name)
        if isinstance(target, tuple):
            defs.add(target)
    return defs


def unreached(package: Package, reached: Reach) -> tuple[list[str], list[Def]]:
    """The modules not reached, and the public top-level functions and classes of reached modules not
    reached (those of unreached modules are reported with their module)."""
    modules = sorted(name for name in package.modules if name not in reached.modules)
    defs = sorted(
        (module.name, name)
        for module in package.modules.values()
        if module.name in reached.modules
        for name in module.defs
        if not name.startswith("_") and (module.name, name) not in reached.defs
    )
    return modules, defs
