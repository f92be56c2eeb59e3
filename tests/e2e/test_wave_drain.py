"""A wave's drain meets a PodDisruptionBudget on a cluster whose scheduler, controllers and kubelets are upstream's.

On the session's control plane (tests/e2e/control_plane.py): prod's three GPU Nodes as RKE2 registers them, run by
KWOK; a training Deployment whose one replica kube-scheduler placed on dc1, protected by a PDB that allows no
disruption. The wave's real `dc1-wave-drain` command (from the preview of an RKE2 bump, as `pulumi up` runs it)
cordons dc1 and drains it through the eviction API: the API server refuses the eviction (the disruption controller
says no disruption is allowed) and the drain keeps retrying, the pod still serving. Once the team scales the
trainer up, kube-scheduler places the new replica on another GPU node (dc1 is cordoned), the budget allows one
disruption, the next eviction passes, the ReplicaSet replaces the evicted pod elsewhere, and the drain ends.
"""

from __future__ import annotations

import copy
import functools
import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from components.gpu_failure_domain.observed import WAVE_CORDON_ANNOTATION
from offline.diff import observing, settled_nodes
from offline.runner import read_stack_file
from tests.e2e.control_plane import ControlPlane, eventually, node_ready, register_node
from tests.e2e.kube import Kubectl
from tests.e2e.nodes import kubelet_report, nfd_labels, rke2_registration
from tests.e2e.servers import Tools
from tests.e2e.stacks import Previewed, run_preview
from tests.e2e.steps import StepRunner
from tests.ssh_keys import TEST_PUBLIC_KEY

NAMESPACE = "e2e-training"
NEW_RKE2 = "v1.33.6+rke2r1"
KEY = TEST_PUBLIC_KEY
REFUSED = "Cannot evict pod as it would violate the pod's disruption budget"
SECONDS = 120


@pytest.fixture(scope="module")
def drain_stack(tmp_path_factory: pytest.TempPathFactory) -> Previewed:
    """prod's RKE2 patch bump as `pulumi preview` plans it from Nodes rolled out to the earlier file: a wave."""
    before = copy.deepcopy(read_stack_file("prod"))
    for domain in before["gpu-pool:failureDomains"]:
        domain["sshAuthorizedKeys"] = [KEY]
    after = copy.deepcopy(before)
    after["gpu-pool:rke2"]["version"] = NEW_RKE2
    with observing(settled_nodes(before)):
        return run_preview("prod", after, tmp_path_factory.mktemp("drain"))


@pytest.fixture(scope="module")
def pool(control_plane: ControlPlane, drain_stack: Previewed) -> Iterator[dict[str, str]]:
    """prod's GPU Nodes on the control plane, Ready (KWOK), with a trainer on dc1 behind a PDB."""
    kubectl = control_plane.kubectl
    cfg = drain_stack.config
    hosts = {d.name: d.hostname for d in cfg.failure_domains}
    try:
        for domain in cfg.failure_domains:
            labels, taints = rke2_registration(domain, cfg.rke2, drain_stack.marking)
            report = kubelet_report(domain, cfg.rke2.version, f"{domain.name}-boot-1")
            report["capacity"] |= {"nvidia.com/gpu": str(cfg.slots(domain))}
            report["allocatable"] |= {"nvidia.com/gpu": str(cfg.slots(domain))}
            register_node(kubectl, domain.hostname, labels | nfd_labels(), taints, report)
        for host in hosts.values():
            eventually(f"{host} Ready", functools.partial(node_ready, kubectl, host))
        kubectl.ensure_namespace(NAMESPACE)
        eventually(
            "the namespace's ServiceAccount",
            lambda: kubectl.run("-n", NAMESPACE, "get", "sa", "default").returncode == 0,
        )
        kubectl.create(trainer(drain_stack, hosts["dc1"]), field_manager="e2e")
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "trainer", "namespace": NAMESPACE},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "trainer"}}},
        }
        kubectl.create(budget, field_manager="e2e")
        yield hosts
    finally:
        kubectl.run("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s")
        kubectl.run("delete", "node", *hosts.values(), "--ignore-not-found")


def trainer(stack: Previewed, prefer: str) -> dict[str, Any]:
    """One GPU replica that tolerates the GPU taint (as Kyverno would add), preferring `prefer`."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "tolerations": [stack.marking.toleration],
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "preference": {
                                        "matchExpressions": [
                                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [prefer]}
                                        ]
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def trainer_pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    pods = kubectl.json("-n", NAMESPACE, "get", "pods", "-l", "app=trainer")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def running_on(kubectl: Kubectl) -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in trainer_pods(kubectl) if p["status"].get("phase") == "Running")


def test_the_wave_drain_waits_on_a_blocking_pdb_and_finishes_once_it_allows_the_eviction(
    control_plane: ControlPlane, e2e_tools: Tools, drain_stack: Previewed, pool: dict[str, str]
) -> None:
    kubectl = control_plane.kubectl
    assert eventually("the trainer running", lambda: running_on(kubectl)) == [pool["dc1"]], "placed on dc1"
    runner = StepRunner(drain_stack, e2e_tools, kubectl, control_plane.kubeconfig)
    drain = runner.start("dc1-wave-drain")
    lines: queue.Queue[str] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        for line in drain.stdout or []:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()

    def read_until(text: str) -> bool:
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            try:
                output.append(lines.get(timeout=1))
            except queue.Empty:
                if drain.poll() is not None:
                    return any(text in line for line in output)
                continue
            if text in output[-1]:
                return True
        return False

    try:
        assert read_until(REFUSED), "".join(output)
        # Refused, retrying: the node is cordoned by the wave, the trainer still serves on it.
        node = kubectl.json("get", "node", pool["dc1"])
        assert node["spec"].get("unschedulable") is True
        assert node["metadata"]["annotations"][WAVE_CORDON_ANNOTATION] == "dc1"
        assert running_on(kubectl) == [pool["dc1"]]
        assert drain.poll() is None, "the drain waits, it does not give up"
        # The team scales up: the new replica lands on another GPU node, and the budget allows one eviction.
        kubectl("-n", NAMESPACE, "scale", "deployment", "trainer", "--replicas=2")
        exit_code = drain.wait(timeout=SECONDS)
        read_until("drained")
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
    text = "".join(output)
    assert exit_code == 0, text
    assert f"node/{pool['dc1']} drained" in text
    assert "evicting pod" in text and REFUSED in text
    placed = eventually("both replicas running off dc1", lambda: (on := running_on(kubectl)) and len(on) == 2 and on)
    assert pool["dc1"] not in placed and set(placed) <= {pool["dc2"], pool["dc3"]}
    budget = json.loads(kubectl("-n", NAMESPACE, "get", "pdb", "trainer", "-o", "json"))
    assert budget["status"]["currentHealthy"] >= 1
