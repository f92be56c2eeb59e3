"""The optional Kyverno ClusterPolicy `gpu-min-cpu-per-gpu`: GPU pods that request too little CPU, in Audit.

The article's notebooks held whole cards for months while asking for 0.6 and 1.2 CPU: a GPU cannot be shared
by request, so a pod that asks for one card and a sliver of CPU keeps the card and starves it. Nothing is
refused (the rule audits): the pods show up in Kyverno's policy reports, where a platform team looks.
"""

from __future__ import annotations

from typing import Any

from components.gpu_platform.kyverno_expressions import (
    EMPTY,
    SPEC,
    condition,
    excluded_namespaces,
    gpu_pod_match_conditions,
)
from components.shared.kubernetes_objects import managed_labels
from config.kyverno import KyvernoConfig
from knowledge.kyverno import MINIMUM_KYVERNO_VERSION

POLICY_NAME = "gpu-min-cpu-per-gpu"
RULE_NAME = "min-cpu-per-gpu"
AUTOGEN_ANNOTATION = "pod-policies.kyverno.io/autogen-controllers"


def gpu_count_expression(resource: str) -> str:
    """The GPUs the pod's app containers ask for, as a number (0 when none). Limits: an extended resource's
    request defaults to its limit, and a request without a limit is refused."""
    return f'sum([`0`, {SPEC}.containers[].resources.limits."{resource}" | [].to_number(@)][])'


def cpu_request_expression() -> str:
    """The CPU the pod's app containers request, summed, as a quantity ("0" when none). The API server defaults a
    container's request to its limit before admission and before the pod is stored, so a limit alone counts."""
    return f'sum([`"0"`, {SPEC}.containers[].resources.requests.cpu || {EMPTY}][])'


def build_cpu_guard_policy(cfg: KyvernoConfig, *, operator_namespace: str) -> dict[str, Any] | None:
    """ClusterPolicy auditing GPU pods that request less than `kyverno.minCpuPerGpu` CPU per GPU; None when off."""
    if cfg.min_cpu_per_gpu is None:
        return None
    minimum = cfg.min_cpu_per_gpu
    excluded = excluded_namespaces(cfg, operator_namespace)
    gpus = gpu_count_expression(cfg.gpu_resource)
    required = f"multiply('{minimum}', {gpus})"
    # CREATE only: a pod's requests cannot change afterwards (short of in-place resize); pods that existed before
    # the policy are reported by the background scan.
    too_little = condition(cpu_request_expression(), "LessThan", "{{ " + required + " }}")
    message = (
        f"asks for {{{{ {gpus} }}}} {cfg.gpu_resource} but requests {{{{ {cpu_request_expression()} }}}} CPU; "
        f"a GPU pod should request at least {minimum} CPU per GPU ({{{{ {required} }}}}), or it holds "
        "a whole card it cannot feed"
    )
    return {
        "apiVersion": "kyverno.io/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": POLICY_NAME,
            "labels": managed_labels(),
            "annotations": {
                "policies.kyverno.io/title": "GPU pods request enough CPU to use their GPUs",
                "policies.kyverno.io/category": "GPU",
                "policies.kyverno.io/subject": "Pod",
                "policies.kyverno.io/severity": "medium",
                "policies.kyverno.io/minversion": MINIMUM_KYVERNO_VERSION,
                "policies.kyverno.io/description": (
                    f"Audits Pods whose app containers set a {cfg.gpu_resource} limit and together request less "
                    f"than {minimum} CPU per GPU: a card held by a pod that cannot feed it is a card nobody "
                    "else can use."
                ),
                # Report on pods only: Deployments or notebooks (StatefulSets) are reported through their pods.
                AUTOGEN_ANNOTATION: "none",
            },
        },
        "spec": {
            "admission": True,
            # Background scans report the pods that were running before the policy existed.
            "background": True,
            "webhookConfiguration": {
                # Audit never refuses a pod; a Kyverno outage must not either.
                "failurePolicy": "Ignore",
                "timeoutSeconds": cfg.webhook_timeout_seconds,
                "matchConditions": gpu_pod_match_conditions(cfg, excluded),
            },
            "rules": [
                {
                    "name": RULE_NAME,
                    "match": {"any": [{"resources": {"kinds": ["Pod"], "operations": ["CREATE"]}}]},
                    "exclude": {"any": [{"resources": {"namespaces": excluded}}]},
                    "preconditions": {"all": [condition(gpus, "GreaterThan", 0)]},
                    "validate": {
                        "failureAction": "Audit",
                        "message": message,
                        "deny": {"conditions": {"all": [too_little]}},
                    },
                }
            ],
        },
    }
