"""Python source under construction, and the names it refers to.

The machine writes each decoder and encoder as straight-line Python built
from layout data, then compiles it once, at import. Generated code is
registered with `linecache`, so tracebacks and profilers show it.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_serial = itertools.count()


class Source:
    """Lines of one generated function plus the globals it uses."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self._lines: list[str] = []
        self._depth = 0
        self._taken: dict[str, int] = {}
        self._constants: dict[tuple[str, Any], str] = {}

    def line(self, text: str) -> None:
        """Append one line at the current indentation."""
        self._lines.append("    " * self._depth + text)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """Append `header` (ending in ':') and indent what follows."""
        self.line(header)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def local(self, hint: str) -> str:
        """A local variable name not used before in this function."""
        count = self._taken.get(hint, 0)
        self._taken[hint] = count + 1
        return f"{hint}_{count}"

    def constant(self, value: Any, hint: str, key: Any = None) -> str:
        """The global name under which generated code sees `value`.

        Values registered with the same `(hint, key)` share one name; with
        no key, the value itself (which must then be hashable) is the key.
        """
        identity = (hint, value if key is None else key)
        name = self._constants.get(identity)
        if name is None:
            name = f"_{hint}_{len(self._constants)}"
            self._constants[identity] = name
            self.namespace[name] = value
        return name

    def compile(self, name: str) -> Callable[..., Any]:
        """Compile the lines (one `def name(...)`) and return the function."""
        text = "\n".join(self._lines) + "\n"
        filename = f"<kagent.consumer_offsets generated {name} #{next(_serial)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), self.namespace)  # code generated from our own layout data
        function: Callable[..., Any] = self.namespace[name]
        return function

    def text(self) -> str:
        """The source so far (for inspection and tests)."""
        return "\n".join(self._lines) + "\n"
