"""The per-domain CUDA smoke test Job under Pulumi mocks: where it runs, what it waits for, when it re-runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from offline.recording import Recording
from tests.proxmox_hardware import ms01_host
from tests.ssh_keys import TEST_PUBLIC_KEY

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


def test_smoke_test_waits_for_its_node_to_be_gpu_ready_and_for_the_steering_policy(run_stack_program: Run, prod_config):
    recording = run_stack_program(prod_config)
    job_deps = recording.named("dc1-cuda-smoke-test").dependencies
    for name in ("dc1-gpu-ready", "gpu-platform-gpu-steering-policy", "gpu-platform-smoke-test-namespace"):
        assert recording.urn_of(name) in job_deps, name
    gate = recording.named("dc1-gpu-ready")
    for name in ("gpu-platform-gpu-operator-ready", "dc1-node-labels", "dc1-node-taint"):
        assert recording.urn_of(name) in gate.dependencies, name
    env = gate.inputs["environment"]
    assert (env["GPU_POOL_STEP"], env["GPU_SLOTS"], env["DRIVER_VERSION"]) == ("gpu-ready", "4", "595.91.07")
    # The Job's deadline starts after the gate, so the first driver build is not counted against it.
    assert job(recording, "dc1")["spec"]["activeDeadlineSeconds"] == 600
    assert env["TIMEOUT_MINUTES"] == "45"


def test_a_driver_bump_reruns_the_gate_on_every_node_before_the_new_smoke_test(
    run_stack_program: Run, prod_config, monitor
):
    before = run_stack_program(prod_config).named("dc2-gpu-ready").inputs["environment"]
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:gpuOperator"]["driverVersion"] = "580.173.02"
    after = run_stack_program(prod_config).named("dc2-gpu-ready").inputs["environment"]
    assert before["DRIVER_VERSION"] != after["DRIVER_VERSION"] == "580.173.02"


def _job_names(recording: Recording) -> dict[str, str]:
    return {d: job(recording, d)["metadata"]["name"] for d in ("dc1", "dc2", "dc3")}


def test_smoke_test_name_changes_exactly_when_what_it_validates_changes(run_stack_program: Run, prod_config, monitor):
    base = _job_names(run_stack_program(prod_config))
    assert base["dc1"].startswith("cuda-smoke-dc1-")
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:failureDomains"][0]["cores"] = 16
    assert _job_names(run_stack_program(prod_config)) == base
    monitor.recording.registrations.clear()
    prod_config["gpu-pool:failureDomains"][0].update(
        {"kernel": "6.8.0-60-generic", "sshAuthorizedKeys": [TEST_PUBLIC_KEY]}
    )
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
