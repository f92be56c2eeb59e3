"""`gpu-pool repair` against the e2e control plane (tests/e2e/control_plane.py): the pool's Nodes registered by the
cluster stand-in as RKE2's agent on each VM the Proxmox stand-in runs (a new bootID each time the VM starts again),
kept Ready by KWOK; on each, a driver pod and a device-plugin pod that kube-controller-manager's DaemonSet controller
made from the operator's DaemonSets and KWOK runs; the smoke Job placed by kube-scheduler and completed by KWOK and
the Job controller; drains through the eviction API. The Proxmox stand-in answers the VM list, the stop and the
start. The repair's steps run for real, with the built kubectl.

- a node whose card reported Xid 79 is repaired end to end: drained, its VM stopped and started, back Ready on a
  new boot, gated, the smoke test run again under a new Job name, uncordoned, the repair recorded on the Node;
- each guard rail refuses with one message and exit 2: another domain cordoned, the daily budget spent, the
  stack's VM id not the VM Proxmox runs under the node's name;
- what a power cycle does not fix (an OOM-killed driver build, a missing profile) is exit 1 with what to do;
- a card missing from the bus, found by node-check over SSH (the stand-in's real sshd), is power-cycled, and
  when it is still missing after, the repair stops at its node-check with the node cordoned and says how to
  resume.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.observed import (
    REPAIRS_ANNOTATION,
    WAVE_CORDON_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
)
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP, build_time_slicing_config
from components.shared.node_marking import GpuNodeMarking
from components.stack_check import validate_stack
from config.stack import StackConfig
from knowledge.gpu_operator import DEVICE_PLUGIN_APP, DRIVER_APP, DRIVER_POD_SELECTOR
from offline.runner import PROJECT, read_stack_file
from tests.day2.cli_helpers import ROOT, Result, run
from tests.e2e.cluster_standin import ClusterStandIn, cluster_standin
from tests.e2e.control_plane import ControlPlane, eventually
from tests.e2e.engine_stacks import SECRETS
from tests.e2e.kube import Kubectl
from tests.e2e.operand_daemonsets import device_plugin_daemonset, driver_daemonset, ready_hosts
from tests.e2e.proxmox_api import Vm, a1000_host, h200_host
from tests.e2e.proxmox_standin import ProxmoxStandIn, start_proxmox
from tests.e2e.servers import Cluster, Tools

PROXMOX_NODES = ("pve-dc1", "pve-dc2", "pve-dc3")
TOKEN = SECRETS["proxmoxApiToken"]
H200 = ROOT / "tests" / "fixtures" / "node_check" / "h200"
XID_79 = "[ 9000.000000] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
HEALTHY_REPORT = ROOT / "examples" / "day2" / "node-check-dc2.json"
XID_REPORT = ROOT / "examples" / "day2" / "node-check-dc2-xid79.json"
DC2 = "rke2-worker-dc2-gpu-a"
EXAMPLES = ROOT / "examples" / "day2"


@dataclass
class Lab:
    stack: StackConfig
    stack_dir: Path
    pve: ProxmoxStandIn
    standin: ClusterStandIn
    kubectl: Kubectl

    def repair(self, *argv: str) -> Result:
        return run("repair", *argv, "--stack", "prod", "--stack-dir", str(self.stack_dir))

    def node(self, name: str = DC2) -> dict[str, Any]:
        node: dict[str, Any] = self.kubectl.json("get", "node", name)
        return node

    def records(self, name: str = DC2) -> list[dict[str, str]]:
        raw = (self.node(name)["metadata"].get("annotations") or {}).get(REPAIRS_ANNOTATION, "[]")
        return list(json.loads(raw))

    def vm_calls(self, vmid: int) -> list[str]:
        return [
            f"{method} {path.rsplit('/', 2)[-2]}/{path.rsplit('/', 1)[-1]}"
            for method, path in self.pve.requests("POST", f"/qemu/{vmid}/status/")
        ]


def lab_config(pve: ProxmoxStandIn, cluster: Cluster, *, ssh_to_dc2: bool) -> dict[str, Any]:
    """prod with dc2 on the lent H200 (examples/day2/Pulumi.h200-lab.yaml), whose node-check reports stand in for
    dc2's, its cluster the e2e control plane and its Proxmox the stand-in."""
    config = copy.deepcopy(read_stack_file("h200-lab", EXAMPLES))
    if ssh_to_dc2:
        # dc2's VM is this machine as the stand-in's sshd serves it (GPU_POOL_SSH sends its address to loopback,
        # which the stack refuses as a VM's address): node-check reads this machine's PCI bus.
        dc2 = config[f"{PROJECT}:failureDomains"][1]
        dc2["username"] = pve.ssh_user
        dc2["sshAuthorizedKeys"] = [(pve_work(pve) / "user_key.pub").read_text().strip()]
    config[f"{PROJECT}:kubernetes"] = {"kubeconfig": str(cluster.kubeconfig), "context": "e2e"}
    config[f"{PROJECT}:proxmox"] = {**config[f"{PROJECT}:proxmox"], "endpoint": pve.endpoint, "insecure": True}
    # The gates wait minutes in a lab; here a wrong state must fail the test soon.
    config[f"{PROJECT}:smokeTest"] = {"gpuReadyTimeoutMinutes": 5, "timeoutSeconds": 60}
    # No `up` installs the steering policy here: the smoke Job carries the GPU toleration itself, as the stack
    # writes it without Kyverno, and kube-scheduler places it by that, the node pin and the node's slots
    # (tests/e2e/test_gpu_operator_running.py shows Kyverno adding the toleration after a real `up`).
    config[f"{PROJECT}:kyverno"] = {"enabled": False}
    return config


def clusterpolicy(stack: StackConfig) -> dict[str, Any]:
    """The operator's ClusterPolicy as far as `doctor` reads it (the driver it runs), with every section the CRD
    requires. No operator reconciles it here: its operand DaemonSets are created as it creates them
    (tests/e2e/operand_daemonsets.py)."""
    spec: dict[str, Any] = {
        section: {}
        for section in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "gfd", "nodeStatusExporter", "operator")
    }
    spec["toolkit"] = {}
    spec["driver"] = {"repository": "nvcr.io/nvidia", "image": "driver", "version": stack.gpu_operator.driver_version}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": spec,
    }


def label_profiles(kubectl: Kubectl, stack: StackConfig) -> None:
    """What the stack's node-labels step sets: the sharing profile the device plugin reads."""
    for domain in stack.failure_domains:
        kubectl("label", "node", domain.hostname, f"nvidia.com/device-plugin.config={domain.sharing}", "--overwrite")


def serving(kubectl: Kubectl, stack: StackConfig) -> bool:
    """Every Node Ready and advertising its profile's slots (KWOK and the device plugin's pod at work)."""
    nodes = {n["metadata"]["name"]: n for n in kubectl.api.items("/api/v1/nodes")}
    return all(
        d.hostname in nodes
        and any(
            c["type"] == "Ready" and c["status"] == "True" for c in nodes[d.hostname]["status"].get("conditions") or []
        )
        and (nodes[d.hostname]["status"].get("allocatable") or {}).get("nvidia.com/gpu") == str(stack.slots(d))
        for d in stack.failure_domains
    )


def pve_work(pve: ProxmoxStandIn) -> Path:
    return Path(pve.ssh_agent_socket).parent


@pytest.fixture(scope="module")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    """This module's cluster: the session's control plane."""
    return control_plane.kubectl


@pytest.fixture(scope="module")
def namespaces(kubectl: Kubectl) -> Iterator[None]:
    """The operator's and the smoke test's namespaces (pods get their `default` ServiceAccount from the controller
    manager), removed when the module ends: prod's own `up` (the engine tests, later) creates them."""
    stack = validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in read_stack_file("h200-lab", EXAMPLES).items()})
    names = (stack.gpu_operator.namespace, stack.smoke_test.namespace)
    for name in names:
        kubectl.ensure_namespace(name)
    yield
    kubectl.run("delete", "namespace", *names, "--ignore-not-found", "--wait=true", "--timeout=120s")


@pytest.fixture
def lab(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    kubectl: Kubectl,
    control_plane_crds: list[str],
    namespaces: None,
    e2e_tools: Tools,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Lab]:
    """The pool serving: three VMs running in the Proxmox stand-in, their Nodes Ready with their slots, the
    operator's driver and device-plugin pods Ready on each; the stack file in a folder of its own, the token where
    the preview reads it. With `indirect` True, dc2 is reached over SSH (the stand-in's sshd on this machine)."""
    ssh_to_dc2 = bool(getattr(request, "param", False))
    with start_proxmox(
        tmp_path / "pve", {node: h200_host() if node == "pve-dc2" else a1000_host() for node in PROXMOX_NODES}, TOKEN
    ) as pve:
        raw = lab_config(pve, control_plane.cluster, ssh_to_dc2=ssh_to_dc2)
        if ssh_to_dc2:
            known = tmp_path / "known_hosts"
            monkeypatch.setenv(
                "GPU_POOL_SSH", f"ssh -p {pve.ssh_port} -o HostName=127.0.0.1 -o UserKnownHostsFile={known}"
            )
            monkeypatch.setenv("SSH_AUTH_SOCK", pve.ssh_agent_socket)
        stack_dir = tmp_path / "stack"
        stack_dir.mkdir()
        (stack_dir / "Pulumi.prod.yaml").write_text(yaml.safe_dump({"config": raw}, sort_keys=False))
        stack = validate_stack({k.removeprefix(f"{PROJECT}:"): v for k, v in raw.items()})
        for domain in stack.failure_domains:
            vm = Vm(domain.vm_id, domain.proxmox_node, {"name": domain.hostname}, status="running", starts=1)
            pve.state.vms[domain.vm_id] = vm
        namespace = stack.gpu_operator.namespace
        hosts = [domain.hostname for domain in stack.failure_domains]
        marking = GpuNodeMarking.from_kyverno(stack.kyverno)
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": TIME_SLICING_CONFIGMAP, "namespace": namespace},
            "data": build_time_slicing_config(stack.sharing_profiles),
        }
        monkeypatch.setenv("PATH", f"{e2e_tools.bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("KUBECACHEDIR", str(kubectl.cache_dir))
        monkeypatch.setenv("GPU_POOL_SECRET_PROXMOXAPITOKEN", TOKEN)
        monkeypatch.delenv("GPU_POOL_SECRETS_FILE", raising=False)
        # The steps' polls (10 s, and 3 s for Proxmox) are made for VMs that take minutes.
        monkeypatch.setenv("GPU_POOL_POLL_SECONDS", "0.2")
        monkeypatch.setenv("GPU_POOL_PROGRESS_SECONDS", "5")
        try:
            kubectl("apply", "--server-side", "--field-manager", "e2e-setup", "-f", "-", stdin=json.dumps(configmap))
            kubectl.create(clusterpolicy(stack), field_manager="helm")
            with cluster_standin(control_plane.kubeconfig, pve.state, stack) as standin:
                try:
                    eventually("every VM's Node registered", lambda: set(hosts) <= standin.node_names())
                    label_profiles(kubectl, stack)
                    for daemonset in (driver_daemonset, device_plugin_daemonset):
                        kubectl.create(daemonset(stack, marking, hosts), field_manager="gpu-operator")
                    eventually(
                        "a Ready driver and device-plugin pod on every GPU node",
                        lambda: (
                            ready_hosts(kubectl, namespace, DRIVER_APP)
                            == ready_hosts(kubectl, namespace, DEVICE_PLUGIN_APP)
                            == set(hosts)
                        ),
                    )
                    eventually("every GPU node Ready with its slots", lambda: serving(kubectl, stack))
                    yield Lab(stack, stack_dir, pve, standin, kubectl)
                finally:
                    # Their pods go before the Nodes do (the stand-in deletes those when its block ends): a Node
                    # of the same name registered by the next test must not find this test's pods on it.
                    for app in (DRIVER_APP, DEVICE_PLUGIN_APP):
                        kubectl.run("-n", namespace, "delete", "daemonset", app, "--ignore-not-found",
                                    "--cascade=foreground")  # fmt: skip
                    kubectl.run("-n", stack.smoke_test.namespace, "delete", "jobs", "--all", "--ignore-not-found",
                                "--cascade=foreground")  # fmt: skip
            assert not standin.errors, standin.errors[:5]
        finally:
            # The full name: Kyverno has a ClusterPolicy kind too, and the short name may mean either.
            kubectl("delete", "clusterpolicies.nvidia.com", "cluster-policy", "--ignore-not-found")
            kubectl("-n", namespace, "delete", "configmap", TIME_SLICING_CONFIGMAP, "--ignore-not-found")
            kubectl("-n", "default", "delete", "events", "--field-selector", "source=gpu-pool-repair")


def test_a_node_whose_card_fell_off_the_bus_is_repaired_end_to_end(lab: Lab) -> None:
    before = lab.node()
    assert before["status"]["nodeInfo"]["bootID"] == "dc2-boot-1"

    result = lab.repair(DC2, "--node-check", str(XID_REPORT), "--yes")

    assert result.code == 0, result.out + result.err
    assert result.err == ""
    assert "why: node:health: Xid 79 at 0000:00:06: GPU has fallen off the bus" in result.out
    assert result.out.rstrip().endswith(
        f"gpu-pool repair: {DC2} repaired (node:health: Xid 79 at 0000:00:06: GPU has fallen off the bus)"
    )
    # Proxmox: the stack's VM of dc2, stopped then started; the other VMs untouched.
    assert lab.vm_calls(4201) == ["POST status/shutdown", "POST status/start"]
    assert lab.vm_calls(4101) == lab.vm_calls(4301) == []
    assert lab.pve.unanswered() == []
    node = lab.node()
    # Back on a new boot, serving again, its turn ended, its rollout record untouched.
    assert node["status"]["nodeInfo"]["bootID"] == "dc2-boot-2"
    assert not node["spec"].get("unschedulable")
    annotations = node["metadata"].get("annotations") or {}
    assert WAVE_CORDON_ANNOTATION not in annotations and WAVE_TURN_ANNOTATION not in annotations
    records = lab.records()
    assert [(r["event"], r["reason"]) for r in records] == [
        ("power-cycle", "node:health: Xid 79 at 0000:00:06: GPU has fallen off the bus"),
        ("repaired", "node:health: Xid 79 at 0000:00:06: GPU has fallen off the bus"),
    ]
    assert records[0]["vm"] == "VM 4201 on pve-dc2"
    events = lab.kubectl.json("-n", "default", "get", "events", "--field-selector", f"involvedObject.name={DC2}")
    # Listed by their generated names, not in time: compared as a set.
    assert sorted(e["reason"] for e in events["items"] if e["source"]["component"] == "gpu-pool-repair") == [
        "GpuPoolPowerCycle",
        "GpuPoolRepaired",
    ]
    # The smoke test ran again under a Job name of its own, and completed.
    jobs = lab.kubectl.json("-n", lab.stack.smoke_test.namespace, "get", "jobs")["items"]
    (job,) = [j for j in jobs if "-repair-" in j["metadata"]["name"]]
    assert job["metadata"]["labels"]["gpu-pool/domain"] == "dc2"
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
    # Its pod was placed on the cordoned node by kube-scheduler (the pin, the GPU toleration, the node's slots).
    smoke = lab.stack.smoke_test.namespace
    (pod,) = lab.kubectl.json("-n", smoke, "get", "pods", "-l", f"job-name={job['metadata']['name']}")["items"]
    assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == (DC2, "Succeeded")
    placed = lab.kubectl.json(
        "-n", smoke, "get", "events", "--field-selector", f"involvedObject.name={pod['metadata']['name']}"
    )
    assert {
        e.get("reportingComponent") or e["source"].get("component")
        for e in placed["items"]
        if e["reason"] == "Scheduled"
    } == {"default-scheduler"}
    # The other domains served throughout.
    for other in ("rke2-worker-dc1-gpu-a", "rke2-worker-dc3-gpu-a"):
        assert not lab.node(other)["spec"].get("unschedulable")


def test_another_domain_cordoned_refuses_the_repair_before_anything_is_touched(lab: Lab) -> None:
    lab.kubectl("cordon", "rke2-worker-dc1-gpu-a")

    result = lab.repair(DC2, "--node-check", str(XID_REPORT), "--yes")

    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1
    assert result.err.startswith(f"gpu-pool: repair {DC2} refused: dc1 is out (cordoned): repairing dc2 too")
    assert "gpu-pool:rollout.maxUnavailable is 1" in result.err
    assert lab.vm_calls(4201) == []
    assert not lab.node()["spec"].get("unschedulable")


def test_a_spent_daily_budget_refuses_a_third_power_cycle_and_says_to_look_at_the_hardware(lab: Lab) -> None:
    import datetime

    now = datetime.datetime.now(datetime.UTC)
    earlier = [
        {"at": (now - datetime.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ"), "event": "power-cycle"}
        | {"reason": "node:health: Xid 79", "vm": "VM 4201 on pve-dc2"}
        for hours in (20, 3)
    ]
    lab.kubectl("annotate", "node", DC2, f"{REPAIRS_ANNOTATION}={json.dumps(earlier)}")

    result = lab.repair(DC2, "--node-check", str(XID_REPORT), "--yes")

    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and result.err.startswith(f"gpu-pool: repair {DC2} refused: ")
    assert "dc2's VM was power-cycled by gpu-pool repair 2 times in the last 24 hours" in result.err
    assert "gpu-pool:repair.maxPerDay is 2: a card that keeps faulting needs its hardware looked at" in result.err
    assert lab.vm_calls(4201) == []


def test_a_vm_id_that_is_not_the_vm_proxmox_runs_for_the_node_is_refused(lab: Lab) -> None:
    # The node's VM was restored from a backup under a new id; 4201 is now another guest.
    vm = lab.pve.state.vms.pop(4201)
    lab.pve.state.vms[4250] = Vm(4250, "pve-dc2", {"name": DC2}, status="running", starts=vm.starts)
    lab.pve.state.vms[4201] = Vm(4201, "pve-dc2", {"name": "build-runner"}, status="running")

    result = lab.repair(DC2, "--node-check", str(XID_REPORT), "--yes")

    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and result.err.startswith(f"gpu-pool: repair {DC2} refused: ")
    assert (
        f"Proxmox runs VM 4201 as build-runner, not {DC2} (VM 4250 is named {DC2}): the stack's VM id is not the "
        "node's VM"
    ) in result.err
    assert lab.vm_calls(4201) == lab.vm_calls(4250) == []


def test_an_oom_killed_driver_build_is_not_a_power_cycle_and_says_what_to_do(lab: Lab) -> None:
    namespace = lab.stack.gpu_operator.namespace
    # dc2's driver pod, as the DaemonSet controller named it.
    pods = lab.kubectl.json(
        "-n", namespace, "get", "pods", "-l", DRIVER_POD_SELECTOR, "--field-selector", f"spec.nodeName={DC2}"
    )["items"]
    (pod,) = [p["metadata"]["name"] for p in pods]
    crash = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {
                "name": "nvidia-driver-ctr",
                "image": f"nvcr.io/nvidia/driver:{lab.stack.gpu_operator.driver_version}-ubuntu24.04",
                "imageID": "",
                "ready": False,
                "restartCount": 6,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            }
        ],
    }
    lab.kubectl(
        "-n",
        namespace,
        "patch",
        "pod",
        pod,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": crash}),
    )

    result = lab.repair(DC2, "--node-check", str(HEALTHY_REPORT), "--yes")

    assert result.code == 1, result.err
    assert result.out.startswith(f"{DC2} (domain dc2): no repair\n")
    assert "driver is broken" in result.out and "which a power cycle of the VM does not fix" in result.out
    assert "trap 1: The driver gets OOM-killed, exit 137" in result.out
    assert lab.vm_calls(4201) == []


def test_a_profile_missing_from_the_time_slicing_configmap_is_not_a_power_cycle(lab: Lab) -> None:
    namespace = lab.stack.gpu_operator.namespace
    lab.kubectl(
        "-n", namespace, "patch", "configmap", TIME_SLICING_CONFIGMAP, "--type=json",
        "-p", json.dumps([{"op": "remove", "path": "/data/a1000-x4"}]),
    )  # fmt: skip

    result = lab.repair(DC2, "--node-check", str(XID_REPORT), "-o", "json")

    assert result.code == 1
    document = json.loads(result.out)
    assert (document["node"], document["domain"], document["repair"], document["steps"]) == (DC2, "dc2", False, [])
    assert document["reason"].startswith("sharing-config is broken (profile a1000-x4")
    assert "which a power cycle of the VM does not fix" in document["reason"]
    assert lab.vm_calls(4201) == []


@pytest.mark.parametrize("lab", [True], indirect=True, ids=["dc2-over-ssh"])
def test_a_card_missing_from_the_bus_found_over_ssh_is_power_cycled_and_if_still_missing_the_repair_stops_cordoned(
    lab: Lab,
) -> None:
    """node-check runs on the node over SSH (here: this machine, which has no NVIDIA card) for the decision and
    again after the power cycle; the card is still missing, so the repair stops there, the node stays out."""
    result = lab.repair(DC2, "--yes")

    assert result.code == 1, result.out + result.err
    assert "why: node:pci: card 1 (10de:2335) is not on the PCI bus" in result.out
    assert [line.split()[2].rstrip(":") for line in result.out.splitlines() if line.startswith("==> ")] == [
        "wave-drain",
        "power-cycle",
        "node-ready",
        "node-check",
    ]
    assert lab.vm_calls(4201) == ["POST status/shutdown", "POST status/start"]
    assert "gpu-pool repair: stopped at node-check (exit 1)" in result.out
    resume = f"gpu-pool repair {DC2} --stack prod --stack-dir {lab.stack_dir} --yes"
    assert f"resume: fix the cause, then `{resume}`" in result.out
    node = lab.node()
    assert node["spec"]["unschedulable"] is True
    annotations = node["metadata"]["annotations"]
    assert annotations[WAVE_CORDON_ANNOTATION] == "dc2" and annotations[WAVE_TURN_ANNOTATION]
    # The node says why it is cordoned and how to resume, as a wave's failed drain or gate does.
    assert annotations[WAVE_STOPPED_ANNOTATION].startswith("repair stopped at node-check at ")
    assert annotations[WAVE_STOPPED_ANNOTATION].endswith(f"; resume: {resume}")
    power_cycle, stopped = lab.records()
    assert power_cycle["event"] == "power-cycle"
    assert (stopped["event"], stopped["step"]) == ("stopped", "node-check")
    assert stopped["resume"] == resume
    # Nothing after the failed check ran: no smoke Job, no gate, no uncordon.
    jobs = lab.kubectl.json("-n", lab.stack.smoke_test.namespace, "get", "jobs")["items"]
    assert not [j for j in jobs if "-repair-" in j["metadata"]["name"]]


def test_a_repair_that_stops_at_its_gate_leaves_the_node_cordoned_and_running_it_again_finishes_it(lab: Lab) -> None:
    # The operator's driver upgrade on the node failed: the gate after the power cycle fails at once.
    lab.kubectl("label", "node", DC2, "nvidia.com/gpu-driver-upgrade-state=upgrade-failed")

    first = lab.repair(DC2, "--node-check", str(XID_REPORT), "--yes")

    assert first.code == 1
    assert "gpu-pool repair: stopped at gpu-ready (exit 1)" in first.out
    assert "the GPU Operator's driver upgrade failed" in first.out
    node = lab.node()
    assert node["spec"]["unschedulable"] is True and node["metadata"]["annotations"][WAVE_TURN_ANNOTATION]
    assert node["metadata"]["annotations"][WAVE_STOPPED_ANNOTATION].startswith("repair stopped at gpu-ready at ")
    assert [r["event"] for r in lab.records()] == ["power-cycle", "stopped"]

    # The cause fixed, the same command again: its turn is the domain's own, so no guard rail stands in the way.
    lab.kubectl("label", "node", DC2, "nvidia.com/gpu-driver-upgrade-state-")
    again = lab.repair(DC2, "--node-check", str(XID_REPORT), "--yes")

    assert again.code == 0, again.out + again.err
    assert "\n  earlier: repair stopped at gpu-ready at " in again.out
    assert "daily budget: 1 of 2 power cycles in the last 24 hours" in again.out
    assert lab.vm_calls(4201) == ["POST status/shutdown", "POST status/start"] * 2
    node = lab.node()
    assert not node["spec"].get("unschedulable")
    assert WAVE_TURN_ANNOTATION not in node["metadata"]["annotations"]
    assert WAVE_STOPPED_ANNOTATION not in node["metadata"]["annotations"]
    assert [r["event"] for r in lab.records()] == ["power-cycle", "stopped", "power-cycle", "repaired"]
