"""The steps on a GPU worker, run for real (`python3 -c <bootstrap>`, the script and node/ packed) against a stand-in
kubectl over an API server in memory and a loopback Proxmox API: never an undrained reboot, waits that say what
they see, timeouts that name the likeliest cause, a power cycle charged only once its stop ended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain import node_steps_script
from components.gpu_failure_domain.node_steps import node_steps_zip
from components.gpu_failure_domain.node_steps_script import STEPS
from components.gpu_failure_domain.steps import ScriptStep
from config.rollout import DRAIN_TIMEOUT_SECONDS
from tests.gpu_failure_domain.node_steps_harness import (
    NODE_PATH,
    OPERATOR,
    Harness,
    driver_daemonset_revisions,
    driver_pod,
    node,
)

NODE = "rke2-worker-dc1-gpu-a"
VM = "/api2/json/nodes/pve-dc1/qemu/4101"
DEVICE = json.dumps([{"id": "10de:25b0", "path": "0000:01:00"}])
MOVED = json.dumps([{"id": "10de:25b0", "path": "0000:02:00"}])
# A wait that must time out, on a scenario of one state: its first poll already sees what the message names.
TIMES_OUT = "0.005"


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def power_cycle_env(endpoint: str, previous: str = "", device: str = DEVICE) -> dict[str, str]:
    return {
        "PROXMOX_ENDPOINT": endpoint,
        "PROXMOX_NODE": "pve-dc1",
        "PROXMOX_VMID": "4101",
        "PROXMOX_API_TOKEN": "pulumi@pve!gpu-pool=abc",
        "PROXMOX_INSECURE": "false",
        "MAPPED_DEVICE": device,
        "PULUMI_COMMAND_STDOUT": previous,
    }


def applied(device: str) -> str:
    return f"applied-device: {device}\n"


def workload(name: str = "notebook-0", *, controller: bool = True) -> dict[str, dict[str, Any]]:
    owners = [{"kind": "StatefulSet", "name": "nb", "controller": True}] if controller else []
    pod = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "ownerReferences": owners},
        "spec": {"nodeName": NODE},
        "status": {"phase": "Running"},
    }
    return {f"/api/v1/namespaces/ml/pods/{name}": pod}


def with_node(**kwargs: Any) -> dict[str, dict[str, Any]]:
    return {NODE_PATH: node(**kwargs)}


def writes(harness: Harness) -> list[str]:
    """What the step changed on the cluster and in Proxmox, in order (reads left out)."""
    return [line for line in harness.journal.lines() if " GET " not in line]


# --- the script is node/'s driver ------------------------------------------------------------------------------


def test_the_script_runs_exactly_the_steps_the_plan_names_and_documents_each() -> None:
    assert list(STEPS) == [step.value for step in ScriptStep]
    assert node_steps_script.__doc__ is not None
    for step in ScriptStep:
        assert f"- `{step.value}`: " in node_steps_script.__doc__, step


def test_the_packed_script_carries_node_and_nothing_of_components_but_itself() -> None:
    import io
    import zipfile

    names = set(zipfile.ZipFile(io.BytesIO(node_steps_zip())).namelist())
    assert {"node/turn.py", "node/kube.py", "node/proxmox.py", "node/drain.py"} <= names
    assert {n for n in names if n.startswith("components/") and not n.endswith("__init__.py")} == {
        "components/gpu_failure_domain/node_steps_script.py"
    }


def test_the_drain_waits_as_long_as_the_stack_says() -> None:
    assert node_steps_script.DRAIN_MINUTES * 60 == DRAIN_TIMEOUT_SECONDS


# --- power cycle: drained, and only when something waits for it --------------------------------------------


def test_a_pending_change_drains_the_node_before_the_shutdown_and_uncordons_it_once_back(harness: Harness) -> None:
    harness.scenario(with_node(boot="boot-1") | workload())
    with harness.proxmox([{"key": "hostpci0", "value": "x", "pending": "mapping=gpu-dc1,pcie=1"}]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint))
    assert result.returncode == 0, result.stderr
    assert writes(harness) == [
        f"kubectl PATCH {NODE_PATH}",  # cordon
        "kubectl POST /api/v1/namespaces/ml/pods/notebook-0/eviction",
        f"proxmox POST {VM}/status/shutdown",
        f"proxmox POST {VM}/status/start",
        f"kubectl PATCH {NODE_PATH}",  # uncordon
    ]
    assert not harness.api().node(NODE)["spec"].get("unschedulable")
    assert api.auth == {"PVEAPIToken=pulumi@pve!gpu-pool=abc"}
    assert "hostpci0 changed; drain, full power cycle" in result.stdout
    assert result.stdout.endswith(applied(DEVICE))


def test_the_vm_is_never_rebooted_through_the_guest() -> None:
    import inspect

    from node import power

    source = inspect.getsource(power)
    assert "/status/shutdown" in source and "/status/reboot" not in source
    assert "/status/reboot" not in inspect.getsource(node_steps_script)


def test_nothing_pending_and_the_same_card_leaves_the_node_alone(harness: Harness) -> None:
    harness.scenario(with_node())
    with harness.proxmox([{"key": "memory", "value": 16384}]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint, previous=applied(DEVICE)))
    assert result.returncode == 0, result.stderr
    assert harness.journal.lines() == [f"proxmox GET {VM}/pending"]
    assert result.stdout.endswith(applied(DEVICE))


def test_a_card_moved_to_another_slot_power_cycles_although_the_vm_config_is_unchanged(harness: Harness) -> None:
    harness.scenario(with_node(boot="boot-1"))
    with harness.proxmox([]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint, previous=applied(DEVICE), device=MOVED))
    assert result.returncode == 0, result.stderr
    assert "the mapped PCI device changed" in result.stdout
    assert f"proxmox POST {VM}/status/shutdown" in harness.journal.lines()
    assert result.stdout.endswith(applied(MOVED))


def test_the_first_run_after_the_vm_is_created_does_not_cycle_it(harness: Harness) -> None:
    with harness.proxmox([]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint, previous=""))
    assert result.returncode == 0, result.stderr
    assert not [line for line in harness.journal.lines() if "status/" in line]


def test_a_bare_pod_stops_the_power_cycle_before_the_vm_is_touched_naming_it(harness: Harness) -> None:
    harness.scenario(with_node() | workload("debug", controller=False))
    with harness.proxmox([{"key": "cores", "value": 8, "pending": 12}]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint))
    assert result.returncode == 1
    assert "cannot delete Pods that declare no controller: ml/debug" in result.stderr
    assert not [line for line in harness.journal.lines() if "status/" in line or "eviction" in line]


def test_a_node_the_admin_had_cordoned_stays_cordoned_after_the_cycle(harness: Harness) -> None:
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([{"key": "machine", "value": "pc", "pending": "q35"}]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint))
    assert result.returncode == 0, result.stderr
    assert harness.api().node(NODE)["spec"]["unschedulable"] is True
    assert "left cordoned" in result.stdout


def test_a_vm_whose_node_never_registered_is_cycled_without_a_drain(harness: Harness) -> None:
    harness.scenario({})
    with harness.proxmox([{"key": "hostpci0", "value": "x", "pending": "y"}]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint))
    assert result.returncode == 0, result.stderr
    assert not [line for line in harness.kubectl() if "PATCH" in line or "eviction" in line]
    assert f"proxmox POST {VM}/status/start" in harness.journal.lines()


# --- waits that talk ----------------------------------------------------------------------------------------


def test_node_ready_waits_for_registration_then_readiness_and_reports_progress(harness: Harness) -> None:
    registered = node(ready=False)
    harness.scenario({}, sequences={NODE_PATH: [None, registered, {"status": node()["status"]}]})
    result = harness.run("node-ready", TIMEOUT_MINUTES="5")
    assert result.returncode == 0, result.stderr
    assert f"still waiting for node {NODE} to register and be Ready" in result.stdout
    assert "not registered" in result.stdout and "registered, not Ready" in result.stdout
    assert f"done: node {NODE} to register and be Ready" in result.stdout


def test_a_node_ready_timeout_blames_the_api_server_when_kubectl_cannot_reach_it(harness: Harness) -> None:
    harness.scenario({}, down=True)
    result = harness.run("node-ready", TIMEOUT_MINUTES=TIMES_OUT)
    assert result.returncode == 1
    assert f"timed out after {TIMES_OUT} min waiting for node {NODE} to register and be Ready" in result.stderr
    assert "was refused" in result.stderr
    assert "Likeliest cause: kubectl cannot reach the API server" in result.stderr


def test_a_node_ready_timeout_points_at_where_the_first_boot_says_the_step_it_stopped_at(harness: Harness) -> None:
    harness.scenario({})
    result = harness.run("node-ready", TIMEOUT_MINUTES=TIMES_OUT)
    assert result.returncode == 1
    assert "Likeliest cause: the node never registered with RKE2" in result.stderr
    # The node never registered, so no first-boot annotation: the console line and the step logs say where it stopped.
    assert "gpu-pool first boot: STOPPED at <step>" in result.stderr
    assert "/var/lib/gpu-pool/first-boot/<step>.log" in result.stderr


def gpu_env(slots: str = "4") -> dict[str, str]:
    return {"GPU_SLOTS": slots, "DRIVER_VERSION": "570.211.01", "OPERATOR_NAMESPACE": "gpu-operator"}


def gpus(count: str) -> dict[str, Any]:
    return {"status": {"allocatable": {"nvidia.com/gpu": count}}}


def test_gpu_ready_waits_for_the_profiles_slots_on_the_pinned_driver(harness: Harness) -> None:
    harness.scenario(with_node(gpus="0") | driver_pod(), sequences={NODE_PATH: [gpus("0"), gpus("1"), gpus("4")]})
    result = harness.run("gpu-ready", TIMEOUT_MINUTES="5", **gpu_env())
    assert result.returncode == 0, result.stderr
    assert "allocatable nvidia.com/gpu=0/4, driver pod Ready" in result.stdout
    assert f"done: {NODE} to advertise 4 nvidia.com/gpu on driver 570.211.01" in result.stdout


def test_gpu_ready_says_a_driver_pod_that_is_not_ready_yet(harness: Harness) -> None:
    harness.scenario(with_node(gpus="4") | driver_pod(ready=False))
    result = harness.run("gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, **gpu_env())
    assert result.returncode == 1
    assert "allocatable nvidia.com/gpu=4/4, driver pod not Ready" in result.stderr
    assert "the first build compiles nvidia.ko" in result.stderr


def test_gpu_ready_keeps_waiting_while_the_node_runs_the_old_driver(harness: Harness) -> None:
    harness.scenario(with_node(gpus="4") | driver_pod(version="570.172.08"))
    result = harness.run("gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, **gpu_env())
    assert result.returncode == 1
    assert "on another driver" in result.stderr
    assert "the operator upgrades one at a time" in result.stderr


def test_gpu_ready_waits_until_the_operators_driver_upgrade_is_done(harness: Harness) -> None:
    upgrading = {"nvidia.com/gpu-driver-upgrade-state": "pod-restart-required"}
    harness.scenario(with_node(gpus="4", labels=upgrading) | driver_pod())
    result = harness.run("gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, **gpu_env())
    assert result.returncode == 1
    assert "driver upgrade on rke2-worker-dc1-gpu-a is still at pod-restart-required" in result.stderr


def test_gpu_ready_fails_at_once_when_the_operators_driver_upgrade_failed(harness: Harness) -> None:
    failed = {"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}
    harness.scenario(with_node(gpus="4", labels=failed) | driver_pod())
    result = harness.run("gpu-ready", TIMEOUT_MINUTES="60", **gpu_env())
    assert result.returncode == 1
    assert "upgrade-failed" in result.stderr and "logs -l app=nvidia-driver-daemonset" in result.stderr


def test_gpu_ready_replaces_a_driver_pod_left_on_an_older_revision_in_upgrade_failed_and_passes(
    harness: Harness,
) -> None:
    """FIELD-REVIEW-5 WRONG-2: the operator leaves upgrade-failed only for a driver pod in sync with the DaemonSet's
    newest ControllerRevision (podInSyncWithDS); the DaemonSet is OnDelete, so nothing replaced the old pod and
    every resume, fix-forward or revert failed at this gate."""
    failed = {"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}
    done = {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}}}
    harness.scenario(
        with_node(gpus="4", labels=failed)
        | driver_pod(revision="5d8f7c9b44")
        | driver_pod(revision="6b7c8d9e55", name="nvidia-driver-daemonset-new")
        | driver_daemonset_revisions("5d8f7c9b44", "6b7c8d9e55"),
        sequences={NODE_PATH: [{}, {}, {}, {}, done]},
    )
    result = harness.run("gpu-ready", TIMEOUT_MINUTES="5", **gpu_env())

    assert result.returncode == 0, result.stderr
    deletes = [line for line in harness.kubectl() if " DELETE " in line]
    assert deletes == [f"kubectl DELETE {OPERATOR}/nvidia-driver-daemonset-5d8f7c9b44"]
    assert (
        f"{NODE}: upgrade-failed with driver pod nvidia-driver-daemonset-5d8f7c9b44 on revision 5d8f7c9b44, the "
        "DaemonSet's newest is 6b7c8d9e55: deleted it" in result.stdout
    )
    (record,) = json.loads(harness.api().node(NODE)["metadata"]["annotations"]["gpu-pool.dev/repairs"])
    assert record["event"] == "driver-pod-deleted" and "6b7c8d9e55" in record["reason"]


def test_gpu_ready_in_upgrade_failed_with_the_pod_on_the_newest_revision_stops_naming_the_driver_log(
    harness: Harness,
) -> None:
    failed = {"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}
    harness.scenario(
        with_node(gpus="4", labels=failed)
        | driver_pod(revision="6b7c8d9e55")
        | driver_daemonset_revisions("5d8f7c9b44", "6b7c8d9e55")
    )
    result = harness.run("gpu-ready", TIMEOUT_MINUTES="60", **gpu_env())

    assert result.returncode == 1
    assert not any(" DELETE " in line for line in harness.kubectl())
    assert "upgrade-failed" in result.stderr and "-c nvidia-driver-ctr" in result.stderr


def test_gpu_ready_names_the_device_plugin_when_the_driver_is_fine_but_the_slots_are_missing(harness: Harness) -> None:
    harness.scenario(with_node(gpus="1") | driver_pod())
    result = harness.run("gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, **gpu_env())
    assert result.returncode == 1
    assert "the device plugin advertises 1 of 4 GPUs: debug from the driver up" in result.stderr


def kubelet(version: str) -> dict[str, Any]:
    return {"status": {"nodeInfo": {"kubeletVersion": version}}}


def test_a_wave_gate_waits_for_the_pinned_kubelet_then_the_slots(harness: Harness) -> None:
    harness.scenario(
        with_node(gpus="4") | driver_pod(),
        sequences={NODE_PATH: [kubelet("v1.33.5+rke2r1"), kubelet("v1.33.6+rke2r1")]},
    )
    result = harness.run("gpu-ready", TIMEOUT_MINUTES="5", KUBELET_VERSION="v1.33.6+rke2r1", **gpu_env())
    assert result.returncode == 0, result.stderr
    assert "kubelet v1.33.5+rke2r1, Ready" in result.stdout
    assert f"done: {NODE} to advertise 4 nvidia.com/gpu" in result.stdout


def test_a_wave_gate_that_fails_names_the_domain_the_gate_and_how_to_resume(harness: Harness) -> None:
    harness.scenario(with_node(gpus="4") | driver_pod(), sequences={NODE_PATH: [kubelet("v1.33.5+rke2r1")]})
    result = harness.run(
        "gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, KUBELET_VERSION="v1.33.6+rke2r1", WAVE_DOMAIN="dc2", **gpu_env()
    )
    assert result.returncode == 1
    assert "is not Ready on kubelet v1.33.6+rke2r1: on the VM, journalctl -u rke2-agent" in result.stderr
    assert (
        "the wave stopped at domain dc2 (gate gpu-ready): dc2 stays cordoned, the domains after it were not touched "
        "and still serve; fix the cause, then `pulumi up` resumes the wave at dc2"
    ) in result.stderr


def test_a_wave_gate_shows_gating_on_the_node_and_stopped_with_why_when_it_fails(harness: Harness) -> None:
    """The node's one visible turn state (`kubectl get nodes -L gpu-pool.dev/turn-state`), as the operator's own."""
    held = node(gpus="4", labels={"gpu-pool.dev/turn-state": "changing"})
    harness.scenario({NODE_PATH: held} | driver_pod(), sequences={NODE_PATH: [kubelet("v1.33.5+rke2r1")]})
    result = harness.run(
        "gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, KUBELET_VERSION="v1.33.6+rke2r1", WAVE_DOMAIN="dc2", **gpu_env()
    )

    assert result.returncode == 1
    after = harness.api().node(NODE)["metadata"]
    assert after["labels"]["gpu-pool.dev/turn-state"] == "stopped"
    assert after["annotations"]["gpu-pool.dev/wave-stopped"].startswith("gate gpu-ready failed at ")
    assert sum(1 for line in harness.kubectl() if line.startswith("kubectl PATCH")) == 2  # gating, then stopped


def test_kernel_rebuild_waits_for_the_new_kernel_then_replaces_only_this_nodes_driver_pod(harness: Harness) -> None:
    harness.scenario(
        with_node(kernel="6.8.0-51-generic") | driver_pod(),
        sequences={NODE_PATH: [{}, {"status": {"nodeInfo": {"kernelVersion": "6.8.0-60-generic"}}}]},
    )
    result = harness.run(
        "kernel-rebuild", TIMEOUT_MINUTES="0.05", KERNEL="6.8.0-60-generic", OPERATOR_NAMESPACE="gpu-operator"
    )
    # The stand-in's DaemonSet does not recreate the pod: the step deletes this node's only and waits for a new one.
    assert result.returncode == 1, result.stderr
    assert [line for line in harness.kubectl() if " DELETE " in line] == [
        f"kubectl DELETE {OPERATOR}/nvidia-driver-daemonset-x1"
    ]
    assert "the driver DaemonSet did not recreate its pod on this node" in result.stderr


def test_an_unknown_step_is_refused_by_name(harness: Harness) -> None:
    result = harness.run("reboot-now")
    assert result.returncode == 1
    assert "unknown GPU_POOL_STEP 'reboot-now'" in result.stderr


# --- a repair: the power cycle forced and charged once its stop ended, the smoke test again, the turn's end -----


def repairs(harness: Harness) -> list[dict[str, Any]]:
    annotations = harness.api().node(NODE)["metadata"].get("annotations") or {}
    return list(json.loads(annotations.get("gpu-pool.dev/repairs") or "[]"))


def test_a_repairs_power_cycle_runs_whatever_is_pending_and_is_charged_once_the_stop_ended(
    harness: Harness,
) -> None:
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:health: Xid 79")
    assert result.returncode == 0, result.stderr
    journal = writes(harness)
    # The stop, its task read (OK), the VM stopped: only then the charge (FIELD-REVIEW-6 W-2), then the start.
    assert journal[0] == f"proxmox POST {VM}/status/shutdown"
    assert journal[1:3] == [f"kubectl PATCH {NODE_PATH}", "kubectl POST /api/v1/namespaces/default/events"]
    assert journal[3:] == [f"proxmox POST {VM}/status/start"]
    (record,) = repairs(harness)
    assert (record["event"], record["reason"], record["vm"]) == (
        "power-cycle",
        "node:health: Xid 79",
        "VM 4101 on pve-dc1",
    )
    (event,) = harness.api().events
    assert (event["reason"], event["type"], event["involvedObject"]["name"]) == ("GpuPoolPowerCycle", "Warning", NODE)
    # The node stays cordoned after it: the repair's last step uncordons it, after its checks.
    assert harness.api().node(NODE)["spec"]["unschedulable"] is True
    assert "node:health: Xid 79; full power cycle (stop, then start)\n" in result.stdout
    assert "VM 4101 on pve-dc1: start task OK" in result.stdout


@pytest.mark.parametrize("reason", ["", "node:health: Xid 79"], ids=["a wave's power cycle", "a repair's"])
def test_a_stop_task_that_fails_on_a_backup_lock_is_one_line_and_charges_no_budget(
    harness: Harness, reason: str
) -> None:
    """FIELD-REVIEW-6 W-2: qemu-server checks the lock inside the stop's task, so the POST answers a UPID and the
    task fails with `VM is locked (backup)`: the budget was charged on the POST."""
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([{"key": "cores", "value": 8, "pending": 12}]) as api:
        api.stop_exit = "VM is locked (backup)"
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON=reason)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("gpu-pool: the stop task of VM 4101 on pve-dc1 failed: VM is locked (backup)")
    assert "no power cycle charged" in line
    assert repairs(harness) == []
    assert not any("start" in line for line in harness.journal.lines() if line.startswith("proxmox POST"))


def test_a_lock_taken_after_the_repairs_check_is_read_again_right_before_the_stop(harness: Harness) -> None:
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([]) as api:
        api.lock = "backup"
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:pci: gone")
    assert result.returncode == 1
    assert "is locked (backup) right before its stop" in result.stderr
    assert not [line for line in harness.journal.lines() if line.startswith("proxmox POST")]
    assert repairs(harness) == []


def test_a_stop_proxmox_refuses_outright_is_one_line_with_pves_message(harness: Harness) -> None:
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([]) as api:
        api.refuse["/status/shutdown"] = (403, "Permission check failed (/vms/4101, VM.PowerMgmt)")
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:pci: gone")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "gpu-pool: Proxmox refused POST /nodes/pve-dc1/qemu/4101/status/shutdown: 403 Permission check failed "
        "(/vms/4101, VM.PowerMgmt)"
    ]
    assert repairs(harness) == []


def test_a_start_task_that_fails_names_qemu_servers_reason_and_the_host(harness: Harness) -> None:
    """FIELD-REVIEW-5 WRONG-4: a card the host lost makes qemu-server's start die; the step waited 180 s and said
    only that the VM did not start."""
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([]) as api:
        api.start_exit = "no pci device info for device '0000:01:00.0'"
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:pci: gone")

    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(
        "gpu-pool: the start task of VM 4101 on pve-dc1 failed: no pci device info for device '0000:01:00.0'"
    )
    assert "PCI remove/rescan, or a host reboot" in line


def test_a_stopped_vm_is_only_started_and_no_power_cycle_is_charged(harness: Harness) -> None:
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([]) as api:
        api.status = "stopped"
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:pci: gone")

    assert result.returncode == 0, result.stderr
    assert "VM 4101 on pve-dc1 is stopped: starting it (no stop)" in result.stdout
    posts = [line for line in harness.journal.lines() if line.startswith("proxmox POST")]
    assert posts == [f"proxmox POST {VM}/status/start"]
    assert repairs(harness) == []


def test_an_ha_managed_vm_that_ha_started_on_another_host_fails_the_step(harness: Harness) -> None:
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([]) as api:
        api.node = "pve-dc3"
        result = harness.run(
            "power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:pci: gone", POWER_CYCLE_HA="1"
        )

    assert result.returncode == 1
    assert "HA started VM 4101 on pve-dc3, not the stack's pve-dc1" in result.stderr
    assert "ha-manager migrate vm:4101 pve-dc1" in result.stderr


def test_a_repairs_power_cycle_says_what_proxmox_had_pending_that_it_applies_too(harness: Harness) -> None:
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with harness.proxmox([{"key": "cores", "value": 8, "pending": 12}]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:pci: gone")
    assert result.returncode == 0, result.stderr
    assert "node:pci: gone; full power cycle (stop, then start); it also applies what Proxmox has pending: cores" in (
        result.stdout
    )


def test_a_repairs_record_keeps_a_week_of_earlier_entries_and_drops_older_ones(harness: Harness) -> None:
    import datetime

    now = datetime.datetime.now(datetime.UTC)
    earlier = [
        {"at": (now - datetime.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ"), "event": "power-cycle"}
        for days in (9, 2)
    ]
    cordoned = node(unschedulable=True, boot="boot-1")
    cordoned["metadata"]["annotations"] = {"gpu-pool.dev/repairs": json.dumps(earlier)}
    harness.scenario({NODE_PATH: cordoned})
    with harness.proxmox([]) as api:
        result = harness.run("power-cycle", **power_cycle_env(api.endpoint), POWER_CYCLE_REASON="node:pci: gone")
    assert result.returncode == 0, result.stderr
    records = repairs(harness)
    assert [r["at"] for r in records[:-1]] == [earlier[1]["at"]]
    assert records[-1]["reason"] == "node:pci: gone"


def test_a_repairs_end_uncordons_the_node_its_drain_cordoned_ends_the_turn_and_records_the_repair(
    harness: Harness,
) -> None:
    ours = node(unschedulable=True, labels={"gpu-pool.dev/turn-state": "repairing"})
    ours["metadata"]["annotations"] = {
        "gpu-pool.dev/wave-cordoned": "dc1",
        "gpu-pool.dev/wave-turn": "t",
        "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable": "true",
    }
    harness.scenario({NODE_PATH: ours})
    result = harness.run("repair-done", REPAIR_REASON="node:health: Xid 79")
    assert result.returncode == 0, result.stderr
    after = harness.api().node(NODE)
    assert not after["spec"].get("unschedulable")
    annotations = after["metadata"]["annotations"]
    for gone in ("gpu-pool.dev/wave-cordoned", "gpu-pool.dev/wave-turn", "gpu-pool.dev/wave-stopped"):
        assert gone not in annotations
    # The operator's mark goes with the turn (it would keep a later upgrade's node cordoned).
    assert "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable" not in annotations
    assert json.loads(annotations["gpu-pool.dev/repairs"])[-1]["event"] == "repaired"
    assert "gpu-pool.dev/rollout" not in annotations  # a repair rolls nothing: the record stays the last turn's
    assert after["metadata"]["labels"]["gpu-pool.dev/turn-state"] == "done"
    assert result.stdout == f"{NODE}: repaired, serving\n"


def test_a_repairs_end_leaves_a_node_someone_else_cordoned_cordoned(harness: Harness) -> None:
    theirs = node(unschedulable=True)
    theirs["metadata"]["annotations"] = {"gpu-pool.dev/wave-turn": "t"}
    harness.scenario({NODE_PATH: theirs})
    result = harness.run("repair-done", REPAIR_REASON="node:health: Xid 79")
    assert result.returncode == 0, result.stderr
    after = harness.api().node(NODE)
    assert after["spec"]["unschedulable"] is True and "gpu-pool.dev/wave-turn" not in after["metadata"]["annotations"]
    assert "left cordoned: someone else cordoned it before the repair" in result.stdout


SMOKE = {"metadata": {"name": "cuda-smoke-dc1-x-repair-1", "namespace": "gpu-smoke-test"}}
SMOKE_PATH = "/apis/batch/v1/namespaces/gpu-smoke-test/jobs/cuda-smoke-dc1-x-repair-1"


def test_the_repairs_smoke_test_creates_its_job_and_waits_for_it_to_complete(harness: Harness) -> None:
    complete = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    harness.scenario({}, sequences={SMOKE_PATH: [{}, complete]})
    result = harness.run("smoke-test", SMOKE_JOB=json.dumps(SMOKE), TIMEOUT_MINUTES="1")
    assert result.returncode == 0, result.stderr
    assert "kubectl POST /apis/batch/v1/namespaces/gpu-smoke-test/jobs" in harness.kubectl()
    assert "(Complete)" in result.stdout


def test_a_failed_smoke_test_fails_the_repair_at_once_with_its_log_command(harness: Harness) -> None:
    failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the"}
    harness.scenario({}, sequences={SMOKE_PATH: [{"status": {"conditions": [failed]}}]})
    result = harness.run("smoke-test", SMOKE_JOB=json.dumps(SMOKE), TIMEOUT_MINUTES="1")
    assert result.returncode == 1
    assert "failed on rke2-worker-dc1-gpu-a (BackoffLimitExceeded: Job has reached the)" in result.stderr
    assert "kubectl -n gpu-smoke-test logs job/cuda-smoke-dc1-x-repair-1" in result.stderr


# --- the power cycle against the e2e tier's Proxmox stand-in (qemu-server's lock and PCI checks) -------------


def standin_vm(tmp_path: Path, *, card_on_host: bool, lock: str = "") -> tuple[Any, Any]:
    from tests.e2e.proxmox_api import ProxmoxState, Vm, a1000_host

    host = a1000_host() if card_on_host else [f for f in a1000_host() if not f.id.startswith("0000:01:00")]
    state = ProxmoxState({"pve-dc1": host}, tmp_path)
    state.mappings["gpu-dc1"] = {"id": "gpu-dc1", "type": "pci", "map": ["node=pve-dc1,path=0000:01:00,id=10de:25b0"]}
    vm = Vm(4101, "pve-dc1", {"name": NODE, "hostpci0": "mapping=gpu-dc1,pcie=1"}, status="running", lock=lock)
    state.vms[4101] = vm
    return state, vm


@pytest.mark.parametrize(
    ("card_on_host", "lock", "said"),
    [
        (False, "", "the start task of VM 4101 on pve-dc1 failed: no pci device info for device '0000:01:00.0'"),
        (True, "backup", "VM 4101 on pve-dc1 is locked (backup) right before its stop"),
    ],
    ids=["the host lost the card", "a backup holds the lock"],
)
def test_against_the_proxmox_stand_in_a_refused_cycle_is_one_line_and_charges_only_an_accepted_stop(
    harness: Harness, tmp_path: Path, card_on_host: bool, lock: str, said: str
) -> None:
    from tests.e2e.proxmox_standin import serving_api

    state, vm = standin_vm(tmp_path, card_on_host=card_on_host, lock=lock)
    harness.scenario(with_node(unschedulable=True, boot="boot-1"))
    with serving_api(tmp_path, state, "pulumi@pve!gpu-pool=abc") as endpoint:
        result = harness.run(
            "power-cycle",
            **(power_cycle_env(endpoint) | {"PROXMOX_INSECURE": "true"}),
            POWER_CYCLE_REASON="node:health: Xid 79",
        )

    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"gpu-pool: {said}")
    # The budget counts a stop that ended, and only that.
    assert len(repairs(harness)) == (0 if lock else 1)
    assert vm.status == ("running" if lock else "stopped")


# --- a turn that rolls a driver change passes only on a driver pod the operator replaced in it ----------------------


def noted(revision: str, **kwargs: Any) -> dict[str, dict[str, Any]]:
    """The node as a turn left it that started with its driver pod on `revision` (gate.note_driver_revision)."""
    found = node(gpus="4", unschedulable=True, **kwargs)
    found["metadata"]["annotations"] = {"gpu-pool.dev/driver-revision-before": revision}
    return {NODE_PATH: found}


def test_a_driver_template_turns_gate_does_not_pass_on_the_pod_it_started_on_though_that_pod_looks_in_sync(
    harness: Harness,
) -> None:
    """FIELD-REVIEW-6 WRONG-1: before the operator renders the new ClusterPolicy, the old pod is on the DaemonSet's
    newest revision, Ready, on the pinned driver and the node upgrade-done: a gate that passed then ended the turn,
    and the operator marked the node upgrade-required afterwards, where it stayed."""
    harness.scenario(
        noted("5d8f7c9b44", labels={"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"})
        | driver_pod(revision="5d8f7c9b44")
        | driver_daemonset_revisions("5d8f7c9b44")
    )
    result = harness.run("gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, FRESH_DRIVER="1", **gpu_env())
    assert result.returncode == 1
    assert "still on revision 5d8f7c9b44, the one this turn started on" in result.stderr

    without = harness.run("gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, **gpu_env())
    assert without.returncode == 0, without.stderr  # the gate of a turn without a driver change: as before


def test_a_driver_template_turns_gate_passes_on_the_pod_the_operator_replaced_on_the_newest_revision(
    harness: Harness,
) -> None:
    done = {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}
    harness.scenario(
        noted("5d8f7c9b44", labels=done)
        | driver_pod(revision="6b7c8d9e55")
        | driver_daemonset_revisions("5d8f7c9b44", "6b7c8d9e55")
    )
    result = harness.run("gpu-ready", TIMEOUT_MINUTES="5", FRESH_DRIVER="1", **gpu_env())
    assert result.returncode == 0, result.stderr


def test_a_driver_template_turns_gate_waits_for_a_pod_on_the_daemonsets_newest_revision(harness: Harness) -> None:
    done = {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}
    harness.scenario(
        noted("5d8f7c9b44", labels=done)
        | driver_pod(revision="6b7c8d9e55")
        | driver_daemonset_revisions("5d8f7c9b44", "6b7c8d9e55", "7c8d9e0f66")
    )
    result = harness.run("gpu-ready", TIMEOUT_MINUTES=TIMES_OUT, FRESH_DRIVER="1", **gpu_env())
    assert result.returncode == 1
    assert "the driver pod is on revision 6b7c8d9e55, the DaemonSet's newest is 7c8d9e0f66" in result.stderr
