"""Builds kagent's three extension modules of compiled twins:

- the `__consumer_offsets` decoders that `kagent.core.consumer_offsets` generates
  from Kafka's layouts (see `kagent/core/consumer_offsets/_native.py`);
- the scrape's innermost loops, storage's commits and the API's merge of pages, `kagent/core/_lag_twins.pyx`
  (see `kagent/core/lag_twins.py`);
- the source's reading of offset commits, storage's check of commit runs and Kafka's murmur2,
  `kagent/core/_events_twins.pyx` (see `kagent/core/ingest.py`).

Everything else is declared in pyproject.toml. Every module is optional: where
one cannot be built, its pure-Python twins run (the decoders at about a third of
the speed on group metadata, a full scrape at about 1.25 times the CPU).

A built module is kept under build/twins/, named by the digest of what it was
built from (the generated Cython source, Cython's version, the C flags, the
Python ABI): an install whose twins have not changed copies it instead of
compiling again, so only the first install after a layout change pays for the
compiler.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import sysconfig
from pathlib import Path

import Cython
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
#: Where the generated source and the built modules, by digest, are kept.
TWINS_DIR = ROOT / "build" / "twins"
#: Python's own flags are -O3 -g: -O2 decodes as fast (benchmarks/bench_consumer_offsets.py) and,
#: without debug information (6/7 of the module's size), compiles the ~7 MB of C in 2/5 of the time.
UNIX_FLAGS = ["-O2", "-g0"]


def generate() -> Path:
    """Write the decoders' twins' Cython source under build/twins/ (left untouched if unchanged); return its path."""
    sys.path.insert(0, str(ROOT))
    os.environ["KAGENT_CODEC"] = "python"  # generate every twin, whatever is built already
    from kagent.core.consumer_offsets import _native

    return _native.write_module(TWINS_DIR)


class BuildTwins(build_ext):
    """`build_ext` that reuses the module built last time from the same source, flags and Python."""

    def build_extension(self, ext: Extension) -> None:
        flags = UNIX_FLAGS if self.compiler.compiler_type == "unix" else []
        (source,) = ext.sources
        key = hashlib.sha256(
            "\n".join(
                [Path(source).read_text(), Cython.__version__, *flags, sysconfig.get_config_var("EXT_SUFFIX")]
            ).encode()
        ).hexdigest()[:16]
        target = Path(self.get_ext_fullpath(ext.name))
        cached = TWINS_DIR / key / target.name
        if cached.exists() and not self.force:
            print(f"kagent: reusing the twins built from the same source ({cached})")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cached, target)
            return
        (compiled,) = cythonize([Extension(ext.name, [source])], quiet=True, compiler_directives={"language_level": 3})
        ext.sources = compiled.sources
        ext.extra_compile_args = [*ext.extra_compile_args, *flags]
        super().build_extension(ext)  # a compiler error is a warning here: the extension is optional
        for old in TWINS_DIR.glob(f"*/{target.name}"):  # one built module per Python ABI
            shutil.rmtree(old.parent, ignore_errors=True)
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}")  # a concurrent install never sees half a file
        shutil.copy2(target, partial)
        partial.replace(cached)


setup(
    ext_modules=[
        Extension("kagent.core.consumer_offsets._twins", [str(generate())], optional=True),
        Extension("kagent.core._lag_twins", ["kagent/core/_lag_twins.pyx"], optional=True),
        Extension("kagent.core._events_twins", ["kagent/core/_events_twins.pyx"], optional=True),
    ],
    cmdclass={"build_ext": BuildTwins},
)
