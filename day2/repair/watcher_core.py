"""The unattended repair's watcher, its own decisions as pure data: what it reads of the stack (WatcherFacts, JSON the
stack writes beside its code), which nodes the health check marked, its verdict on the Node, what the Proxmox
token holds beyond its role and what the host says against a power cycle. The turn itself (the hold, the cordon,
the drain, the power cycle, the gate, the end or the stop) is node/'s, as the wave's and a person's repair run it
(day2/repair/watcher.py drives it); nothing here reads a clock or a socket, so every rule is tested as data.

Standard library only: the watcher runs in a stock python image from a zip of its import closure
(components/shared/payload.py), as the health check does.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from day2.repair.unattended import Refusal, UnattendedFacts
from node.proxmox import proxmox_facts
from node.vocabulary import HEALTH_CONDITION, WATCHER_HOLDER_PREFIX

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
    # gpu-pool:trustedCa: the lab CA the watcher trusts for the Proxmox API besides its image's store.
    proxmox_trusted_ca: str | None = None

    @property
    def holder(self) -> str:
        """The Node's turn holder (`repair:unattended@<stack>`): the stack's watcher, whichever process it is (the
        Lease's holder is the process: node/lease.py)."""
        return f"{WATCHER_HOLDER_PREFIX}{self.stack}"

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "unattended": self.unattended.as_json(),
            "pool": dict(self.pool),
            "namespace": self.namespace,
            "eventsNamespace": self.events_namespace,
            "proxmox": proxmox_facts(self.proxmox_endpoint, self.proxmox_insecure, self.proxmox_trusted_ca),
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
            proxmox_trusted_ca=str(proxmox["trustedCa"]) if proxmox.get("trustedCa") else None,
        )


# ---------------------------------------------------------------------------------------------------- the marks


def marked(node: Mapping[str, Any]) -> bool:
    """The health check marked the node: its condition GpuPoolHealthy is False (day2/doctor/health_check.py)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == HEALTH_CONDITION and c.get("status") == "False" for c in conditions)


def mark_of(node: Mapping[str, Any]) -> str:
    """When the health check last wrote its mark on the node ('' when it is not marked)."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == HEALTH_CONDITION and c.get("status") == "False":
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


def slots_of(pool: Mapping[str, Any], hostname: str) -> int:
    """The GPU slots the node advertises when it serves (doctor's pool facts: its cards times its profile)."""
    return int(next(d["slots"] for d in pool["domains"] if d["hostname"] == hostname))


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
