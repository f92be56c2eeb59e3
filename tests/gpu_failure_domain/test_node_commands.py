"""The shell steps run for real against a stand-in kubectl: they parse, call what they should, in order."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from components.gpu_failure_domain.kernel_upgrade import drain_command, unchanged_kernel_command, uncordon_command
from components.gpu_failure_domain.node_metadata import taint_command, untaint_command
from components.shared.kubectl import kubectl_prefix

NODE = "rke2-worker-dc1-gpu-a"
KERNEL = "6.8.0-60-generic"

FAKE_KUBECTL = """#!/bin/sh
echo "$*" >> "$KUBECTL_LOG"
exit "${KUBECTL_EXIT:-0}"
"""


@pytest.fixture
def kubectl(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kubectl"
    fake.write_text(FAKE_KUBECTL)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def run(command: str, home: Path, exit_code: int = 0) -> tuple[int, list[str]]:
    log = home / "kubectl.log"
    env = {
        **os.environ,
        "PATH": f"{home / 'bin'}:{os.environ['PATH']}",
        "KUBECTL_LOG": str(log),
        "KUBECTL_EXIT": str(exit_code),
    }
    result = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines() if log.exists() else []
    return result.returncode, calls


def test_taint_and_untaint_touch_only_the_gpu_taint(kubectl: Path) -> None:
    assert run(taint_command(NODE, "kubectl"), kubectl) == (
        0,
        [f"taint node {NODE} nvidia.com/gpu=true:NoSchedule --overwrite"],
    )


def test_untaint_of_a_node_that_is_already_gone_does_not_fail_the_destroy(kubectl: Path) -> None:
    code, calls = run(untaint_command(NODE, "kubectl"), kubectl, exit_code=1)
    assert code == 0
    assert calls == [f"taint node {NODE} nvidia.com/gpu-"]


def test_a_configured_kubeconfig_and_context_reach_every_call(kubectl: Path) -> None:
    prefix = kubectl_prefix("/home/me/.kube/lab config", "lab")
    _, calls = run(taint_command(NODE, prefix), kubectl)
    assert calls[0].startswith("--kubeconfig /home/me/.kube/lab config --context lab taint node")


def test_the_kernel_drain_cordons_first_and_the_uncordon_follows(kubectl: Path) -> None:
    calls: list[str] = []
    for step in (drain_command(NODE, "kubectl"), uncordon_command(NODE, "kubectl")):
        code, step_calls = run(step, kubectl)
        assert code == 0, step
        calls = step_calls
    assert calls == [
        f"cordon {NODE}",
        f"drain {NODE} --ignore-daemonsets --delete-emptydir-data --timeout=15m",
        f"uncordon {NODE}",
    ]


def test_a_kernel_steps_update_does_nothing_so_a_new_gpu_pool_version_never_drains_again(kubectl: Path) -> None:
    code, calls = run(unchanged_kernel_command(KERNEL), kubectl)
    assert (code, calls) == (0, [])


def test_a_failing_drain_stops_the_upgrade_before_anything_else(kubectl: Path) -> None:
    code, calls = run(drain_command(NODE, "kubectl"), kubectl, exit_code=1)
    assert code != 0
    assert calls == [f"cordon {NODE}"]
