"""Strict validators for custom resources, from the CRDs in the upstream reference data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import yaml

KYVERNO_CLUSTER_POLICY_CRD = "kyverno/v1.19.0/kyverno.io_clusterpolicies.yaml"
KYVERNO_MUTATING_POLICY_CRD = "kyverno/v1.19.0/policies.kyverno.io_mutatingpolicies.yaml"
KYVERNO_GENERATING_POLICY_CRD = "kyverno/v1.19.0/policies.kyverno.io_generatingpolicies.yaml"
KYVERNO_VALIDATING_POLICY_CRD = "kyverno/v1.19.0/policies.kyverno.io_validatingpolicies.yaml"
PROMETHEUS_RULE_CRD = "prometheus-operator/v0.93.0/monitoring.coreos.com_prometheusrules.yaml"


def strict(schema: Any) -> Any:
    """`additionalProperties: false` on every object that lists its properties (and does not say it keeps
    unknown fields), so a misspelt key fails here instead of being pruned silently by the API server."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_schema(upstream: Path, relative: str, version: str = "v1") -> dict[str, Any]:
    # The CRDs are large; libyaml's loader reads them in a fraction of the pure-Python loader's time.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((upstream / relative).read_text(), Loader=loader)
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def strict_validator(upstream: Path, relative: str, version: str = "v1") -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(strict(crd_schema(upstream, relative, version)))
