"""Write the PrometheusRule of deploy/kubernetes from the alerting rules in deploy/prometheus/.

    python deploy/kubernetes/prometheusrule.py          # rewrites components/prometheus-operator/prometheusrule.yaml
    python deploy/kubernetes/prometheusrule.py --check  # exit 1 if it differs from what it would write

A PrometheusRule's ``spec`` is a Prometheus rules file (``groups: ...``), so the object is the rules
file's text from its ``groups:`` line on, indented under ``spec:``: its rules, their comments and their
layout as they are in ``deploy/prometheus/kagent-rules.yml``, the file ``promtool test rules`` tests.
kustomize has no generator for a custom resource, hence this file and the test that runs it
(``tests/unit/test_kubernetes_manifests.py``), which fails while the two differ.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[1]
RULES = DEPLOY / "prometheus" / "kagent-rules.yml"
"""The source: Prometheus' own rules file, as docker-compose.yml's Prometheus loads it."""
PROMETHEUS_RULE = DEPLOY / "kubernetes" / "components" / "prometheus-operator" / "prometheusrule.yaml"
"""What this writes."""

HEADER = """\
# Generated from deploy/prometheus/kagent-rules.yml by deploy/kubernetes/prometheusrule.py: edit the rules
# there (and their promtool tests beside them), then run `python deploy/kubernetes/prometheusrule.py`.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kagent
  labels:
    app.kubernetes.io/name: kagent
spec:
"""


def render(rules_text: str) -> str:
    """The PrometheusRule whose ``spec`` is ``rules_text`` (a rules file) from its ``groups:`` line on."""
    lines = rules_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("groups:")), None)
    if start is None:
        raise ValueError("the rules file has no top-level 'groups:' line")
    body = "".join(f"  {line}\n" if line.strip() else "\n" for line in lines[start:])
    return HEADER + body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the file is up to date")
    args = parser.parse_args()
    text = render(RULES.read_text())
    if args.check:
        current = PROMETHEUS_RULE.read_text() if PROMETHEUS_RULE.exists() else ""
        if current != text:
            print(f"{PROMETHEUS_RULE} differs from {RULES}: run python {Path(__file__).relative_to(DEPLOY.parent)}")
            return 1
        return 0
    PROMETHEUS_RULE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
