"""The watcher's Kubernetes RBAC for a stack: the rules derived from its steps' requests
(components/unattended/watcher_api.py WATCHER_API) with the stack's namespaces and hostnames filled in. Nodes: get
and patch only, limited by `resourceNames` to the stack's hostnames; nothing lists, creates or deletes a Node."""

from __future__ import annotations

from typing import Any

from components.unattended.watcher_api import (
    EVENTS,
    EVENTS_NAMESPACE,
    NODE_CHECK,
    OPERATOR,
    OWN,
    SMOKE,
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
