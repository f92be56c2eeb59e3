"""A GPU node's kernel upgrade as a deliberate, ordered operation (the article's runbook, automated).

A new kernel without a rebuilt module is the "Unknown symbol __register_chrdev" trap. So for one
domain at a time: cordon and drain, install and hold the kernel, reboot, wait for the node to come
back on that kernel, restart that node's driver pod (it rebuilds nvidia.ko), smoke test, uncordon.

Each step runs when the kernel pin changes (its trigger) and at no other time: a later change to a step's
own text (a gpu-pool upgrade) runs its `update`, which does nothing, instead of draining a node again.
"""

from __future__ import annotations

import shlex

from components.gpu_failure_domain.cloud_init import HELD_KERNEL_PACKAGES


def login_check_command(kernel: str | None = None) -> str:
    """Runs on the VM over SSH before the drain. The VM trusts the keys cloud-init gave it at its creation, and
    only those: a key added to sshAuthorizedKeys later never reaches it. Logging in (and sudo without a
    password, which the install needs) is proven here, while the node still serves its GPU pods.

    With `kernel`, the packages the install will ask for are proven to be in the VM's apt sources too (after an
    `apt-get update`, as the install runs it): a pin the archive does not serve (a typo, a kernel its mirror lacks,
    one withdrawn) fails here, before the drain, instead of after it."""
    login = 'sudo -n true && echo "ssh and sudo ok on $(hostname)"'
    if kernel is None:
        return login
    packages = " ".join(shlex.quote(name) for name in kernel_packages(kernel))
    missing = shlex.quote(
        f"gpu-pool: the VM's apt sources have no %s, which the kernel pin {kernel} installs: pin a kernel "
        "`apt-cache search linux-image-` lists on the VM (or add it to your apt mirror); nothing was drained\n"
    )
    return (
        f"{login} && sudo apt-get update -q >/dev/null && "
        f"for package in {packages}; do "
        'apt-cache show --no-all-versions "$package" >/dev/null 2>&1 || '
        f'{{ printf {missing} "$package" >&2; exit 1; }}; '
        f"done && echo {shlex.quote(f'kernel {kernel} packages found')}"
    )


def kernel_packages(kernel: str) -> tuple[str, ...]:
    """What the kernel install asks apt for (no headers: the driver container installs the ones it builds
    against itself, see cloud_init.py)."""
    return tuple(f"{prefix}-{kernel}" for prefix in ("linux-image", "linux-modules"))


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
    packages = " ".join(shlex.quote(name) for name in kernel_packages(kernel))
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


def uncordon_command(node: str, kubectl: str) -> str:
    return f"{kubectl} uncordon {shlex.quote(node)}"


def unchanged_kernel_command(kernel: str) -> str:
    """The `update` of every kernel step: the kernel did not change, so there is nothing to do."""
    return f"echo {shlex.quote(f'kernel {kernel} unchanged: nothing to do')}"


def unchanged_kernel_script(kernel: str) -> str:
    """The same for a step the node-steps script runs (`python3 -c`): Python, which `echo` is not."""
    return f"print({f'kernel {kernel} unchanged: nothing to do'!r})"
