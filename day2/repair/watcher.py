"""The unattended repair's watcher: the loop the in-cluster Deployment runs (`python3 watcher.pyz --facts F`).

Each pass: read the breaker (its ConfigMap) and each GPU domain's Node; a node the watcher's own stack holds
`repairing` whose holder is gone (the Lease is free) is resumed or stopped; a node the health check marked
(GpuPoolHealthy False) whose standing guard rails pass gets node-check as a Job pinned to it; doctor's walk and
the same `decide` as `gpu-pool repair`, then the guard rails (day2/repair/unattended.py). A repair: the Lease (this
process's own identity, renewed during the waits), the Proxmox token from its Secret (read per repair) and `GET
/access/permissions` against the role, the host's view of the VM and its card, every domain's Node read again,
then the repair turn: node/'s transitions, the same the wave and `gpu-pool repair` run (node/turn.py: hold,
operator held off, cordon, drain by `kubectl drain`'s rules, operator released; node/power.py: the power cycle;
Ready, node-check again, node/gate.py: slots on the pinned driver, the smoke Jobs; then the end, or the stop,
which leaves the node cordoned). What is the watcher's own, and stricter: its refusals (a token beyond its role,
the host's mapping checks, an HA-managed VM, every other domain must serve, read again before the hold and before
the power cycle), the breaker, the verdict on the Node and the metrics; never the sequence.

Every refusal is recorded on the Node (gpu-pool.dev/unattended-verdict) and as an Event with its typed reason,
when it changes; a Proxmox or Secret failure before the hold is one such refusal (HostRefuses, judged: no
node-check Job per pass).
"""

from __future__ import annotations

import base64
import datetime
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from components.gpu_failure_domain.observed import observed_node
from components.unattended.objects import BREAKER_CONFIGMAP, LEASE_NAME, SECRET_NAME
from config.arguments import ArgumentParser
from day2 import objects as o
from day2.doctor.node_report import NodeCheck, parse_node_check
from day2.doctor.walk import diagnose
from day2.errors import Day2Error
from day2.metrics_http import serve_metrics as serve_text
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
    JUDGED_ANNOTATION,
    VERDICT_ANNOTATION,
    EventReason,
    WatcherFacts,
    beyond,
    host_refusals,
    job_named,
    judged_already,
    mark_of,
    marked,
    slots_of,
    smoke_named,
    verdict_changed,
    verdict_patch,
)
from node.gate import Pins, gate
from node.jobs import job_log, run_job, smoke_test
from node.kube import ApiError, Conflict, Kube, Rest, node_path
from node.lease import Lease
from node.power import Charge, Vm, power_cycle
from node.proxmox import Proxmox
from node.turn import HeldByOther, Turn, finish_repair, start, stop, wait_ready
from node.vocabulary import (
    TurnState,
    boot_id,
    held_since,
    repair_records,
    stamp,
    turn_holder,
    turn_state,
)
from node.waiting import StepFailed

TOKEN_KEY = "token"
# The metrics' names (components/unattended/alerts.py REPAIRS, REFUSALS, BREAKER_OPEN; a test keeps them equal).
REPAIRS_METRIC = "gpu_pool_unattended_repairs_total"
REFUSALS_METRIC = "gpu_pool_unattended_refusals_total"
BREAKER_METRIC = "gpu_pool_unattended_breaker_open"
METRICS_PORT = 9400
EVENT_SOURCE = "gpu-pool-repair-watcher"


@dataclass(frozen=True)
class Limits:
    """How long each wait of a repair may take (minutes): the drain, the node back Ready and the gate, node-check, a
    smoke Job."""

    drain: float = 15
    ready: float = 30
    node_check: float = 6
    smoke: float = 15


LIMITS = Limits()
# The Lease's term as this watcher writes it: renewed at every poll of a wait once a third of it has passed, so a
# live watcher keeps it through any repair and a dead one frees it within half an hour (client-go leaderelection).
LEASE_TERM_SECONDS = 30 * 60


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
    serve_text(metrics.text, port)


class Log:
    """The watcher's log as a file: each line stamped (what the turn's waits say goes here too)."""

    def __init__(self, out: TextIO, clock: Callable[[], datetime.datetime]) -> None:
        self.out, self.clock = out, clock

    def write(self, text: str) -> None:
        for line in text.splitlines():
            self.out.write(f"{stamp(self.clock())} {line}\n")

    def flush(self) -> None:
        self.out.flush()


@dataclass
class Watcher:
    kube: Kube
    facts: WatcherFacts
    out: TextIO
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    poll_seconds: float = 5.0
    # How node-check runs on a node: a Job pinned to it (job_node_check) unless a test gives another.
    node_check: NodeCheckRunner = field(default=lambda w, host, attempt: job_node_check(w, host, attempt))
    # The Proxmox client for a token (node/proxmox.py, logged in).
    connect: Callable[[WatcherFacts, str], Proxmox] = field(default=lambda facts, token: login(facts, token))
    metrics: Metrics = field(default_factory=Metrics)
    lease: Lease | None = None
    limits: Limits = LIMITS

    def __post_init__(self) -> None:
        if self.lease is None:
            path = f"/apis/coordination.k8s.io/v1/namespaces/{self.facts.namespace}/leases/{LEASE_NAME}"
            self.lease = Lease(self.kube, path, seconds=LEASE_TERM_SECONDS)

    @property
    def the_lease(self) -> Lease:
        assert self.lease is not None
        return self.lease

    def log(self, line: str) -> None:
        self.out.write(f"{stamp(self.clock())} {line}\n")
        self.out.flush()

    def turn(self, host: str, domain: str) -> Turn:
        """The repair turn on `host`, as node/ runs it for everyone; its waits renew the Lease."""
        turn = Turn(self.kube, host, self.facts.holder, domain, Log(self.out, self.clock), self.clock)
        turn.tick = lambda: self.the_lease.renew(self.clock())
        turn.poll = self.poll_seconds
        return turn


# ---------------------------------------------------------------------------------------------------- reading


def read_nodes(w: Watcher) -> dict[str, dict[str, Any] | None]:
    """Each domain's Node by name (get, limited by resourceNames to the stack's hostnames: no list of Nodes)."""
    return {d.name: w.kube.node(d.hostname) for d in w.facts.unattended.domains}


def breaker_path(w: Watcher) -> str:
    return f"/api/v1/namespaces/{w.facts.namespace}/configmaps/{BREAKER_CONFIGMAP}"


def read_pool(w: Watcher, raw: Mapping[str, Mapping[str, Any] | None] | None = None) -> Pool:
    """The breaker and every domain's Node as they are now (read again before the hold and before the power cycle:
    another holder may have taken a domain meanwhile, FIELD-REVIEW-6 WRONG-4)."""
    current = w.kube.get(breaker_path(w))
    breaker = breaker_of((current or {}).get("data")) if current is not None else breaker_of({"state": "unknown"})
    w.metrics.breaker_open = int(breaker.open)
    raw = read_nodes(w) if raw is None else raw
    observed = {name: observed_node(node) if node is not None else None for name, node in raw.items()}
    return Pool(observed, breaker, dict(w.facts.not_eligible))


def read_snapshot(w: Watcher, nodes: Mapping[str, Mapping[str, Any] | None]) -> o.Snapshot:
    """What doctor's walk reads, from where the stack puts it: the domains' Nodes, the operator's pods, the
    time-slicing ConfigMap and the smoke Jobs."""
    pool = w.facts.pool
    operator = pool["operatorNamespace"]
    items: list[dict[str, Any]] = [{"kind": "Node", **n} for n in nodes.values() if n is not None]
    items += w.kube.list(f"/api/v1/namespaces/{operator}/pods", "Pod")
    configmap = w.kube.get(f"/api/v1/namespaces/{operator}/configmaps/{pool['timeSlicingConfigMap']}")
    if configmap is not None:
        items.append({"kind": "ConfigMap", **configmap})
    if pool["smokeTestEnabled"]:
        items += w.kube.list(f"/apis/batch/v1/namespaces/{pool['smokeNamespace']}/jobs", "Job")
    return o.Snapshot.from_items(items)


def job_node_check(w: Watcher, hostname: str, attempt: str) -> tuple[NodeCheck | None, str]:
    """node-check as a Job pinned to the node (components/unattended/node_check_job.py): its report from the pod's
    log, or why there is none."""
    job = job_named(w.facts.node_check_jobs[hostname], hostname, w.clock(), attempt)
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    turn = w.turn(hostname, "")
    if attempt == "before":
        turn.tick = None  # no Lease is held before the repair
    try:
        run_job(turn, job, w.limits.node_check, "node-check Job")
        log = job_log(turn, namespace, name)
    except (StepFailed, ApiError) as error:
        return None, str(error)
    try:
        return parse_node_check(json.loads(log), f"(Job {namespace}/{name})"), ""
    except (ValueError, Day2Error) as error:
        return None, f"node-check Job {namespace}/{name} printed no report: {error}"


# ---------------------------------------------------------------------------------------------------- recording


def post(w: Watcher, node: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
    if not w.kube.event(node, kind, reason, message, w.facts.events_namespace):
        w.log(f"could not post the {reason} Event")
    w.log(f"{(node.get('metadata') or {}).get('name')}: {reason}: {message}")


def record_refusals(w: Watcher, node: Mapping[str, Any], refusals: Sequence[Refusal], judged: bool = False) -> None:
    """The verdict on the Node and, for each reason, an Event: only when it changed since the last pass; `judged`:
    it came from node-check or Proxmox, so this mark is not judged again (watcher_core.JUDGED_ANNOTATION)."""
    changed = verdict_changed(node, refusals)
    if not changed and not judged:
        return
    name = str((node.get("metadata") or {}).get("name"))
    try:
        w.kube.patch(node_path(name), verdict_patch(node, refusals, judged))
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
        current = w.kube.get(breaker_path(w))
        if current is None:
            raise StepFailed(f"ConfigMap {w.facts.namespace}/{BREAKER_CONFIGMAP} is gone")
        now = w.clock()
        breaker = record_failure(
            breaker_of(current.get("data")), w.facts.unattended, Failure(stamp(now), node, why), now
        )
        try:
            w.kube.update(breaker_path(w), {**current, "data": breaker_data(breaker)})
        except Conflict:
            continue
        return breaker.open
    raise StepFailed("the breaker's ConfigMap kept changing (10 conflicts)")


def count(w: Watcher, host: str, result: str) -> None:
    w.metrics.repairs[(host, result)] = w.metrics.repairs.get((host, result), 0) + 1


# ---------------------------------------------------------------------------------------------------- the pass


def one_pass(w: Watcher) -> str:
    """One look at the pool; at most one repair (or one resumed). What it did, in a line."""
    raw = read_nodes(w)
    for domain in w.facts.unattended.domains:
        node = raw[domain.name]
        if node is not None and turn_holder(node) == w.facts.holder and turn_state(node) == TurnState.REPAIRING:
            # Its own stack's hold: a repair at work in another watcher process (left alone), or one whose process
            # ended (resumed or stopped).
            resumed = resume(w, domain.name, domain.hostname)
            if resumed is not None:
                return resumed
    pool = read_pool(w, raw)
    cfg = w.facts.unattended
    for domain in cfg.domains:
        node = raw[domain.name]
        if node is None or not marked(node) or turn_holder(node) == w.facts.holder or judged_already(node):
            continue
        standing = standing_refusals(cfg, domain.name, pool, w.clock())
        if standing:
            record_refusals(w, node, standing)
            continue
        report, why_not = w.node_check(w, domain.hostname, "before")
        diagnosis = diagnose(read_snapshot(w, raw), facts_from_document(w.facts.pool), domain.hostname, report)
        decision = decide(diagnosis, why_not)
        judged = verdict(cfg, domain.name, decision, read_pool(w), w.clock())
        if not judged.repair:
            record_refusals(w, node, judged.refusals, judged=True)
            continue
        return repair(w, domain.name, decision)
    return "nothing to repair"


def repair(w: Watcher, domain: str, decision: Decision) -> str:
    """The repair of one domain under the Lease, released whatever happens."""
    who = w.the_lease.acquire(w.clock())
    if who:
        return f"Lease {w.facts.namespace}/{LEASE_NAME} is held by {who}: no repair"
    try:
        return repair_turn(w, domain, decision)
    finally:
        w.the_lease.release()


def proxmox_for(w: Watcher) -> Proxmox:
    """The Proxmox client with the token read from its Secret now (a replaced token takes effect here)."""
    secret = w.kube.get(f"/api/v1/namespaces/{w.facts.namespace}/secrets/{SECRET_NAME}")
    encoded = ((secret or {}).get("data") or {}).get(TOKEN_KEY)
    if not encoded:
        raise StepFailed(f"Secret {w.facts.namespace}/{SECRET_NAME} has no {TOKEN_KEY}")
    return w.connect(w.facts, base64.b64decode(encoded).decode().strip())


def login(facts: WatcherFacts, token: str) -> Proxmox:
    api = Proxmox(facts.proxmox_endpoint, facts.proxmox_insecure, facts.proxmox_trusted_ca)
    api.login(token, None)
    return api


def refused_by_proxmox(w: Watcher, api: Proxmox, domain_name: str) -> list[Refusal]:
    """Why Proxmox's side forbids the repair now: the token holding more than its role, or the VM and the host's
    view of its card (watcher_core.host_refusals)."""
    host = w.facts.unattended.domain(domain_name).hostname
    extra = beyond(api.call("GET", "/access/permissions") or {}, w.facts.allowed)
    if extra:
        return [
            Refusal(
                Reason.TOKEN_BEYOND_ROLE,
                f"the repair token holds more than its role: {'; '.join(extra)}: no unattended repair until the token "
                "is the stack's again (remove the extra ACLs, or raise repair.unattended.tokenGeneration and `pulumi "
                "up`)",
            )
        ]
    vm = w.facts.vms[domain_name]
    guests = api.guests()
    mappings = api.pci_mappings(vm.proxmox_node) if vm.mappings else []
    return [Refusal(Reason.HOST_REFUSES, problem) for problem in host_refusals(vm, host, guests, mappings or [])]


def others_out(w: Watcher, domain_name: str) -> list[Refusal]:
    """The standing guard rails on every domain's Node read now (not the pass's snapshot: WRONG-4)."""
    return standing_refusals(w.facts.unattended, domain_name, read_pool(w), w.clock())


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
    node = w.kube.node(host) or {"metadata": {"name": host}}
    try:
        # A Proxmox or Secret failure here is a judged refusal: recorded, an Event and a metric, and no node-check
        # Job on this mark again until the health check looks again (FIELD-REVIEW-6 WRONG-6).
        pve = proxmox_for(w)
        refusals = refused_by_proxmox(w, pve, domain_name)
    except (StepFailed, ApiError) as error:
        refusals = [Refusal(Reason.HOST_REFUSES, f"Proxmox cannot be asked now: {error}")]
    refusals = refusals or others_out(w, domain_name)
    if refusals:
        record_refusals(w, node, refusals, judged=True)
        return f"{host}: {refusals[0].message}"
    turn = w.turn(host, domain_name)
    try:
        start(turn, f"repair {stamp(w.clock())}", w.limits.drain, take_stopped=False)
    except HeldByOther as error:
        return f"{host}: {error}"
    except StepFailed as error:
        # The turn stopped before any change of the card (not Ready, a pod that will not leave): said, not counted.
        return stopped(w, turn, str(error), cycled=False)
    post(w, turn.read(), "Warning", EventReason.REPAIR_STARTED, f"unattended repair of {host}: {decision.reason}")
    reason = decision.reason
    return checked_end(w, turn, reason, cycle=lambda progress: cycle(w, turn, pve, reason, progress))


def cycle(w: Watcher, turn: Turn, pve: Proxmox, reason: str, progress: set[str]) -> None:
    """The power cycle, after every other domain's Node was read once more; then the node Ready on a new boot."""
    refusals = others_out(w, turn.mark)
    if refusals:
        raise StepFailed(f"stopped before the power cycle: {refusals[0].message}")
    vm = w.facts.vms[turn.mark]
    old_boot = boot_id(turn.read())
    charge = Charge(reason, by="unattended", said="unattended repair")
    power_cycle(turn, pve, Vm(vm.vmid, vm.proxmox_node), charge, progress=progress)
    wait_ready(turn, w.limits.ready, old_boot)


def checked_end(w: Watcher, turn: Turn, reason: str, cycle: Callable[[set[str]], None] | None) -> str:
    """The rest of the turn, as for everyone: (the power cycle,) node-check again, the gate, the smoke Jobs; then the
    end, or the stop. `cycle` None: resumed after a power cycle its last watcher made."""
    progress: set[str] = set()
    try:
        if cycle is not None:
            cycle(progress)
        else:
            wait_ready(turn, w.limits.ready)
        report, why_not = w.node_check(w, turn.node, "after")
        if report is None or report.first_broken is not None:
            broken = why_not or f"node-check finds {report.first_broken if report else '?'} broken"
            raise StepFailed(f"the power cycle did not fix it: {broken}")
        pool = w.facts.pool
        pins = Pins(slots_of(pool, turn.node), str(pool["driverVersion"]), str(pool["operatorNamespace"]))
        gate(turn, pins, w.limits.ready)
        for template in w.facts.smoke_jobs.get(turn.node, ()):
            try:
                smoke_test(turn, smoke_named(template, w.clock()), w.limits.smoke)
            except StepFailed as error:
                raise StepFailed(f"the power cycle did not fix it: {error}") from None
    except StepFailed as error:
        cycled = "stopped" in progress or cycle is None
        return stopped(w, turn, str(error), cycled)
    node = finish_repair(
        turn,
        {"event": "repaired", "reason": reason, "by": "unattended"},
        {VERDICT_ANNOTATION: None} | ({JUDGED_ANNOTATION: mark} if (mark := mark_of(turn.read())) else {}),
    )
    post(w, node, "Normal", EventReason.REPAIRED, f"unattended repair: {reason}; node-check passes, serving")
    count(w, turn.node, "fixed")
    return f"{turn.node} repaired"


def stopped(w: Watcher, turn: Turn, why: str, cycled: bool) -> str:
    """The turn stops: the node stays cordoned under the watcher's hold, `stopped`, saying why; a person's `gpu-pool
    repair <node> --yes` takes it from there. Only a repair that power-cycled counts against the breaker."""
    node = turn.kube.node(turn.node) or {}
    mark = mark_of(node)
    note = (
        f"unattended repair stopped at {stamp(w.clock())}: {why}; look at the hardware, then `gpu-pool repair "
        f"{turn.node} --stack {w.facts.stack} --yes`"
    )
    entry = {"event": "stopped", "step": "unattended repair", "reason": why[:300], "by": "unattended"}
    stop(turn, note, entry, {JUDGED_ANNOTATION: mark} if mark else None)
    reason = EventReason.DID_NOT_FIX if cycled else EventReason.STOPPED
    post(w, turn.read(), "Warning", reason, f"{why}; {turn.node} stays cordoned")
    count(w, turn.node, "not-fixed" if cycled else "stopped")
    if cycled and record_failure_in_breaker(w, turn.node, why):
        w.metrics.breaker_open = 1
        post(
            w,
            turn.read(),
            "Warning",
            EventReason.BREAKER_OPENED,
            "the unattended repair's breaker is open: nothing more runs unattended until a person looks at the "
            f"hardware and runs `gpu-pool repair --reset-breaker --stack {w.facts.stack}`",
        )
    return f"{turn.node} stopped: {why}"


def resume(w: Watcher, domain_name: str, host: str) -> str | None:
    """A node its own stack's watcher holds `repairing`. With the Lease held by a live process, that process is at
    work: left alone. With the Lease free, the process that held it ended mid-repair (its pod was evicted,
    rolled or OOM-killed): after a power cycle the checks run again and end or stop the turn; before one, the turn
    stops (the node stays cordoned, saying why): never a node skipped forever under a dead holder (WRONG-5). None:
    left alone."""
    who = w.the_lease.acquire(w.clock())
    if who:
        w.log(f"{host} is being repaired by {who}")
        return None
    try:
        turn = w.turn(host, domain_name)
        node = turn.read()
        since = held_since(node)
        cycles = [r for r in repair_records(node) if r.get("event") == "power-cycle" and str(r.get("at")) >= since]
        if cycles:
            w.log(f"{host}: resuming the repair its last watcher left after the power cycle")
            return checked_end(w, turn, str(cycles[-1].get("reason") or "unattended"), None)
        return stopped(w, turn, "the watcher that held it ended before its power cycle", cycled=False)
    finally:
        w.the_lease.release()


# ---------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = ArgumentParser(prog="gpu-pool repair-watcher", description=__doc__.split("\n\n")[0])
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
            rest = Rest(args.server, args.token_file.read_text().strip() if args.token_file else "", args.ca_file)
        else:
            rest = Rest.in_cluster()
    except (ApiError, OSError) as error:
        out.write(f"gpu-pool repair-watcher: {error}\n")
        return 2
    watcher = Watcher(Kube(rest, component=EVENT_SOURCE), facts, out)
    if args.metrics_port:
        serve_metrics(watcher.metrics, args.metrics_port)
    check_token_at_start(watcher)
    while True:
        try:
            watcher.log(one_pass(watcher))
        except (ApiError, StepFailed, OSError) as error:
            # One bad pass (the API away, a node gone) is logged; the next pass reads everything again, and a hold
            # of its own left `repairing` is resumed or stopped there.
            watcher.log(f"pass failed: {error}")
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
