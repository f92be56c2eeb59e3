"""The unattended repair's Kubernetes objects, as plain dicts: the watcher's namespace (Pod Security restricted),
its ServiceAccount, the breaker's ConfigMap and the repair Lease, and the RBAC its steps need
(components/unattended/watcher_api.py): in its own namespace the Proxmox token's Secret, the breaker's ConfigMap
and the Lease each by `resourceNames`, so no other object of the namespace is within its reach and no other
ServiceAccount of gpu-pool's can read the token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.shared.in_cluster import program_labels, program_meta
from knowledge.kubernetes import pod_security_labels

# Type-only: the in-cluster watcher imports the names below (its zip leaves TYPE_CHECKING imports out, and it runs
# without pydantic); the builders read the config's fields by name.
if TYPE_CHECKING:
    from config.repair import UnattendedConfig

NAME = "gpu-pool-repair"
SECRET_NAME = "gpu-pool-repair-proxmox"
BREAKER_CONFIGMAP = "gpu-pool-repair-breaker"
LEASE_NAME = "gpu-pool-repair"
# The repair Lease's term: longer than the longest repair the watcher's waits allow (day2/repair/watcher.py:
# node-check twice 6 min, drain 15, the VM's stop and start 4 + 3, Ready 30, the slots 30, each smoke Job 15: about
# 110 minutes), so a watcher that died mid-repair frees it after this, never a live one.
LEASE_SECONDS = 2 * 60 * 60
RBAC = "rbac.authorization.k8s.io"


def labels() -> dict[str, str]:
    return program_labels(NAME)


def meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    return program_meta(NAME, name, namespace)


def namespace_object(cfg: UnattendedConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": cfg.namespace, "labels": {**labels(), **pod_security_labels("restricted")}},
    }


def build_watcher_access(cfg: UnattendedConfig) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, the breaker ConfigMap and Lease (created closed and free, so the watcher needs no
    `create`). What the watcher may do with them (each by name) is in its Roles (build_watcher_rbac)."""
    namespace = cfg.namespace
    return [
        namespace_object(cfg),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME, namespace)},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(BREAKER_CONFIGMAP, namespace),
            "data": {"state": "closed", "failures": "[]"},
        },
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta(LEASE_NAME, namespace),
            "spec": {"leaseDurationSeconds": LEASE_SECONDS},
        },
    ]


def build_watcher_rbac(
    cfg: UnattendedConfig, cluster_rules: list[dict[str, Any]], namespaced: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The ClusterRole and the Roles the watcher's steps need (components/unattended/watcher_api.py), each bound to
    its ServiceAccount: a Role per namespace the steps touch, its own included."""
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": cfg.namespace}]
    objects: list[dict[str, Any]] = [
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": meta(NAME), "rules": cluster_rules},
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(NAME),
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": NAME},
            "subjects": subject,
        },
    ]
    for namespace, rules in namespaced.items():
        name = NAME
        objects += [
            {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": meta(name, namespace), "rules": rules},
            {
                "apiVersion": f"{RBAC}/v1",
                "kind": "RoleBinding",
                "metadata": meta(name, namespace),
                "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
                "subjects": subject,
            },
        ]
    return objects
