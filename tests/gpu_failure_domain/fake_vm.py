"""A VM's shell for a day-2 step's command, with its /etc under a temporary root: what a files turn writes can be
read back (and handed to apt itself) without touching this machine's /etc."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run_on_a_fake_vm(
    command: str, root: Path, stdin: str = "", *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Runs a step's command as its SSH session would (`stdin`: what pulumi-command sends, the registry
    credentials), with /etc under `root`: `sudo` runs its command, `systemctl` records what it was asked in
    `root/systemctl.log`."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    # sudo's own options (-n: never ask for a password) are dropped; it runs the rest as given.
    (bin_dir / "sudo").write_text('#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n')
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {root}/systemctl.log\n')
    # The system store's refresh is the VM's: recorded as asked, never run on this machine.
    (bin_dir / "update-ca-certificates").write_text(
        f'#!/bin/sh\necho "update-ca-certificates $*" >> {root}/systemctl.log\n'
    )
    for shim in ("sudo", "systemctl", "update-ca-certificates"):
        (bin_dir / shim).chmod(0o755)
    said = subprocess.run(
        ["bash", "-c", _rooted(command, root)],
        capture_output=True,
        text=True,
        # The files stdin carries name their places on the VM too.
        input=_rooted(stdin, root),
        env={"PATH": f"{bin_dir}:/usr/bin:/bin:/usr/sbin:/sbin"},
    )
    if check:
        assert said.returncode == 0, said.stderr
    return said


def systemctl_calls(root: Path) -> list[str]:
    log = root / "systemctl.log"
    return log.read_text().splitlines() if log.exists() else []


def _rooted(text: str, root: Path) -> str:
    """The VM's /etc and its CA folder under `root`."""
    return text.replace("/etc/", f"{root}/etc/").replace("/usr/local/share/", f"{root}/usr/local/share/")
