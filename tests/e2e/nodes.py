"""GPU worker Nodes as RKE2 registers them, from the domain's own cloud-init: there is no kubelet here."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from components.gpu_failure_domain.cloud_init import rke2_agent_config
from components.shared.node_marking import GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from config.rke2 import Rke2Config
from knowledge.gpu_operator import NFD_NVIDIA_PCI_LABEL
from tests.e2e.kube import Kubectl, rejections
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


# The VM's operating system, as NFD reads /etc/os-release on the Ubuntu 24.04 cloud image, and the kernel it boots.
OS_ID, OS_VERSION = "ubuntu", "24.04"
KERNEL = "6.8.0-51-generic"
# What RKE2's containerd reports as the kubelet's container runtime.
CONTAINER_RUNTIME = "containerd://2.1.4-k3s2"


def nfd_labels() -> dict[str, str]:
    """The labels NFD's worker sets on a VM with the card passed through (`pci-<vendor>.present`, os_release and
    kernel features), which the GPU Operator selects its GPU nodes and driver image by."""
    major, minor = OS_VERSION.split(".")
    return {
        NFD_NVIDIA_PCI_LABEL: "true",
        "feature.node.kubernetes.io/system-os_release.ID": OS_ID,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": OS_VERSION,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": major,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": minor,
        "feature.node.kubernetes.io/kernel-version.full": KERNEL,
    }


def rke2_registration(
    domain: FailureDomainConfig, rke2: Rke2Config, marking: GpuNodeMarking
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The labels and taints a domain's Node registers with: the kubelet's, and RKE2's from the cloud-init's
    /etc/rancher/rke2/config.yaml (node-label, node-taint)."""
    agent = rke2_agent_config(domain, rke2, "unused-token", marking)
    labels = kubelet_labels(agent["node-name"]) | dict(label.split("=", 1) for label in agent["node-label"])
    return labels, [parse_taint(taint) for taint in agent["node-taint"]]


def kubelet_report(domain: FailureDomainConfig, kubelet_version: str, boot_id: str) -> dict[str, Any]:
    """The kubelet's status report of the VM it runs on: its CPUs and memory, its versions and boot."""
    machine = {"cpu": str(domain.cores), "memory": f"{domain.memory_mib}Mi", "pods": "110"}
    info = {
        "bootID": boot_id,
        "kernelVersion": KERNEL,
        "kubeletVersion": kubelet_version,
        "containerRuntimeVersion": CONTAINER_RUNTIME,
        "osImage": f"Ubuntu {OS_VERSION} LTS",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }
    return {"capacity": machine, "allocatable": machine, "nodeInfo": info}


def parse_taint(text: str) -> dict[str, str]:
    """`key=value:Effect`, RKE2's `node-taint` form, as a Node's spec.taints entry."""
    key_value, _, effect = text.rpartition(":")
    key, _, value = key_value.partition("=")
    return {"key": key, "value": value, "effect": effect}


def registered_node(domain: FailureDomainConfig, stack: Previewed) -> dict[str, Any]:
    """The Node RKE2's agent registers from /etc/rancher/rke2/config.yaml (node-name, node-label, node-taint)."""
    labels, taints = rke2_registration(domain, stack.config.rke2, stack.marking)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": domain.hostname, "labels": labels},
        "spec": {"taints": taints},
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


def rejected_manifests(kubectl: Kubectl, stack: Previewed) -> list[str]:
    """What the API server rejects of the stack's manifests, each as `pulumi up` would send it (server-side apply,
    dry run), with its Nodes registered as RKE2 registers them (Nodes are patched, never created)."""
    manifests = stack.manifests()
    namespaces = [path for path in manifests if path.name.startswith("namespace-")]
    with registered_nodes(kubectl, stack):
        # The stack's Namespaces as creates (unless an earlier test made them), then for real: what lives in them
        # cannot be dry-run without them.
        results = [(path.name, kubectl.server_side_apply(path, dry_run=True)) for path in namespaces]
        kubectl.create_namespaces(manifests)
        others = [path for path in manifests if path not in namespaces]
        results += [(path.name, kubectl.server_side_apply(path, dry_run=True)) for path in others]
    return rejections(results)


def labels_and_taints(kubectl: Kubectl, name: str) -> tuple[dict[str, str], list[dict[str, str]], str]:
    """A node's labels, its taints (sorted by key) and its resourceVersion."""
    node = kubectl.json("get", "node", name)
    taints = sorted(node["spec"].get("taints") or [], key=lambda taint: str(taint["key"]))
    return node["metadata"].get("labels") or {}, taints, node["metadata"]["resourceVersion"]
