"""Smoke test per domain, kernel upgrades and the Proxmox host preflight, under Pulumi mocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from offline.recording import Recording, reveal
from tests.proxmox_hardware import answering, device, ms01_host

Run = Callable[..., Recording]


def job(recording: Recording, domain: str) -> dict[str, Any]:
    return recording.named(f"{domain}-cuda-smoke-test").inputs


def test_smoke_test_is_pinned_to_its_domain_node_and_asks_only_for_one_gpu(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    spec = job(recording, "dc2")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "rke2-worker-dc2-gpu-a"}
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert spec["containers"][0]["image"] == "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
    assert all(t["key"] != "nvidia.com/gpu" for t in spec["tolerations"]), "Kyverno must add it"
    assert "affinity" not in spec


def test_a_gpu_chain_broken_below_the_scheduler_fails_that_domains_smoke_test_not_silently(
    run_stack_program: Run, prod_config
):
    # Toolkit blocked (KubeArmor), CDI spec never read, nvidia not the default runtime: the pod then runs
    # with no GPU injected or hangs. The Job uses the default runtime like any workload, so it fails, and
    # its deadline turns a hang into a failure that `pulumi up` reports under the domain's name.
    recording = run_stack_program(prod_config)
    job_inputs = job(recording, "dc1")
    spec = job_inputs["spec"]
    assert "runtimeClassName" not in spec["template"]["spec"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["backoffLimit"] == 1
    assert spec["activeDeadlineSeconds"] == 600
    assert job_inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"


def test_smoke_test_runs_under_the_restricted_pod_security_standard(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    namespace = recording.named("gpu-platform-smoke-test-namespace").inputs["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    spec = job(recording, "dc1")["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]["securityContext"]
    assert container == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_smoke_test_waits_for_operator_policy_labels_and_taint(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    deps = recording.named("dc1-cuda-smoke-test").dependencies
    for name in ("gpu-platform-gpu-operator", "gpu-platform-gpu-steering-policy", "dc1-node-labels", "dc1-node-taint"):
        assert recording.urn_of(name) in deps, name


def _job_names(recording: Recording) -> dict[str, str]:
    return {d: job(recording, d)["metadata"]["name"] for d in ("dc1", "dc2", "dc3")}


def test_smoke_test_name_changes_exactly_when_what_it_validates_changes(run_stack_program: Run, prod_config, monitor):
    base = _job_names(run_stack_program(prod_config))
    assert base["dc1"].startswith("cuda-smoke-dc1-")
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:failureDomains"][0]["cores"] = 16
    assert _job_names(run_stack_program(prod_config)) == base
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:failureDomains"][0]["kernel"] = "6.8.0-60-generic"
    after_kernel = _job_names(run_stack_program(prod_config))
    assert after_kernel["dc1"] != base["dc1"] and after_kernel["dc2"] == base["dc2"]
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:gpuOperator"]["driverVersion"] = "580.173.02"
    after_driver = _job_names(run_stack_program(prod_config))
    assert all(after_driver[d] != after_kernel[d] for d in after_driver)


def test_moving_the_card_to_another_slot_re_runs_that_domains_smoke_test(
    run_stack_program: Run, prod_config, monitor, pci_tables
):
    base = _job_names(run_stack_program(prod_config))
    monitor.recording.registrations.clear()
    pci_tables["pve-dc3"] = ms01_host(gpu_at="0000:02:00")
    prod_config["gpu-pool:failureDomains"][2]["gpu"]["pciAddress"] = "0000:02:00"
    after = _job_names(run_stack_program(prod_config))
    assert after["dc3"] != base["dc3"] and after["dc1"] == base["dc1"]


def test_smoke_test_can_be_turned_off_per_stack(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:smokeTest"] = {"enabled": False}
    names = {r.name for r in run_stack_program(prod_config).registrations}
    assert not {n for n in names if "smoke" in n}


def test_an_unpinned_smoke_test_image_is_refused(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu-pool:smokeTest"] = {"image": "nvcr.io/nvidia/k8s/cuda-sample:latest"}
    with pytest.raises(pulumi.RunError, match=r"gpu-pool:smokeTest\.image: ':latest' is not a pin"):
        run_stack_program(prod_config)
    assert monitor.recording.registrations == []


def test_the_articles_driver_on_the_pinned_chart_is_refused_with_the_supported_r570(
    run_stack_program: Run, prod_config, monitor
):
    prod_config["gpu-pool:gpuOperator"]["driverVersion"] = "570.133.20"
    with pytest.raises(pulumi.RunError) as raised:
        run_stack_program(prod_config)
    assert "gpu-pool:gpuOperator" in str(raised.value) and "570.211.01" in str(raised.value)
    assert monitor.recording.registrations == []


def test_no_kernel_upgrade_steps_without_a_pinned_kernel(run_stack_program: Run, prod_config):
    assert not [r for r in run_stack_program(prod_config).registrations if "-kernel-" in r.name]


def test_changing_a_domains_kernel_runs_the_ordered_upgrade_for_that_domain_only(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:failureDomains"][1]["kernel"] = "6.8.0-60-generic"
    recording = run_stack_program(prod_config)
    steps = [r for r in recording.registrations if "-kernel-" in r.name]
    assert {r.name for r in steps} == {
        "dc2-kernel-drain",
        "dc2-kernel-install",
        "dc2-kernel-driver-rebuild",
        "dc2-kernel-uncordon",
    }
    for step in steps:
        assert step.inputs["triggers"] == ["6.8.0-60-generic"], step.name

    def waits_for(later: str, earlier: str) -> bool:
        return recording.urn_of(earlier) in recording.named(later).dependencies

    assert waits_for("dc2-kernel-drain", "dc2-node-taint")
    assert waits_for("dc2-kernel-install", "dc2-kernel-drain")
    assert waits_for("dc2-kernel-driver-rebuild", "dc2-kernel-install")
    assert waits_for("dc2-cuda-smoke-test", "dc2-kernel-driver-rebuild")
    assert waits_for("dc2-kernel-uncordon", "dc2-cuda-smoke-test")
    drain = recording.named("dc2-kernel-drain").inputs["create"]
    assert drain.index("cordon") < drain.index("drain") and "--ignore-daemonsets" in drain
    install = recording.named("dc2-kernel-install").inputs
    assert reveal(install["connection"]) == {"host": "10.10.22.51", "user": "ubuntu"}
    assert "linux-headers-6.8.0-60-generic" in install["create"] and "apt-mark hold" in install["create"]
    rebuild = recording.named("dc2-kernel-driver-rebuild").inputs["create"]
    assert "kernelVersion" in rebuild and "--field-selector spec.nodeName=rke2-worker-dc2-gpu-a" in rebuild
    # The driver DaemonSet is OnDelete: `rollout status` would refuse it, so the new pod itself is awaited.
    assert "rollout status" not in rebuild
    assert rebuild.index("delete pod") < rebuild.index("wait --for=condition=Ready pod")
    assert "Advanced options for Ubuntu>Ubuntu, with Linux 6.8.0-60-generic" in install["create"]
    assert "linux-virtual" in install["create"].split("apt-mark hold", 1)[1]
    tolerations = job(recording, "dc2")["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_preflight_passes_on_the_articles_hardware_and_is_reported(run_stack_program: Run, prod_config, monitor):
    outputs = run_stack_program(prod_config).stack_outputs
    assert outputs["failureDomains"]["dc1"]["preflight"].startswith("passed: 10de:25b0")
    calls = [i for i in monitor.recording.invocations if i.token == "proxmoxve:hardware/getPci:getPci"]
    assert sorted(c.args["nodeName"] for c in calls) == ["pve-dc1", "pve-dc2", "pve-dc3"]


BAD_HARDWARE = [
    (
        "card missing",
        ms01_host(gpu_at="0000:02:00"),
        "no PCI device at 0000:01:00; NVIDIA devices on this host: 0000:02:00.0",
    ),
    (
        "another vendor's card",
        [device("0000:01:00.0", "1002", "73bf", 14, name="Navi 21")],
        "0000:01:00.0 is 1002:73bf 'Navi 21', not an NVIDIA device",
    ),
    (
        "another NVIDIA card",
        [device("0000:01:00.0", "10de", "2882", 14, name="RTX 4060"), device("0000:01:00.1", "10de", "22be", 14)],
        "is 10de:2882 'RTX 4060', but gpu.vendorDeviceId says 10de:25b0",
    ),
    (
        "shared IOMMU group",
        [*ms01_host(), device("0000:02:00.0", "8086", "125c", 14, subsystem="8086:0000", name="I226-V")],
        "shares IOMMU group 14 with 0000:02:00.0",
    ),
    ("IOMMU off", ms01_host(gpu_group=-1, audio_group=-1), "is in no IOMMU group: IOMMU is off"),
    ("group moved", ms01_host(gpu_group=15, audio_group=15), "is in IOMMU group 15, config says 14"),
]


@pytest.mark.parametrize(("case", "table", "expected"), BAD_HARDWARE, ids=[c[0] for c in BAD_HARDWARE])
def test_preflight_fails_the_plan_naming_domain_node_and_what_was_found(
    case: str, table: list[dict[str, Any]], expected: str, run_stack_program: Run, prod_config, pci_tables, monitor
):
    pci_tables["pve-dc2"] = table
    with pytest.raises(pulumi.RunError) as raised:
        run_stack_program(prod_config)
    message = str(raised.value)
    assert "domain dc2 (node pve-dc2)" in message and expected in message, message
    assert not [r for r in monitor.recording.registrations if r.type.startswith(("proxmoxve:index", "gpu-pool"))]


def test_preflight_host_check_refuses_a_card_not_bound_to_vfio(prod_config):
    from offline.runner import install_mocks, run_main, set_config, to_engine_config

    install_mocks("test", invoke=answering(host_check_stdout="nvidia\n24\n"))
    prod_config["gpu-pool:preflight"] = {"hostCheck": True}
    engine, secret_keys = to_engine_config(prod_config, {})
    set_config(engine, secret_keys)
    with pytest.raises(pulumi.RunError, match=r"bound to 'nvidia' on the host, not vfio-pci"):
        run_main()


def test_preflight_can_be_disabled_and_says_so(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu-pool:preflight"] = {"enabled": False}
    outputs = run_stack_program(prod_config).stack_outputs
    assert outputs["failureDomains"]["dc3"]["preflight"] == "skipped: gpu-pool:preflight.enabled is false"
    assert not monitor.recording.invocations


def test_offline_preview_reports_preflight_skipped_rather_than_passed(tmp_path):
    import json

    from offline.preview import main

    assert main(["--stack", "prod", "--out", str(tmp_path), "--quiet"]) == 0
    outputs = json.loads((tmp_path / "plan.json").read_text())["outputs"]
    assert {d["preflight"] for d in outputs["failureDomains"].values()} == {
        "skipped: the offline preview has no Proxmox API"
    }
