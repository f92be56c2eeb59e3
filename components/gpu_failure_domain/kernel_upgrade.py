"""A GPU node's kernel upgrade as a deliberate, ordered operation (the article's runbook, automated).

A new kernel without a rebuilt module is the "Unknown symbol __register_chrdev" trap. So for one
domain at a time: cordon and drain, install and hold the kernel, reboot, wait for the node to come
back on that kernel, restart that node's driver pod (it rebuilds nvidia.ko), smoke test, uncordon.
"""

from __future__ import annotations

import shlex

from components.gpu_failure_domain.cloud_init import HELD_KERNEL_PACKAGES
from knowledge.gpu_operator import DRIVER_POD_SELECTOR


def drain_command(node: str, kubectl: str) -> str:
    quoted = shlex.quote(node)
    return (
        f"{kubectl} cordon {quoted} && "
        f"{kubectl} drain {quoted} --ignore-daemonsets --delete-emptydir-data --timeout=15m"
    )


def install_kernel_command(kernel: str) -> str:
    """Runs on the VM over SSH. The reboot is scheduled so the SSH session ends cleanly first.

    GRUB is pointed at this kernel by name: otherwise the VM boots the newest installed kernel, and a
    pin below it (a rollback, or older than the cloud image's) would never take effect.
    """
    packages = " ".join(
        shlex.quote(f"{prefix}-{kernel}") for prefix in ("linux-image", "linux-headers", "linux-modules")
    )
    grub_default = shlex.quote(f'GRUB_DEFAULT="Advanced options for Ubuntu>Ubuntu, with Linux {kernel}"')
    return (
        "set -e; sudo apt-mark unhold $(apt-mark showhold | grep '^linux-' || true) >/dev/null; "
        "sudo apt-get update -q; "
        f"sudo DEBIAN_FRONTEND=noninteractive apt-get install -y {packages}; "
        f"sudo apt-mark hold {packages} {' '.join(HELD_KERNEL_PACKAGES)}; "
        f"echo {grub_default} | sudo tee /etc/default/grub.d/99-gpu-pool-kernel.cfg >/dev/null; "
        "sudo update-grub; "
        "sudo systemd-run --on-active=5 /bin/systemctl reboot"
    )


def wait_for_kernel_command(node: str, kernel: str, kubectl: str, namespace: str, timeout_minutes: int = 30) -> str:
    """Wait until the node reports the new kernel and is Ready, then rebuild its driver."""
    quoted = shlex.quote(node)
    seconds = timeout_minutes * 60
    ns = shlex.quote(namespace)
    on_node = f"--field-selector spec.nodeName={quoted}"
    return (
        f"deadline=$(( $(date +%s) + {seconds} )); "
        f"until [ \"$({kubectl} get node {quoted} -o jsonpath='{{.status.nodeInfo.kernelVersion}}' 2>/dev/null)\" "
        f"= {shlex.quote(kernel)} ]; do "
        f'if [ "$(date +%s)" -ge "$deadline" ]; then echo "node {node} did not come back on kernel {kernel}" >&2; '
        f"exit 1; fi; sleep 10; done; "
        f"{kubectl} wait --for=condition=Ready node/{quoted} --timeout={seconds}s && "
        # Only this node's driver pod: the other domains keep serving while this one rebuilds. The
        # chart runs the driver DaemonSet with OnDelete, so `rollout status` cannot follow it: wait for
        # the replacement pod on this node to be Ready instead (it compiles nvidia.ko first).
        f"{kubectl} -n {ns} delete pod -l {DRIVER_POD_SELECTOR} {on_node} --wait=true && "
        f"until {kubectl} -n {ns} get pod -l {DRIVER_POD_SELECTOR} {on_node} -o name | grep -q .; do "
        f'if [ "$(date +%s)" -ge "$deadline" ]; then echo "no driver pod came back on {node}" >&2; exit 1; fi; '
        f"sleep 5; done && "
        f"{kubectl} -n {ns} wait --for=condition=Ready pod -l {DRIVER_POD_SELECTOR} {on_node} --timeout=20m"
    )


def uncordon_command(node: str, kubectl: str) -> str:
    return f"{kubectl} uncordon {shlex.quote(node)}"
