"""Python source under construction, and the names it refers to.

The machine writes each decoder and encoder as straight-line Python built
from layout data, then compiles it once, at import. Generated code is
registered with `linecache`, so tracebacks and profilers show it.

A `Source` made with `native=True` also keeps a Cython twin of its function:
the same lines, with C types declared for its signature and for the locals
made with a `ctype`, and with a line's `native` alternative where it has one.
The twins are built into an extension module at install (`_native`);
`compile` returns the built twin when its text is the one built, and the
Python function otherwise.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kagent.core.consumer_offsets import _native

_serial = itertools.count()


class Source:
    """Lines of one generated function plus the globals it uses."""

    def __init__(self, *, native: bool = False) -> None:
        self.namespace: dict[str, Any] = {}
        self.native = native
        #: (indentation, Python text, Cython text).
        self._lines: list[tuple[int, str, str]] = []
        self._depth = 0
        self._taken: dict[str, int] = {}
        self._constants: dict[tuple[str, Any], str] = {}
        self._signature: tuple[str, Sequence[tuple[str, str | None]]] | None = None
        #: Locals the Cython twin declares: name -> C type.
        self._c_locals: dict[str, str] = {}

    def line(self, text: str, native: str | None = None) -> None:
        """Append one line at the current indentation; `native` replaces it
        (possibly with several lines) in the Cython twin."""
        self._lines.append((self._depth, text, text if native is None else native))

    @contextmanager
    def block(self, header: str, native: str | None = None) -> Iterator[None]:
        """Append `header` (ending in ':', its twin's `native`) and indent
        what follows."""
        self.line(header, native)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    @contextmanager
    def function(self, name: str, params: Sequence[tuple[str, str | None]]) -> Iterator[None]:
        """Open the one function of this source: `params` are (name, C type
        of the twin's parameter or None)."""
        if self._signature is not None or self._lines:
            raise ValueError("a Source holds one function")
        self._signature = (name, params)
        with self.block(f"def {name}({', '.join(param for param, _ in params)}):"):
            yield

    def local(self, hint: str, ctype: str | None = None) -> str:
        """A local variable name not used before in this function; the
        Cython twin declares it as `ctype` when given."""
        count = self._taken.get(hint, 0)
        self._taken[hint] = count + 1
        name = f"{hint}_{count}"
        if ctype is not None:
            self.declare(name, ctype)
        return name

    def declare(self, name: str, ctype: str) -> None:
        """Declare the local `name` as `ctype` in the Cython twin."""
        if self._c_locals.setdefault(name, ctype) != ctype:
            raise ValueError(f"{name} declared as both {self._c_locals[name]} and {ctype}")

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
        """Compile the lines (one `def name(...)`) and return the function:
        the built Cython twin if there is one for exactly this text."""
        if self.native:
            twin = _native.twin(name, self.native_text(), self.namespace)
            if twin is not None:
                return twin
        text = self.text()
        filename = f"<kagent.core.consumer_offsets generated {name} #{next(_serial)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), self.namespace)  # code generated from our own layout data
        function: Callable[..., Any] = self.namespace[name]
        return function

    def text(self) -> str:
        """The Python source so far (for inspection and tests)."""
        return "".join("    " * depth + text + "\n" for depth, text, _ in self._lines)

    def native_text(self) -> str:
        """The Cython twin: the function with typed parameters and locals,
        as it appears (indented by the caller) in the extension module."""
        if self._signature is None:
            raise ValueError("native sources must open their function with `function`")
        name, params = self._signature
        typed = ", ".join(param if ctype is None else f"{ctype} {param}" for param, ctype in params)
        out = [f"def {name}({typed}):\n"]
        declared = {param for param, _ in params}
        by_type: dict[str, list[str]] = {}
        for local, ctype in self._c_locals.items():
            if local not in declared:
                by_type.setdefault(ctype, []).append(local)
        out += [f"    cdef {ctype} {', '.join(names)}\n" for ctype, names in by_type.items()]
        for depth, _, native in self._lines[1:]:
            out += ["    " * depth + piece + "\n" for piece in native.split("\n")]
        return "".join(out)
