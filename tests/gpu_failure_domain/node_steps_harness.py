"""Running the node-steps script exactly as pulumi-command does (`python3 -c <bootstrap>`), against a stand-in
kubectl over an API server in memory (tests/node/fake_kubectl.py, tests/node/memory_api.py) and a loopback Proxmox
API. Both write to one journal (`kubectl <METHOD> <path>`, `proxmox <METHOD> <path>`), so a test asserts the order
across both (a drain before the shutdown, the uncordon after the start); the API's objects after the run are
what the step left on the cluster.
"""

from __future__ import annotations

import http.server
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from components.gpu_failure_domain.node_steps import INTERPRETER, node_steps_script
from tests.loopback import serving
from tests.node.memory_api import MemoryApi

# The stand-in kubectl: tests/node/fake_kubectl.py over the scenario's MemoryApi (a JSON file between calls).
FAKE_KUBECTL = """#!{python}
import sys
sys.path.insert(0, {root!r})
from tests.node.fake_kubectl import main
sys.exit(main())
"""
ROOT = str(Path(__file__).resolve().parent.parent.parent)
NODE_PATH = "/api/v1/nodes/rke2-worker-dc1-gpu-a"


def node(
    name: str = "rke2-worker-dc1-gpu-a",
    *,
    ready: bool = True,
    boot: str = "boot-1",
    gpus: str | None = None,
    unschedulable: bool = False,
    kernel: str = "6.8.0-51-generic",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "nodeInfo": {"bootID": boot, "kernelVersion": kernel},
        "allocatable": {"cpu": "8"} | ({"nvidia.com/gpu": gpus} if gpus is not None else {}),
    }
    spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status}


def boot(new: str) -> dict[str, Any]:
    """What a node that rebooted reports (a merge into its status)."""
    return {"status": {"nodeInfo": {"bootID": new}}}


OPERATOR = "/api/v1/namespaces/gpu-operator/pods"


def driver_daemonset_revisions(*hashes: str) -> dict[str, dict[str, Any]]:
    """The driver DaemonSet and its ControllerRevisions, oldest first (revision 1, 2, ...), by API path."""
    apps = "/apis/apps/v1/namespaces/gpu-operator"
    objects: dict[str, dict[str, Any]] = {
        f"{apps}/daemonsets/nvidia-driver-daemonset": {
            "kind": "DaemonSet",
            "metadata": {"name": "nvidia-driver-daemonset", "namespace": "gpu-operator"},
            "spec": {"selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}}},
        }
    }
    for i, h in enumerate(hashes, start=1):
        objects[f"{apps}/controllerrevisions/nvidia-driver-daemonset-{h}"] = {
            "kind": "ControllerRevision",
            "metadata": {
                "name": f"nvidia-driver-daemonset-{h}",
                "namespace": "gpu-operator",
                "labels": {"app": "nvidia-driver-daemonset"},
            },
            "revision": i,
        }
    return objects


def driver_pod(
    *, version: str = "570.211.01", ready: bool = True, revision: str | None = None, name: str = ""
) -> dict[str, dict[str, Any]]:
    """The node's driver pod by its API path; with `revision`, as the DaemonSet controller labels it."""
    pod_name = name or f"nvidia-driver-daemonset-{revision or 'x1'}"
    labels = {"app": "nvidia-driver-daemonset"} | ({"controller-revision-hash": revision} if revision else {})
    metadata: dict[str, Any] = {
        "name": pod_name,
        "namespace": "gpu-operator",
        "labels": labels,
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-driver-daemonset", "controller": True}
        ],
    }
    pod = {
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": "rke2-worker-dc1-gpu-a",
            "containers": [{"name": "nvidia-driver-ctr", "image": f"nvcr.io/nvidia/driver:{version}-ubuntu24.04"}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }
    return {f"{OPERATOR}/{pod_name}": pod}


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        path.write_text("")

    def write(self, line: str) -> None:
        with self.lock, self.path.open("a") as out:
            out.write(line + "\n")

    def lines(self) -> list[str]:
        return [line for line in self.path.read_text().splitlines() if line]


class FakeProxmox:
    """Loopback stand-in for the Proxmox API: answers pending config and VM status, journals every call."""

    def __init__(self, journal: Journal, pending: list[dict[str, Any]], reboot: Any = None) -> None:
        self.pending = pending
        self.status = "running"
        self.auth: set[str] = set()
        # The start task's exit status (qemu-server's die message when it fails: `no pci device info ...`).
        self.start_exit = "OK"
        # The stop task's exit status: qemu-server checks the lock inside the task (`VM is locked (backup)`).
        self.stop_exit = "OK"
        # /cluster/resources' lock of the VM (read again right before the stop).
        self.lock = ""
        # POST paths ending so answer an error: suffix -> (HTTP status, PVE's message in the status line).
        self.refuse: dict[str, tuple[int, str]] = {}
        # HA: the node the VM runs on after a start (`/cluster/resources`), when not the stack's.
        self.node = "pve-dc1"
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, data: Any, status: int = 200, reason: str | None = None) -> None:
                body = json.dumps({"data": data}).encode()
                self.send_response(status, reason)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.auth.add(self.headers.get("Authorization", ""))
                if self.path.endswith("/pending"):
                    journal.write(f"proxmox GET {self.path}")
                    self._answer(fake.pending)
                elif "/tasks/" in self.path:
                    # pve-manager PVE/API2/Tasks.pm read_task_status: a finished task's exit status.
                    task = self.path.split("/tasks/", 1)[1]
                    done = fake.start_exit if "qmstart" in task else fake.stop_exit
                    self._answer({"status": "stopped", "exitstatus": done})
                elif self.path.startswith("/api2/json/cluster/resources"):
                    guest = {"vmid": 4101, "type": "qemu", "node": fake.node, "status": fake.status}
                    self._answer([guest | ({"lock": fake.lock} if fake.lock else {})])
                else:
                    self._answer({"status": fake.status})

            def do_POST(self) -> None:
                fake.auth.add(self.headers.get("Authorization", ""))
                journal.write(f"proxmox POST {self.path}")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                for suffix, (code, message) in fake.refuse.items():
                    if self.path.endswith(suffix):
                        self._answer(None, code, message)
                        return
                if self.path.endswith("/shutdown"):
                    if fake.stop_exit == "OK":
                        fake.status = "stopped"
                    self._answer("UPID:pve-dc1:00000001:00000000:00000000:qmshutdown:4101:root@pam:")
                    return
                if fake.start_exit == "OK":
                    fake.status = "running"
                    if reboot is not None:
                        reboot()
                self._answer("UPID:pve-dc1:00000002:00000000:00000000:qmstart:4101:root@pam:")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.journal = Journal(tmp_path / "journal.log")
        self.state_path = tmp_path / "kube-state.json"
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        fake = bin_dir / "kubectl"
        fake.write_text(FAKE_KUBECTL.format(python=sys.executable, root=ROOT))
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        self.bin_dir = bin_dir
        self.scenario({})

    def scenario(
        self,
        objects: dict[str, dict[str, Any]],
        *,
        sequences: dict[str, list[Any]] | None = None,
        down: bool = False,
        pdb_refusals: dict[str, int] | None = None,
    ) -> None:
        """The cluster the step runs against: its objects by API path; `sequences`: what a path reports at each
        following read (a node that registers, becomes Ready); `down`: the API server refuses connections."""
        api = MemoryApi(objects=dict(objects), sequences=dict(sequences or {}), pdb_refusals=dict(pdb_refusals or {}))
        self.state_path.write_text(json.dumps({**api.state(), "down": down}))

    def api(self) -> MemoryApi:
        """The cluster as the step left it."""
        return MemoryApi.of_state(json.loads(self.state_path.read_text()))

    def reboot(self, new: str = "boot-2") -> None:
        """The node comes back from a cold start (what the Proxmox stand-in's start does)."""
        state = json.loads(self.state_path.read_text())
        if NODE_PATH in state["objects"]:
            state["objects"][NODE_PATH]["status"]["nodeInfo"]["bootID"] = new
        self.state_path.write_text(json.dumps(state))

    def kubectl(self) -> list[str]:
        """The kubectl calls in order (`kubectl METHOD path`)."""
        return [line for line in self.journal.lines() if line.startswith("kubectl ")]

    def run(self, step: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`python3 -c <bootstrap>` with the step's environment, as pulumi-command runs it."""
        full = {
            **os.environ,
            "PATH": f"{self.bin_dir}:{os.environ['PATH']}",
            "FAKE_KUBE_STATE": str(self.state_path),
            "FAKE_JOURNAL": str(self.journal.path),
            "GPU_POOL_STEP": step,
            "NODE_NAME": "rke2-worker-dc1-gpu-a",
            "KUBECTL": json.dumps(["kubectl", "--context", "lab"]),
            "TIMEOUT_MINUTES": "0.02",
            "GPU_POOL_POLL_SECONDS": "0",
            "GPU_POOL_PROGRESS_SECONDS": "0",
            **env,
        }
        return subprocess.run(
            [sys.executable, INTERPRETER[1], node_steps_script()],
            env=full,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    @contextmanager
    def proxmox(self, pending: list[dict[str, Any]]) -> Iterator[FakeProxmox]:
        api = FakeProxmox(self.journal, pending, self.reboot)
        with serving(api.server):
            yield api
