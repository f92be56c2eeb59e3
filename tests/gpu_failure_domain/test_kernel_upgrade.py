"""A pinned kernel on a new worker runs the ordered upgrade (drain, install, reboot, driver rebuild, smoke test,
then the domain's last step uncordons). On day 2 a kernel change is a wave turn (tests/gpu_failure_domain/
test_plan.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.gpu_failure_domain.kernel_upgrade import login_check_command
from offline.recording import Recording, is_secret, reveal
from tests.ssh_keys import TEST_PUBLIC_KEY

Run = Callable[..., Recording]
KEY = TEST_PUBLIC_KEY


def job(recording: Recording, domain: str) -> dict[str, Any]:
    return recording.named(f"{domain}-cuda-smoke-test").inputs


def test_no_kernel_upgrade_steps_without_a_pinned_kernel(run_stack_program: Run, prod_config):
    assert not [r for r in run_stack_program(prod_config).registrations if "-kernel-" in r.name]


def test_a_new_worker_with_a_pinned_kernel_runs_the_ordered_upgrade_for_that_domain_only(
    run_stack_program: Run, prod_config
):
    prod_config["gpu-pool:failureDomains"][1].update({"kernel": "6.8.0-60-generic", "sshAuthorizedKeys": [KEY]})
    recording = run_stack_program(prod_config)
    steps = [r for r in recording.registrations if "-kernel-" in r.name]
    assert {r.name for r in steps} == {
        "dc2-kernel-login",
        "dc2-kernel-drain",
        "dc2-kernel-install",
        "dc2-kernel-driver-rebuild",
    }
    for step in steps:
        assert step.inputs["triggers"] == ["6.8.0-60-generic"], step.name

    def waits_for(later: str, earlier: str) -> bool:
        return recording.urn_of(earlier) in recording.named(later).dependencies

    assert waits_for("dc2-kernel-login", "dc2-node-taint")
    assert waits_for("dc2-kernel-drain", "dc2-kernel-login")
    assert waits_for("dc2-kernel-install", "dc2-kernel-drain")
    assert waits_for("dc2-kernel-driver-rebuild", "dc2-kernel-install")
    assert waits_for("dc2-gpu-ready", "dc2-kernel-driver-rebuild")
    assert waits_for("dc2-cuda-smoke-test", "dc2-gpu-ready")
    # Only the domain's last step uncordons, after the smoke test, and only a node the drain marked as cordoned by it.
    assert waits_for("dc2-rollout", "dc2-cuda-smoke-test")
    # The drain is the turn's start, node/'s (the hold, the operator held off, the cordon marked dc2's, the drain).
    drain = recording.named("dc2-kernel-drain").inputs
    assert drain["environment"]["GPU_POOL_STEP"] == "drain" and drain["environment"]["TURN_DOMAIN"] == "dc2"
    assert drain["create"] == recording.named("dc2-gpu-ready").inputs["create"]
    install = recording.named("dc2-kernel-install").inputs
    connection = reveal(install["connection"])
    assert (connection["host"], connection["user"]) == ("10.10.22.51", "ubuntu")
    assert "privateKey" not in connection  # the ssh-agent is used

    assert "linux-image-6.8.0-60-generic" in install["create"] and "apt-mark hold" in install["create"]
    # The driver container fetches its own headers from the archive; the host never needs them.
    assert "linux-headers-6.8.0-60-generic" not in install["create"]
    rebuild = recording.named("dc2-kernel-driver-rebuild").inputs["environment"]
    assert (rebuild["GPU_POOL_STEP"], rebuild["KERNEL"]) == ("kernel-rebuild", "6.8.0-60-generic")
    # Only a kernel change runs a step: any other change (say, a new gpu-pool version) runs a no-op update, which
    # runs under the step's own interpreter (`python3 -c` for the node-steps script's: an `echo` there was a
    # SyntaxError that failed the first `up` after an upgrade).
    import subprocess
    import sys

    for step in steps:
        interpreter = step.inputs.get("interpreter") or ["/bin/sh", "-c"]
        argv = [sys.executable, "-c"] if interpreter[0] == "python3" else list(interpreter)
        ran = subprocess.run([*argv, step.inputs["update"]], capture_output=True, text=True, check=False)
        assert (ran.returncode, ran.stdout) == (0, "kernel 6.8.0-60-generic unchanged: nothing to do\n"), step.name
    assert "Advanced options for Ubuntu>Ubuntu, with Linux 6.8.0-60-generic" in install["create"]
    assert "linux-virtual" in install["create"].split("apt-mark hold", 1)[1]
    tolerations = job(recording, "dc2")["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_a_key_the_vm_does_not_trust_fails_the_upgrade_before_its_node_is_drained(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:failureDomains"][1].update({"kernel": "6.8.0-60-generic", "sshAuthorizedKeys": [KEY]})
    recording = run_stack_program(prod_config)
    login, install = recording.named("dc2-kernel-login").inputs, recording.named("dc2-kernel-install").inputs

    assert recording.named("dc2-kernel-login").type == "command:remote:Command"
    assert reveal(login["connection"]) == reveal(install["connection"])
    # The install runs sudo without a terminal: the check proves that too, before anything is drained.
    assert login["create"].startswith("sudo -n true")
    assert recording.urn_of("dc2-kernel-login") in recording.named("dc2-kernel-drain").dependencies


def test_a_pinned_kernel_without_an_ssh_key_on_the_vm_is_refused_at_preview(
    run_stack_program: Run, prod_config, monitor
):
    prod_config["gpu-pool:failureDomains"][1]["kernel"] = "6.8.0-60-generic"
    with pytest.raises(pulumi.RunError, match=r"failureDomains\[dc2\]\.kernel: .*no sshAuthorizedKeys"):
        run_stack_program(prod_config)
    assert monitor.recording.registrations == []


def test_a_pinned_kernel_without_an_agent_or_a_private_key_is_refused_at_preview(
    run_stack_program: Run, prod_config, monitor, monkeypatch
):
    prod_config["gpu-pool:proxmox"]["ssh"]["agent"] = False
    prod_config["gpu-pool:failureDomains"][1].update({"kernel": "6.8.0-60-generic", "sshAuthorizedKeys": [KEY]})
    monkeypatch.delenv("SSH_AUTH_SOCK")
    recording = None
    with pytest.raises(pulumi.RunError, match=r"gpu-pool:sshPrivateKey"):
        recording = run_stack_program(prod_config)
    assert recording is None and monitor.recording.registrations == []


def test_a_private_key_secret_reaches_the_kernel_install_as_a_secret(run_stack_program: Run, prod_config, monkeypatch):
    prod_config["gpu-pool:proxmox"]["ssh"]["agent"] = False
    prod_config["gpu-pool:failureDomains"][1].update({"kernel": "6.8.0-60-generic", "sshAuthorizedKeys": [KEY]})
    monkeypatch.delenv("SSH_AUTH_SOCK")
    # Without the agent, the snippet upload needs the provider's own SSH credential (ssh-credential-for-snippets).
    monkeypatch.setenv("PROXMOX_VE_SSH_PRIVATE_KEY", "-----BEGIN OPENSSH PRIVATE KEY-----")
    recording = run_stack_program(prod_config, {"sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----"})
    connection = recording.named("dc2-kernel-install").inputs["connection"]
    assert is_secret(connection) or is_secret(connection.get("privateKey"))


def _login_on_a_fake_vm(tmp_path: Path, command: str, served: set[str]) -> subprocess.CompletedProcess[str]:
    """The kernel login as its SSH session runs it, on a VM whose apt sources serve `served` (apt-cache answers as
    apt-cache does: 0 for a package it knows, 100 for one it does not)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shims = {
        "sudo": '#!/bin/sh\n[ "$1" = -n ] && shift\nexec env "$@"\n',
        "apt-get": f'#!/bin/sh\necho "$@" >> {tmp_path}/apt-get.log\n',
        "apt-cache": '#!/bin/sh\nfor last; do :; done\ngrep -qx "$last" ' + f"{tmp_path}/served || exit 100\n",
    }
    for name, text in shims.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "served").write_text("".join(f"{name}\n" for name in served))
    return subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}
    )


def test_the_kernel_login_proves_the_pinned_kernels_packages_exist_before_the_drain(tmp_path: Path) -> None:
    kernel = "6.8.0-60-generic"
    served = {f"linux-image-{kernel}", f"linux-modules-{kernel}"}
    ok = _login_on_a_fake_vm(tmp_path, login_check_command(kernel), served)
    assert ok.returncode == 0, ok.stderr
    assert f"kernel {kernel} packages found" in ok.stdout
    assert (tmp_path / "apt-get.log").read_text().startswith("update")


def test_a_kernel_pin_the_vms_apt_sources_do_not_serve_fails_the_login_naming_the_package(tmp_path: Path) -> None:
    kernel = "6.8.0-999-generic"
    failed = _login_on_a_fake_vm(tmp_path, login_check_command(kernel), {f"linux-image-{kernel}"})
    assert failed.returncode == 1
    assert f"the VM's apt sources have no linux-modules-{kernel}, which the kernel pin {kernel} installs" in (
        failed.stderr
    )
    assert "nothing was drained" in failed.stderr
