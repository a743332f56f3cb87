"""The compiled twins of the generated decoders.

Every decoder the machine writes (`Source(native=True)`) has a Cython twin:
the same code with C types for offsets, lengths and counts, and fixed-width
fields read straight from the bytes. At install, `setup.py` writes all twins
into one module with `module_text` and builds it as the extension `_twins`,
or reuses the module it built last time if `module_text` is unchanged.
Each twin sits in a factory that takes the function's globals, so the twins
share no names.

At import, `twin` hands a generated function its built twin only when the
module holds one built from exactly the same text (a digest per function):
a layout changed since the last install keeps its pure-Python decoder until
the next `pip install`. Setting `KAGENT_CODEC=python` turns every twin off
(for tracebacks into generated Python, or to compare the two).

Given `bytes`, the twins behave exactly as the Python functions: the same
records, and the same `DecodeError`s with the same offsets and reasons.
Every read past the end of the bytes is checked before it is made, as
`struct` would check it.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import struct
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

#: The environment variable that, set to "python", turns the twins off (the
#: setting `codec` of `kagent.settings`, which checks its value).
CODEC_VARIABLE = "KAGENT_CODEC"


def _load() -> ModuleType | None:
    if os.environ.get(CODEC_VARIABLE, "") == "python":
        return None
    try:
        return importlib.import_module("kagent.core.consumer_offsets._twins")
    except ImportError:
        return None


_module = _load()

#: Every native function generated so far: name -> (its Cython twin's
#: text, the names of its globals).
TWINS: dict[str, tuple[str, tuple[str, ...]]] = {}
#: The names whose built twin is in use.
IN_USE: set[str] = set()

#: The C type of each struct code that twins read in place.
_C_TYPES = {"b": "int8_t", "h": "int16_t", "H": "uint16_t", "i": "int32_t", "I": "uint32_t", "q": "int64_t"}

#: Readers of big-endian fixed-width values, by struct code, for twins. They
#: do not check bounds: the generated code checks before it reads.
READERS = {code: f"_read_{ctype.removesuffix('_t')}" for code, ctype in _C_TYPES.items()}

_PRELUDE = (
    f'''\
# cython: language_level=3
"""Compiled twins of kagent.core.consumer_offsets' generated decoders.

Written by kagent.core.consumer_offsets._native.module_text at install; not
edited by hand.
"""

from libc.stdint cimport {", ".join(sorted({*_C_TYPES.values(), "uint64_t"}))}


cdef inline uint64_t _big_endian(bytes buf, Py_ssize_t pos, int size):
    cdef const unsigned char* data = buf
    cdef uint64_t value = 0
    cdef int index
    for index in range(size):
        value = (value << 8) | data[pos + index]
    return value
'''
    + "".join(
        f"\n\ncdef inline {ctype} {READERS[code]}(bytes buf, Py_ssize_t pos):\n"
        f"    return <{ctype}>_big_endian(buf, pos, {struct.calcsize('>' + code)})\n"
        for code, ctype in _C_TYPES.items()
    )
    + "\n"
)


def digest(text: str, names: tuple[str, ...]) -> str:
    """The digest by which a built twin is matched to its text and globals."""
    return hashlib.sha256("\n".join((text, *names)).encode()).hexdigest()


def twin(name: str, text: str, namespace: dict[str, Any]) -> Callable[..., Any] | None:
    """Register the twin `text` of the generated function `name` (whose
    globals are `namespace`); return the built twin if it was built from
    this very text, else None."""
    names = tuple(sorted(namespace))
    if TWINS.setdefault(name, (text, names)) != (text, names):
        raise ValueError(f"two generated functions are named {name}")
    if _module is None or _module.DIGESTS.get(name) != digest(text, names):
        return None
    function: Callable[..., Any] = getattr(_module, f"make_{name}")(**namespace)
    IN_USE.add(name)
    return function


def compiled_decoders() -> tuple[int, int]:
    """(generated decoders running their compiled twin, generated decoders)."""
    return len(IN_USE), len(TWINS)


def module_text() -> str:
    """The Cython source of the extension: every registered twin, each in a
    factory `make_<name>(**globals)`, and their digests."""
    parts = [_PRELUDE, "DIGESTS = {\n"]
    parts += [f"    {name!r}: {digest(*twin)!r},\n" for name, twin in sorted(TWINS.items())]
    parts.append("}\n")
    for name, (text, names) in sorted(TWINS.items()):
        parts.append(f"\n\ndef make_{name}({', '.join(names)}):\n")
        parts += ["    " + line + "\n" if line else "\n" for line in text.splitlines()]
        parts.append(f"    return {name}\n")
    return "".join(parts)


def write_module(directory: Path) -> Path:
    """Write `module_text()` as `_twins.pyx` in `directory` (made if
    missing), leaving an identical file untouched; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "_twins.pyx"
    text = module_text()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path
