"""Compiled twins of the scrape's innermost loops, storage's commits, an evaluation's rates and the API's
merge, where built; and how any compiled twin is found.

A full scrape reads every group-partition's committed offset, measures its lag, adds a group's up and writes
its three samples: a few hundred thousand times per scrape at the issue's mix, millions at a million
group-partitions, inside the worker's event loop. Those four loops,
:func:`kagent.core.committed_offset.offsets_of`, :func:`kagent.core.time_lag.measured_lags`,
:func:`kagent.core.lag_series.lag_sums` and :func:`kagent.core.lag_series.partition_pieces`, and the two
that add up and write each member's lag, :func:`kagent.core.member_lag.read_lags` and
:func:`kagent.core.lag_series.member_pieces`, have Cython twins in ``_lag_twins.pyx``, built at install by
``setup.py`` beside the codec's twins; they take the offsets and the history's points as C integers and
doubles, and write each sample straight into its piece's bytes. So does
:func:`kagent.core.committed_offset.applied`, which storage calls for every group-partition a batch commits
to (tens of thousands of times a second live): its twin reads the stored value's text in place and writes
the new one, keeping the window's commits as their text. So does
:func:`kagent.core.member_lag.partition_rows`, which lays out how a group's partitions add up per member and
whose labels each carries, once per shape of the group: for every group at the first scrape after a start
or after the groups rebalance. So does
:func:`kagent.core.throughput.partition_throughput`, which every evaluation calls for each partition its
group reads: its twin reads the end-offset history's arrays in place. So does the judgement of each of those
partitions' health by Burrow's rules (:func:`kagent.core.group_health.judge`): its twin reads the window's
commits as C integers and doubles. So does the reading of those windows from the stored values
(:func:`kagent.core.committed_offset.window_of`): its twin reads the value's text in place. And
:func:`kagent.core.group_listing.merged_body` writes a page of ``GET /api/groups`` from the workers' pages:
its twin merges them in one pass and copies each summary's JSON into the body once.

Contract: given the same arguments, a twin returns exactly what its Python function returns (equal
lists, the same text byte for byte, the same ``ValueError`` for mismatched lengths);
``tests/unit/test_lag_twins.py`` and ``tests/unit/test_listing_twin.py`` hold them to it. Offsets, log
offsets and lags are Kafka's (int64, as the wire and the decoders give them): a twin given one beyond
int64 raises ``OverflowError`` where the Python function computes (but for the text, the sums and the
commits, which go the Python's way past int64).

Where the extension is not built (no compiler at install) or ``KAGENT_CODEC=python`` is set, the Python
functions run. The source's :func:`kagent.core.ingest.ingest`, storage's check of a commit run
(:func:`kagent.core.events._plain_run`), Kafka's murmur2 (:data:`kagent.core.table_keys.murmur2`) and
storage's per-commit key and gathering (:data:`kagent.core.table_keys.partition_key`,
:data:`kagent.core.events.gathered_runs`) have their twins in an extension of their own
(``_events_twins.pyx``), found the same way (:func:`twin_of` with its module's name).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

__all__ = ["CODEC_VARIABLE", "IN_USE", "twin_of"]

F = TypeVar("F", bound=Callable[..., Any])

CODEC_VARIABLE = "KAGENT_CODEC"
"""The environment variable that, set to "python", turns these twins off, as it does the decoders'
(:data:`kagent.core.consumer_offsets._native.CODEC_VARIABLE`, not imported: that loads the whole codec)."""

IN_USE: set[str] = set()
"""The names of the functions whose compiled twin is in use."""


LAG_TWINS = "kagent.core._lag_twins"
"""The extension of this module's twins (it imports nothing of kagent but exposition)."""

_loaded: dict[str, ModuleType | None] = {}


def _load(name: str) -> ModuleType | None:
    if name not in _loaded:
        try:
            _loaded[name] = None if os.environ.get(CODEC_VARIABLE, "") == "python" else importlib.import_module(name)
        except ImportError:
            _loaded[name] = None
    return _loaded[name]


def twin_of(function: F, extension: str = LAG_TWINS) -> F:
    """``function``'s compiled twin (the function of the same name, without a leading underscore, in the
    module ``extension``) when that is built and twins are on; ``function`` itself otherwise."""
    module = _load(extension)
    twin = getattr(module, function.__name__.lstrip("_"), None) if module is not None else None
    if twin is None:
        return function
    IN_USE.add(function.__name__.lstrip("_"))
    return twin  # type: ignore[no-any-return]
