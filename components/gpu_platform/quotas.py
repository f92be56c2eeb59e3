"""GPU ResourceQuotas as plain dicts: one per explicitly capped namespace.

A quota only limits what it names (article, "Who holds a card"): the profile namespaces capped CPU and
memory, not `nvidia.com/gpu`, so GPU use per namespace was unbounded.
"""

from __future__ import annotations

from typing import Any

from config.gpu_quotas import GpuQuotasConfig
from config.project import PROJECT
from knowledge.gpu_operator import GPU_RESOURCE


def quota_key(resource: str = GPU_RESOURCE) -> str:
    """`requests.<resource>`: extended resources cannot be overcommitted (request == limit), so the pod quota
    evaluator counts them under the `requests.` prefix only. The API server does accept a quota on
    `limits.nvidia.com/gpu` (the e2e tier's v1.33.5 created one), but nothing is ever counted against it
    (kubernetes pkg/quota/v1/evaluator/core/pods.go, isExtendedResourceNameForQuota): it would limit nothing.

    A pod that only sets the limit is still counted: its request defaults to the limit. Pods that ask for no
    GPU are not affected (unlike a cpu/memory quota, an extended-resource quota does not force every pod to
    declare the resource).
    """
    return f"requests.{resource}"


def quota_data(max_gpus: int, *, resource: str = GPU_RESOURCE) -> dict[str, Any]:
    """The labels and spec of a GPU quota, shared by Pulumi-owned quotas and the Kyverno generate rule."""
    return {
        "metadata": {"labels": {"app.kubernetes.io/part-of": PROJECT}},
        "spec": {"hard": {quota_key(resource): str(max_gpus)}},
    }


def build_resource_quota(namespace: str, max_gpus: int, *, name: str, resource: str = GPU_RESOURCE) -> dict[str, Any]:
    """A v1 ResourceQuota capping the GPUs pods in `namespace` may request (0 forbids GPUs there)."""
    if max_gpus < 0:
        raise ValueError(f"a GPU quota cannot be negative (namespace {namespace!r}, got {max_gpus})")
    data = quota_data(max_gpus, resource=resource)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**data["metadata"]["labels"], "app.kubernetes.io/managed-by": "pulumi"},
        },
        "spec": data["spec"],
    }


def build_gpu_quotas(quotas: GpuQuotasConfig) -> list[dict[str, Any]]:
    """The explicit namespaces' quotas, sorted by namespace so previews are stable."""
    return [
        build_resource_quota(namespace, max_gpus, name=quotas.quota_name)
        for namespace, max_gpus in sorted(quotas.namespaces.items())
    ]


def build_kyverno_quota_rbac() -> dict[str, Any]:
    """Lets Kyverno's controllers create and keep ResourceQuotas for the generate policy.

    Kyverno refuses a generate policy for a kind its service accounts cannot manage; its
    ClusterRoles aggregate every ClusterRole that carries these labels.
    """
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": "gpu-pool:kyverno-manage-resourcequotas",
            "labels": {
                "app.kubernetes.io/part-of": PROJECT,
                "rbac.kyverno.io/aggregate-to-admission-controller": "true",
                "rbac.kyverno.io/aggregate-to-background-controller": "true",
            },
        },
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["resourcequotas"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            }
        ],
    }
