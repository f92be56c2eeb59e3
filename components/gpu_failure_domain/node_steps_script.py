"""gpu-pool's steps on one GPU worker, run by pulumi-command as `python3 -c <this file>` where `pulumi up` runs.

Standard library only. `GPU_POOL_STEP` picks the step:

- `node-ready`: wait until the node has registered with RKE2 and is Ready.
- `gpu-ready`: wait until the node advertises the GPU slots its sharing profile promises, the operator's
  driver upgrade on it is done, and its driver pod runs the pinned driver (the smoke test starts after it).
- `power-cycle`: apply the VM's pending Proxmox changes (q35, hostpci, cores, memory...) or a moved card with a
  full stop and start, never a guest reboot, with the node drained first and uncordoned once Ready again.
- `kernel-rebuild`: wait until the node is back on the pinned kernel, then rebuild the driver on it.
- `smoke-test`: create a smoke Job (`gpu-pool repair` runs the domain's test again under a new name) and wait
  until it completes or fails.
- `repair-done`: a repair's last step, after its checks: one patch ends the turn, uncordons the node where the
  drain cordoned it and records the repair on the Node; an Event says so.

With POWER_CYCLE_REASON set (`gpu-pool repair`), `power-cycle` stops and starts the VM whatever is pending, and
records the power cycle on the Node (gpu-pool.dev/repairs, which the repair's daily budget counts) and as an
Event once Proxmox accepted the stop. A stopped VM is only started. The start task's exit status is read (a card
the host lost ends it with qemu-server's `no pci device info`); with POWER_CYCLE_HA (an HA-managed VM, allowed by
`repair.allowHaManaged`) the VM must run on PROXMOX_NODE afterwards. A Proxmox error is one line with PVE's
message.

Every wait prints a line at least once a minute with what it is waiting for and the last error kubectl gave,
and its timeout names the likeliest cause from that error.

Environment: GPU_POOL_STEP, NODE_NAME, KUBECTL (JSON argv prefix, e.g. ["kubectl", "--context", "lab"]),
TIMEOUT_MINUTES; gpu-ready: GPU_SLOTS, DRIVER_VERSION, OPERATOR_NAMESPACE; kernel-rebuild: KERNEL,
OPERATOR_NAMESPACE; power-cycle: PROXMOX_ENDPOINT, PROXMOX_NODE, PROXMOX_VMID, PROXMOX_INSECURE, PROXMOX_API_TOKEN
or PROXMOX_ROOT_PASSWORD, MAPPED_DEVICE, and PULUMI_COMMAND_STDOUT (what the previous run printed), and
POWER_CYCLE_REASON; smoke-test: SMOKE_JOB (the Job, JSON); repair-done: REPAIR_REASON.
GPU_POOL_POLL_SECONDS and GPU_POOL_PROGRESS_SECONDS tune the pace (10 and 60).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

DRIVER_PODS = "app=nvidia-driver-daemonset"
UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
GPU_RESOURCE = "nvidia.com/gpu"
APPLIED_DEVICE = "applied-device: "
# The Node annotations of components/gpu_failure_domain/observed.py (a test keeps them equal): this script runs
# alone, as `python3 -c`, so it cannot import them.
WAVE_CORDON_ANNOTATION = "gpu-pool.dev/wave-cordoned"
WAVE_TURN_ANNOTATION = "gpu-pool.dev/wave-turn"
REPAIRS_ANNOTATION = "gpu-pool.dev/repairs"
WAVE_STOPPED_ANNOTATION = "gpu-pool.dev/wave-stopped"
TURN_STATE_LABEL = "gpu-pool.dev/turn-state"
# A repair record is kept this long (the daily budget reads the last day of it) and at most this many.
REPAIR_RECORD_DAYS = 7
REPAIR_RECORD_MAX = 20
EVENT_SOURCE = "gpu-pool-repair"


class StepFailed(Exception):
    pass


def env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise StepFailed(f"{name} is not set")
    return value


# ---------------------------------------------------------------------------------------------------- kubectl


class Kubectl:
    def __init__(self, prefix: list[str]) -> None:
        self.prefix = prefix
        self.last_error = ""

    def run(self, *args: str, timeout: int = 120, stdin: str | None = None) -> tuple[int, str]:
        try:
            done = subprocess.run(
                [*self.prefix, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError:
            raise StepFailed(f"{self.prefix[0]} not found: install kubectl on the machine that runs pulumi") from None
        except subprocess.TimeoutExpired:
            self.last_error = f"kubectl {' '.join(args)} did not answer within {timeout} s"
            return 1, ""
        if done.returncode != 0:
            text = (done.stderr or done.stdout).strip()
            self.last_error = text.splitlines()[-1] if text else f"exit {done.returncode}"
        return done.returncode, done.stdout

    def json(self, *args: str) -> Any | None:
        code, out = self.run(*args, "-o", "json")
        if code != 0:
            return None
        try:
            return json.loads(out)
        except ValueError:
            self.last_error = f"kubectl printed no JSON: {out[:200]!r}"
            return None

    def must(self, *args: str, timeout: int = 120, stdin: str | None = None) -> str:
        code, out = self.run(*args, timeout=timeout, stdin=stdin)
        if code != 0:
            raise StepFailed(f"kubectl {' '.join(args)} failed: {self.last_error}")
        return out


def likely_cause(error: str, otherwise: str) -> str:
    """From kubectl's own last message, what is most probably wrong."""
    text = error.lower()
    if "no such file" in text and ("kubeconfig" in text or "stat " in text):
        return "the kubeconfig file does not exist: check gpu-pool:kubernetes.kubeconfig"
    if any(sign in text for sign in ("unable to connect", "connection refused", "no such host", "i/o timeout")):
        return "kubectl cannot reach the API server: check gpu-pool:kubernetes (kubeconfig, context) and the network"
    if any(sign in text for sign in ("unauthorized", "forbidden", "certificate")):
        return "the API server refuses the kubeconfig's credentials: check gpu-pool:kubernetes.context and its user"
    if "context" in text and "does not exist" in text:
        return "the kubeconfig has no such context: check gpu-pool:kubernetes.context"
    return otherwise


class Waiter:
    """Polls `check` until it says done; a line at least every progress interval; a timeout with a cause."""

    def __init__(self, what: str, minutes: float, kubectl: Kubectl) -> None:
        self.what = what
        self.deadline = time.monotonic() + minutes * 60
        self.minutes = minutes
        self.kubectl = kubectl
        self.poll = float(os.environ.get("GPU_POOL_POLL_SECONDS", "10"))
        self.progress = float(os.environ.get("GPU_POOL_PROGRESS_SECONDS", "60"))

    def until(self, check: Callable[[], tuple[bool, str, str]]) -> None:
        """`check` returns (done, what it sees now, the likeliest cause if it never gets done)."""
        started = time.monotonic()
        last_report = started
        print(f"waiting for {self.what} (up to {self.minutes:g} min)", flush=True)
        while True:
            self.kubectl.last_error = ""
            done, status, cause = check()
            if done:
                print(f"done: {self.what} ({status}) after {time.monotonic() - started:.0f} s", flush=True)
                return
            now = time.monotonic()
            error = self.kubectl.last_error
            if now >= self.deadline:
                seen = f"; last error from kubectl: {error}" if error else ""
                raise StepFailed(
                    f"timed out after {self.minutes:g} min waiting for {self.what}. Last seen: {status}{seen}. "
                    f"Likeliest cause: {likely_cause(error, cause)}"
                )
            if now - last_report >= self.progress:
                seen = f" (kubectl: {error})" if error else ""
                print(f"still waiting for {self.what}, {now - started:.0f} s: {status}{seen}", flush=True)
                last_report = now
            time.sleep(self.poll)


def node_ready(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def boot_id(node: dict[str, Any] | None) -> str:
    return str(((node or {}).get("status") or {}).get("nodeInfo", {}).get("bootID") or "")


# ---------------------------------------------------------------------------------------------------- steps


def step_node_ready(kubectl: Kubectl, name: str, minutes: float) -> None:
    def check() -> tuple[bool, str, str]:
        node = kubectl.json("get", "node", name)
        if node is None:
            return (
                False,
                "not registered",
                (
                    "the node never registered with RKE2: check cloud-init and the agent on the VM "
                    "(/var/log/cloud-init-output.log, journalctl -u rke2-agent), the join token and "
                    "gpu-pool:rke2.serverUrl"
                ),
            )
        if not node_ready(node):
            return (
                False,
                "registered, not Ready",
                (
                    f"the node registered but the kubelet is not Ready: kubectl describe node {name} "
                    "(CNI, disk pressure, kubelet)"
                ),
            )
        return True, "Ready", ""

    Waiter(f"node {name} to register and be Ready", minutes, kubectl).until(check)


def driver_log_command(namespace: str, node: str) -> str:
    return f"kubectl -n {namespace} logs -l {DRIVER_PODS} --field-selector spec.nodeName={node} -c nvidia-driver-ctr"


def _driver_pods(kubectl: Kubectl, namespace: str, node: str) -> list[dict[str, Any]]:
    found = kubectl.json("-n", namespace, "get", "pods", "-l", DRIVER_PODS, "--field-selector", f"spec.nodeName={node}")
    return list((found or {}).get("items") or [])


def _pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


REVISION_HASH_LABEL = "controller-revision-hash"


def newest_revision_hash(kubectl: Kubectl, namespace: str, pod: dict[str, Any]) -> str | None:
    """The hash of the driver DaemonSet's newest ControllerRevision, as k8s-operator-libs' podInSyncWithDS reads
    it (pkg/upgrade pod_manager.go GetDaemonsetControllerRevisionHash: the revisions matching the DaemonSet's
    selector whose name starts with its name, the highest `revision`, its name less `<ds>-`). None: not known."""
    owner = next(
        (o for o in (pod.get("metadata") or {}).get("ownerReferences") or [] if o.get("kind") == "DaemonSet"), None
    )
    if owner is None:
        return None
    daemonset = kubectl.json("-n", namespace, "get", "daemonset", str(owner.get("name")))
    match = ((daemonset or {}).get("spec") or {}).get("selector", {}).get("matchLabels") or {}
    if not match:
        return None
    selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
    found = kubectl.json("-n", namespace, "get", "controllerrevisions", "-l", selector)
    ds_name = str(owner.get("name"))
    revisions = [
        r
        for r in (found or {}).get("items") or []
        if str((r.get("metadata") or {}).get("name", "")).startswith(ds_name)
    ]
    if not revisions:
        return None
    newest = max(revisions, key=lambda r: int(r.get("revision") or 0))
    return str(newest["metadata"]["name"]).removeprefix(f"{ds_name}-")


def replace_out_of_sync_driver_pod(kubectl: Kubectl, namespace: str, name: str) -> bool:
    """`upgrade-failed` is left only when the node's driver pod is in sync with the DaemonSet's newest revision
    and Ready (k8s-operator-libs common_manager.go ProcessUpgradeFailedNodes, isDriverPodInSync); the driver
    DaemonSet is OnDelete (gpu-operator assets/state-driver/0500_daemonset.yaml), so nothing replaces a pod of an
    older revision. Deletes that pod (the DaemonSet controller creates it again on the newest revision), says so
    and records it on the Node: True. False when the pod is already on the newest revision (a real failure)."""
    for pod in _driver_pods(kubectl, namespace, name):
        pod_hash = ((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_HASH_LABEL)
        newest = newest_revision_hash(kubectl, namespace, pod)
        if newest is None or pod_hash is None or pod_hash == newest:
            continue
        pod_name = str(pod["metadata"]["name"])
        kubectl.must("-n", namespace, "delete", "pod", pod_name, "--wait=false")
        why = f"upgrade-failed with driver pod {pod_name} on revision {pod_hash}, the DaemonSet's newest is {newest}"
        print(f"{name}: {why}: deleted it, so the operator's DaemonSet recreates it on {newest}; waiting")
        record_repair(kubectl, name, {"event": "driver-pod-deleted", "reason": why})
        return True
    return False


def upgrade_failed(kubectl: Kubectl, namespace: str, name: str, replaced: set[str]) -> tuple[bool, str, str]:
    """The gate on a node in upgrade-failed: an out-of-sync driver pod is deleted once (the recreated pod must pass
    on its own: FIELD-REVIEW-5 WRONG-2) and the gate waits; a pod on the newest revision is a real failure."""
    if not replaced and replace_out_of_sync_driver_pod(kubectl, namespace, name):
        replaced.add(name)
        return False, "upgrade-failed, out-of-sync driver pod deleted", "the recreated driver pod"
    if replaced:
        cause = "the recreated driver pod did not bring the node out of upgrade-failed: "
        return (
            False,
            "upgrade-failed, waiting for the recreated driver pod",
            cause + driver_log_command(namespace, name),
        )
    raise StepFailed(
        f"the GPU Operator's driver upgrade failed on {name} ({UPGRADE_STATE_LABEL}=upgrade-failed): "
        + driver_log_command(namespace, name)
    )


def set_turn_state(kubectl: Kubectl, name: str, state: str) -> None:
    """The node's visible turn state (components/gpu_failure_domain/observed.py TURN_STATE_LABEL); a repair's turn
    stays `repairing` until it ends."""
    node = kubectl.json("get", "node", name) or {}
    if ((node.get("metadata") or {}).get("labels") or {}).get(TURN_STATE_LABEL) == "repairing" and state == "gating":
        return
    kubectl.run("label", "node", name, "--overwrite", f"{TURN_STATE_LABEL}={state}")


def step_gpu_ready(kubectl: Kubectl, name: str, minutes: float) -> None:
    slots = int(env("GPU_SLOTS"))
    driver = env("DRIVER_VERSION")
    namespace = env("OPERATOR_NAMESPACE")
    kubelet = os.environ.get("KUBELET_VERSION", "")
    replaced: set[str] = set()
    if os.environ.get("WAVE_DOMAIN"):
        set_turn_state(kubectl, name, "gating")

    def check() -> tuple[bool, str, str]:
        node = kubectl.json("get", "node", name)
        if node is None:
            return False, "node not found", f"node {name} is gone"
        running = str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "")
        if kubelet and (running != kubelet or not node_ready(node)):
            return (
                False,
                f"kubelet {running or 'unknown'}, {'Ready' if node_ready(node) else 'not Ready'}",
                f"{name} is not Ready on kubelet {kubelet}: on the VM, journalctl -u rke2-agent (the stack pins RKE2 "
                f"{kubelet}: a node on another release is pending an RKE2 upgrade, which the plan shows)",
            )
        state = (node.get("metadata", {}).get("labels") or {}).get(UPGRADE_STATE_LABEL, "")
        if state == "upgrade-failed":
            return upgrade_failed(kubectl, namespace, name, replaced)
        pods = _driver_pods(kubectl, namespace, name)
        images = [c.get("image", "") for p in pods for c in (p.get("spec") or {}).get("containers") or []]
        on_version = any(f":{driver}" in image for image in images)
        ready = any(_pod_ready(p) for p in pods)
        allocatable = str((node.get("status") or {}).get("allocatable", {}).get(GPU_RESOURCE, "0"))
        status = (
            f"allocatable {GPU_RESOURCE}={allocatable}/{slots}, driver pod "
            f"{'Ready' if ready else 'not Ready' if pods else 'missing'}"
            f"{'' if on_version or not pods else ' on another driver'}, upgrade state {state or 'none'}"
        )
        if not pods:
            return (
                False,
                status,
                (
                    f"no driver pod on {name}: is the node labelled for the operator (nvidia.com/gpu.deploy.driver) "
                    f"and does NFD see the card? kubectl -n {namespace} get pods -o wide"
                ),
            )
        if not on_version:
            return (
                False,
                status,
                f"the driver pod on {name} still runs another driver; the operator upgrades one node at a time",
            )
        if state not in ("", "upgrade-done"):
            return False, status, f"the operator's driver upgrade on {name} is still at {state}"
        if not ready:
            return (
                False,
                status,
                (
                    "the driver pod is not Ready (the first build compiles nvidia.ko): "
                    + driver_log_command(namespace, name)
                ),
            )
        if allocatable != str(slots):
            return (
                False,
                status,
                (
                    f"the device plugin advertises {allocatable} of {slots} GPUs: debug from the driver up "
                    f"(toolkit, then device plugin): kubectl -n {namespace} get pods -o wide "
                    f"--field-selector spec.nodeName={name}"
                ),
            )
        return True, status, ""

    Waiter(f"{name} to advertise {slots} {GPU_RESOURCE} on driver {driver}", minutes, kubectl).until(check)


def step_kernel_rebuild(kubectl: Kubectl, name: str, minutes: float) -> None:
    kernel = env("KERNEL")
    namespace = env("OPERATOR_NAMESPACE")

    def back_on_kernel() -> tuple[bool, str, str]:
        node = kubectl.json("get", "node", name)
        running = str(((node or {}).get("status") or {}).get("nodeInfo", {}).get("kernelVersion") or "unknown")
        if node is None or running != kernel or not node_ready(node):
            return (
                False,
                f"kernel {running}, {'Ready' if node and node_ready(node) else 'not Ready'}",
                (f"the VM did not boot kernel {kernel}: check /etc/default/grub.d/99-gpu-pool-kernel.cfg on the VM"),
            )
        return True, f"kernel {running}, Ready", ""

    Waiter(f"{name} to come back Ready on kernel {kernel}", minutes, kubectl).until(back_on_kernel)
    # Only this node's driver pod: the others keep serving. The driver DaemonSet is OnDelete, so `rollout
    # status` cannot follow it: delete the pod and wait for its replacement on this node to be Ready.
    kubectl.must(
        "-n",
        namespace,
        "delete",
        "pod",
        "-l",
        DRIVER_PODS,
        "--field-selector",
        f"spec.nodeName={name}",
        "--wait=true",
        timeout=600,
    )

    def rebuilt() -> tuple[bool, str, str]:
        pods = _driver_pods(kubectl, namespace, name)
        if not pods:
            return False, "no driver pod yet", "the driver DaemonSet did not recreate its pod on this node"
        if not any(_pod_ready(p) for p in pods):
            return (
                False,
                "driver pod not Ready",
                (
                    f"the driver did not build for {kernel} (does the Ubuntu archive still serve its headers?): "
                    + driver_log_command(namespace, name)
                ),
            )
        return True, "driver pod Ready", ""

    Waiter(f"the driver on {name} to rebuild for kernel {kernel}", minutes, kubectl).until(rebuilt)


# ---------------------------------------------------------------------------------------------------- Proxmox


class ProxmoxFailed(StepFailed):
    """A Proxmox API call that failed, as one line with PVE's own message (never a traceback); `status` is the
    HTTP status (None: the API did not answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def pve_message(error: urllib.error.HTTPError) -> str:
    """PVE's reason for a refusal: pveproxy puts the handler's `die` message in the status line, and a parameter
    error's details in the body's `errors` (pve-http-server PVE/APIServer/AnyEvent.pm)."""
    reason = str(error.reason or "").strip()
    try:
        body = json.loads(error.read() or b"{}")
    except (ValueError, OSError):
        body = {}
    details = body.get("errors") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    text = str(message or reason or f"HTTP {error.code}")
    if isinstance(details, dict) and details:
        text += " (" + "; ".join(f"{k}: {v}" for k, v in details.items()) + ")"
    return " ".join(text.split())


class Proxmox:
    def __init__(self, endpoint: str, insecure: bool) -> None:
        self.endpoint = endpoint
        self.base = endpoint.rstrip("/") + "/api2/json"
        self.context = ssl._create_unverified_context() if insecure else ssl.create_default_context()
        self.headers: dict[str, str] = {}

    def login(self, token: str | None, password: str | None) -> None:
        if token:
            self.headers["Authorization"] = f"PVEAPIToken={token}"
            return
        data = self.call("POST", "/access/ticket", {"username": "root@pam", "password": password or ""})
        self.headers["Cookie"] = f"PVEAuthCookie={data['ticket']}"
        self.headers["CSRFPreventionToken"] = data["CSRFPreventionToken"]

    def call(self, method: str, path: str, form: dict[str, str] | None = None) -> Any:
        """The answer's `data`; a refusal or no answer is ProxmoxFailed with PVE's message (a Python traceback
        once ended a wave's power cycle and a repair: FIELD-REVIEW-5 WRONG-5)."""
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=60) as response:
                return json.load(response)["data"]
        except urllib.error.HTTPError as error:
            raise ProxmoxFailed(
                f"Proxmox refused {method} {path}: {error.code} {pve_message(error)}", error.code
            ) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", None) or error
            raise ProxmoxFailed(f"cannot reach the Proxmox API at {self.endpoint}: {reason}") from None
        except (ValueError, KeyError, TypeError) as error:
            raise ProxmoxFailed(
                f"the Proxmox API at {self.endpoint} gave no answer to {method} {path}: {error}"
            ) from None

    def wait_status(self, vm: str, status: str, seconds: int) -> bool:
        deadline = time.monotonic() + seconds
        poll = float(os.environ.get("GPU_POOL_POLL_SECONDS", "3"))
        while time.monotonic() < deadline:
            if self.call("GET", f"{vm}/status/current")["status"] == status:
                return True
            time.sleep(poll)
        return False

    def wait_task(self, upid: str, seconds: int) -> str | None:
        """The exit status of a worker task (`GET /nodes/{node}/tasks/{upid}/status`, pve-manager
        PVE/API2/Tasks.pm: `exitstatus` is `OK`, `WARNINGS: n`, or the task's error), None while it runs."""
        parts = upid.split(":")
        if len(parts) < 3 or parts[0] != "UPID":
            return "OK"  # not a task id: nothing to wait for
        deadline = time.monotonic() + seconds
        poll = float(os.environ.get("GPU_POOL_POLL_SECONDS", "3"))
        path = f"/nodes/{parts[1]}/tasks/{urllib.parse.quote(upid, safe='')}/status"
        while True:
            answer = self.call("GET", path) or {}
            if answer.get("status") == "stopped":
                return str(answer.get("exitstatus") or "OK")
            if time.monotonic() >= deadline:
                return None
            time.sleep(poll)

    def guest(self, vmid: str) -> dict[str, Any] | None:
        """The VM's entry in `GET /cluster/resources?type=vm` (its node, status, lock, hastate)."""
        for entry in self.call("GET", "/cluster/resources?type=vm") or []:
            if isinstance(entry, dict) and str(entry.get("vmid")) == str(vmid):
                return entry
        return None


def task_ok(exitstatus: str | None) -> bool:
    return exitstatus is not None and (exitstatus == "OK" or exitstatus.startswith("WARNINGS"))


def _ha_placed(api: Proxmox, vmid: str, seconds: int) -> str | None:
    """The node an HA-managed VM runs on once it runs, from the cluster's view (its `/nodes/<stack node>/...`
    path no longer resolves when the CRM started it elsewhere)."""
    deadline = time.monotonic() + seconds
    poll = float(os.environ.get("GPU_POOL_POLL_SECONDS", "3"))
    while True:
        entry = api.guest(vmid) or {}
        if entry.get("status") == "running":
            return str(entry.get("node") or "") or None
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def pending_keys(pending: list[dict[str, Any]]) -> list[str]:
    """Keys of `GET /nodes/{node}/qemu/{vmid}/pending` entries that wait for the VM's next cold start."""
    return sorted(str(e["key"]) for e in pending if "key" in e and ("pending" in e or e.get("delete")))


def previous_device(previous_stdout: str) -> str | None:
    for line in previous_stdout.splitlines():
        if line.startswith(APPLIED_DEVICE):
            return line[len(APPLIED_DEVICE) :]
    return None


def start_vm(api: Proxmox, vm: str, vmid: str, where: str, name: str) -> None:
    """`status/start` and its task's exit status (qemu-server's own reason when it fails: `no pci device info for
    device ...` when the host lost the card, PCI.pm); an HA-managed VM must then run on the stack's node."""
    started = api.call("POST", f"{vm}/status/start")
    exitstatus = api.wait_task(str(started or ""), 180)
    if exitstatus is not None and not task_ok(exitstatus):
        # qemu-server's own reason: `no pci device info for device ...` when the host lost the card (PCI.pm).
        raise StepFailed(
            f"the start task of {where} failed: {exitstatus} (node {name} stays cordoned; a card the host lost is "
            "reset on the host: PCI remove/rescan, or a host reboot)"
        )
    print(f"{where}: start task {exitstatus or 'still running'}")
    if os.environ.get("POWER_CYCLE_HA"):
        # An HA-managed VM's start is a request the CRM places: it may start on another node that has the mapping.
        ha_node = _ha_placed(api, vmid, 180)
        if ha_node != env("PROXMOX_NODE"):
            raise StepFailed(
                f"HA started VM {vmid} on {ha_node or 'no node'}, not the stack's {env('PROXMOX_NODE')}: the failure "
                f"domain is now on another host; migrate it back (ha-manager migrate vm:{vmid} "
                f"{env('PROXMOX_NODE')}) and check the HA group's nodes (node {name} stays cordoned)"
            )
    elif not api.wait_status(vm, "running", 180):
        raise StepFailed(f"VM {vmid} did not start within 180 s (node {name} stays cordoned)")


def step_power_cycle(kubectl: Kubectl, name: str, minutes: float) -> None:
    vmid = env("PROXMOX_VMID")
    device = env("MAPPED_DEVICE", "")
    api = Proxmox(env("PROXMOX_ENDPOINT"), env("PROXMOX_INSECURE", "false") == "true")
    api.login(os.environ.get("PROXMOX_API_TOKEN"), os.environ.get("PROXMOX_ROOT_PASSWORD"))
    vm = f"/nodes/{env('PROXMOX_NODE')}/qemu/{vmid}"
    forced = os.environ.get("POWER_CYCLE_REASON", "")
    if forced:
        # `gpu-pool repair`: the card faulted; a cold start resets it whatever the VM's config says. It also
        # applies what Proxmox has pending for the VM (a stack change not rolled yet): said, so it is no surprise.
        keys = pending_keys(api.call("GET", f"{vm}/pending"))
        also = f"; it also applies what Proxmox has pending: {', '.join(keys)}" if keys else ""
        print(f"VM {vmid}: {forced}; full power cycle (stop, then start){also}")
    else:
        keys = pending_keys(api.call("GET", f"{vm}/pending"))
        before = previous_device(os.environ.get("PULUMI_COMMAND_STDOUT", ""))
        # A mapping that now points at another slot changes nothing in the VM's config: only a cold start hands
        # the guest the new device, so a changed mapping counts as pending too.
        moved = before is not None and before != device
        reasons = keys + (["the mapped PCI device"] if moved else [])
        if not reasons:
            print(f"VM {vmid}: nothing pending, no power cycle")
            print(APPLIED_DEVICE + device)
            return
        print(f"VM {vmid}: {', '.join(reasons)} changed; drain, full power cycle (stop, then start), uncordon")
    current = str((api.call("GET", f"{vm}/status/current") or {}).get("status") or "")
    node = kubectl.json("get", "node", name)
    was_cordoned = bool(((node or {}).get("spec") or {}).get("unschedulable"))
    if node is not None:
        # Never an undrained reboot: GPU pods are evicted (their PodDisruptionBudgets respected) first.
        kubectl.must("drain", name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=15m", timeout=1000)
    else:
        print(f"node {name} is not registered: nothing to drain")
    where = f"VM {vmid} on {env('PROXMOX_NODE')}"
    if current == "stopped":
        # Nothing to stop: a cold start is all there is to do (and costs no power cycle of the budget).
        print(f"{where} is stopped: starting it (no stop)")
    else:
        shutdown = api.call("POST", f"{vm}/status/shutdown", {"timeout": "180", "forceStop": "1"})
        if forced and node is not None:
            # Recorded once Proxmox accepted the stop, not before: a refused stop (a backup's lock, HA) changed
            # nothing and must not spend the daily budget (FIELD-REVIEW-5 WRONG-5).
            node = record_repair(kubectl, name, {"event": "power-cycle", "reason": forced, "vm": where})
            post_event(kubectl, node, "Warning", "GpuPoolPowerCycle", f"gpu-pool repair power-cycles {where}: {forced}")
        stopped = api.wait_task(str(shutdown or ""), 240)
        if stopped is not None and not task_ok(stopped):
            raise StepFailed(f"the stop task of {where} failed: {stopped} (node {name} stays cordoned)")
        if not api.wait_status(vm, "stopped", 240):
            raise StepFailed(f"VM {vmid} did not stop within 240 s (node {name} stays cordoned)")
    start_vm(api, vm, vmid, where, name)
    if node is not None:
        old_boot = boot_id(node)

        def rebooted() -> tuple[bool, str, str]:
            now = kubectl.json("get", "node", name)
            if now is None or boot_id(now) == old_boot or not node_ready(now):
                return False, "not back yet", f"the VM started but {name} did not come back Ready: check the VM console"
            return True, "Ready after the power cycle", ""

        Waiter(f"{name} to come back Ready after the power cycle", minutes, kubectl).until(rebooted)
        if not was_cordoned:
            kubectl.must("uncordon", name)
        else:
            print(f"node {name} was cordoned before the power cycle: left cordoned")
    print(APPLIED_DEVICE + device)


# ---------------------------------------------------------------------------------------------------- repair


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def repair_records(node: dict[str, Any]) -> list[dict[str, Any]]:
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(REPAIRS_ANNOTATION) or "[]"
    try:
        parsed = json.loads(raw)
    except ValueError:
        return []
    return [entry for entry in parsed if isinstance(entry, dict)] if isinstance(parsed, list) else []


def kept_records(records: list[dict[str, Any]], now: datetime.datetime) -> list[dict[str, Any]]:
    """The records of the last REPAIR_RECORD_DAYS, at most REPAIR_RECORD_MAX, oldest first."""
    oldest = now - datetime.timedelta(days=REPAIR_RECORD_DAYS)
    kept = []
    for entry in records:
        try:
            at = datetime.datetime.strptime(str(entry.get("at")), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        except ValueError:
            continue
        if at >= oldest:
            kept.append(entry)
    return kept[-REPAIR_RECORD_MAX:]


def repairs_with(node: dict[str, Any], entry: dict[str, str]) -> str:
    now = datetime.datetime.now(datetime.UTC)
    records = [*kept_records(repair_records(node), now), {"at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), **entry}]
    return json.dumps(records[-REPAIR_RECORD_MAX:], separators=(",", ":"))


def patch_node(kubectl: Kubectl, name: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Patches the Node with what `change` makes of it as read now, carrying its resourceVersion, so a concurrent
    writer (the kubelet's status reports move it too) makes the patch fail and it is made again, instead of one of
    the two writes being lost. Returns the Node as read before the patch that went through."""
    for _attempt in range(10):
        node: dict[str, Any] | None = kubectl.json("get", "node", name)
        if node is None:
            raise StepFailed(f"node {name} is gone: {kubectl.last_error}")
        patch = change(node)
        patch.setdefault("metadata", {})["resourceVersion"] = (node.get("metadata") or {}).get("resourceVersion")
        code, _ = kubectl.run("patch", "node", name, "--type=merge", "-p", json.dumps(patch))
        if code == 0:
            return node
        if "the object has been modified" not in kubectl.last_error and "Conflict" not in kubectl.last_error:
            raise StepFailed(f"kubectl patch node {name} failed: {kubectl.last_error}")
    raise StepFailed(f"node {name} kept changing under the patch (10 conflicts): {kubectl.last_error}")


def record_repair(kubectl: Kubectl, name: str, entry: dict[str, str]) -> dict[str, Any]:
    """Appends `entry` (with the time) to the Node's repair record."""

    def appended(node: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"annotations": {REPAIRS_ANNOTATION: repairs_with(node, entry)}}}

    return patch_node(kubectl, name, appended)


def post_event(kubectl: Kubectl, node: dict[str, Any], kind: str, reason: str, message: str) -> None:
    """A core/v1 Event on the Node (what `kubectl describe node` lists), as the kubelet writes its own: in the
    default namespace, the Node as its involved object."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name"))
    now = utc_now()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}.gpu-pool-", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": meta.get("uid", "")},
        "type": kind,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": EVENT_SOURCE, "host": socket.gethostname()},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    code, _ = kubectl.run("create", "-f", "-", "-o", "name", stdin=json.dumps(event))
    if code != 0:
        # The record on the Node is what counts; an Event is for people and expires within hours anyway.
        print(f"warning: could not post the {reason} Event on {name}: {kubectl.last_error}", file=sys.stderr)


def step_repair_done(kubectl: Kubectl, name: str, minutes: float) -> None:
    reason = env("REPAIR_REASON")

    def done(node: dict[str, Any]) -> dict[str, Any]:
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        ours = bool(annotations.get(WAVE_CORDON_ANNOTATION))
        record = repairs_with(node, {"event": "repaired", "reason": reason})
        # One patch: no interruption leaves the node uncordoned with its turn still open, or the reverse.
        change: dict[str, Any] = {
            "metadata": {
                # The turn's end releases the hold: its visible state done, kept until the next turn.
                "labels": {TURN_STATE_LABEL: "done"},
                "annotations": {WAVE_TURN_ANNOTATION: None, WAVE_STOPPED_ANNOTATION: None, REPAIRS_ANNOTATION: record}
                | ({WAVE_CORDON_ANNOTATION: None} if ours else {}),
            }
        }
        if ours:
            change["spec"] = {"unschedulable": None}
        return change

    node = patch_node(kubectl, name, done)
    ours = bool(((node.get("metadata") or {}).get("annotations") or {}).get(WAVE_CORDON_ANNOTATION))
    cordoned = bool((node.get("spec") or {}).get("unschedulable")) and not ours
    end = "left cordoned: someone else cordoned it before the repair" if cordoned else "serving"
    post_event(kubectl, node, "Normal", "GpuPoolRepaired", f"gpu-pool repair: {reason}; checked again, {end}")
    print(f"{name}: repaired, {end}")


def step_smoke_test(kubectl: Kubectl, name: str, minutes: float) -> None:
    job = json.loads(env("SMOKE_JOB"))
    namespace, job_name = job["metadata"]["namespace"], job["metadata"]["name"]
    kubectl.must("create", "-f", "-", "-o", "name", stdin=json.dumps(job))

    def finished() -> tuple[bool, str, str]:
        found = kubectl.json("-n", namespace, "get", "job", job_name)
        conditions = {c.get("type"): c for c in ((found or {}).get("status") or {}).get("conditions") or []}
        failed = conditions.get("Failed") or {}
        if failed.get("status") == "True":
            why = ": ".join(str(failed.get(k)) for k in ("reason", "message") if failed.get(k))
            raise StepFailed(
                f"the smoke test {namespace}/{job_name} failed on {name} ({why}): kubectl -n {namespace} logs "
                f"job/{job_name}"
            )
        if (conditions.get("Complete") or {}).get("status") == "True":
            return True, "Complete", ""
        active = ((found or {}).get("status") or {}).get("active") or 0
        return (
            False,
            f"{active} active",
            f"the smoke Job did not finish: kubectl -n {namespace} get pods -l job-name={job_name} -o wide",
        )

    Waiter(f"the smoke test {namespace}/{job_name} on {name}", minutes, kubectl).until(finished)


STEPS: dict[str, Callable[[Kubectl, str, float], None]] = {
    "node-ready": step_node_ready,
    "gpu-ready": step_gpu_ready,
    "power-cycle": step_power_cycle,
    "kernel-rebuild": step_kernel_rebuild,
    "smoke-test": step_smoke_test,
    "repair-done": step_repair_done,
}


def main() -> int:
    try:
        step = STEPS.get(env("GPU_POOL_STEP"))
        if step is None:
            raise StepFailed(f"unknown GPU_POOL_STEP {os.environ['GPU_POOL_STEP']!r}; one of {', '.join(STEPS)}")
        step(Kubectl(json.loads(env("KUBECTL", '["kubectl"]'))), env("NODE_NAME"), float(env("TIMEOUT_MINUTES", "30")))
    except StepFailed as error:
        print(f"gpu-pool: {error}", file=sys.stderr)
        wave = os.environ.get("WAVE_DOMAIN")
        stopped = os.environ.get("WAVE_STOPPED_ANNOTATION")
        if wave and stopped:
            # The node stays cordoned: it says why, for `kubectl describe node` and the next plan.
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            note = f"gate {env('GPU_POOL_STEP')} failed at {when}: {error}"[:1000]
            failed = Kubectl(json.loads(env("KUBECTL", '["kubectl"]')))
            failed.run("annotate", "node", env("NODE_NAME"), "--overwrite", f"{stopped}={note}")
            failed.run("label", "node", env("NODE_NAME"), "--overwrite", f"{TURN_STATE_LABEL}=stopped")
        if wave:
            print(
                f"gpu-pool: the wave stopped at domain {wave} (gate {env('GPU_POOL_STEP')}): {wave} stays cordoned, "
                "the domains after it were not touched and still serve; fix the cause, then `pulumi up` resumes "
                f"the wave at {wave}",
                file=sys.stderr,
            )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
