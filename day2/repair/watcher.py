"""The unattended repair's watcher: the loop the in-cluster Deployment runs (`python3 watcher.pyz --facts F`).

Each pass: read the breaker (its ConfigMap), each GPU domain's Node, and for a node the health check marked
(GpuPoolHealthy False) whose standing guard rails pass, run node-check as a Job pinned to it and read its report;
doctor's walk and the same `decide` as `gpu-pool repair`, then the guard rails (day2/repair/unattended.py). A
repair: the Lease, the Proxmox token from its Secret (read per repair) and `GET /access/permissions` against the
role, the node's hold and cordon in one conditional patch, the drain by evictions, the power cycle through the
Proxmox API, Ready with a new boot id, node-check again; fixed: the hold released and the node uncordoned; not
fixed: the node stays cordoned (turn-state stopped) and the breaker records it. Every refusal is recorded on the
Node (gpu-pool.dev/unattended-verdict) and as an Event with its typed reason, when it changes.

The decisions are pure (day2/repair/watcher_core.py); this module carries them to the API server (the pod's
ServiceAccount token, urllib, no kubectl) and Proxmox (node_steps_script.Proxmox, the wave's own client). Not done
here: the smoke test after the power cycle (node-check's floors decide whether it fixed).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import socket
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from components.gpu_failure_domain.node_steps_script import (
    Proxmox,
    StepFailed,
    boot_id,
    node_ready,
    start_vm,
    task_ok,
)
from components.gpu_failure_domain.observed import observed_node
from components.unattended.objects import BREAKER_CONFIGMAP, LEASE_NAME, SECRET_NAME
from day2 import objects as o
from day2.doctor.health_check import Api, ApiError
from day2.doctor.node_report import NodeCheck, parse_node_check
from day2.doctor.walk import diagnose
from day2.errors import Day2Error
from day2.pool import facts_from_document
from day2.repair.decide import Decision, decide
from day2.repair.unattended import (
    Failure,
    Pool,
    Reason,
    Refusal,
    breaker_data,
    breaker_of,
    record_failure,
    standing_refusals,
    verdict,
)
from day2.repair.watcher_core import (
    EventReason,
    WatcherFacts,
    advertises,
    beyond,
    done_patch,
    event,
    eviction,
    held_by,
    hold_patch,
    host_refusals,
    job_named,
    judged_already,
    lease_free,
    lease_released,
    lease_taken,
    marked,
    may_hold,
    power_cycle_patch,
    slots_of,
    smoke_named,
    stamp,
    stopped_patch,
    to_evict,
    verdict_changed,
    verdict_patch,
)

TOKEN_KEY = "token"
# The metrics' names (components/unattended/alerts.py REPAIRS, REFUSALS, BREAKER_OPEN; a test keeps them equal).
REPAIRS_METRIC = "gpu_pool_unattended_repairs_total"
REFUSALS_METRIC = "gpu_pool_unattended_refusals_total"
BREAKER_METRIC = "gpu_pool_unattended_breaker_open"
METRICS_PORT = 9400
MERGE = "application/merge-patch+json"
# How long each wait of a repair may take (minutes): the drain, the VM's stop and start, the node back Ready.
DRAIN_MINUTES = 15
READY_MINUTES = 30
NODE_CHECK_MINUTES = 6
SMOKE_MINUTES = 15


class Conflict(ApiError):
    """409: the object changed since it was read (its resourceVersion)."""


class Kube(Api):
    """The API server with the watcher's ServiceAccount token: JSON calls, and a pod's log as text."""

    def send(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        try:
            return self.call(method, path, body, content_type)
        except ApiError as error:
            if ": 409 " in str(error):
                raise Conflict(str(error)) from None
            raise

    def text(self, path: str) -> str:
        import urllib.request

        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.token}"}, method="GET"
        )
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                body: bytes = response.read()
                return body.decode(errors="replace")
        except OSError as error:
            raise ApiError(f"GET {path}: {error}") from None


NodeCheckRunner = Callable[["Watcher", str, str], tuple[NodeCheck | None, str]]


@dataclass
class Metrics:
    """What the watcher exports (components/unattended/alerts.py names them; its alerts read them): repairs run to
    the end by node and result, refusals by node and reason (each time the verdict changes), the breaker's state."""

    repairs: dict[tuple[str, str], int] = field(default_factory=dict)
    refusals: dict[tuple[str, str], int] = field(default_factory=dict)
    breaker_open: int = 0

    def text(self) -> str:
        lines = [
            f"# TYPE {REPAIRS_METRIC} counter",
            *(f'{REPAIRS_METRIC}{{node="{n}",result="{r}"}} {v}' for (n, r), v in sorted(self.repairs.items())),
            f"# TYPE {REFUSALS_METRIC} counter",
            *(f'{REFUSALS_METRIC}{{node="{n}",reason="{r}"}} {v}' for (n, r), v in sorted(self.refusals.items())),
            f"# TYPE {BREAKER_METRIC} gauge",
            f"{BREAKER_METRIC} {self.breaker_open}",
        ]
        return "\n".join(lines) + "\n"


def serve_metrics(metrics: Metrics, port: int) -> None:
    """`GET /metrics` on `port`, in a thread of its own, for the ServiceMonitor."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = metrics.text().encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("", port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()


@dataclass
class Watcher:
    kube: Kube
    facts: WatcherFacts
    out: TextIO
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    poll_seconds: float = 5.0
    # How node-check runs on a node: a Job pinned to it (job_node_check) unless a test gives another.
    node_check: NodeCheckRunner = field(default=lambda w, host, attempt: job_node_check(w, host, attempt))
    # The Proxmox client for a token (node_steps_script.Proxmox, logged in).
    connect: Callable[[WatcherFacts, str], Proxmox] = field(default=lambda facts, token: login(facts, token))
    host: str = field(default_factory=socket.gethostname)
    metrics: Metrics = field(default_factory=Metrics)

    def log(self, line: str) -> None:
        self.out.write(f"{stamp(self.clock())} {line}\n")
        self.out.flush()

    def wait(self, what: str, minutes: float, check: Callable[[], Any]) -> Any:
        """Polls `check` until it returns something truthy, or StepFailed naming `what` after `minutes`."""
        deadline = time.monotonic() + minutes * 60
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() >= deadline:
                raise StepFailed(f"{what}: not within {minutes:g} minutes")
            time.sleep(self.poll_seconds)


# ---------------------------------------------------------------------------------------------------- reading


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{urllib.parse.quote(name)}"


def read_nodes(w: Watcher) -> dict[str, dict[str, Any] | None]:
    """Each domain's Node by name (get, limited by resourceNames to the stack's hostnames: no list of Nodes)."""
    return {d.name: w.kube.send("GET", node_path(d.hostname)) for d in w.facts.unattended.domains}


def breaker_path(w: Watcher) -> str:
    return f"/api/v1/namespaces/{w.facts.namespace}/configmaps/{BREAKER_CONFIGMAP}"


def read_snapshot(w: Watcher, nodes: Mapping[str, Mapping[str, Any] | None]) -> o.Snapshot:
    """What doctor's walk reads, from where the stack puts it: the domains' Nodes, the operator's pods, the
    time-slicing ConfigMap and the smoke Jobs."""
    pool = w.facts.pool
    operator = pool["operatorNamespace"]
    items: list[dict[str, Any]] = [{"kind": "Node", **n} for n in nodes.values() if n is not None]
    items += w.kube.items(f"/api/v1/namespaces/{operator}/pods", "Pod")
    configmap = w.kube.send("GET", f"/api/v1/namespaces/{operator}/configmaps/{pool['timeSlicingConfigMap']}")
    if configmap is not None:
        items.append({"kind": "ConfigMap", **configmap})
    if pool["smokeTestEnabled"]:
        items += w.kube.items(f"/apis/batch/v1/namespaces/{pool['smokeNamespace']}/jobs", "Job")
    return o.Snapshot.from_items(items)


def job_node_check(w: Watcher, hostname: str, attempt: str) -> tuple[NodeCheck | None, str]:
    """node-check as a Job pinned to the node (components/unattended/node_check_job.py): its report from the pod's
    log, or why there is none."""
    job = job_named(w.facts.node_check_jobs[hostname], hostname, w.clock(), attempt)
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    w.kube.send("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

    def finished() -> str:
        found = w.kube.send("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}") or {}
        for condition in (found.get("status") or {}).get("conditions") or []:
            if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
                return str(condition["type"])
        return ""

    try:
        w.wait(f"node-check Job {namespace}/{name}", NODE_CHECK_MINUTES, finished)
    except StepFailed as error:
        return None, str(error)
    selector = urllib.parse.quote(f"job-name={name}")
    pods = w.kube.items(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}", "Pod")
    if not pods:
        return None, f"node-check Job {namespace}/{name} left no pod"
    pod = pods[0]["metadata"]["name"]
    log = w.kube.text(f"/api/v1/namespaces/{namespace}/pods/{pod}/log")
    try:
        return parse_node_check(json.loads(log), f"(Job {namespace}/{name})"), ""
    except (ValueError, Day2Error) as error:
        return None, f"node-check Job {namespace}/{name} printed no report: {error}"


# ---------------------------------------------------------------------------------------------------- recording


def post(w: Watcher, node: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
    body = event(node, kind, reason, message, w.clock(), w.facts.events_namespace, w.host)
    try:
        w.kube.send("POST", f"/api/v1/namespaces/{w.facts.events_namespace}/events", body)
    except ApiError as error:
        # The record on the Node is what counts; an Event is for people and expires within hours anyway.
        w.log(f"could not post the {reason} Event: {error}")
    w.log(f"{(node.get('metadata') or {}).get('name')}: {reason}: {message}")


def patch_node(w: Watcher, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any]:
    """A merge patch carrying the resourceVersion `change` read it at, made again on a 409 from another writer (the
    kubelet's status, the operator's labels) with the Node as read again; `change` returning None stops (the node
    is no longer the watcher's to change). The Node as read before the patch that went through."""
    for _attempt in range(10):
        node: dict[str, Any] | None = w.kube.send("GET", node_path(name))
        if node is None:
            raise StepFailed(f"node {name} is gone")
        patch = change(node)
        if patch is None:
            raise StepFailed(f"node {name} changed hands while the watcher patched it")
        try:
            w.kube.send("PATCH", node_path(name), patch, MERGE)
        except Conflict:
            continue
        return node
    raise StepFailed(f"node {name} kept changing under the patch (10 conflicts)")


def record_refusals(
    w: Watcher, node: Mapping[str, Any], refusals: tuple[Refusal, ...] | list[Refusal], judged: bool = False
) -> None:
    """The verdict on the Node and, for each reason, an Event: only when it changed since the last pass; `judged`:
    it came from node-check or Proxmox, so this mark is not judged again (watcher_core.JUDGED_ANNOTATION)."""
    changed = verdict_changed(node, refusals)
    if not changed and not judged:
        return
    name = str((node.get("metadata") or {}).get("name"))
    try:
        w.kube.send("PATCH", node_path(name), verdict_patch(node, refusals, judged), MERGE)
    except Conflict:
        return  # the next pass reads it again
    for refusal in refusals if changed else ():
        key = (name, str(refusal.reason))
        w.metrics.refusals[key] = w.metrics.refusals.get(key, 0) + 1
        kind = "Normal" if refusal.reason == "NoRepairNeeded" else "Warning"
        post(w, node, kind, str(refusal.reason), refusal.message)


def record_failure_in_breaker(w: Watcher, node: str, why: str) -> bool:
    """A repair that did not fix, in the breaker's ConfigMap (a conditional update, made again on 409: a person's
    --reset-breaker at the same moment is never lost); whether the breaker is open now."""
    for _attempt in range(10):
        current = w.kube.send("GET", breaker_path(w))
        if current is None:
            raise StepFailed(f"ConfigMap {w.facts.namespace}/{BREAKER_CONFIGMAP} is gone")
        now = w.clock()
        breaker = record_failure(
            breaker_of(current.get("data")), w.facts.unattended, Failure(stamp(now), node, why), now
        )
        try:
            w.kube.send("PUT", breaker_path(w), {**current, "data": breaker_data(breaker)})
        except Conflict:
            continue
        return breaker.open
    raise StepFailed("the breaker's ConfigMap kept changing (10 conflicts)")


# ---------------------------------------------------------------------------------------------------- the pass


def one_pass(w: Watcher) -> str:
    """One look at the pool; at most one repair. What it did, in a line."""
    current = w.kube.send("GET", breaker_path(w))
    breaker = breaker_of((current or {}).get("data")) if current is not None else breaker_of({"state": "unknown"})
    w.metrics.breaker_open = int(breaker.open)
    raw = read_nodes(w)
    observed = {name: observed_node(node) if node is not None else None for name, node in raw.items()}
    pool = Pool(observed, breaker, dict(w.facts.not_eligible))
    cfg = w.facts.unattended
    for domain in cfg.domains:
        node = raw[domain.name]
        if node is None or not marked(node) or held_by(node, w.facts.holder) or judged_already(node):
            continue
        standing = standing_refusals(cfg, domain.name, pool, w.clock())
        if standing:
            record_refusals(w, node, standing)
            continue
        report, why_not = w.node_check(w, domain.hostname, "before")
        diagnosis = diagnose(read_snapshot(w, raw), facts_from_document(w.facts.pool), domain.hostname, report)
        decision = decide(diagnosis, why_not)
        judged = verdict(cfg, domain.name, decision, pool, w.clock())
        if not judged.repair:
            record_refusals(w, node, judged.refusals, judged=True)
            continue
        return repair(w, domain.name, decision)
    return "nothing to repair"


def lease_path(w: Watcher) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{w.facts.namespace}/leases/{LEASE_NAME}"


def repair(w: Watcher, domain: str, decision: Decision) -> str:
    """The repair of one domain under the Lease, released whatever happens."""
    lease = w.kube.send("GET", lease_path(w))
    if lease is None:
        return f"Lease {w.facts.namespace}/{LEASE_NAME} is missing: no repair"
    if not lease_free(lease, w.facts.holder, w.clock()):
        return f"Lease {w.facts.namespace}/{LEASE_NAME} is held by {lease['spec'].get('holderIdentity')}: no repair"
    try:
        lease = w.kube.send("PUT", lease_path(w), lease_taken(lease, w.facts.holder, w.clock()))
    except Conflict:
        return "another watcher took the Lease: no repair"
    try:
        return repair_turn(w, domain, decision)
    finally:
        current = w.kube.send("GET", lease_path(w))
        if current is not None:
            w.kube.send("PUT", lease_path(w), lease_released(current))


def proxmox_for(w: Watcher) -> Proxmox:
    """The Proxmox client with the token read from its Secret now (a replaced token takes effect here)."""
    secret = w.kube.send("GET", f"/api/v1/namespaces/{w.facts.namespace}/secrets/{SECRET_NAME}")
    encoded = ((secret or {}).get("data") or {}).get(TOKEN_KEY)
    if not encoded:
        raise StepFailed(f"Secret {w.facts.namespace}/{SECRET_NAME} has no {TOKEN_KEY}")
    return w.connect(w.facts, base64.b64decode(encoded).decode().strip())


def login(facts: WatcherFacts, token: str) -> Proxmox:
    api = Proxmox(facts.proxmox_endpoint, facts.proxmox_insecure)
    api.login(token, None)
    return api


def refused_by_proxmox(w: Watcher, api: Proxmox, domain_name: str, node: Mapping[str, Any]) -> str:
    """Why Proxmox's side forbids the repair now ('' when nothing does): the token holding more than its role, or
    the VM and the host's view of its card (watcher_core.host_refusals)."""
    host = w.facts.unattended.domain(domain_name).hostname
    extra = beyond(api.call("GET", "/access/permissions") or {}, w.facts.allowed)
    if extra:
        key = (host, EventReason.TOKEN_BEYOND_ROLE)
        w.metrics.refusals[key] = w.metrics.refusals.get(key, 0) + 1
        post(
            w,
            node,
            "Warning",
            EventReason.TOKEN_BEYOND_ROLE,
            f"the repair token holds more than its role: {'; '.join(extra)}: no unattended repair until the token "
            "is the stack's again (remove the extra ACLs, or raise repair.unattended.tokenGeneration and `pulumi up`)",
        )
        return "token beyond its role: no repair"
    vm = w.facts.vms[domain_name]
    guests = api.call("GET", "/cluster/resources?type=vm") or []
    mappings = api.call("GET", f"/cluster/mapping/pci?check-node={vm.proxmox_node}") if vm.mappings else []
    problems = host_refusals(vm, host, guests, mappings or [])
    if problems:
        refusal = Refusal(Reason.HOST_REFUSES, "; ".join(problems))
        record_refusals(w, node, [refusal], judged=True)
        return f"{host}: {refusal.message}"
    return ""


def check_token_at_start(w: Watcher) -> None:
    """At start, what the token holds beyond its role is said in the log and the refusals metric (node ""): each
    repair checks it again and refuses on it with an Event on the node."""
    try:
        extra = beyond(proxmox_for(w).call("GET", "/access/permissions") or {}, w.facts.allowed)
    except (ApiError, StepFailed) as error:
        w.log(f"could not read the token's permissions at start: {error}")
        return
    if extra:
        key = ("", EventReason.TOKEN_BEYOND_ROLE)
        w.metrics.refusals[key] = w.metrics.refusals.get(key, 0) + 1
        w.log(f"the repair token holds more than its role: {'; '.join(extra)}: every repair will be refused")


def repair_turn(w: Watcher, domain_name: str, decision: Decision) -> str:
    host = w.facts.unattended.domain(domain_name).hostname
    node = w.kube.send("GET", node_path(host)) or {}
    refused = refused_by_proxmox(w, proxmox_for(w), domain_name, node)
    if refused:
        return refused
    node = patch_node(
        w, host, lambda n: hold_patch(n, w.facts.holder, w.clock()) if may_hold(n, w.facts.holder) else None
    )
    post(w, node, "Warning", EventReason.REPAIR_STARTED, f"unattended repair of {host}: {decision.reason}")
    cycled = False
    try:
        drain(w, host)
        cycled = power_cycle(w, domain_name, decision.reason)
        back_ready(w, host, boot_id(node))
        report, why_not = w.node_check(w, host, "after")
        if report is None or report.first_broken is not None:
            broken = why_not or f"node-check finds {report.first_broken if report else '?'} broken"
            raise StepFailed(f"the power cycle did not fix it: {broken}")
        gate_and_smoke(w, host)
    except (StepFailed, ApiError) as error:
        return stopped(w, host, str(error), cycled)
    node = patch_node(w, host, lambda n: done_patch(n, decision.reason, w.clock()))
    post(w, node, "Normal", EventReason.REPAIRED, f"unattended repair: {decision.reason}; node-check passes, serving")
    count(w, host, "fixed")
    return f"{host} repaired"


def count(w: Watcher, host: str, result: str) -> None:
    w.metrics.repairs[(host, result)] = w.metrics.repairs.get((host, result), 0) + 1


def stopped(w: Watcher, host: str, why: str, cycled: bool) -> str:
    node = patch_node(w, host, lambda n: stopped_patch(n, "unattended repair", why, w.clock()))
    reason = EventReason.DID_NOT_FIX if cycled else EventReason.STOPPED
    post(w, node, "Warning", reason, f"{why}; {host} stays cordoned")
    count(w, host, "not-fixed" if cycled else "stopped")
    # Only a repair that power-cycled counts against the breaker: a stop before it changed nothing of the card.
    if cycled and record_failure_in_breaker(w, host, why):
        w.metrics.breaker_open = 1
        post(
            w,
            node,
            "Warning",
            EventReason.BREAKER_OPENED,
            "the unattended repair's breaker is open: nothing more runs unattended until a person looks at the "
            f"hardware and runs `gpu-pool repair --reset-breaker --stack {w.facts.stack}`",
        )
    return f"{host} stopped: {why}"


def drain(w: Watcher, host: str) -> None:
    """Evicts the node's pods (PodDisruptionBudgets respected: a 429 is tried again) and waits until they are gone."""
    selector = urllib.parse.quote(f"spec.nodeName={host}")

    def remaining() -> list[dict[str, Any]]:
        return [dict(p) for p in to_evict(w.kube.items(f"/api/v1/pods?fieldSelector={selector}", "Pod"))]

    def evicted() -> bool:
        pods = remaining()
        for pod in pods:
            meta = pod["metadata"]
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction"
            try:
                w.kube.send("POST", path, eviction(pod))
            except ApiError as error:
                if ": 429 " not in str(error) and ": 404 " not in str(error):
                    raise
        return not pods

    w.wait(f"the drain of {host}", DRAIN_MINUTES, evicted)


def power_cycle(w: Watcher, domain_name: str, reason: str) -> bool:
    """Stop then start the domain's VM, the power cycle recorded on the Node once Proxmox accepted the stop (a
    refused stop changed nothing and spends none of repair.maxPerDay). True once it was stopped."""
    domain = w.facts.unattended.domain(domain_name)
    vm_facts = w.facts.vms[domain_name]
    api = proxmox_for(w)
    vm = f"/nodes/{vm_facts.proxmox_node}/qemu/{vm_facts.vmid}"
    where = f"VM {vm_facts.vmid} on {vm_facts.proxmox_node}"
    status = str((api.call("GET", f"{vm}/status/current") or {}).get("status") or "")
    if status != "stopped":
        # As the wave's and a person's repair: a shutdown that forces the stop after 180 s (qemu-server vm_shutdown).
        task = api.call("POST", f"{vm}/status/shutdown", {"timeout": "180", "forceStop": "1"})
        node = patch_node(w, domain.hostname, lambda n: power_cycle_patch(n, reason, where, w.clock()))
        post(w, node, "Warning", EventReason.POWER_CYCLE, f"unattended repair power-cycles {where}: {reason}")
        exitstatus = api.wait_task(str(task or ""), 240)
        if exitstatus is not None and not task_ok(exitstatus):
            raise StepFailed(f"the stop task of {where} failed: {exitstatus}")
        if not api.wait_status(vm, "stopped", 240):
            raise StepFailed(f"{where} did not stop within 240 s")
    start_vm(api, vm, vm_facts.vmid, where, domain.hostname)
    return True


def gate_and_smoke(w: Watcher, host: str) -> None:
    """What the repair turn runs after node-check, before the node serves again: the gpu-ready gate (every slot
    advertised) and the stack's smoke Jobs under a name of this run; a failed Job means the repair did not fix."""
    slots = slots_of(w.facts.pool, host)

    def ready() -> bool:
        node = w.kube.send("GET", node_path(host))
        return node is not None and advertises(node, slots)

    w.wait(f"{host} to advertise its {slots} GPU slots again", READY_MINUTES, ready)
    for template in w.facts.smoke_jobs.get(host, ()):
        job = smoke_named(template, w.clock())
        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        w.kube.send("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

        def finished(namespace: str = namespace, name: str = name) -> str:
            found = w.kube.send("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}") or {}
            conditions = {c.get("type"): c.get("status") for c in (found.get("status") or {}).get("conditions") or []}
            return (
                "Failed" if conditions.get("Failed") == "True" else "Complete" * (conditions.get("Complete") == "True")
            )

        if w.wait(f"the smoke test {namespace}/{name}", SMOKE_MINUTES, finished) == "Failed":
            raise StepFailed(f"the power cycle did not fix it: the smoke test {namespace}/{name} failed")


def back_ready(w: Watcher, host: str, old_boot: str) -> None:
    def ready() -> bool:
        node = w.kube.send("GET", node_path(host))
        return node is not None and node_ready(node) and boot_id(node) != old_boot

    w.wait(f"{host} Ready after the power cycle (a new boot id)", READY_MINUTES, ready)


# ---------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="gpu-pool repair-watcher", description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", required=True, type=Path, help="the stack's facts (JSON, from the stack)")
    parser.add_argument("--server", help="the API server (default: in the pod, the kubernetes service)")
    parser.add_argument("--token-file", type=Path, help="a bearer token (default: the pod's ServiceAccount's)")
    parser.add_argument("--ca-file", help="the API server's CA (default: the pod's ServiceAccount's)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between passes (default 60)")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument(
        "--metrics-port", type=int, default=METRICS_PORT, help=f"serve /metrics here (default {METRICS_PORT}; 0: no)"
    )
    args = parser.parse_args(argv)
    try:
        facts = WatcherFacts.from_json(json.loads(args.facts.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        out.write(f"gpu-pool repair-watcher: --facts {args.facts}: {error}\n")
        return 2
    try:
        if args.server:
            kube = Kube(args.server, args.token_file.read_text().strip() if args.token_file else "", args.ca_file)
        else:
            kube = Kube.in_cluster()  # type: ignore[assignment]
    except (ApiError, OSError) as error:
        out.write(f"gpu-pool repair-watcher: {error}\n")
        return 2
    watcher = Watcher(kube, facts, out)
    if args.metrics_port:
        serve_metrics(watcher.metrics, args.metrics_port)
    check_token_at_start(watcher)
    while True:
        try:
            watcher.log(one_pass(watcher))
        except (ApiError, StepFailed, OSError) as error:
            # One bad pass (the API away, a node gone) is logged; the next pass reads everything again.
            watcher.log(f"pass failed: {error}")
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
