"""A VM's first boot run as the script cloud-init runs, against the lab's https servers, with no route out.

What is real: the rendered runcmd and the step runner it writes (components/gpu_failure_domain/first_boot.py), curl,
RKE2's own install.sh (the refdata copy, at the pinned release or at master), sha256sum and tar, TLS with a CA made
in the test, and the trust a VM's system store gives curl (cloud-init's `ca_certs` puts each certificate in the
bundle update-ca-certificates writes: the bundle here is this machine's plus exactly the rendered `ca_certs`).

What is stood in, because only a VM has it: apt-get and apt-mark (answering as a working or a broken mirror would),
update-initramfs, modprobe, systemctl (recording what it was asked), and RKE2's kubectl (recording the annotation
the boot writes on its Node).

It all runs in a user, mount and network namespace of its own (`unshare -rmn`): only loopback exists, so nothing
reaches the internet; /etc/hosts names the lab's servers on 127.0.0.x, each served on port 443 by tests/lab_https.py
as the docs' URLs say; /etc/systemd/system (where install.sh moves the agent's unit) is a tmpfs; the install goes to
a temporary prefix. The servers are the namespace's own processes and end with it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shlex
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.gpu_failure_domain.first_boot import STEP_RUNNER

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# install.sh's own name for the machine (setup_arch: x86_64 -> amd64, aarch64 -> arm64).
ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())

APT_BROKEN = (
    "Err:1 https://apt.lab.internal/ubuntu noble InRelease\n  404  Not Found\n"
    "E: Failed to fetch https://apt.lab.internal/ubuntu/dists/noble/InRelease  404  Not Found"
)
STAND_INS = {
    "apt-get": 'if [ -n "${APT_BROKEN:-}" ]; then printf "%s\\n" "$APT_BROKEN" >&2; exit 100; fi; echo "apt-get $*"',
    "apt-mark": 'echo "apt-mark $*"',
    "update-initramfs": 'echo "update-initramfs $*"',
    "modprobe": "exit 0",
    "systemctl": 'echo "$*" >> "$RECORD/systemctl"',
    "kubectl": 'echo "$*" >> "$RECORD/kubectl"',
}


@dataclass(frozen=True)
class Boot:
    returncode: int
    console: str
    steps: list[dict[str, Any]]
    systemctl: list[str]
    kubectl: list[str]
    served: list[str]
    prefix: Path


def release_folder(folder: Path, version: str) -> None:
    """An RKE2 release as GitHub lays it out (`<version>/sha256sum-<arch>.txt` and the tarball), with a tarball that
    holds what install.sh unpacks and edits: bin/rke2, bin/rke2-uninstall.sh, the agent's and server's units."""
    files = {
        "bin/rke2": "#!/bin/sh\necho 'rke2 (test release)'\n",
        "bin/rke2-uninstall.sh": "#!/bin/sh\n# /usr/local\n",
        "lib/systemd/system/rke2-agent.service": "[Service]\nExecStart=/usr/local/bin/rke2 agent\n",
        "lib/systemd/system/rke2-server.service": "[Service]\nExecStart=/usr/local/bin/rke2 server\n",
    }
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text), 0o755
            tar.addfile(info, io.BytesIO(text.encode()))
    tarball = f"rke2.linux-{ARCH}.tar.gz"
    release = folder / version  # a plain file server's folder keeps the `+` install.sh sends as %2B
    release.mkdir(parents=True)
    (release / tarball).write_bytes(data.getvalue())
    digest = hashlib.sha256(data.getvalue()).hexdigest()
    (release / f"sha256sum-{ARCH}.txt").write_text(f"{digest}  {tarball}\n")


def _script(document: dict[str, Any], work: Path) -> Path:
    """The runcmd as cloud-init writes it (one line per entry under #!/bin/sh), with the VM's fixed paths moved into
    `work`, and the runner cloud-init's write_files put on the VM."""
    runner = next(f for f in document["write_files"] if f["path"] == STEP_RUNNER)
    (work / "bin").mkdir(exist_ok=True)
    (work / "run").mkdir(exist_ok=True)
    (work / "bin" / "gpu-pool-first-boot-step").write_text(runner["content"])
    (work / "bin" / "gpu-pool-first-boot-step").chmod(0o755)
    text = "#!/bin/sh\n" + "\n".join(document["runcmd"]) + "\n"
    text = text.replace(STEP_RUNNER, str(work / "bin" / "gpu-pool-first-boot-step"))
    text = text.replace("/run/install-rke2.sh", str(work / "run" / "install-rke2.sh"))
    script = work / "runcmd.sh"
    script.write_text(text)
    return script


def _trust_bundle(document: dict[str, Any], work: Path) -> Path:
    """What cloud-init's ca_certs leaves in the VM's bundle: the system's roots and each `trusted` certificate."""
    trusted = document.get("ca_certs", {}).get("trusted", [])
    bundle = work / "ca-certificates.crt"
    bundle.write_text(SYSTEM_BUNDLE.read_text() + "".join(trusted))
    return bundle


def run_first_boot(
    document: dict[str, Any],
    work: Path,
    servers: dict[str, tuple[Path, Path, Path]],
    *,
    apt_broken: bool = False,
) -> Boot:
    """Boot `document` (a rendered cloud-config) in `work`. `servers`: host -> (folder, certificate, key), each served
    on 127.0.0.x:443 as /etc/hosts names it."""
    work.mkdir(parents=True, exist_ok=True)
    record, results, prefix = work / "record", work / "results", work / "prefix"
    for folder in (record, results, prefix, work / "path"):
        folder.mkdir(exist_ok=True)
    for name, body in STAND_INS.items():
        path = work / "path" / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    hosts = work / "hosts"
    addresses = {host: f"127.0.0.{index + 2}" for index, host in enumerate(servers)}
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"{ip} {host}\n" for host, ip in addresses.items()))
    starts = []
    for host, (folder, certificate, key) in servers.items():
        command = [
            sys.executable, "-m", "tests.lab_https", "--address", addresses[host], "--folder", str(folder),
            "--cert", str(certificate), "--key", str(key), "--log", str(record / f"{host}.log"),
            "--ready", str(record / f"{host}.ready"),
        ]  # fmt: skip
        wait = f"while [ ! -e {shlex.quote(str(record / f'{host}.ready'))} ]; do sleep 0.05; done"
        starts.append(f'{shlex.join(command)} & servers="$servers $!"; {wait}')
    environment = {
        "PATH": f"{work / 'path'}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(work),
        "RECORD": str(record),
        "GPU_POOL_FIRST_BOOT_DIR": str(results),
        "GPU_POOL_KUBECTL": str(work / "path" / "kubectl"),
        "GPU_POOL_RETRY_SECONDS": "0",
        "INSTALL_RKE2_TAR_PREFIX": str(prefix),
        "PYTHONPATH": str(ROOT),
        **({"APT_BROKEN": APT_BROKEN} if apt_broken else {}),
    }
    script = _script(document, work)
    namespace = "\n".join(
        [
            "set -e",
            "ip link set lo up",
            f"mount --bind {shlex.quote(str(hosts))} /etc/hosts",
            f"mount --bind {shlex.quote(str(_trust_bundle(document, work)))} {SYSTEM_BUNDLE}",
            "mount -t tmpfs tmpfs /etc/systemd/system",
            'servers=""',
            "trap 'kill $servers 2>/dev/null' EXIT",
            *starts,
            "set +e",
            f"sh {shlex.quote(str(script))}",
        ]
    )
    done = subprocess.run(
        ["unshare", "-rmn", "sh", "-c", namespace],
        capture_output=True,
        text=True,
        env={**environment, "LANG": "C.UTF-8"},
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    steps_file = results / "steps"
    lines = steps_file.read_text().splitlines() if steps_file.exists() else []

    def read(path: Path) -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    served = [line for host in servers for line in read(record / f"{host}.log")]
    return Boot(
        returncode=done.returncode,
        console=done.stdout + done.stderr,
        steps=[json.loads(line) for line in lines],
        systemctl=read(record / "systemctl"),
        kubectl=read(record / "kubectl"),
        served=served,
        prefix=prefix,
    )


def unshare_works() -> bool:
    """Whether this machine lets a process make a user, mount and network namespace of its own."""
    done = subprocess.run(["unshare", "-rmn", "true"], capture_output=True, check=False, env=dict(os.environ))
    return done.returncode == 0
