"""Kubernetes manifests checked without a cluster: rendered by kustomize, validated by the API's schemas.

- :func:`render`: ``kubectl kustomize DIR``, the objects it prints (kubectl is required: without it the
  test is skipped, saying so, except under ``CI=true``, where it fails);
- :func:`validate`: an object against the Kubernetes API's schemas (``kubernetes-validate``, strict: a
  field the API does not know fails) at each of :data:`KUBERNETES_VERSIONS`, or, for a custom resource,
  against its CRD's OpenAPI schema kept in ``tests/unit/data/crds/`` (``jsonschema``), tightened as
  ``kubectl apply``'s strict field validation is.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support import REPO
from tests.support.monitoring import in_ci

__all__ = ["CRDS", "KUBERNETES_VERSIONS", "crd_errors", "render", "require_kubectl", "validate"]

KUBERNETES_VERSIONS = ("1.29", "1.32", kubernetes_validate.latest_version())
"""The API versions every built-in object must validate at: an older release clusters still run,
kubectl's here, and the newest kubernetes-validate carries."""

CRDS = REPO / "tests" / "unit" / "data" / "crds"
"""The custom resource definitions (their source and version: README.md there)."""


def require_kubectl() -> str:
    """The path of ``kubectl`` (with its built-in kustomize); the test is skipped without it, or fails
    under ``CI=true``."""
    path = shutil.which("kubectl")
    if path is not None:
        return path
    reason = (
        "kubectl is not installed: the Kubernetes manifests are rendered with `kubectl kustomize` "
        "(kubectl 1.27 or later, with kustomize 5; Debian's kubernetes-client is too old)"
    )
    if in_ci():
        pytest.fail(f"{reason}. Under CI=true a missing tool fails the test.", pytrace=False)
    pytest.skip(reason)


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize directory`` renders; fails with kustomize's message if it cannot."""
    result = subprocess.run(
        [require_kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [obj for obj in yaml.safe_load_all(result.stdout) if obj]


def _strict(schema: Any) -> Any:
    """``schema`` where every object that lists its properties allows no others (unless it says it keeps
    unknown fields): a CRD's schema prunes unknown fields, and kubectl's strict validation rejects them."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: _strict(value) for key, value in schema.items()}
    if (
        "properties" in strict
        and "additionalProperties" not in strict
        and not strict.get("x-kubernetes-preserve-unknown-fields")
    ):
        strict["additionalProperties"] = False
    return strict


@functools.cache
def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the strict schema of every CRD version in :data:`CRDS`."""
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        for version in spec["versions"]:
            schemas[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = _strict(
                version["schema"]["openAPIV3Schema"]
            )
    return schemas


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """What the CRD's schema finds wrong with custom resource ``obj`` (OpenAPI 3.0 is JSON Schema draft 4's
    dialect), each as ``path: message``; a kind without a CRD here is an error."""
    schema = _crd_schemas().get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if schema is None:
        return [f"no CRD in {CRDS.relative_to(REPO)} for {obj.get('apiVersion')} {obj.get('kind')}"]
    errors = jsonschema.Draft4Validator(schema).iter_errors(obj)
    return [f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}" for error in errors]


def validate(obj: dict[str, Any]) -> None:
    """Fail unless ``obj`` is valid: a custom resource (a kind of a CRD in :data:`CRDS`) against its CRD,
    any other kind at every one of :data:`KUBERNETES_VERSIONS` (a kind the API does not have fails)."""
    name = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
    if (obj.get("apiVersion"), obj.get("kind")) in _crd_schemas():
        errors = crd_errors(obj)
        assert not errors, f"{name} does not validate against its CRD:\n" + "\n".join(errors)
        return
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError as error:
            raise AssertionError(f"{name}: {error.message}") from None
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.absolute_path) or "(root)"
            raise AssertionError(f"{name} is not valid for Kubernetes {version}: {path}: {error.message}") from None
