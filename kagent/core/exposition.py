"""Prometheus' text exposition format (version 0.0.4), written piece by piece.

The worker renders each group's series when its figures change and joins the
pieces at a scrape (:mod:`kagent.worker.lag_exporter`), instead of having
``prometheus_client`` format every sample of every scrape. What it writes is
byte for byte what ``prometheus_client.generate_latest`` writes for the same
samples (the test holds it to that):

- a family is ``# HELP name help`` (backslash and newline escaped), ``# TYPE
  name type``, then its samples, one a line;
- a sample is ``name{labels} value``, its labels sorted by name, each value
  with backslash, newline and double quote escaped;
- a value is Go's float formatting as ``prometheus_client`` reproduces it
  (``floatToGoString``): ``NaN``, ``+Inf``, ``-Inf``, Python's ``repr``
  otherwise, with an exponent from 1e+06 up.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["family_header", "go_float", "go_int", "label_value", "labels_text"]


def go_float(value: float) -> str:
    """``value`` as ``prometheus_client``'s ``floatToGoString`` writes it (Go's ``strconv.FormatFloat``
    with ``'g'`` as Prometheus' own client writes it). An integer below 1e6 costs one ``repr``."""
    if value != value:  # NaN
        return "NaN"
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def go_int(number: int) -> str:
    """An integer figure as :func:`go_float` writes it, from its digits (a float is exact below 2**53)."""
    if -1_000_000_000_000_000 < number < 1_000_000:
        return f"{number}.0"
    if number >= 2**53:
        return go_float(float(number))
    digits = str(number)
    rest = digits[1:].rstrip("0")
    return f"{digits[0]}.{rest}e+{len(digits) - 1:02d}" if rest else f"{digits[0]}e+{len(digits) - 1:02d}"


def label_value(value: str) -> str:
    """``value`` escaped for a label: backslash, newline and double quote."""
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def labels_text(pairs: Sequence[tuple[str, str]]) -> str:
    """The inside of a sample's braces: ``name="value"`` pairs sorted by name, joined by commas."""
    return ",".join(f'{name}="{label_value(value)}"' for name, value in sorted(pairs))


def family_header(name: str, help_text: str, kind: str = "gauge") -> bytes:
    """The ``# HELP`` and ``# TYPE`` lines that open family ``name``."""
    escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {name} {escaped}\n# TYPE {name} {kind}\n".encode()
