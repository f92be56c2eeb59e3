"""Day-2 waves on the e2e control plane (tests/e2e/control_plane.py), their kubectl steps run for real: prod's three
GPU Nodes as RKE2 registers them, kept Ready by KWOK; each with its driver pod, which kube-controller-manager's
DaemonSet controller made from a driver DaemonSet as the operator creates it and KWOK runs Ready; a drain goes
through the eviction API:
- the second domain's gate fails: the first is back in service, the third never touched;
- the first domain's gate fails after its agent came back on the new release (FIELD-REVIEW-4 WRONG-1): the next
  plan, read from the Nodes as `pulumi preview` reads them, resumes dc1's turn, whose gate runs again before dc1 is
  uncordoned, and dc2 is drained only after;
- a sharing edit whose gate fails, then reverted (WRONG-2): dc1 is gated and uncordoned, not left cordoned.
What needs a VM (the RKE2 installer over SSH, the restarted agent's report) is played by the test."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.observed import (
    ROLLOUT_ANNOTATION,
    WAVE_CORDON_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
)
from knowledge.gpu_operator import DRIVER_APP
from offline.diff import observing, settled_nodes
from offline.runner import read_stack_file
from tests.e2e.control_plane import ControlPlane, eventually, node_ready, register_node
from tests.e2e.kube import Kubectl
from tests.e2e.nodes import KUBELET, kubelet_report, nfd_labels, rke2_registration
from tests.e2e.operand_daemonsets import driver_daemonset, ready_hosts
from tests.e2e.servers import Tools
from tests.e2e.stacks import Previewed, run_preview
from tests.e2e.steps import StepRunner
from tests.e2e.wave_engine import run_wave
from tests.ssh_keys import TEST_PUBLIC_KEY

OLD, NEW = "v1.33.5+rke2r1", "v1.33.6+rke2r1"
KEY = TEST_PUBLIC_KEY
QUICK = {"GPU_POOL_POLL_SECONDS": "0.1", "GPU_POOL_PROGRESS_SECONDS": "0", "TIMEOUT_MINUTES": "0.05"}
WAVE_STEPS = ("-wave-drain", "-device-plugin-restart", "-wave-gate", "-rollout")


def base() -> dict[str, Any]:
    config = copy.deepcopy(read_stack_file("prod"))
    for domain in config["gpu-pool:failureDomains"]:
        domain["sshAuthorizedKeys"] = [KEY]
    return config


def rke2_bump() -> dict[str, Any]:
    config = base()
    config["gpu-pool:rke2"]["version"] = NEW
    return config


def planned(config: dict[str, Any], nodes: dict[str, Any], work: Path) -> Previewed:
    """The preview of `config` against these Nodes, as `pulumi preview` plans it from the cluster."""
    with observing(nodes):
        return run_preview("prod", config, work)


@pytest.fixture(scope="module")
def wave_stack(tmp_path_factory: pytest.TempPathFactory) -> Previewed:
    """prod's RKE2 patch bump, planned as `pulumi preview` plans it from Nodes rolled out to the earlier file."""
    return planned(rke2_bump(), settled_nodes(base()), tmp_path_factory.mktemp("wave"))


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


@pytest.fixture(scope="module")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    """This module's cluster: the session's control plane, not the bare API server."""
    return control_plane.kubectl


@pytest.fixture(scope="module")
def step_runner_for(e2e_tools: Tools, control_plane: ControlPlane) -> Callable[[Previewed], StepRunner]:
    """prod names no kubeconfig (gpu-pool:kubernetes): its steps use the ambient one, the control plane's."""

    def runner(stack: Previewed) -> StepRunner:
        return StepRunner(stack, e2e_tools, control_plane.kubectl, control_plane.kubeconfig)

    return runner


@pytest.fixture
def pool(kubectl: Kubectl, wave_stack: Previewed) -> Iterator[dict[str, str]]:
    """Three Nodes rolled out to the earlier file (annotation, kubelet), Ready (KWOK), each with its driver pod Ready
    on the pinned driver (the DaemonSet controller's, run by KWOK): a drain leaves it alone."""
    cfg = wave_stack.config
    namespace = cfg.gpu_operator.namespace
    earlier = {
        item["metadata"]["labels"]["topology.kubernetes.io/zone"]: item["metadata"]["annotations"][ROLLOUT_ANNOTATION]
        for item in settled_nodes(read_stack_file("prod"))["items"]
    }
    hosts = {d.name: d.hostname for d in cfg.failure_domains}
    try:
        for domain in cfg.failure_domains:
            labels, taints = rke2_registration(domain, cfg.rke2, wave_stack.marking)
            register_node(
                kubectl, domain.hostname, labels | nfd_labels(), taints, kubelet_report(domain, OLD, "boot-1")
            )
            kubectl("annotate", "node", domain.hostname, f"{ROLLOUT_ANNOTATION}={earlier[domain.name]}")
        for domain in cfg.failure_domains:
            eventually(f"{domain.hostname} Ready", functools.partial(node_ready, kubectl, domain.hostname))
            # After KWOK's first status (it may have written its own kubelet's): the agent's report on the old release.
            node_status(kubectl, domain.hostname, kubelet=OLD, gpus=cfg.slots(domain))
        kubectl.ensure_namespace(namespace)
        kubectl.create(driver_daemonset(cfg, wave_stack.marking, list(hosts.values())), field_manager="gpu-operator")
        eventually(
            "a Ready driver pod on every GPU node",
            lambda: ready_hosts(kubectl, namespace) == set(hosts.values()),
        )
        yield hosts
    finally:
        kubectl.run("-n", namespace, "delete", "daemonset", DRIVER_APP, "--ignore-not-found", "--cascade=foreground")
        kubectl.run("delete", "node", *hosts.values(), "--ignore-not-found")
        # prod's own `up` (the engine tests, later) creates this namespace.
        kubectl.run("delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=120s")


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


def plays_the_vm(kubectl: Kubectl, stack: Previewed, pool: dict[str, str], gpus: dict[str, int]) -> dict[str, Any]:
    """The VM's side of each domain's remote steps: the login works, and the installer restarts the agent on the new
    release with `gpus[domain]` GPUs advertised (0: the new release broke the node's GPU stack)."""
    by_name = {d.name: d for d in stack.config.failure_domains}

    def installer(domain: str) -> Callable[[], bool]:
        def play() -> bool:
            node_status(kubectl, pool[domain], kubelet=NEW, gpus=gpus.get(domain, stack.config.slots(by_name[domain])))
            return True

        return play

    return {f"{d}-rke2-upgrade": installer(d) for d in pool} | {f"{d}-rke2-login": lambda: True for d in pool}


def turn_steps(stack: Previewed, domain: str) -> list[str]:
    """The domain's turn as the program exported it (the `wave` output), in plan order."""
    turn = stack.plan["outputs"]["wave"]["domains"][domain]
    return [step["name"] for step in turn["steps"] if step["name"].startswith(tuple(s[1:] for s in WAVE_STEPS))]


def test_a_wave_whose_first_gate_fails_after_the_agent_restart_resumes_there_and_drains_dc2_only_after_dc1_passes(
    wave_stack: Previewed,
    step_runner_for: Callable[[Previewed], StepRunner],
    kubectl: Kubectl,
    pool: dict[str, str],
    tmp_path: Path,
) -> None:
    """FIELD-REVIEW-4 WRONG-1: the restarted agent reports the new kubelet, yet dc1 stays the wave's to finish."""
    first = run_wave(
        step_runner_for(wave_stack),
        lambda name: name.endswith(WAVE_STEPS),
        plays_the_vm(kubectl, wave_stack, pool, {"dc1": 0}),
        **QUICK,
    )
    assert first.order == ["dc1-rke2-login", "dc1-wave-drain", "dc1-rke2-upgrade", "dc1-wave-gate"]
    assert first.outcomes["dc1-wave-gate"] == "failed"
    assert "advertises 0 of 4 GPUs" in first.output["dc1-wave-gate"].stderr
    dc1 = kubectl.json("get", "node", pool["dc1"])
    assert dc1["spec"]["unschedulable"] is True
    assert dc1["status"]["nodeInfo"]["kubeletVersion"] == NEW
    assert dc1["metadata"]["annotations"][WAVE_CORDON_ANNOTATION] == "dc1"
    assert dc1["metadata"]["annotations"][WAVE_TURN_ANNOTATION]
    # It says why it stays cordoned, and the next plan says it too.
    stopped = dc1["metadata"]["annotations"][WAVE_STOPPED_ANNOTATION]
    assert stopped.startswith("gate gpu-ready failed at ") and "advertises 0 of 4 GPUs" in stopped

    # The cause is fixed (the node advertises its slots again); `pulumi preview` reads the Nodes as they are.
    node_status(kubectl, pool["dc1"], kubelet=NEW, gpus=4)
    resumed = planned(rke2_bump(), kubectl.json("get", "nodes"), tmp_path)
    assert resumed.plan["outputs"]["wave"]["order"] == [["dc1"], ["dc2"], ["dc3"]]
    assert resumed.plan["outputs"]["wave"]["domains"]["dc1"]["turn"] == "resume"
    assert "(gate gpu-ready failed at " in resumed.plan["outputs"]["wave"]["domains"]["dc1"]["why"]
    # No second install (the kubelet runs the pin), but the gate again, before the uncordon.
    assert turn_steps(resumed, "dc1") == ["wave-drain", "device-plugin-restart", "wave-gate", "rollout"]

    second = run_wave(
        step_runner_for(resumed),
        lambda name: name.endswith(WAVE_STEPS),
        plays_the_vm(kubectl, resumed, pool, {}),
        **QUICK,
    )
    assert set(second.outcomes[f"{d}-{s}"] for d in pool for s in ("wave-gate", "rollout")) == {"ran"}
    order = second.order
    assert order.index("dc1-wave-gate") < order.index("dc1-rollout") < order.index("dc2-rke2-login")
    assert order.index("dc2-rke2-login") < order.index("dc2-wave-drain") < order.index("dc2-rollout")
    assert "dc1-rke2-upgrade" not in order
    for name, host in pool.items():
        node = kubectl.json("get", "node", host)
        annotations = node["metadata"]["annotations"]
        assert not node["spec"].get("unschedulable"), name
        assert not {WAVE_CORDON_ANNOTATION, WAVE_TURN_ANNOTATION, WAVE_STOPPED_ANNOTATION} & set(annotations), name
        assert json.loads(annotations[ROLLOUT_ANNOTATION])["rke2"] == NEW, name


def test_a_sharing_edit_whose_gate_failed_then_reverted_gates_and_uncordons_the_node_the_wave_cordoned(
    step_runner_for: Callable[[Previewed], StepRunner],
    kubectl: Kubectl,
    pool: dict[str, str],
    tmp_path: Path,
) -> None:
    """FIELD-REVIEW-4 WRONG-2: the edit is reverted while dc1 is the wave's; dc1 must not stay cordoned."""
    edited = base()
    edited["gpu-pool:sharingProfiles"]["a1000-x4"]["replicas"] = 2
    edit = planned(edited, settled_nodes(base()), tmp_path / "edit")
    assert turn_steps(edit, "dc1") == ["wave-drain", "device-plugin-restart", "wave-gate", "rollout"]
    # Nothing plays the device plugin here: the node keeps advertising 4, the gate waits for 2 and fails.
    first = run_wave(step_runner_for(edit), lambda name: name.endswith(WAVE_STEPS), {}, **QUICK)
    assert first.outcomes["dc1-wave-gate"] == "failed"
    assert first.outcomes["dc2-wave-drain"] == "not started"
    assert kubectl.json("get", "node", pool["dc1"])["spec"]["unschedulable"] is True
    recorded = kubectl.json("get", "node", pool["dc1"])["metadata"]["annotations"][ROLLOUT_ANNOTATION]

    reverted = planned(base(), kubectl.json("get", "nodes"), tmp_path / "reverted")
    wave = reverted.plan["outputs"]["wave"]
    assert wave["order"] == [["dc1"]] and wave["domains"]["dc1"]["turn"] == "resume"
    assert wave["changes"] == {"dc1": []}
    # What this `up` runs: dc1's turn; dc2's and dc3's steps are as the last settled `up` left them.
    second = run_wave(
        step_runner_for(reverted), lambda name: name.startswith("dc1-") and name.endswith(WAVE_STEPS), {}, **QUICK
    )
    assert second.order == ["dc1-wave-drain", "dc1-device-plugin-restart", "dc1-wave-gate", "dc1-rollout"]
    assert set(second.outcomes[name] for name in second.order) == {"ran"}
    node = kubectl.json("get", "node", pool["dc1"])
    assert not node["spec"].get("unschedulable")
    annotations = node["metadata"]["annotations"]
    assert WAVE_CORDON_ANNOTATION not in annotations and WAVE_TURN_ANNOTATION not in annotations
    assert annotations[ROLLOUT_ANNOTATION] == recorded
