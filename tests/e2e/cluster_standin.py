"""What the e2e control plane's upstream programs cannot play, while `pulumi up` (tests/e2e/engine_deployed.py) or
`gpu-pool repair` (tests/e2e/test_repair.py) waits on the cluster.

The cluster is tests/e2e/control_plane.py: kube-controller-manager (Deployments, DaemonSets and Jobs, ResourceQuota
status, ServiceAccounts, the not-ready taint, garbage collection), kube-scheduler, KWOK (the kubelets: Node
heartbeats and Leases, pods running, Ready, Jobs' pods completing), Kyverno's admission and background controllers
and the GPU Operator's own controller (tests/e2e/cluster_programs.py). What is left here, a background thread
writing through the API server as each would, is what no upstream program can do without the hardware:
- the Proxmox side of a node (RKE2's agent on the VM the Proxmox stand-in runs): once a domain's VM runs, its Node
  registers with the labels and taint of its cloud-init (tests/e2e/nodes.py), and its kubelet's first report: the
  VM's CPUs and memory, RKE2's kubelet version, a new bootID per VM start. KWOK then keeps it Ready;
- Node Feature Discovery's labels for what its worker would read from the VM's PCI bus and /etc/os-release (the
  card's vendor 10de, Ubuntu 24.04, the kernel): NFD's worker pod runs under KWOK, but there is no card to read;
- the device plugin's report of a GPU node's `nvidia.com/gpu` capacity, once the operator's device-plugin pod on it
  is Ready: its pod runs under KWOK, but there is no card to enumerate. The number is what the real plugin
  advertised on an H200 under the document the node's sharing-profile label names, per card, times its cards
  (tests/e2e/plugin_capacity.py).
What it writes is this status and these labels, never the objects the stack or a controller writes. Before its
thread starts it creates, once, what a lab has before the stack and no program here installs: Rancher Monitoring's
Prometheus Operator CRDs and a Prometheus that loads every rule (no Prometheus Operator runs in this tier), and the
namespaces the stack writes into without creating them (the dashboard's and the rules', the quota namespaces).
Nothing else of the former stand-in is left: kube-controller-manager completes Jobs, rolls out Deployments and
DaemonSets, fills quota status and makes ServiceAccounts; KWOK runs the pods and keeps Nodes Ready; the GPU
Operator's controller creates the operand DaemonSets and moves the driver upgrade state (a test that runs no
operator creates the driver's and the device plugin's DaemonSets as it does: tests/e2e/operand_daemonsets.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.shared.node_marking import GpuNodeMarking
from config.stack import StackConfig
from knowledge.gpu_operator import (
    DEVICE_PLUGIN_APP,
    DEVICE_PLUGIN_CONFIG_LABEL,
    GPU_RESOURCE,
    OPERAND_APP_LABEL,
)
from tests.e2e.kube import Api
from tests.e2e.monitoring_crds import PROMETHEUS_CRD, SERVICE_MONITOR_CRD, rancher_monitoring_prometheus
from tests.e2e.nodes import kubelet_report, nfd_labels, rke2_registration
from tests.e2e.plugin_capacity import advertised
from tests.e2e.proxmox_api import ProxmoxState

SHARING_LABEL = DEVICE_PLUGIN_CONFIG_LABEL
GPU = GPU_RESOURCE
DEVICE_PLUGIN_PODS = f"{OPERAND_APP_LABEL}={DEVICE_PLUGIN_APP}"
PACE_SECONDS = 0.5
# What KWOK's node-initialize Stage reports as the kubelet's version where none is set (`kwok-<version>`).
KWOK_KUBELET = "kwok-"


class ClusterStandIn:
    def __init__(self, api: Api, proxmox: ProxmoxState, stack: StackConfig) -> None:
        self.api = api
        self.proxmox = proxmox
        self.stack = stack
        self.marking = GpuNodeMarking.from_kyverno(stack.kyverno)
        self.boots: dict[str, int] = {}
        self.errors: list[str] = []

    def remove_what_it_played(self) -> None:
        """The Nodes it registered: the session's API server is shared, and later tests register the same Nodes.
        (The pods bound to them go with them: kube-controller-manager's pod garbage collector.)"""
        for domain in self.stack.failure_domains:
            self.api.call("DELETE", f"/api/v1/nodes/{domain.hostname}")

    def node_names(self) -> set[str]:
        return {node["metadata"]["name"] for node in self.api.items("/api/v1/nodes")}

    def step(self) -> None:
        # One list of the Nodes for both halves: a GET per Node and half was most of what the API server of an idle
        # deployed stack served (its /metrics: ten requests a second, docs/engine.md).
        nodes = {node["metadata"]["name"]: node for node in self.api.items("/api/v1/nodes")}
        self._nodes(nodes)
        self._device_plugin(nodes)

    # -------------------------------------------------------------------------------------- RKE2 agent + NFD

    def _nodes(self, nodes: dict[str, dict[str, Any]]) -> None:
        for domain in self.stack.failure_domains:
            vm = self.proxmox.vms.get(domain.vm_id)
            if vm is None or vm.status != "running":
                continue
            name = domain.hostname
            node = nodes.get(name)
            if node is None:
                labels, taints = rke2_registration(domain, self.stack.rke2, self.marking)
                node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels | nfd_labels()}}
                node = self.api.call("POST", "/api/v1/nodes?fieldManager=kubelet", node | {"spec": {"taints": taints}})
            # The kubelet's report of the machine it runs on, once per boot (a new boot, a new bootID). RKE2's kubelet
            # reports RKE2's own version (v1.33.5+rke2r1): the wave's gate waits for exactly that; a test that plays
            # an agent restarted on another release sets it itself. Reported again only where KWOK's first status,
            # written from a Node it had cached before this report, put its own kubelet's in its place.
            report = kubelet_report(domain, self.stack.rke2.version, f"{domain.name}-boot-{vm.starts}")
            info = ((node or {}).get("status") or {}).get("nodeInfo") or {}
            kwok_wrote = str(info.get("kubeletVersion", "")).startswith(KWOK_KUBELET)
            if self.boots.get(name) != vm.starts or kwok_wrote:
                self.api.merge_status(f"/api/v1/nodes/{name}", report)
                self.boots[name] = vm.starts

    # -------------------------------------------------------------------------------------- device plugin

    def _device_plugin(self, nodes: dict[str, dict[str, Any]]) -> None:
        """As of the step's list: a Node registered or reported in this step is seen at the next."""
        namespace = self.stack.gpu_operator.namespace
        running = {
            pod["spec"].get("nodeName")
            for pod in self.api.items(f"/api/v1/namespaces/{namespace}/pods", DEVICE_PLUGIN_PODS)
            if _ready(pod)
        }
        profiles = self._profiles(namespace)
        for domain in self.stack.failure_domains:
            node = nodes.get(domain.hostname)
            if node is None:
                continue
            profile = (node["metadata"].get("labels") or {}).get(SHARING_LABEL)
            slots = str(advertised(profiles, profile, len(domain.cards)) if domain.hostname in running else 0)
            if (node.get("status") or {}).get("allocatable", {}).get(GPU, "0") != slots:
                self.api.merge_status(
                    f"/api/v1/nodes/{domain.hostname}", {"capacity": {GPU: slots}, "allocatable": {GPU: slots}}
                )

    def _profiles(self, namespace: str) -> dict[str, str]:
        """The time-slicing ConfigMap's documents, by profile name (the device plugin's capacity under each comes
        from its recorded run: tests/e2e/plugin_capacity.py)."""
        config = self.api.call("GET", f"/api/v1/namespaces/{namespace}/configmaps/{TIME_SLICING_CONFIGMAP}")
        return dict((config or {}).get("data") or {})


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def ensure_crd(api: Api, crd: dict[str, Any]) -> None:
    """Create a CRD (unless there) and wait until it is Established."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    name = crd["metadata"]["name"]
    api.call("POST", path, crd)
    deadline = time.monotonic() + 60
    while True:
        found = api.call("GET", f"{path}/{name}") or {}
        conditions = (found.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {name} CRD was not Established within 60 s")
        time.sleep(0.2)  # poll interval; bounded by the deadline above


def existing_namespaces(stack: StackConfig) -> list[str]:
    """Namespaces the stack writes into but does not create: a lab has them (Rancher Monitoring, Kubeflow)."""
    quota = list(stack.gpu_quotas.namespaces)
    return sorted({stack.monitoring.dashboard_namespace, stack.monitoring.rules_namespace, *quota})


@contextmanager
def cluster_standin(kubeconfig: Path, proxmox: ProxmoxState, stack: StackConfig) -> Iterator[ClusterStandIn]:
    """The stand-in's thread for the block's duration; an error in it fails the block's end, not silently."""
    standin = ClusterStandIn(Api(kubeconfig), proxmox, stack)
    # What a lab with rancher-monitoring has: the Prometheus Operator's CRDs and a Prometheus loading every rule.
    ensure_crd(standin.api, SERVICE_MONITOR_CRD)
    ensure_crd(standin.api, PROMETHEUS_CRD)
    for name in existing_namespaces(stack):
        standin.api.call(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    rules = stack.monitoring.rules_namespace
    standin.api.call(
        "POST", f"/apis/monitoring.coreos.com/v1/namespaces/{rules}/prometheuses", rancher_monitoring_prometheus(rules)
    )
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            try:
                standin.step()
            except Exception as error:
                standin.errors.append(repr(error))
            stopping.wait(PACE_SECONDS)

    thread = threading.Thread(target=loop, name="cluster-standin", daemon=True)
    thread.start()
    try:
        yield standin
    finally:
        stopping.set()
        thread.join(timeout=30)
        standin.remove_what_it_played()
