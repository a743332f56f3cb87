"""Every sample name a worker's ``/metrics`` can contain, read from the families it describes: the oracle the
deploy rules, the monitoring drill and the lag exporter's tests hold names to."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from kagent.worker.lag_exporter import metric_families
from kagent.worker.metrics import Metrics

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
    ``_total`` and ``_created``, a histogram's ``_bucket``, ``_sum``, ``_count`` and ``_created``) and those
    :class:`~kagent.worker.lag_exporter.LagExporter` exports at any granularity.

    Built from the families the registry's collectors and the lag exporter describe, not from a list.
    """
    return frozenset(_sample_names(Metrics().registry.collect()) | _sample_names(metric_families()))
