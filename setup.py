"""Builds kagent's one extension module: the compiled twins of the
`__consumer_offsets` decoders that `kagent.core.consumer_offsets` generates from
Kafka's layouts (see `kagent/core/consumer_offsets/_native.py`).

Everything else is declared in pyproject.toml. The module is optional: where
it cannot be built, the pure-Python decoders run, at about a third of the
speed on group metadata.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent


def twins() -> list[Extension]:
    """Generate the twins' source under build/ and declare its extension."""
    sys.path.insert(0, str(ROOT))
    os.environ["KAGENT_CODEC"] = "python"  # generate every twin, whatever is built already
    from kagent.core.consumer_offsets import _native

    source = _native.write_module(ROOT / "build" / "twins")
    extensions: list[Extension] = cythonize(
        [Extension("kagent.core.consumer_offsets._twins", [str(source)])],
        quiet=True,
        compiler_directives={"language_level": 3},
    )
    for extension in extensions:
        extension.optional = True  # no compiler: warn and install the pure-Python decoders
    return extensions


setup(ext_modules=twins())
