"""The Kyverno ClusterPolicy that gives every labelled namespace a GPU ResourceQuota, as a plain dict."""

from __future__ import annotations

from typing import Any

from components.gpu_platform.quotas import quota_data, quota_key
from components.shared.kubernetes_objects import managed_labels
from config.gpu_quotas import GpuQuotasConfig, NamespaceQuotaRule
from knowledge.kyverno import MINIMUM_KYVERNO_VERSION

QUOTA_POLICY_NAME = "gpu-quota-for-labelled-namespaces"


def _explicit_exclusion(quotas: GpuQuotasConfig) -> dict[str, Any]:
    """Namespaces under gpuQuotas.namespaces: Pulumi owns their one GPU quota, so no rule generates a second (an
    explicit entry wins over a label rule; two quotas would make the smaller cap win whatever was written)."""
    if not quotas.namespaces:
        return {}
    return {"exclude": {"any": [{"resources": {"kinds": ["Namespace"], "names": sorted(quotas.namespaces)}}]}}


def _quota_rule(rule: NamespaceQuotaRule, quotas: GpuQuotasConfig) -> dict[str, Any]:
    return {
        "name": rule.name,
        "match": {
            "any": [{"resources": {"kinds": ["Namespace"], "selector": {"matchLabels": dict(rule.match_labels)}}}]
        },
        **_explicit_exclusion(quotas),
        "generate": {
            "generateExisting": True,
            # Synchronize: a quota someone edits or deletes is put back, and it goes when the namespace loses its
            # labels, so the cap cannot be removed quietly (the webhook's matchConditions let those events in).
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


# Kyverno labels what a generate rule created with the policy's name (pkg/background/common/labels.go).
GENERATED_BY_LABEL = "generate.kyverno.io/policy-name"


def _labels_cel(match_labels: dict[str, str], var: str) -> str:
    checks = [
        f"('{key}' in {var}.metadata.labels && {var}.metadata.labels['{key}'] == '{value}')"
        for key, value in sorted(match_labels.items())
    ]
    return "(" + " && ".join(checks) + ")"


def explicit_namespaces_cel(quotas: GpuQuotasConfig, var: str) -> str:
    """CEL: the object `var` is a namespace with an explicit gpuQuotas.namespaces entry ("false" without any)."""
    if not quotas.namespaces:
        return "false"
    names = ", ".join(f"'{name}'" for name in sorted(quotas.namespaces))
    return f"({var}.metadata.name in [{names}])"


def _selected(quotas: GpuQuotasConfig, var: str) -> str:
    """CEL: the object `var` (object or oldObject) is a namespace some rule selects and no explicit entry names."""
    rules = " || ".join(_labels_cel(rule.match_labels, var) for rule in quotas.selectors)
    return f"(has({var}.metadata.labels) && ({rules}) && !{explicit_namespaces_cel(quotas, var)})"


def quota_match_condition(quotas: GpuQuotasConfig) -> str:
    """Which admission requests reach Kyverno for this policy (the webhook only it uses).

    The trigger: a selected namespace created or updated, or one that loses its labels (synchronize then
    deletes its quota). The downstream: an update or delete of a quota this policy generated, which is how
    Kyverno learns that it must put it back (its generation handler re-syncs downstream objects from admission
    requests only, keyed on the old object's labels: kyverno pkg/webhooks/resource/generation/handler.go).

    Kyverno's background controller evaluates these conditions too, each time it applies a rule to a trigger: for
    `generateExisting`, and to put back a deleted or edited quota. It builds that request itself, for the trigger
    namespace, with an empty operation (v1.19.1 pkg/background/common/context.go NewBackgroundContext, an update
    request with no admission request in it; pkg/engine/internal/match.go checkMatchConditions). The empty
    operation is accepted for a selected namespace: without it a running Kyverno 1.19.1 skipped the rule
    ("matchConditions doesn't match request") and generated nothing for namespaces labelled before the policy,
    restored no deleted quota and reset no edited one (tests/e2e/test_kyverno_running.py). The API server never
    sends an empty operation, so no more requests reach the webhook.
    """
    # `object` is null on DELETE and `oldObject` on CREATE: the operation is tested before either is read.
    namespace = (
        "request.kind.kind == 'Namespace' && request.operation in ['CREATE', 'UPDATE', ''] && "
        f"({_selected(quotas, 'object')} || (request.operation == 'UPDATE' && {_selected(quotas, 'oldObject')}))"
    )
    generated = (
        "request.kind.kind == 'ResourceQuota' && request.operation in ['UPDATE', 'DELETE'] && "
        "has(oldObject.metadata.labels) && "
        f"'{GENERATED_BY_LABEL}' in oldObject.metadata.labels && "
        f"oldObject.metadata.labels['{GENERATED_BY_LABEL}'] == '{QUOTA_POLICY_NAME}'"
    )
    return f"({namespace}) || ({generated})"


def build_gpu_quota_generate_policy(quotas: GpuQuotasConfig) -> dict[str, Any] | None:
    """ClusterPolicy that gives every namespace matching a selector rule a GPU ResourceQuota; None without rules."""
    if not quotas.selectors:
        return None
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
                # Only selected namespaces and the quotas this policy made reach Kyverno, so an outage blocks
                # nothing else; a labelled namespace is refused rather than created without its cap. Without
                # the quota events here, `synchronize` could never restore an edited or deleted quota.
                "matchConditions": [
                    {"name": "gpu-quota-trigger-or-generated", "expression": quota_match_condition(quotas)}
                ],
            },
            "rules": [_quota_rule(rule, quotas) for rule in quotas.selectors],
        },
    }
