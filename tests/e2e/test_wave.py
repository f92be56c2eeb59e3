"""A day-2 wave against the real API server with three registered GPU nodes: the second domain's gate fails, the
first domain is back in service and the third was never touched (no drain, no cordon, no new state)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.rollout import ROLLOUT_ANNOTATION, WAVE_CORDON_ANNOTATION
from knowledge.gpu_operator import DRIVER_POD_SELECTOR
from offline.diff import _deployed, deployed_from
from offline.runner import read_stack_file
from tests.e2e.kube import Kubectl
from tests.e2e.match_conditions import ensure_pod_namespace
from tests.e2e.nodes import KUBELET, registered_nodes
from tests.e2e.stacks import Previewed, run_preview
from tests.e2e.steps import StepRunner
from tests.e2e.wave_engine import run_wave
from tests.ssh_keys import TEST_PUBLIC_KEY

OLD, NEW = "v1.33.5+rke2r1", "v1.33.6+rke2r1"
KEY = TEST_PUBLIC_KEY
QUICK = {"GPU_POOL_POLL_SECONDS": "0.1", "GPU_POOL_PROGRESS_SECONDS": "0", "TIMEOUT_MINUTES": "0.05"}
WAVE_STEPS = ("-wave-drain", "-wave-gate", "-rollout")


@pytest.fixture(scope="module")
def wave_stack(tmp_path_factory: pytest.TempPathFactory) -> Previewed:
    """prod's RKE2 patch bump, planned as `pulumi preview` plans it from Nodes rolled out to the earlier file."""
    before = copy.deepcopy(read_stack_file("prod"))
    for domain in before["gpu-pool:failureDomains"]:
        domain["sshAuthorizedKeys"] = [KEY]
    after = copy.deepcopy(before)
    after["gpu-pool:rke2"]["version"] = NEW
    with _deployed(deployed_from(before)):
        return run_preview("prod", after, tmp_path_factory.mktemp("wave"))


def node_status(kubectl: Kubectl, name: str, *, kubelet: str, gpus: int) -> None:
    patch = {"status": {"nodeInfo": {"kubeletVersion": kubelet}, "allocatable": {"nvidia.com/gpu": str(gpus)}}}
    kubectl(
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=merge",
        "--field-manager",
        KUBELET,
        "-p",
        json.dumps(patch),
    )


@pytest.fixture
def pool(kubectl: Kubectl, wave_stack: Previewed, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Three Nodes rolled out to the earlier file (annotation, kubelet), each with its driver pod Ready on the pinned
    driver, owned by the driver DaemonSet as the operator creates it (so a drain leaves it alone)."""
    cfg = wave_stack.config
    namespace = cfg.gpu_operator.namespace
    ensure_pod_namespace(kubectl, namespace)
    app = DRIVER_POD_SELECTOR.split("=", 1)[1]
    image = f"nvcr.io/nvidia/driver:{cfg.gpu_operator.driver_version}-ubuntu24.04"
    daemonset: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "nvidia-driver-ctr", "image": image}]},
            },
        },
    }
    kubectl.create(daemonset, field_manager="gpu-operator")
    uid = kubectl.json("-n", namespace, "get", "daemonset", app)["metadata"]["uid"]
    earlier = deployed_from(read_stack_file("prod"))
    hosts = {d.name: d.hostname for d in cfg.failure_domains}
    try:
        with registered_nodes(kubectl, wave_stack):
            for domain in cfg.failure_domains:
                state = json.dumps(earlier[domain.name]["rollout"], sort_keys=True, separators=(",", ":"))
                kubectl("annotate", "node", domain.hostname, f"{ROLLOUT_ANNOTATION}={state}")
                node_status(kubectl, domain.hostname, kubelet=OLD, gpus=cfg.slots(domain))
                pod: dict[str, Any] = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{app}-{domain.name}",
                        "namespace": namespace,
                        "labels": {"app": app},
                        "ownerReferences": [
                            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": app, "uid": uid, "controller": True}
                        ],
                    },
                    "spec": {
                        "nodeName": domain.hostname,
                        "containers": [{"name": "nvidia-driver-ctr", "image": image}],
                    },
                }
                kubectl.create(pod, field_manager="kube-controller-manager")
                current = kubectl.json("-n", namespace, "get", "pod", pod["metadata"]["name"])
                current["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
                kubectl("replace", "--subresource=status", "-f", "-", stdin=json.dumps(current))
            yield hosts
    finally:
        # No kubelet here confirms a pod's end: removed at once, so no later test sees them Terminating.
        kubectl(
            "-n", namespace, "delete", "pods", "-l", f"app={app}", "--ignore-not-found", "--grace-period=0", "--force"
        )
        kubectl("-n", namespace, "delete", "daemonset", app, "--ignore-not-found", "--wait=false")


def test_a_wave_whose_second_domain_fails_its_gate_leaves_the_first_serving_and_the_third_untouched(
    wave_stack: Previewed,
    step_runner_for: Callable[[Previewed], StepRunner],
    kubectl: Kubectl,
    pool: dict[str, str],
) -> None:
    runner = step_runner_for(wave_stack)
    upgraded: list[str] = []

    def installer(domain: str, comes_back: bool) -> Callable[[], bool]:
        """The VM's side of `<domain>-rke2-upgrade`: the agent restarts on the new kubelet, or (dc2) never does."""

        def play() -> bool:
            upgraded.append(domain)
            if comes_back:
                node_status(
                    kubectl,
                    pool[domain],
                    kubelet=NEW,
                    gpus=wave_stack.config.slots(
                        next(d for d in wave_stack.config.failure_domains if d.name == domain)
                    ),
                )
            return True

        return play

    played = {f"{d}-rke2-upgrade": installer(d, comes_back=d != "dc2") for d in pool}
    played |= {f"{d}-rke2-login": lambda: True for d in pool}
    run = run_wave(runner, lambda name: name.endswith(WAVE_STEPS), played, **QUICK)

    assert run.order == [
        "dc1-rke2-login", "dc1-wave-drain", "dc1-rke2-upgrade", "dc1-wave-gate", "dc1-rollout",
        "dc2-rke2-login", "dc2-wave-drain", "dc2-rke2-upgrade", "dc2-wave-gate",
    ]  # fmt: skip
    assert run.outcomes["dc2-wave-gate"] == "failed"
    assert {run.outcomes[f"dc3-{s}"] for s in ("rke2-login", "wave-drain", "rke2-upgrade", "wave-gate", "rollout")} == {
        "not started"
    }
    assert run.outcomes["dc2-rollout"] == "not started"
    gate = run.output["dc2-wave-gate"]
    assert f"is not Ready on kubelet {NEW}" in gate.stderr
    assert "the wave stopped at domain dc2 (gate gpu-ready)" in gate.stderr
    assert "`pulumi up` resumes the wave at dc2" in gate.stderr
    assert upgraded == ["dc1", "dc2"]

    nodes = {name: kubectl.json("get", "node", host) for name, host in pool.items()}
    annotations = {name: node["metadata"].get("annotations") or {} for name, node in nodes.items()}
    # dc1: drained, upgraded, gated, uncordoned, and its new state recorded.
    assert not nodes["dc1"]["spec"].get("unschedulable")
    assert WAVE_CORDON_ANNOTATION not in annotations["dc1"]
    assert json.loads(annotations["dc1"][ROLLOUT_ANNOTATION])["rke2"] == NEW
    # dc2: stays cordoned (marked as the wave's), still on the earlier state: the next `up` resumes here.
    assert nodes["dc2"]["spec"].get("unschedulable") is True
    assert annotations["dc2"][WAVE_CORDON_ANNOTATION] == "dc2"
    assert json.loads(annotations["dc2"][ROLLOUT_ANNOTATION])["rke2"] == OLD
    # dc3: never drained or cordoned, still serving on the earlier state.
    assert not nodes["dc3"]["spec"].get("unschedulable")
    assert WAVE_CORDON_ANNOTATION not in annotations["dc3"]
    assert json.loads(annotations["dc3"][ROLLOUT_ANNOTATION])["rke2"] == OLD
    assert nodes["dc3"]["status"]["nodeInfo"]["kubeletVersion"] == OLD
