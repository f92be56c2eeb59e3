"""Running node_steps_script.py exactly as pulumi-command does, against a stand-in kubectl and a loopback Proxmox API.

The stand-in kubectl answers `get node` / `get pods` from a scenario (a sequence of answers per object, the
last one repeated) and logs every call to the same journal the fake Proxmox API writes to, so a test can
assert the order across both (a drain before the shutdown, the uncordon after the start).
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

FAKE_KUBECTL = """#!{python}
import json, os, sys
args = sys.argv[1:]
state_path = os.environ["FAKE_KUBE_STATE"]
state = json.load(open(state_path))
with open(os.environ["FAKE_JOURNAL"], "a") as journal:
    journal.write("kubectl " + " ".join(args) + "\\n")

def answer(key):
    answers = state["answers"].get(key)
    if not answers:
        print(state.get("missing_error", 'Error from server (NotFound): not found'), file=sys.stderr)
        sys.exit(1)
    current = answers[0] if len(answers) == 1 else answers.pop(0)
    json.dump(state, open(state_path, "w"))
    if isinstance(current, dict) and "error" in current:
        print(current["error"], file=sys.stderr)
        sys.exit(1)
    print(json.dumps(current))
    sys.exit(0)

verb = [a for a in args if not a.startswith("-")]
for failing in state.get("fail", []):
    if failing in " ".join(args):
        print("error: " + failing + " failed", file=sys.stderr)
        sys.exit(1)
if "get" in verb and "node" in verb:
    answer("node")
if "get" in verb and "pods" in verb:
    answer("driver-pods")
if "get" in verb and "job" in verb:
    answer("job")
if "get" in verb and "daemonset" in verb:
    answer("daemonset")
if "get" in verb and "controllerrevisions" in verb:
    answer("revisions")
if "create" in verb:
    with open(os.environ["FAKE_JOURNAL"], "a") as journal:
        journal.write("created " + sys.stdin.read() + "\\n")
sys.exit(0)
"""


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


def driver_daemonset_revisions(*hashes: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The driver DaemonSet and its ControllerRevisions, oldest first (revision 1, 2, ...), as the API lists them."""
    daemonset = {
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-driver-daemonset"},
        "spec": {"selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}}},
    }
    revisions = {
        "kind": "List",
        "items": [
            {"kind": "ControllerRevision", "metadata": {"name": f"nvidia-driver-daemonset-{h}"}, "revision": i}
            for i, h in enumerate(hashes, start=1)
        ],
    }
    return daemonset, revisions


def driver_pods(*, version: str = "570.211.01", ready: bool = True, revision: str | None = None) -> dict[str, Any]:
    """The node's driver pod; with `revision`, as the DaemonSet controller labels it (controller-revision-hash)."""
    metadata: dict[str, Any] = {"name": f"nvidia-driver-daemonset-{revision or 'x1'}"}
    if revision is not None:
        metadata["labels"] = {"app": "nvidia-driver-daemonset", "controller-revision-hash": revision}
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-driver-daemonset", "controller": True}
        ]
    pod = {
        "metadata": metadata,
        "spec": {
            "containers": [{"name": "nvidia-driver-ctr", "image": f"nvcr.io/nvidia/driver:{version}-ubuntu24.04"}]
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }
    return {"kind": "List", "items": [pod]}


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

    def __init__(self, journal: Journal, pending: list[dict[str, Any]]) -> None:
        self.pending = pending
        self.status = "running"
        self.auth: set[str] = set()
        # The start task's exit status (qemu-server's die message when it fails: `no pci device info ...`).
        self.start_exit = "OK"
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
                    done = fake.start_exit if "qmstart" in task else "OK"
                    self._answer({"status": "stopped", "exitstatus": done})
                elif self.path.startswith("/api2/json/cluster/resources"):
                    self._answer([{"vmid": 4101, "type": "qemu", "node": fake.node, "status": fake.status}])
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
                    fake.status = "stopped"
                    self._answer("UPID:pve-dc1:00000001:00000000:00000000:qmshutdown:4101:root@pam:")
                    return
                if fake.start_exit == "OK":
                    fake.status = "running"
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
        fake.write_text(FAKE_KUBECTL.format(python=sys.executable))
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        self.bin_dir = bin_dir
        self.scenario({})

    def scenario(
        self, answers: dict[str, list[Any]], *, fail: list[str] | None = None, missing_error: str = ""
    ) -> None:
        state: dict[str, Any] = {"answers": answers, "fail": fail or []}
        if missing_error:
            state["missing_error"] = missing_error
        self.state_path.write_text(json.dumps(state))

    def run(self, step: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`python3 -c <script>` with the step's environment, as pulumi-command runs it."""
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
        api = FakeProxmox(self.journal, pending)
        with serving(api.server):
            yield api
