"""A GPU node's kernel upgrade as a deliberate, ordered operation (the article's runbook, automated).

A new kernel without a rebuilt module is the "Unknown symbol __register_chrdev" trap. So for one
domain at a time: cordon and drain, install and hold the kernel, reboot, wait for the node to come
back on that kernel, restart that node's driver pod (it rebuilds nvidia.ko), smoke test, uncordon.
"""

from __future__ import annotations

import shlex

DRIVER_POD_SELECTOR = "app=nvidia-driver-daemonset"


def drain_command(node: str, kubectl: str) -> str:
    quoted = shlex.quote(node)
    return (
        f"{kubectl} cordon {quoted} && "
        f"{kubectl} drain {quoted} --ignore-daemonsets --delete-emptydir-data --timeout=15m"
    )


def install_kernel_command(kernel: str) -> str:
    """Runs on the VM over SSH. The reboot is scheduled so the SSH session ends cleanly first."""
    packages = " ".join(
        shlex.quote(f"{prefix}-{kernel}") for prefix in ("linux-image", "linux-headers", "linux-modules")
    )
    return (
        "set -e; sudo apt-mark unhold $(apt-mark showhold | grep '^linux-' || true) >/dev/null; "
        "sudo apt-get update -q; "
        f"sudo DEBIAN_FRONTEND=noninteractive apt-get install -y {packages}; "
        f"sudo apt-mark hold {packages} linux-generic linux-image-generic linux-headers-generic; "
        "sudo systemd-run --on-active=5 /bin/systemctl reboot"
    )


def wait_for_kernel_command(node: str, kernel: str, kubectl: str, namespace: str, timeout_minutes: int = 30) -> str:
    """Wait until the node reports the new kernel and is Ready, then rebuild its driver."""
    quoted = shlex.quote(node)
    seconds = timeout_minutes * 60
    return (
        f"deadline=$(( $(date +%s) + {seconds} )); "
        f"until [ \"$({kubectl} get node {quoted} -o jsonpath='{{.status.nodeInfo.kernelVersion}}' 2>/dev/null)\" "
        f"= {shlex.quote(kernel)} ]; do "
        f'if [ "$(date +%s)" -ge "$deadline" ]; then echo "node {node} did not come back on kernel {kernel}" >&2; '
        f"exit 1; fi; sleep 10; done; "
        f"{kubectl} wait --for=condition=Ready node/{quoted} --timeout={seconds}s && "
        # Only this node's driver pod: the other domains keep serving while this one rebuilds.
        f"{kubectl} -n {shlex.quote(namespace)} delete pod -l {DRIVER_POD_SELECTOR} "
        f"--field-selector spec.nodeName={quoted} --wait=true && "
        f"{kubectl} -n {shlex.quote(namespace)} rollout status daemonset/nvidia-driver-daemonset --timeout=20m"
    )


def uncordon_command(node: str, kubectl: str) -> str:
    return f"{kubectl} uncordon {shlex.quote(node)}"
