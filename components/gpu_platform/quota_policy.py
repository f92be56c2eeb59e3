"""The Kyverno ClusterPolicy that gives every labelled namespace a GPU ResourceQuota, as a plain dict."""

from __future__ import annotations

from typing import Any

from components.gpu_platform.quotas import quota_data, quota_key
from components.shared.kubernetes_objects import managed_labels
from config.gpu_quotas import GpuQuotasConfig, NamespaceQuotaRule
from knowledge.kyverno import MINIMUM_KYVERNO_VERSION

QUOTA_POLICY_NAME = "gpu-quota-for-labelled-namespaces"


def _quota_rule(rule: NamespaceQuotaRule, quotas: GpuQuotasConfig) -> dict[str, Any]:
    return {
        "name": rule.name,
        "match": {
            "any": [{"resources": {"kinds": ["Namespace"], "selector": {"matchLabels": dict(rule.match_labels)}}}]
        },
        "generate": {
            "generateExisting": True,
            # Synchronize: a quota someone edits or deletes is put back, so the cap cannot be removed quietly.
            "synchronize": True,
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            # One object per rule: a namespace matching two rules gets two quotas, and Kubernetes enforces every
            # quota, so the smaller cap wins instead of two rules overwriting one object.
            "name": f"{quotas.quota_name}-{rule.name}",
            "namespace": "{{request.object.metadata.name}}",
            "data": quota_data(rule.max_gpus),
        },
    }


def _labels_cel(match_labels: dict[str, str]) -> str:
    checks = [
        f"('{key}' in object.metadata.labels && object.metadata.labels['{key}'] == '{value}')"
        for key, value in sorted(match_labels.items())
    ]
    return "(" + " && ".join(checks) + ")"


def build_gpu_quota_generate_policy(quotas: GpuQuotasConfig) -> dict[str, Any] | None:
    """ClusterPolicy that gives every namespace matching a selector rule a GPU ResourceQuota; None without rules."""
    if not quotas.selectors:
        return None
    selectors = " || ".join(_labels_cel(rule.match_labels) for rule in quotas.selectors)
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": QUOTA_POLICY_NAME,
            "labels": managed_labels(),
            "annotations": {
                "policies.kyverno.io/title": "GPU quota for labelled namespaces",
                "policies.kyverno.io/category": "GPU",
                "policies.kyverno.io/subject": "Namespace, ResourceQuota",
                "policies.kyverno.io/minversion": MINIMUM_KYVERNO_VERSION,
                "policies.kyverno.io/description": (
                    "A quota only limits what it names: a namespace whose ResourceQuota caps CPU and memory "
                    "can still take every GPU. Each namespace matching a rule's labels gets a ResourceQuota on "
                    f"{quota_key()}, existing namespaces included, kept in sync."
                ),
            },
        },
        "spec": {
            "admission": True,
            # Generate rules run in Kyverno's background controller; generateExisting needs it.
            "background": True,
            "webhookConfiguration": {
                "failurePolicy": quotas.failure_policy,
                "timeoutSeconds": 10,
                # Only labelled namespaces reach Kyverno, so an outage cannot block unrelated namespaces; a
                # labelled namespace is refused rather than created without its cap. DELETE is skipped: the
                # quota is deleted with its namespace, and `object` is null then.
                "matchConditions": [
                    {
                        "name": "labelled-for-gpu-quota",
                        "expression": (
                            f"request.operation != 'DELETE' && has(object.metadata.labels) && ({selectors})"
                        ),
                    }
                ],
            },
            "rules": [_quota_rule(rule, quotas) for rule in quotas.selectors],
        },
    }
