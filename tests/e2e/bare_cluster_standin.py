"""The former all-in-one cluster stand-in, kept for `gpu-pool repair`'s tests alone (tests/e2e/test_repair.py, issue
30), which run on the bare e2e API server and were written against it. Not yet ported to the control plane
(tests/e2e/control_plane.py), where kube-controller-manager, KWOK and the GPU Operator's controller do these parts
(tests/e2e/cluster_standin.py keeps only what no upstream program can do there). Every other e2e test uses the
control plane; this module goes once test_repair.py does.

What the cluster's own agents would do while `pulumi up` waits on them: there is no kubelet or controller here.

A background thread plays, through the real API server (status subresources, as they write it):
- RKE2's agent and the kubelet: once a domain's VM runs in the Proxmox stand-in, its Node registers with the
  labels and taint of its cloud-init (tests/e2e/nodes.py) and reports Ready on RKE2's kubelet version, with a
  new bootID per VM start;
- the Deployment controller: every Deployment's status says its replicas are available (the chart's operator,
  which the `gpu-operator-ready` step waits for with `kubectl rollout status`);
- the GPU Operator: a driver DaemonSet and, on every GPU node, its pod running the ClusterPolicy's driver
  version, Ready, replaced by one on the new version when the ClusterPolicy's driver changes; the device
  plugin: the node's allocatable nvidia.com/gpu as the real plugin advertised it on an H200 under the document
  its sharing-profile label names, per card, times its cards (tests/e2e/plugin_capacity.py);
- the ResourceQuota controller: each quota's status says its limits, nothing used;
- the Job controller: every Job completes (the smoke test, the chart's hooks);
- the ServiceAccount controller: the operator namespace's `default` account, for the driver pods' admission.
What it fakes is this status, never the objects the stack itself writes.
"""

from __future__ import annotations

import datetime
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from components.gpu_failure_domain.cloud_init import rke2_agent_config
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.shared.node_marking import GpuNodeMarking
from config.stack import StackConfig
from tests.e2e.monitoring_crds import PROMETHEUS_CRD, SERVICE_MONITOR_CRD, rancher_monitoring_prometheus
from tests.e2e.nodes import NOT_READY_TAINT, kubelet_labels, parse_taint
from tests.e2e.plugin_capacity import advertised
from tests.e2e.proxmox_api import ProxmoxState

DRIVER_LABEL = {"app": "nvidia-driver-daemonset"}
DRIVER_DAEMONSET = "nvidia-driver-daemonset"
SHARING_LABEL = "nvidia.com/device-plugin.config"
GPU = "nvidia.com/gpu"
PACE_SECONDS = 0.5
RETRIES_429 = 10


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Api:
    """The API server over HTTPS with the kubeconfig's token: lighter than a kubectl per call on busy cores."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.url = cluster["server"]
        self.token = config["users"][0]["user"]["token"]
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": content_type}
        for _attempt in range(RETRIES_429):
            request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                    return json.load(response)
            except urllib.error.HTTPError as error:
                if error.code in (404, 409):
                    return None
                if error.code == 429:
                    # The server asks for a retry ("storage is (re)initializing" while a CRD is being set up),
                    # after the seconds it names: a controller waits as told, a bounded number of times.
                    time.sleep(float(error.headers.get("Retry-After") or 1))
                    continue
                raise AssertionError(f"{method} {path}: {error.code} {error.read().decode()[:500]}") from None
        raise AssertionError(f"{method} {path}: still 429 after {RETRIES_429} tries")

    def items(self, path: str) -> list[dict[str, Any]]:
        found = self.call("GET", path)
        return list((found or {}).get("items") or [])

    def merge_status(self, path: str, status: dict[str, Any]) -> None:
        self.call("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")


class ClusterStandIn:
    def __init__(self, api: Api, proxmox: ProxmoxState, stack: StackConfig) -> None:
        self.api = api
        self.proxmox = proxmox
        self.stack = stack
        self.marking = GpuNodeMarking.from_kyverno(stack.kyverno)
        self.boots: dict[str, int] = {}
        self.errors: list[str] = []

    def remove_what_it_played(self) -> None:
        """The Nodes and driver pods it registered, and the driver DaemonSet: the session's API server is shared,
        and later tests (tests/e2e/test_wave.py) register the same Nodes and create the same DaemonSet."""
        namespace = self.stack.gpu_operator.namespace
        for domain in self.stack.failure_domains:
            pod = f"/api/v1/namespaces/{namespace}/pods/{DRIVER_DAEMONSET}-{domain.hostname}?gracePeriodSeconds=0"
            self.api.call("DELETE", pod)
            self.api.call("DELETE", f"/api/v1/nodes/{domain.hostname}")
        self.api.call("DELETE", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{DRIVER_DAEMONSET}")

    def node_names(self) -> set[str]:
        return {node["metadata"]["name"] for node in self.api.items("/api/v1/nodes")}

    def step(self) -> None:
        self._nodes()
        self._deployments()
        self._quotas()
        self._driver()
        self._jobs()

    # -------------------------------------------------------------------------------------- RKE2 + kubelet

    def _nodes(self) -> None:
        for domain in self.stack.failure_domains:
            vm = self.proxmox.vms.get(domain.vm_id)
            if vm is None or vm.status != "running":
                continue
            name = domain.hostname
            if self.boots.get(name) == vm.starts:
                continue
            if self.api.call("GET", f"/api/v1/nodes/{name}") is None:
                agent = rke2_agent_config(domain, self.stack.rke2, "unused", self.marking)
                labels = kubelet_labels(name) | dict(label.split("=", 1) for label in agent["node-label"])
                taints = [parse_taint(t) for t in agent["node-taint"]]
                node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
                self.api.call("POST", "/api/v1/nodes?fieldManager=kubelet", node | {"spec": {"taints": taints}})
            ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is ready"}
            ready |= {"lastHeartbeatTime": _now(), "lastTransitionTime": _now()}
            # RKE2's kubelet reports RKE2's own version (v1.33.5+rke2r1): the wave's gate waits for exactly that.
            info = {"bootID": f"{domain.name}-boot-{vm.starts}", "kernelVersion": "6.8.0-51-generic"}
            info["kubeletVersion"] = self.stack.rke2.version
            self.api.merge_status(f"/api/v1/nodes/{name}", {"conditions": [ready], "nodeInfo": info})
            # The node lifecycle controller lifts the API server's not-ready taint once the node is Ready.
            current = self.api.call("GET", f"/api/v1/nodes/{name}")
            kept = [t for t in current["spec"].get("taints") or [] if t["key"] != NOT_READY_TAINT]
            self.api.call(
                "PATCH",
                f"/api/v1/nodes/{name}",
                {"spec": {"taints": kept or None}},
                "application/merge-patch+json",
            )
            self.boots[name] = vm.starts

    # -------------------------------------------------------------------------------------- controllers

    def _deployments(self) -> None:
        for deployment in self.api.items("/apis/apps/v1/deployments"):
            meta, status = deployment["metadata"], deployment.get("status") or {}
            if status.get("observedGeneration") == meta["generation"]:
                continue
            replicas = deployment["spec"].get("replicas", 1)
            available = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
            available |= {"lastUpdateTime": _now(), "lastTransitionTime": _now(), "message": "stand-in"}
            self.api.merge_status(
                f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}",
                {
                    "observedGeneration": meta["generation"],
                    "replicas": replicas,
                    "updatedReplicas": replicas,
                    "readyReplicas": replicas,
                    "availableReplicas": replicas,
                    "conditions": [available],
                },
            )

    def _quotas(self) -> None:
        """The ResourceQuota controller: status.hard as the spec says, nothing used (pulumi-kubernetes awaits it)."""
        for quota in self.api.items("/api/v1/resourcequotas"):
            meta, hard = quota["metadata"], quota["spec"].get("hard") or {}
            if (quota.get("status") or {}).get("hard") == hard:
                continue
            used = {key: "0" for key in hard}
            path = f"/api/v1/namespaces/{meta['namespace']}/resourcequotas/{meta['name']}"
            self.api.merge_status(path, {"hard": hard, "used": used})

    def _jobs(self) -> None:
        for job in self.api.items("/apis/batch/v1/jobs"):
            meta, status = job["metadata"], job.get("status") or {}
            if any(c["type"] == "Complete" for c in status.get("conditions") or []):
                continue
            now = _now()
            done = {"status": "True", "lastProbeTime": now, "lastTransitionTime": now, "reason": "CompletionsReached"}
            self.api.merge_status(
                f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}",
                {
                    "startTime": status.get("startTime") or now,
                    "completionTime": now,
                    "succeeded": 1,
                    "ready": 0,
                    "terminating": 0,
                    "uncountedTerminatedPods": {},
                    "conditions": [
                        done | {"type": "SuccessCriteriaMet", "message": "Reached expected number of succeeded pods"},
                        done | {"type": "Complete", "message": "Reached expected number of succeeded pods"},
                    ],
                },
            )

    # -------------------------------------------------------------------------------------- GPU Operator

    def _driver(self) -> None:
        policies = self.api.items("/apis/nvidia.com/v1/clusterpolicies")
        if not policies:
            return
        driver = policies[0]["spec"].get("driver") or {}
        image = f"{driver.get('repository', 'nvcr.io/nvidia')}/{driver.get('image', 'driver')}:"
        image += f"{driver.get('version', 'unknown')}-ubuntu24.04"
        namespace = self.stack.gpu_operator.namespace
        # The ServiceAccount controller's part: a namespace's `default` account, which a pod's admission needs.
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        self.api.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", account)
        base = f"/apis/apps/v1/namespaces/{namespace}/daemonsets"
        daemonset = self.api.call("GET", f"{base}/{DRIVER_DAEMONSET}")
        if daemonset is None:
            template = {"metadata": {"labels": DRIVER_LABEL}, "spec": {"containers": [_container(image)]}}
            body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": DRIVER_DAEMONSET}}
            body["spec"] = {"selector": {"matchLabels": DRIVER_LABEL}, "template": template}
            daemonset = self.api.call("POST", f"{base}?fieldManager=gpu-operator", body)
        profiles = self._profiles(namespace)
        for domain in self.stack.failure_domains:
            node = self.api.call("GET", f"/api/v1/nodes/{domain.hostname}")
            if node is None:
                continue
            self._driver_pod(namespace, domain.hostname, image, daemonset)
            profile = (node["metadata"].get("labels") or {}).get(SHARING_LABEL)
            slots = str(advertised(profiles, profile, len(domain.cards)))
            if (node.get("status") or {}).get("allocatable", {}).get(GPU) != slots:
                self.api.merge_status(
                    f"/api/v1/nodes/{domain.hostname}", {"capacity": {GPU: slots}, "allocatable": {GPU: slots}}
                )

    def _profiles(self, namespace: str) -> dict[str, str]:
        """The time-slicing ConfigMap's documents, by profile name (the device plugin's capacity under each comes
        from its recorded run: tests/e2e/plugin_capacity.py)."""
        config = self.api.call("GET", f"/api/v1/namespaces/{namespace}/configmaps/{TIME_SLICING_CONFIGMAP}")
        return dict((config or {}).get("data") or {})

    def _driver_pod(self, namespace: str, node: str, image: str, daemonset: dict[str, Any]) -> None:
        name = f"{DRIVER_DAEMONSET}-{node}"
        path = f"/api/v1/namespaces/{namespace}/pods"
        pod = self.api.call("GET", f"{path}/{name}")
        if pod is not None and pod["spec"]["containers"][0]["image"] != image:
            # The operator's upgrade controller on a driver change: the old pod goes (the DaemonSet is OnDelete)
            # and one on the new driver takes its place, on the next pass.
            self.api.call("DELETE", f"{path}/{name}?gracePeriodSeconds=0")
            return
        if pod is None:
            owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": DRIVER_DAEMONSET, "controller": True}
            owner["uid"] = daemonset["metadata"]["uid"]
            meta = {"name": name, "labels": DRIVER_LABEL, "ownerReferences": [owner]}
            spec = {"nodeName": node, "containers": [_container(image)], "tolerations": [{"operator": "Exists"}]}
            pod = self.api.call("POST", path, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        if pod and (pod.get("status") or {}).get("phase") != "Running":
            ready = {"type": "Ready", "status": "True", "lastTransitionTime": _now()}
            self.api.merge_status(f"{path}/{name}", {"phase": "Running", "conditions": [ready]})


def _container(image: str) -> dict[str, Any]:
    return {"name": "nvidia-driver-ctr", "image": image}


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
