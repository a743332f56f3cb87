"""Every sample name a worker's ``/metrics`` can contain, read from the families it describes: the oracle the
deploy rules, the monitoring drill and the lag exporter's tests hold names to."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from kagent.core.lag_series import FAMILIES
from kagent.worker.metrics import GROUP_GAUGE_FAMILIES, Metrics

__all__ = ["exported_metric_names"]

SAMPLE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "info": ("_info",),
}
"""The sample names ``prometheus_client`` writes for a family of each type, as suffixes of the family's name
(types not listed write one sample name, the family's own)."""


def _sample_names(families: Iterable[Metric]) -> set[str]:
    names: set[str] = set()
    for family in families:
        names.update(f"{family.name}{suffix}" for suffix in SAMPLE_SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def exported_metric_names() -> frozenset[str]:
    """Every sample name a worker's ``/metrics`` can contain: those of :class:`Metrics`' registry (a counter's
    ``_total`` and ``_created``, a histogram's ``_bucket``, ``_sum``, ``_count`` and ``_created``), the per-group
    gauges' and the lag series' at any granularity (gauges: one sample name each, the family's).

    Built from the families the registry's collectors describe and those the rendered series declare, not
    from a list.
    """
    rendered = {family.name for family in (*FAMILIES, *GROUP_GAUGE_FAMILIES)}
    return frozenset(_sample_names(Metrics().registry.collect()) | rendered)
