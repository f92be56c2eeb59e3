"""The unattended repair's watcher, its decisions as pure data: what it reads of the stack (WatcherFacts, JSON the
stack writes beside its code), which nodes the health check marked, the Node patches of a repair's turn (the hold
with the cordon, the power cycle's record, the end or the stop), which pods a drain evicts, the Lease, what the
Proxmox token holds beyond its role, and the Events. The I/O (day2/repair/watcher.py) only carries these to the
API server and Proxmox; nothing here reads a clock or a socket, so every rule is tested as data.

Standard library only: the watcher runs in a stock python image from a zip of its import closure
(components/shared/payload.py), as the health check does.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.gpu_failure_domain.node_steps_script import kept_records, repair_records
from components.gpu_failure_domain.observed import (
    REPAIRS_ANNOTATION,
    TURN_HOLDER_ANNOTATION,
    TURN_STATE_LABEL,
    WAVE_CORDON_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
)
from components.shared.health_condition import CONDITION
from components.unattended.objects import LEASE_SECONDS
from day2.repair.decide import TIME_FORMAT
from day2.repair.unattended import WATCHER_HOLDER_PREFIX, Refusal, UnattendedFacts

# The watcher's last verdict on a node, as `<Reason>: <message>` lines (what `kubectl describe node` shows without
# waiting for an Event, which expires within hours).
VERDICT_ANNOTATION = "gpu-pool.dev/unattended-verdict"
# The health check's mark (its condition's lastHeartbeatTime) the watcher last judged with node-check or repaired:
# the same mark is not judged again until the health check runs again (a node-check Job per pass on a node with a
# fault the watcher cannot repair would pile up Jobs for nothing).
JUDGED_ANNOTATION = "gpu-pool.dev/unattended-judged"
EVENT_SOURCE = "gpu-pool-repair-watcher"
MESSAGE_LIMIT = 1024


class EventReason:
    """The typed reasons of the watcher's own Events (the guard rails' refusals are day2/repair/unattended.Reason)."""

    REPAIR_STARTED = "UnattendedRepairStarted"
    POWER_CYCLE = "GpuPoolPowerCycle"
    REPAIRED = "GpuPoolRepaired"
    DID_NOT_FIX = "UnattendedRepairDidNotFix"
    STOPPED = "UnattendedRepairStopped"
    BREAKER_OPENED = "UnattendedBreakerOpened"
    TOKEN_BEYOND_ROLE = "TokenBeyondRole"


@dataclass(frozen=True)
class Vm:
    vmid: str
    proxmox_node: str
    # The domain's PCI mappings (its cards), whose host-side check the watcher reads before anything stops.
    mappings: tuple[str, ...] = ()


@dataclass(frozen=True)
class WatcherFacts:
    """What the watcher reads of the stack, computed at preview (components/unattended/watcher_facts.py)."""

    stack: str
    unattended: UnattendedFacts
    # doctor's pool facts (day2.pool.facts_from_document), as the health check's ConfigMap holds them.
    pool: Mapping[str, Any]
    namespace: str
    events_namespace: str
    proxmox_endpoint: str
    proxmox_insecure: bool
    vms: Mapping[str, Vm]
    # Path -> the privileges the token's roles grant there (components/unattended/credential.py).
    allowed: Mapping[str, frozenset[str]]
    # Hostname -> the node-check Job pinned to it (components/unattended/node_check_job.py), named per run.
    node_check_jobs: Mapping[str, Mapping[str, Any]]
    # Domain -> why the credential plan leaves it to a person (a raw PCI id instead of a mapping).
    not_eligible: Mapping[str, str]
    # Hostname -> the smoke Jobs the repair's turn runs after the power cycle (empty: the stack runs none).
    smoke_jobs: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)

    @property
    def holder(self) -> str:
        return f"{WATCHER_HOLDER_PREFIX}{self.stack}"

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "unattended": self.unattended.as_json(),
            "pool": dict(self.pool),
            "namespace": self.namespace,
            "eventsNamespace": self.events_namespace,
            "proxmox": {"endpoint": self.proxmox_endpoint, "insecure": self.proxmox_insecure},
            "vms": {
                name: {"vmid": vm.vmid, "proxmoxNode": vm.proxmox_node, "mappings": list(vm.mappings)}
                for name, vm in sorted(self.vms.items())
            },
            "allowed": {path: sorted(privileges) for path, privileges in sorted(self.allowed.items())},
            "nodeCheckJobs": dict(sorted(self.node_check_jobs.items())),
            "notEligible": dict(sorted(self.not_eligible.items())),
            "smokeJobs": {host: list(jobs) for host, jobs in sorted(self.smoke_jobs.items())},
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> WatcherFacts:
        """A missing or mistyped field raises (KeyError, TypeError, ValueError): a watcher that cannot read the
        stack's facts must not repair."""
        proxmox = document["proxmox"]
        return cls(
            stack=str(document["stack"]),
            unattended=UnattendedFacts.from_json(document["unattended"]),
            pool=dict(document["pool"]),
            namespace=str(document["namespace"]),
            events_namespace=str(document["eventsNamespace"]),
            proxmox_endpoint=str(proxmox["endpoint"]),
            proxmox_insecure=bool(proxmox["insecure"]),
            vms={
                str(k): Vm(str(v["vmid"]), str(v["proxmoxNode"]), tuple(str(m) for m in v["mappings"]))
                for k, v in document["vms"].items()
            },
            allowed={str(k): frozenset(str(p) for p in v) for k, v in document["allowed"].items()},
            node_check_jobs={str(k): dict(v) for k, v in document["nodeCheckJobs"].items()},
            not_eligible={str(k): str(v) for k, v in document["notEligible"].items()},
            smoke_jobs={str(k): tuple(dict(j) for j in v) for k, v in document["smokeJobs"].items()},
        )


def stamp(now: datetime.datetime) -> str:
    return now.strftime(TIME_FORMAT)


# ---------------------------------------------------------------------------------------------------- the marks


def marked(node: Mapping[str, Any]) -> bool:
    """The health check marked the node: its condition GpuPoolHealthy is False (day2/doctor/health_check.py)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == CONDITION and c.get("status") == "False" for c in conditions)


def mark_of(node: Mapping[str, Any]) -> str:
    """When the health check last wrote its mark on the node ('' when it is not marked)."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == CONDITION and c.get("status") == "False":
            return str(c.get("lastHeartbeatTime") or c.get("lastTransitionTime") or "")
    return ""


def judged_already(node: Mapping[str, Any]) -> bool:
    """The watcher judged (or repaired) this very mark: it waits for the health check's next look."""
    mark = mark_of(node)
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return bool(mark) and annotations.get(JUDGED_ANNOTATION) == mark


def verdict_lines(refusals: Sequence[Refusal]) -> str:
    return "\n".join(f"{r.reason}: {r.message}" for r in refusals)[:MESSAGE_LIMIT]


def verdict_changed(node: Mapping[str, Any], refusals: Sequence[Refusal]) -> bool:
    """Whether the refusals differ from what the Node records: an Event and a patch only when they change, not
    every pass (a node refused for an open breaker would otherwise post one a minute)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(VERDICT_ANNOTATION, "")) != verdict_lines(refusals)


def verdict_patch(node: Mapping[str, Any], refusals: Sequence[Refusal], judged: bool = False) -> dict[str, Any]:
    """The verdict on the Node; `judged`: it came from node-check or Proxmox, for this mark (JUDGED_ANNOTATION)."""
    annotations: dict[str, Any] = {VERDICT_ANNOTATION: verdict_lines(refusals) or None}
    if judged and mark_of(node):
        annotations[JUDGED_ANNOTATION] = mark_of(node)
    return {
        "metadata": {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion"), "annotations": annotations}
    }


# ---------------------------------------------------------------------------------------------------- the turn


def _rv(node: Mapping[str, Any]) -> Any:
    return (node.get("metadata") or {}).get("resourceVersion")


def _records_with(node: Mapping[str, Any], entry: Mapping[str, str], now: datetime.datetime) -> str:
    records = [*kept_records(repair_records(dict(node)), now), {"at": stamp(now), **entry}]
    return json.dumps(records[-20:], separators=(",", ":"))


def hold_patch(node: Mapping[str, Any], holder: str, now: datetime.datetime) -> dict[str, Any]:
    """The turn's first act, in one conditional patch (the Node's resourceVersion, as the wave's
    rollout.take_hold_command): the hold (turn-state repairing, the holder) and the cordon, which the turn's end
    undoes only where this patch made it (a node someone else cordoned stays cordoned)."""
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    annotations: dict[str, Any] = {TURN_HOLDER_ANNOTATION: f"{holder} since {stamp(now)}"}
    if not cordoned:
        annotations[WAVE_CORDON_ANNOTATION] = holder
    annotations[WAVE_TURN_ANNOTATION] = f"repair {stamp(now)}"
    return {
        "metadata": {
            "resourceVersion": _rv(node),
            "labels": {TURN_STATE_LABEL: "repairing"},
            "annotations": annotations,
        },
        "spec": {"unschedulable": True},
    }


def power_cycle_patch(node: Mapping[str, Any], reason: str, vm: str, now: datetime.datetime) -> dict[str, Any]:
    """The power cycle in the Node's repair record (what repair.maxPerDay counts), once Proxmox accepted the stop."""
    entry = {"event": "power-cycle", "reason": reason, "vm": vm, "by": "unattended"}
    return {
        "metadata": {"resourceVersion": _rv(node), "annotations": {REPAIRS_ANNOTATION: _records_with(node, entry, now)}}
    }


def done_patch(node: Mapping[str, Any], reason: str, now: datetime.datetime) -> dict[str, Any]:
    """The turn's end, in one patch (as node_steps_script.step_repair_done): the hold released, the cordon undone
    where the hold made it, the repair recorded, the last verdict cleared."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    ours = bool(annotations.get(WAVE_CORDON_ANNOTATION))
    change: dict[str, Any] = {
        "metadata": {
            "resourceVersion": _rv(node),
            "labels": {TURN_STATE_LABEL: "done"},
            "annotations": {
                WAVE_TURN_ANNOTATION: None,
                WAVE_STOPPED_ANNOTATION: None,
                VERDICT_ANNOTATION: None,
                REPAIRS_ANNOTATION: _records_with(node, {"event": "repaired", "reason": reason}, now),
            }
            | ({WAVE_CORDON_ANNOTATION: None} if ours else {})
            | ({JUDGED_ANNOTATION: mark_of(node)} if mark_of(node) else {}),
        }
    }
    if ours:
        change["spec"] = {"unschedulable": None}
    return change


def stopped_patch(node: Mapping[str, Any], step: str, why: str, now: datetime.datetime) -> dict[str, Any]:
    """A repair that stopped (a step failed, or it did not fix): the node stays cordoned under the watcher's hold,
    state stopped, with why; a person's `gpu-pool repair` or `pulumi up` takes it from there."""
    resume = "look at the hardware; then `gpu-pool repair <node> --stack <stack> --yes`, or `pulumi up` once it is fine"
    entry = {"event": "stopped", "step": step, "reason": why[:300], "by": "unattended"}
    return {
        "metadata": {
            "resourceVersion": _rv(node),
            "labels": {TURN_STATE_LABEL: "stopped"},
            "annotations": {
                WAVE_STOPPED_ANNOTATION: f"unattended repair stopped at {step} at {stamp(now)}: {why}; {resume}"[:1000],
                REPAIRS_ANNOTATION: _records_with(node, entry, now),
            }
            | ({JUDGED_ANNOTATION: mark_of(node)} if mark_of(node) else {}),
        }
    }


def may_hold(node: Mapping[str, Any], holder: str) -> bool:
    """Whether the watcher may take the node's hold: nobody holds it (no turn state, or done), or it is its own."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get(TURN_STATE_LABEL, "done") == "done" or held_by(node, holder)


def held_by(node: Mapping[str, Any], holder: str) -> bool:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(TURN_HOLDER_ANNOTATION) or "").startswith(f"{holder} since ")


# ---------------------------------------------------------------------------------------------------- the drain


def _owner_kinds(pod: Mapping[str, Any]) -> set[str]:
    return {str(o.get("kind")) for o in (pod.get("metadata") or {}).get("ownerReferences") or []}


def to_evict(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods a drain evicts, as `kubectl drain --ignore-daemonsets --delete-emptydir-data` picks them
    (k8s.io/kubectl pkg/drain/filters.go): not a DaemonSet's (it would come back at once), not a mirror pod (the
    kubelet's static pod: the API cannot delete it), not one that has ended."""
    chosen = []
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if "DaemonSet" in _owner_kinds(pod) or "kubernetes.io/config.mirror" in annotations:
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        chosen.append(pod)
    return chosen


def eviction(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
    }


# ---------------------------------------------------------------------------------------------------- the Lease


def lease_free(lease: Mapping[str, Any], holder: str, now: datetime.datetime) -> bool:
    """Whether the watcher may take the repair Lease: nobody holds it, it is its own, or its holder's term ran out
    (a watcher that died mid-repair)."""
    spec = lease.get("spec") or {}
    who = spec.get("holderIdentity") or ""
    if not who or who == holder:
        return True
    renewed = str(spec.get("renewTime") or spec.get("acquireTime") or "")
    try:
        at = datetime.datetime.strptime(renewed[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.UTC)
    except ValueError:
        return True
    return now > at + datetime.timedelta(seconds=int(spec.get("leaseDurationSeconds") or LEASE_SECONDS))


def micro_time(now: datetime.datetime) -> str:
    """A MicroTime (coordination.k8s.io/v1 renewTime needs the microseconds)."""
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_taken(lease: Mapping[str, Any], holder: str, now: datetime.datetime) -> dict[str, Any]:
    """The Lease held by `holder` from now (a full update carrying the resourceVersion read: a second watcher that
    took it in between makes it fail with 409)."""
    spec = dict(lease.get("spec") or {})
    spec.update(
        holderIdentity=holder,
        acquireTime=micro_time(now),
        renewTime=micro_time(now),
        leaseDurationSeconds=LEASE_SECONDS,
    )
    return {**lease, "spec": spec}


def lease_released(lease: Mapping[str, Any]) -> dict[str, Any]:
    spec = {
        k: v for k, v in (lease.get("spec") or {}).items() if k not in ("holderIdentity", "acquireTime", "renewTime")
    }
    return {**lease, "spec": spec}


# ---------------------------------------------------------------------------------------------------- Proxmox


def beyond(answer: Mapping[str, Mapping[str, Any]], allowed: Mapping[str, frozenset[str]]) -> list[str]:
    """Every privilege the token holds (`GET /access/permissions`: `{path: {privilege: propagate}}`) beyond what
    its roles grant on each path, and any that propagates (the plan grants none that do): a token someone widened
    by hand is not the one the stack reviewed, and the watcher refuses to use it."""
    problems: list[str] = []
    for path, privileges in sorted(answer.items()):
        extra = sorted(set(privileges) - allowed.get(path, frozenset()))
        if extra:
            problems.append(f"{', '.join(extra)} on {path}")
        propagated = sorted(p for p, propagate in privileges.items() if propagate)
        if propagated:
            problems.append(f"{', '.join(propagated)} on {path} propagated to everything below it")
    return problems


def host_refusals(
    vm: Vm, hostname: str, guests: Sequence[Mapping[str, Any]], mappings: Sequence[Mapping[str, Any]]
) -> list[str]:
    """What Proxmox says against a power cycle now, read with the token's own grants: the VM in
    `GET /cluster/resources?type=vm` (VM.Audit on /vms/<id>: its name, host, lock, HA state) and each of the
    domain's mappings in `GET /cluster/mapping/pci?check-node=<host>` (Mapping.Audit: `checks` lists what the host
    finds wrong with the mapped device, e.g. a card it lost, pve-manager PCI.pm index). Unattended is stricter than
    a person's repair: an HA-managed VM, or a mapping the host reports a problem with, is left to a person."""
    where = f"VM {vm.vmid} on {vm.proxmox_node}"
    entry = next((g for g in guests if str(g.get("vmid")) == vm.vmid), None)
    if entry is None:
        # A filter endpoint: a VM the token may not see is simply absent (no 403).
        return [f"{where} is not in /cluster/resources: gone, or the token lacks VM.Audit on /vms/{vm.vmid}"]
    problems = []
    if entry.get("name") != hostname:
        problems.append(f"Proxmox runs VM {vm.vmid} as {entry.get('name')!s}, not {hostname}: not the node's VM")
    if entry.get("node") != vm.proxmox_node:
        problems.append(f"VM {vm.vmid} runs on {entry.get('node')!s}, the stack says {vm.proxmox_node} (migrated?)")
    if entry.get("lock"):
        problems.append(f"{where} is locked ({entry['lock']}): Proxmox refuses its stop and start until it is free")
    if entry.get("hastate") and entry.get("hastate") != "ignored":
        problems.append(f"{where} is HA-managed ({entry['hastate']}): left to a person's `gpu-pool repair`")
    by_id = {str(m.get("id")): m for m in mappings}
    for name in vm.mappings:
        found = by_id.get(name)
        if found is None:
            problems.append(f"mapping {name} is not in /cluster/mapping/pci: gone, or the token lacks Mapping.Audit")
            continue
        said = "; ".join(str(c.get("message") or c) for c in found.get("checks") or [])
        if said:
            problems.append(f"{vm.proxmox_node} reports on mapping {name}: {said}: a host matter, not a VM power cycle")
    return problems


# ---------------------------------------------------------------------------------------------------- Events


def event(
    node: Mapping[str, Any], kind: str, reason: str, message: str, now: datetime.datetime, namespace: str, host: str
) -> dict[str, Any]:
    """A core/v1 Event on the Node, as the kubelet and node_steps_script.post_event write theirs."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name"))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}.gpu-pool-unattended-", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": meta.get("uid", "")},
        "type": kind,
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "source": {"component": EVENT_SOURCE, "host": host},
        "firstTimestamp": stamp(now),
        "lastTimestamp": stamp(now),
        "count": 1,
    }


def slots_of(pool: Mapping[str, Any], hostname: str) -> int:
    """The GPU slots the node advertises when it serves (doctor's pool facts: its cards times its profile)."""
    return int(next(d["slots"] for d in pool["domains"] if d["hostname"] == hostname))


def advertises(node: Mapping[str, Any], slots: int) -> bool:
    """The gpu-ready gate (as the repair turn's): the device plugin reports every slot of the node again."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return str(allocatable.get("nvidia.com/gpu", "0")) == str(slots)


def smoke_named(template: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any]:
    """A smoke Job under a name of this run (the template's, with `-u<when>`, cut to 63)."""
    job: dict[str, Any] = json.loads(json.dumps(template))
    when = f"-u{now.strftime('%Y%m%d%H%M%S')}"
    job["metadata"]["name"] = str(job["metadata"]["name"])[: 63 - len(when)].rstrip("-") + when
    return job


def job_named(template: Mapping[str, Any], node: str, now: datetime.datetime, attempt: str) -> dict[str, Any]:
    """The node's node-check Job under a name of this run (`<node>-<when>-<before|after>`, cut to 63)."""
    job: dict[str, Any] = json.loads(json.dumps(template))
    when = now.strftime("%Y%m%d%H%M%S")
    job["metadata"]["name"] = (
        f"node-check-{node}"[: 63 - len(when) - len(attempt) - 2].rstrip("-") + f"-{when}-{attempt}"
    )
    return job
