"""Registering a plain Kubernetes object dict as the pulumi-kubernetes resource its kind is.

Every kind this program writes with a typed class of the SDK (a Namespace, a Job, the Helm release, a Node patch)
is registered here untyped, as that class would register it: the same type token, inputs, SDK version and aliases,
so the engine and the provider see one and the same resource (tests/shared/test_kubernetes_objects.py compares
the registration requests with the typed classes', kind by kind). What that spares is the typed modules: importing
`pulumi_kubernetes.core.v1` alone (every class of the core group and their input types) took about 0.5 s of each
real-engine preview of prod, and the CRDs' typed class converted megabytes of OpenAPI schema through its input
types (docs/engine.md, "What a real preview costs").
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes

from config.project import PROJECT

# The kinds registered as their typed class would, each with the aliases that class declares (its former API
# versions: a stack created on one of them moves without a replacement). Read by the test against the SDK.
TYPED_KINDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("v1", "Namespace"): (),
    ("v1", "ConfigMap"): (),
    ("v1", "ServiceAccount"): (),
    ("coordination.k8s.io/v1", "Lease"): ("v1beta1",),
    ("v1", "ResourceQuota"): (),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("v1alpha1", "v1beta1"),
    ("rbac.authorization.k8s.io/v1", "Role"): ("v1alpha1", "v1beta1"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("v1alpha1", "v1beta1"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("v1alpha1", "v1beta1"),
    ("batch/v1", "CronJob"): ("v1beta1", "v2alpha1"),
    ("batch/v1", "Job"): (),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("v1beta1",),
}
NODE_PATCH_TYPE = "kubernetes:core/v1:NodePatch"
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"


def managed_labels() -> dict[str, str]:
    """Labels on the objects gpu-pool owns, so `kubectl get -l app.kubernetes.io/part-of=gpu-pool` finds them."""
    return {"app.kubernetes.io/part-of": PROJECT, "app.kubernetes.io/managed-by": "pulumi"}


def type_token(api_version: str, kind: str) -> str:
    """The typed class's token: `kubernetes:<group>/<version>:<Kind>`, the core group written `core`."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def _alias_token(api_version: str, kind: str, version: str) -> str:
    """The token of the same kind at another version of its group."""
    group = api_version.rpartition("/")[0]
    return type_token(f"{group}/{version}" if group else version, kind)


def _as_typed(
    token: str, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions, aliases: tuple[str, ...] = ()
) -> pulumi.CustomResource:
    # As the typed classes do: the SDK's defaults (its version, so the engine asks for the plugin it was built
    # against) under the caller's options, then the class's aliases.
    merged = pulumi.ResourceOptions.merge(kubernetes._utilities.get_resource_opts_defaults(), opts)
    if aliases:
        merged = pulumi.ResourceOptions.merge(
            merged, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=alias) for alias in aliases])
        )
    return pulumi.CustomResource(token, name, props, merged)


def register_object(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """A kind of TYPED_KINDS as its typed class would register it; any other (a custom resource) as the SDK's
    CustomResource."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    versions = TYPED_KINDS.get((api_version, kind))
    if versions is not None:
        aliases = tuple(_alias_token(api_version, kind, version) for version in versions)
        return _as_typed(type_token(api_version, kind), name, dict(obj), opts, aliases)
    return kubernetes.apiextensions.CustomResource(
        name,
        api_version=api_version,
        kind=kind,
        metadata=obj["metadata"],
        spec=obj.get("spec"),
        opts=opts,
    )


def register_node_patch(name: str, metadata: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """`kubernetes.core.v1.NodePatch(name, metadata=...)`: server-side apply of the given fields on an existing Node."""
    # The patch's object is the Node it patches: the typed class sends kind Node under the NodePatch token.
    props = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
    return _as_typed(NODE_PATCH_TYPE, name, props, opts)


def register_helm_release(name: str, release: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """`kubernetes.helm.v3.Release(name, ...)` with `release` in the provider's own (camelCase) input names; `compat`
    is the constant the typed class adds."""
    return _as_typed(HELM_RELEASE_TYPE, name, {**release, "compat": "true"}, opts)
