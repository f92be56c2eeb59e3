"""Who holds which GPU, counted the way the scheduler counts: pure functions over plain dicts.

A pod holds its GPUs from the moment it is bound to a node (`spec.nodeName`) until it is gone, whatever its
phase except Succeeded and Failed: a Terminating pod still holds its card (the article's "replicas=0 isn't
proof a card came back").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from day2 import objects as o
from knowledge.gpu_operator import GPU_RESOURCE
from knowledge.kubeflow import NOTEBOOK_KIND, NOTEBOOK_NAME_LABEL, stop_notebook_command
from knowledge.quantities import parse_quantity

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DEFAULT_LONG_HELD_SECONDS = 7 * 24 * 3600

FLAG_TERMINATING = "terminating"
FLAG_LOW_CPU = "low-cpu"
FLAG_LONG_HELD = "long-held"
FLAG_IDLE = "idle"
FLAGS = (FLAG_TERMINATING, FLAG_LOW_CPU, FLAG_LONG_HELD, FLAG_IDLE)


@dataclass(frozen=True)
class Owner:
    kind: str
    name: str


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    node: str
    gpus: int
    cpu_request: Decimal
    age_seconds: int
    phase: str
    terminating: bool
    owner: Owner
    flags: tuple[str, ...]


@dataclass(frozen=True)
class Waiting:
    namespace: str
    pod: str
    gpus: int
    reason: str | None


@dataclass(frozen=True)
class NodeClaims:
    name: str
    allocatable: int
    allocated: int
    free: int
    expected: int | None


@dataclass(frozen=True)
class Totals:
    allocatable: int
    allocated: int
    free: int


@dataclass(frozen=True)
class Claims:
    nodes: tuple[NodeClaims, ...]
    holders: tuple[Holder, ...]
    waiting: tuple[Waiting, ...]

    @property
    def total(self) -> Totals:
        return Totals(
            allocatable=sum(n.allocatable for n in self.nodes),
            allocated=sum(n.allocated for n in self.nodes),
            free=sum(n.free for n in self.nodes),
        )


@dataclass(frozen=True)
class ClaimsOptions:
    now: datetime
    long_held_seconds: int = DEFAULT_LONG_HELD_SECONDS
    # Node name -> slots its profile promises (from --stack), else None.
    expected: Mapping[str, int] | None = None
    # (key, value) of the label that marks a GPU node.
    gpu_node_label: tuple[str, str] = ("nodepool", "gpu")
    # (namespace, pod) of holders whose GPU stayed idle (from --prometheus); None when not asked.
    idle: frozenset[tuple[str, str]] | None = None


def quantity(value: Any) -> Decimal:
    """A resource quantity as a number; a malformed one counts as zero rather than stopping the count."""
    try:
        return parse_quantity(str(value))
    except ValueError:
        return Decimal(0)


def _amount(container: Mapping[str, Any], resource: str, first: str, then: str) -> Decimal:
    for kind in (first, then):
        value = o.resources(container, kind).get(resource)
        if value is not None:
            return quantity(value)
    return Decimal(0)


def effective_request(pod: Mapping[str, Any], amount: Callable[[Mapping[str, Any]], Decimal]) -> Decimal:
    """The pod's request as the scheduler computes it (PodRequests in k8s.io/component-helpers).

    The larger of the sum of the app containers (plus sidecars, init containers with restartPolicy
    Always, which keep running) and the largest init container (plus the sidecars started before it).
    Without sidecars: max(largest init container, sum of app containers).
    """
    apps = sum((amount(c) for c in o.containers(pod)), Decimal(0))
    sidecars = Decimal(0)
    largest_init = Decimal(0)
    for init in o.containers(pod, "initContainers"):
        if init.get("restartPolicy") == "Always":
            sidecars += amount(init)
            largest_init = max(largest_init, sidecars)
        else:
            largest_init = max(largest_init, amount(init) + sidecars)
    return max(apps + sidecars, largest_init)


def pod_gpus(pod: Mapping[str, Any]) -> int:
    """`nvidia.com/gpu` of a pod: limits, or requests where a container sets no limit."""
    return int(effective_request(pod, lambda c: _amount(c, GPU_RESOURCE, "limits", "requests")))


def pod_cpu_request(pod: Mapping[str, Any]) -> Decimal:
    """CPU the pod requests, in cores (a limit alone is also the request, as the API server defaults it)."""
    return effective_request(pod, lambda c: _amount(c, "cpu", "requests", "limits"))


def phase(pod: Mapping[str, Any]) -> str:
    return str(o.status(pod).get("phase") or "Unknown")


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool(o.metadata(pod).get("deletionTimestamp"))


def holds_gpus(pod: Mapping[str, Any]) -> bool:
    """Bound to a node and not finished (Terminating included), and asking for at least one GPU."""
    return o.bound_node(pod) is not None and phase(pod) not in TERMINAL_PHASES and pod_gpus(pod) > 0


def is_waiting(pod: Mapping[str, Any]) -> bool:
    """Asks for GPUs and is not bound to a node yet."""
    return (
        o.bound_node(pod) is None
        and phase(pod) not in TERMINAL_PHASES
        and not is_terminating(pod)
        and pod_gpus(pod) > 0
    )


def bound_since(pod: Mapping[str, Any]) -> datetime | None:
    """When the scheduler bound the pod (PodScheduled), else when it started, else when it was created."""
    scheduled = o.condition(pod, "PodScheduled")
    candidates = [
        scheduled.get("lastTransitionTime") if scheduled and scheduled.get("status") == "True" else None,
        o.status(pod).get("startTime"),
        o.metadata(pod).get("creationTimestamp"),
    ]
    return next((t for t in map(o.parse_time, candidates) if t is not None), None)


def owner_of(pod: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]] = ()) -> Owner:
    """What to stop to free the pod's GPU: its Notebook, Deployment, StatefulSet, CronJob or Job, else itself."""
    notebook = o.labels(pod).get(NOTEBOOK_NAME_LABEL)
    if notebook:
        return Owner(NOTEBOOK_KIND, notebook)
    ref = o.controller_of(pod)
    if ref is None:
        return Owner("Pod", o.name(pod))
    kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
    template_hash = o.labels(pod).get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
        # A Deployment names its ReplicaSets <deployment>-<pod-template-hash>.
        return Owner("Deployment", name.removesuffix(f"-{template_hash}"))
    if kind == "Job":
        job = next((j for j in jobs if o.name(j) == name and o.namespace(j) == o.namespace(pod)), None)
        parent = o.controller_of(job) if job is not None else None
        if parent is not None and parent.get("kind") == "CronJob":
            return Owner("CronJob", str(parent.get("name", "")))
    return Owner(kind, name)


def stop_command(holder: Holder) -> str:
    """The command that frees the holder's GPU for good (deleting the pod alone would bring it back)."""
    ns, owner = holder.namespace, holder.owner
    if owner.kind == NOTEBOOK_KIND:
        return stop_notebook_command(ns, owner.name)
    if owner.kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return f"kubectl -n {ns} scale {owner.kind.lower()}/{owner.name} --replicas=0"
    if owner.kind == "CronJob":
        return f'kubectl -n {ns} patch cronjob/{owner.name} -p \'{{"spec":{{"suspend":true}}}}\''
    if owner.kind == "Job":
        return f"kubectl -n {ns} delete job/{owner.name}"
    return f"kubectl -n {ns} delete pod/{holder.pod}"


def scheduler_reason(pod: Mapping[str, Any]) -> str | None:
    """Why the scheduler has not bound the pod: the PodScheduled=False message, else its reason."""
    scheduled = o.condition(pod, "PodScheduled")
    if scheduled is None or scheduled.get("status") != "False":
        return None
    return str(scheduled.get("message") or scheduled.get("reason") or "") or None


def _flags(terminating: bool, gpus: int, cpu: Decimal, age: int, idle: bool, options: ClaimsOptions) -> tuple[str, ...]:
    raised = {
        FLAG_TERMINATING: terminating,
        FLAG_LOW_CPU: gpus >= 1 and cpu < 1,
        FLAG_LONG_HELD: age > options.long_held_seconds,
        FLAG_IDLE: idle,
    }
    return tuple(flag for flag in FLAGS if raised[flag])


def holder(pod: Mapping[str, Any], options: ClaimsOptions, jobs: Sequence[Mapping[str, Any]] = ()) -> Holder:
    since = bound_since(pod)
    age = max(0, int((options.now - since).total_seconds())) if since else 0
    gpus, cpu, terminating = pod_gpus(pod), pod_cpu_request(pod), is_terminating(pod)
    key = (o.namespace(pod), o.name(pod))
    idle = options.idle is not None and key in options.idle
    return Holder(
        namespace=key[0],
        pod=key[1],
        node=o.bound_node(pod) or "",
        gpus=gpus,
        cpu_request=cpu,
        age_seconds=age,
        phase=phase(pod),
        terminating=terminating,
        owner=owner_of(pod, jobs),
        flags=_flags(terminating, gpus, cpu, age, idle, options),
    )


def gpu_node_names(snapshot: o.Snapshot, options: ClaimsOptions, holders: Sequence[Holder]) -> list[str]:
    """Nodes that advertise the GPU resource, carry the GPU node label, are expected, or host a holder."""
    key, value = options.gpu_node_label
    names = {
        o.name(n) for n in snapshot.nodes if o.allocatable(n, GPU_RESOURCE) is not None or o.labels(n).get(key) == value
    }
    names |= set(options.expected or {})
    names |= {h.node for h in holders}
    return sorted(names)


def compute_claims(snapshot: o.Snapshot, options: ClaimsOptions) -> Claims:
    holders = sorted(
        (holder(p, options, snapshot.jobs) for p in snapshot.pods if holds_gpus(p)),
        key=lambda h: (h.node, h.namespace, h.pod),
    )
    waiting = sorted(
        (Waiting(o.namespace(p), o.name(p), pod_gpus(p), scheduler_reason(p)) for p in snapshot.pods if is_waiting(p)),
        key=lambda w: (w.namespace, w.pod),
    )
    nodes_by_name = {o.name(n): n for n in snapshot.nodes}
    rows: list[NodeClaims] = []
    for node_name in gpu_node_names(snapshot, options, holders):
        node = nodes_by_name.get(node_name)
        advertised = int(quantity(o.allocatable(node, GPU_RESOURCE) or 0)) if node is not None else 0
        allocated = sum(h.gpus for h in holders if h.node == node_name)
        expected = None if options.expected is None else options.expected.get(node_name)
        rows.append(NodeClaims(node_name, advertised, allocated, max(0, advertised - allocated), expected))
    return Claims(nodes=tuple(rows), holders=tuple(holders), waiting=tuple(waiting))


def free_by_node(claims: Claims) -> dict[str, int]:
    return {n.name: n.free for n in claims.nodes}
