"""A cluster whose agents are upstream programs: the e2e tier's control plane, on loopback, for one test session or
module.

`start_control_plane(tools, work)` starts, in `work`:
- etcd and kube-apiserver as tests/e2e/servers.py does, but with the API server's garbage collector on (the
  controller manager runs it);
- kube-controller-manager and kube-scheduler, built from the k8s.io/kubernetes release kube-apiserver is built from
  (e2e/go.mod), with the admin kubeconfig, no leader election, their secure ports on loopback;
- KWOK (e2e/kwok/go.mod), managing every Node of this API server, with the pinned module's own Stages
  (`KWOK_STAGES`, read from its directory in the Go module cache, never copied): a Node turns Ready and keeps its
  Lease renewed; a pod bound to a Node runs and is Ready (init containers done), a Job's pod then succeeds, a
  deleted pod goes;
- one control-plane Node, as an RKE2 server registers itself, where the pods that tolerate no GPU taint land.

It yields a `ControlPlane`: the `Cluster` (URL, admin kubeconfig, every component's log) and its `Kubectl`. On exit
every process stops, last started first, and the data goes. GPU workers are registered by whoever plays their VMs
(tests/e2e/cluster_standin.py, or a test through `register_gpu_node`), and KWOK takes them over from there.

The fixtures in tests/e2e/conftest.py: `control_plane` (one per session, one per xdist worker), and on top of it
`kyverno_running` and the GPU Operator (tests/e2e/cluster_programs.py); `deployed_plane`, the deployed stack's own.
A module that needs a cluster of its own (a state the session's must not see) calls `start_control_plane` itself
in a module-scoped fixture.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline.runner import ROOT_DIR
from tests.e2e.kube import Kubectl
from tests.e2e.nodes import CONTAINER_RUNTIME
from tests.e2e.servers import Cluster, ServerError, Tools, free_ports, log_tails, spawn, start_cluster, stop
from tests.environ import process_environment

E2E_DIR = ROOT_DIR / "e2e"
# The kubelet's part, as KWOK's own "fast" Stages (sigs.k8s.io/kwok kustomize/stage/): node-initialize (Ready, the
# kubelet's conditions, capacity and nodeInfo kept where set), node-heartbeat-with-lease (with
# --node-lease-duration-seconds: the Lease is the heartbeat), pod-ready (a bound pod runs: init containers
# completed, containers running, Ready), pod-complete (a Job's running pod succeeds), pod-delete (a pod being
# deleted goes, as the kubelet confirms it).
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
READY_SECONDS = 120
# RKE2's server node: the labels its kubelet and RKE2 set (rke2 pkg/rke2/rke2.go: control-plane, etcd, master).
SERVER_NODE = "rke2-server-1"
SERVER_LABELS = {
    "kubernetes.io/hostname": SERVER_NODE,
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "node-role.kubernetes.io/control-plane": "true",
    "node-role.kubernetes.io/etcd": "true",
    "node-role.kubernetes.io/master": "true",
}


@dataclass(frozen=True)
class ControlPlane:
    """A running control plane: its API server (with every component's log) and kubectl against it."""

    cluster: Cluster
    kubectl: Kubectl
    work: Path

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def logs(self) -> tuple[Path, ...]:
        """Every log in its work dir: the servers', and those of the programs started on it later."""
        return tuple(sorted(self.work.rglob("*.log")))


def pinned_module_dir(module_dir: Path, module: str) -> Path:
    """Where the Go module cache holds the version `module_dir`'s go.mod pins (`make e2e-tools` downloaded it)."""
    done = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", module],
        cwd=module_dir,
        env={**process_environment(), "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = Path(done.stdout.strip())
    if done.returncode != 0 or not found.is_dir():
        raise ServerError(f"{module} is not in the Go module cache (run `make e2e-tools`): {done.stderr.strip()}")
    return found


def insecure() -> ssl.SSLContext:
    # The components' serving certs are self-signed on their own loopback ports; only /healthz is read.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def healthy(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_until(what: str, check: Callable[[], bool], logs: tuple[Path, ...], seconds: float = READY_SECONDS) -> None:
    """Poll `check` until it holds; past the deadline fail naming `what`, with the logs' last lines."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise ServerError(f"{what} not within {seconds:.0f} s\n{log_tails(logs)}")
        time.sleep(0.2)  # poll interval; the deadline above bounds the wait


def eventually(what: str, check: Callable[[], Any], seconds: float = READY_SECONDS) -> Any:
    """Poll until `check` returns something truthy (returned); fail naming `what` past the deadline. What the
    control plane's programs do happens a reconcile or two later, never at once."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:.0f} s: {what}")
        time.sleep(0.5)  # poll interval; bounded by the deadline above


@dataclass
class Processes:
    """Processes started for one cluster, stopped last-started first; fails loudly if one died early."""

    started: list[tuple[str, subprocess.Popen[bytes]]]

    def spawn(self, name: str, argv: list[str], log: Path, env: Mapping[str, str] | None = None) -> None:
        self.started.append((name, spawn(argv, log, env)))

    def exited(self) -> list[str]:
        return [name for name, process in self.started if process.poll() is not None]

    def stop(self) -> None:
        stop([process for _name, process in reversed(self.started)])
        alive = [name for name, process in self.started if process.returncode is None]
        if alive:
            raise ServerError(f"still running after stop: {alive}")


def component_flags(kubeconfig: Path, work: Path, name: str, port: int) -> list[str]:
    """What kube-controller-manager and kube-scheduler share: the admin kubeconfig for their API calls and for
    delegated authn/authz of their own port (healthz is always allowed), loopback, no leader election."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={work / (name + '-certs')}",
        "--leader-elect=false",
    ]


def controller_manager_argv(tools: Tools, kubeconfig: Path, work: Path, port: int) -> list[str]:
    return [
        str(tools.kube_controller_manager),
        *component_flags(kubeconfig, work, "kube-controller-manager", port),
        # The ServiceAccount token controller signs with the API server's key; every namespace gets the CA bundle.
        f"--service-account-private-key-file={work / 'sa.key'}",
        f"--root-ca-file={work / 'ca.crt'}",
        # Every default controller: Deployment, ReplicaSet, DaemonSet, Job, ResourceQuota, ServiceAccount, namespace,
        # garbage collector, node lifecycle (lifts the not-ready taint, evicts from dead nodes), disruption (PDBs).
        "--controllers=*",
    ]


def scheduler_argv(tools: Tools, kubeconfig: Path, work: Path, port: int) -> list[str]:
    return [str(tools.kube_scheduler), *component_flags(kubeconfig, work, "kube-scheduler", port)]


def kwok_argv(tools: Tools, kubeconfig: Path, port: int) -> list[str]:
    kwok = pinned_module_dir(E2E_DIR / "kwok", "sigs.k8s.io/kwok")
    return [
        str(tools.kwok),
        f"--kubeconfig={kubeconfig}",
        *(f"--config={kwok / stage}" for stage in KWOK_STAGES),
        # This API server is the control plane's own: every Node on it is KWOK's.
        "--manage-all-nodes=true",
        # The kubelet's default: the node lifecycle controller reads a Node's Lease as its heartbeat.
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{port}",
    ]


def register_node(
    kubectl: Kubectl,
    name: str,
    labels: Mapping[str, str],
    taints: list[dict[str, str]],
    status: Mapping[str, Any],
    *,
    field_manager: str = "kubelet",
) -> None:
    """A Node as a kubelet registers it (labels, taints), then its first status report (capacity, nodeInfo): what
    KWOK's node-initialize Stage keeps when it marks the Node Ready."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}
    kubectl.create(node | {"spec": {"taints": taints}}, field_manager=field_manager)
    patch = json.dumps({"status": dict(status)})
    kubectl(
        "patch", "node", name, "--subresource=status", "--type=merge", "--field-manager", field_manager, "-p", patch
    )


def node_ready(kubectl: Kubectl, name: str) -> bool:
    """Ready, and no longer tainted not-ready (the node lifecycle controller lifts the taint the API server set)."""
    node = kubectl.json("get", "node", name)
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    taints = node["spec"].get("taints") or []
    return ready and not any(t["key"] == "node.kubernetes.io/not-ready" for t in taints)


@contextlib.contextmanager
def start_control_plane(tools: Tools, work: Path) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK in `work`, ready, with one Ready
    control-plane Node; all stopped on exit."""
    work.mkdir(parents=True, exist_ok=True)
    with start_cluster(tools, work, garbage_collector=True) as api:
        kcm_port, scheduler_port, kwok_port = free_ports(3)
        logs = {name: work / f"{name}.log" for name in ("kube-controller-manager", "kube-scheduler", "kwok")}
        cluster = Cluster(api.url, api.kubeconfig, (*api.logs, *logs.values()))
        kubectl = Kubectl(tools.kubectl, api.kubeconfig, work / "kubectl-cache")
        processes = Processes([])
        try:
            processes.spawn(
                "kube-controller-manager",
                controller_manager_argv(tools, api.kubeconfig, work, kcm_port),
                logs["kube-controller-manager"],
            )
            processes.spawn(
                "kube-scheduler", scheduler_argv(tools, api.kubeconfig, work, scheduler_port), logs["kube-scheduler"]
            )
            # KWOK reads ~/.kwok/kwok.yaml besides --config when it exists: HOME is the work dir, so only ours counts.
            processes.spawn("kwok", kwok_argv(tools, api.kubeconfig, kwok_port), logs["kwok"], {"HOME": str(work)})

            def up(url: str, context: ssl.SSLContext | None = None) -> Callable[[], bool]:
                def check() -> bool:
                    if processes.exited():
                        raise ServerError(f"{', '.join(processes.exited())} exited\n{log_tails(cluster.logs)}")
                    return healthy(url, context)

                return check

            wait_until(
                "kube-controller-manager healthz", up(f"https://127.0.0.1:{kcm_port}/healthz", insecure()), cluster.logs
            )
            wait_until(
                "kube-scheduler healthz", up(f"https://127.0.0.1:{scheduler_port}/healthz", insecure()), cluster.logs
            )
            wait_until("KWOK healthz", up(f"http://127.0.0.1:{kwok_port}/healthz"), cluster.logs)
            # The ServiceAccount controller at work: the `default` namespace's account (pods need one to be admitted).
            wait_until(
                "the default ServiceAccount",
                lambda: kubectl.run("-n", "default", "get", "serviceaccount", "default").returncode == 0,
                cluster.logs,
            )
            register_node(
                kubectl,
                SERVER_NODE,
                SERVER_LABELS,
                [],
                {"nodeInfo": {"containerRuntimeVersion": CONTAINER_RUNTIME}},
            )
            wait_until(f"node {SERVER_NODE} Ready", lambda: node_ready(kubectl, SERVER_NODE), cluster.logs)
            yield ControlPlane(cluster, kubectl, work)
        finally:
            processes.stop()
