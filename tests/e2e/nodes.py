"""GPU worker Nodes as RKE2 registers them, from the domain's own cloud-init: there is no kubelet here."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from components.gpu_failure_domain.cloud_init import rke2_agent_config
from config.failure_domain import FailureDomainConfig
from tests.e2e.kube import Kubectl
from tests.e2e.stacks import Previewed

# Field managers of what writes a Node in a real cluster besides the stack.
KUBELET = "kubelet"
LIFECYCLE_CONTROLLER = "node-lifecycle-controller"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
# A taint another controller owns on the node: the stack's taint step must leave it alone.
FOREIGN_TAINT = {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}
FOREIGN_MANAGER = "maintenance-controller"


def kubelet_labels(name: str) -> dict[str, str]:
    """What the kubelet sets on every node it registers, whatever RKE2 asks for."""
    return {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }


def parse_taint(text: str) -> dict[str, str]:
    """`key=value:Effect`, RKE2's `node-taint` form, as a Node's spec.taints entry."""
    key_value, _, effect = text.rpartition(":")
    key, _, value = key_value.partition("=")
    return {"key": key, "value": value, "effect": effect}


def registered_node(domain: FailureDomainConfig, stack: Previewed) -> dict[str, Any]:
    """The Node RKE2's agent registers from /etc/rancher/rke2/config.yaml (node-name, node-label, node-taint)."""
    agent = rke2_agent_config(domain, stack.config.rke2, "unused-token", stack.marking)
    name = agent["node-name"]
    labels = kubelet_labels(name) | dict(label.split("=", 1) for label in agent["node-label"])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": [parse_taint(taint) for taint in agent["node-taint"]]},
    }


def set_status(kubectl: Kubectl, name: str, *, ready: bool, boot_id: str) -> None:
    """The kubelet's status report (status subresource): Ready or not, and the boot it runs in."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "kubelet is posting ready status" if ready else "container runtime network not ready",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    status = {"conditions": [condition], "nodeInfo": {"bootID": boot_id, "kernelVersion": "6.8.0-51-generic"}}
    patch = json.dumps({"status": status})
    kubectl("patch", "node", name, "--subresource=status", "--type=merge", "--field-manager", KUBELET, "-p", patch)
    # The API server taints every new node not-ready (TaintNodesByCondition); the node lifecycle controller, which
    # does not run here, lifts it once the node is Ready.
    taints = kubectl.json("get", "node", name)["spec"].get("taints") or []
    if ready and any(taint["key"] == NOT_READY_TAINT for taint in taints):
        kubectl("taint", "node", name, f"{NOT_READY_TAINT}:NoSchedule-", "--field-manager", LIFECYCLE_CONTROLLER)


def add_foreign_taint(kubectl: Kubectl, name: str) -> None:
    taint = f"{FOREIGN_TAINT['key']}={FOREIGN_TAINT['value']}:{FOREIGN_TAINT['effect']}"
    kubectl("taint", "node", name, taint, "--field-manager", FOREIGN_MANAGER)


@contextmanager
def registered_nodes(
    kubectl: Kubectl, stack: Previewed, *, ready: bool = True, only: FailureDomainConfig | None = None
) -> Iterator[list[str]]:
    """Every domain's Node (or `only` one's), registered and Ready unless told otherwise; deleted afterwards."""
    names: list[str] = []
    try:
        for domain in [only] if only else stack.config.failure_domains:
            node = registered_node(domain, stack)
            kubectl.create(node, field_manager=KUBELET)
            names.append(node["metadata"]["name"])
            set_status(kubectl, node["metadata"]["name"], ready=ready, boot_id=f"{domain.name}-boot-1")
        yield names
    finally:
        if names:
            kubectl("delete", "node", *names, "--wait=true")


def labels_and_taints(kubectl: Kubectl, name: str) -> tuple[dict[str, str], list[dict[str, str]], str]:
    """A node's labels, its taints (sorted by key) and its resourceVersion."""
    node = kubectl.json("get", "node", name)
    taints = sorted(node["spec"].get("taints") or [], key=lambda taint: str(taint["key"]))
    return node["metadata"].get("labels") or {}, taints, node["metadata"]["resourceVersion"]
