"""A pinned kernel runs the ordered upgrade (drain, install, reboot, driver rebuild, smoke test, uncordon)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from offline.recording import Recording, reveal

Run = Callable[..., Recording]


def job(recording: Recording, domain: str) -> dict[str, Any]:
    return recording.named(f"{domain}-cuda-smoke-test").inputs


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
