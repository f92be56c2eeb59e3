"""Pieces of Kyverno policy text the GPU policies share: variables, conditions, the GPU-pod CEL test."""

from __future__ import annotations

from typing import Any

from config.kyverno import KyvernoConfig

SPEC = "request.object.spec"
# A JMESPath literal empty list: every list defaults to it, so no expression ever resolves to null.
EMPTY = "`[]`"


def var(expression: str) -> str:
    """A Kyverno variable. A key that is one whole `{{ }}` keeps the JSON type of its result."""
    return "{{ " + expression + " }}"


def condition(expression: str, operator: str, value: Any) -> dict[str, Any]:
    return {"key": var(expression), "operator": operator, "value": value}


def gpu_cel_condition(resource: str) -> str:
    """CEL: does any container or initContainer set a non-zero limit for the GPU resource?"""
    has_gpu = (
        f"has(c.resources) && has(c.resources.limits) && '{resource}' in c.resources.limits"
        f" && string(c.resources.limits['{resource}']) != '0'"
    )
    return (
        f"object.spec.containers.exists(c, {has_gpu}) || "
        f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {has_gpu}))"
    )


def cel_string_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


def excluded_namespaces(cfg: KyvernoConfig, operator_namespace: str) -> list[str]:
    """The configured exclusions plus the operator's namespace, whose validator pods request a GPU."""
    return sorted({operator_namespace, *cfg.excluded_namespaces})


def gpu_pod_match_conditions(cfg: KyvernoConfig, excluded: list[str]) -> list[dict[str, str]]:
    """The API server calls Kyverno only for GPU pods outside the excluded namespaces."""
    return [
        # On DELETE `object` is null: evaluating object.spec would be an error, and with failurePolicy Fail an
        # error refuses the request. A false condition skips the webhook.
        {"name": "not-a-delete", "expression": "request.operation != 'DELETE'"},
        {"name": "asks-for-gpu", "expression": gpu_cel_condition(cfg.gpu_resource)},
        {"name": "not-in-excluded-namespace", "expression": f"!(request.namespace in {cel_string_list(excluded)})"},
    ]
