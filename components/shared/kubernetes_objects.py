"""Registering a plain Kubernetes object dict as the matching typed pulumi-kubernetes resource."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes

# The type the typed CustomResourceDefinition class aliases
# (pulumi_kubernetes/apiextensions/v1/CustomResourceDefinition.py).
CRD_V1BETA1 = "kubernetes:apiextensions.k8s.io/v1beta1:CustomResourceDefinition"


def managed_labels() -> dict[str, str]:
    """Labels on the objects gpu-pool owns, so `kubectl get -l app.kubernetes.io/part-of=gpu-pool` finds them."""
    return {"app.kubernetes.io/part-of": "gpu-pool", "app.kubernetes.io/managed-by": "pulumi"}


def register_object(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Typed resources where the kind is core (server-side validated, awaited), CustomResource otherwise."""
    kind = obj["kind"]
    metadata = obj["metadata"]
    if kind == "Namespace":
        return kubernetes.core.v1.Namespace(name, metadata=metadata, opts=opts)
    if kind == "ConfigMap":
        return kubernetes.core.v1.ConfigMap(
            name, metadata=metadata, data=obj.get("data"), binary_data=obj.get("binaryData"), opts=opts
        )
    if kind == "ServiceAccount":
        return kubernetes.core.v1.ServiceAccount(name, metadata=metadata, opts=opts)
    if kind == "ResourceQuota":
        return kubernetes.core.v1.ResourceQuota(name, metadata=metadata, spec=obj["spec"], opts=opts)
    if kind == "ClusterRole":
        return kubernetes.rbac.v1.ClusterRole(name, metadata=metadata, rules=obj["rules"], opts=opts)
    if kind == "Role":
        return kubernetes.rbac.v1.Role(name, metadata=metadata, rules=obj["rules"], opts=opts)
    if kind == "ClusterRoleBinding":
        return kubernetes.rbac.v1.ClusterRoleBinding(
            name, metadata=metadata, role_ref=obj["roleRef"], subjects=obj["subjects"], opts=opts
        )
    if kind == "RoleBinding":
        return kubernetes.rbac.v1.RoleBinding(
            name, metadata=metadata, role_ref=obj["roleRef"], subjects=obj["subjects"], opts=opts
        )
    if kind == "CronJob":
        return kubernetes.batch.v1.CronJob(name, metadata=metadata, spec=obj["spec"], opts=opts)
    if kind == "CustomResourceDefinition":
        # The same resource as kubernetes.apiextensions.v1.CustomResourceDefinition (type token, inputs, the typed
        # class's alias), registered untyped: the typed class converts a CRD's megabyte of OpenAPI schema through
        # its input types, and its module is the largest the SDK has; together most of what a preview with the
        # chart on disk cost above the floor (BENCHMARKS.md, the real engine).
        crd_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=CRD_V1BETA1)]))
        return kubernetes.apiextensions.CustomResource(
            name, api_version=obj["apiVersion"], kind=kind, metadata=metadata, spec=obj["spec"], opts=crd_opts
        )
    if kind == "Job":
        return kubernetes.batch.v1.Job(name, metadata=metadata, spec=obj["spec"], opts=opts)
    return kubernetes.apiextensions.CustomResource(
        name,
        api_version=obj["apiVersion"],
        kind=kind,
        metadata=metadata,
        spec=obj.get("spec"),
        opts=opts,
    )
