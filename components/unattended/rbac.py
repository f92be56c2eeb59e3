"""The watcher's Kubernetes RBAC for a stack: the rules derived from its steps' requests
(components/unattended/watcher_api.py WATCHER_API) with the stack's namespaces and hostnames filled in. Nodes: get
and patch only, limited by `resourceNames` to the stack's hostnames; nothing lists, creates or deletes a Node."""

from __future__ import annotations

from typing import Any

from components.unattended.watcher_api import (
    CLUSTER,
    EVENTS,
    EVENTS_NAMESPACE,
    NODE,
    NODE_CHECK,
    OPERATOR,
    OWN,
    SMOKE,
    TIME_SLICING,
    WATCHER_API,
    requests,
    rules,
)
from config.stack import StackConfig


def namespaces_of(stack: StackConfig) -> dict[str, str]:
    cfg = stack.repair.unattended
    return {
        OWN: cfg.namespace,
        NODE_CHECK: cfg.node_check_namespace,
        OPERATOR: stack.gpu_operator.namespace,
        SMOKE: stack.smoke_test.namespace,
        EVENTS: EVENTS_NAMESPACE,
    }


def watcher_rules(
    stack: StackConfig, time_slicing: str
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """(ClusterRole rules, Role rules by namespace) of the watcher of this stack; `time_slicing` is the
    time-slicing ConfigMap's name (doctor's walk reads it by name)."""
    hostnames = [d.hostname for d in stack.failure_domains]
    return rules(requests(stack.smoke_test.enabled), hostnames, namespaces_of(stack), time_slicing)


def watcher_lines(stack: StackConfig) -> list[str]:
    """What the preview and `make diff` say of the watcher: its Deployment and, step by step, what its account may
    do in the cluster (the rows its Roles are derived from)."""
    cfg = stack.repair.unattended
    namespaces = namespaces_of(stack)
    hosts = ", ".join(d.hostname for d in stack.failure_domains)
    lines = [
        f"Watcher: Deployment {cfg.namespace}/gpu-pool-repair (1 replica, Recreate, {cfg.image}), node-check Jobs "
        f"in {cfg.node_check_namespace} (Pod Security privileged); its account may:",
    ]
    wanted = set(requests(stack.smoke_test.enabled))
    for step, rows in WATCHER_API.items():
        said = []
        for row in rows:
            if row not in wanted:
                continue
            name = "the time-slicing ConfigMap" if row.name == TIME_SLICING else row.name
            where = {NODE: f"Nodes {hosts}", CLUSTER: "any namespace"}.get(row.where, namespaces.get(row.where, ""))
            said.append(f"{row.verb} {row.resource}{f' {name}' if name else ''} ({where})")
        if said:
            lines.append(f"  {step}: {'; '.join(said)}")
    return lines
