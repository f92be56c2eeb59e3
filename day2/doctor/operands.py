"""The GPU Operator's pods on one node, and whether each is Running and Ready or where it is stuck."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from day2 import objects as o
from knowledge.gpu_operator import OPERAND_APP_LABEL

Problem = Literal[
    "ok", "missing", "finished", "unschedulable", "init-crash", "init-waiting", "crash", "image", "not-ready"
]
_CRASH_REASONS = frozenset({"CrashLoopBackOff", "Error", "RunContainerError", "CreateContainerError"})
_IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
OOM_EXIT_CODE = 137


@dataclass(frozen=True)
class PodHealth:
    pod: str
    problem: Problem
    detail: str
    # The next command: the log of the container that failed, or `describe` where there is no log.
    command: str
    # The failing container was OOM-killed (exit 137).
    oom: bool = False
    # The scheduler's message for a pod that is not bound.
    scheduler_message: str = ""

    @property
    def ok(self) -> bool:
        return self.problem == "ok"


def operand_pods(snapshot: o.Snapshot, namespace: str, app: str, node: str) -> list[Mapping[str, Any]]:
    """Pods of one operand DaemonSet (by its `app` label) bound to, or meant for, the node."""
    return [
        p
        for p in snapshot.pods
        if o.namespace(p) == namespace and o.labels(p).get(OPERAND_APP_LABEL) == app and o.intended_node(p) == node
    ]


def current(pods: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The pod that matters: the newest one not being deleted (a rollout leaves the old one Terminating)."""
    alive = [p for p in pods if not o.metadata(p).get("deletionTimestamp")]
    return o.newest(alive or pods)


def _state(status: Mapping[str, Any], which: str, key: str = "state") -> Mapping[str, Any]:
    """`state.waiting`, `state.terminated`, `lastState.terminated`... of a container status, or {}."""
    outer = status.get(key)
    inner = outer.get(which) if isinstance(outer, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def _last_exit(status: Mapping[str, Any]) -> tuple[str, bool]:
    """`last exit 137 (OOMKilled)` of a container status, and whether that was an OOM kill."""
    terminated = _state(status, "terminated", "lastState") or _state(status, "terminated")
    if not terminated:
        return "", False
    code, reason = terminated.get("exitCode"), terminated.get("reason") or ""
    oom = reason == "OOMKilled" or code == OOM_EXIT_CODE
    return f"last exit {code}" + (f" ({reason})" if reason else ""), oom


def _describe(ns: str, pod: str) -> str:
    return f"kubectl -n {ns} describe pod {pod}"


def _logs(ns: str, pod: str, container: str, previous: bool) -> str:
    return f"kubectl -n {ns} logs {pod} -c {container}" + (" --previous" if previous else "")


def _container_trouble(ns: str, pod: str, status: Mapping[str, Any], prefix: str) -> PodHealth | None:
    """A container (or init container) that crashed, cannot pull its image, or stopped with an error."""
    cname = str(status.get("name", ""))
    restarts = int(status.get("restartCount") or 0)
    waiting, terminated = _state(status, "waiting"), _state(status, "terminated")
    last, oom = _last_exit(status)
    reason = str(waiting.get("reason") or terminated.get("reason") or "")
    if waiting and reason in _IMAGE_REASONS:
        detail = f"{pod}: {prefix}{cname} {reason}: {waiting.get('message') or 'image cannot be pulled'}"
        return PodHealth(pod, "image", detail, _describe(ns, pod))
    crashed = (waiting and reason in _CRASH_REASONS) or (terminated and terminated.get("exitCode") not in (0, None))
    if not crashed:
        return None
    facts = ", ".join(f for f in (reason, last, f"{restarts} restarts" if restarts else "") if f)
    problem: Problem = "init-crash" if prefix else "crash"
    return PodHealth(pod, problem, f"{pod}: {prefix}{cname} {facts}", _logs(ns, pod, cname, restarts > 0), oom=oom)


def _init_trouble(ns: str, pod: Mapping[str, Any]) -> PodHealth | None:
    pod_name = o.name(pod)
    specs = [c for c in o.containers(pod, "initContainers") if c.get("restartPolicy") != "Always"]
    statuses = {str(s.get("name")): s for s in o.container_statuses(pod, "initContainerStatuses")}
    for index, init in enumerate(specs):
        cname = str(init.get("name", ""))
        status = statuses.get(cname)
        if status is None:
            detail = f"{pod_name}: Init:{index}/{len(specs)}, {cname} has not started"
            return PodHealth(pod_name, "init-waiting", detail, _describe(ns, pod_name))
        if _state(status, "terminated").get("exitCode") == 0:
            continue
        if trouble := _container_trouble(ns, pod_name, status, "init container "):
            return trouble
        running = "running" in (status.get("state") or {})
        how = "running: it waits for the floor below" if running else "waiting"
        detail = f"{pod_name}: Init:{index}/{len(specs)}, init container {cname} {how}"
        return PodHealth(pod_name, "init-waiting", detail, _logs(ns, pod_name, cname, False))
    return None


def assess(pod: Mapping[str, Any] | None, namespace: str, app: str, main_container: str) -> PodHealth:
    """Running and Ready, or the first thing that keeps the operand pod from it, bottom up."""
    if pod is None:
        return PodHealth(
            "", "missing", f"no {app} pod for this node", f"kubectl -n {namespace} get daemonset {app} -o wide"
        )
    name = o.name(pod)
    phase = str(o.status(pod).get("phase") or "Unknown")
    if phase in ("Succeeded", "Failed"):
        return PodHealth(name, "finished", f"{name}: {phase}", _describe(namespace, name))
    if o.bound_node(pod) is None:
        scheduled = o.condition(pod, "PodScheduled") or {}
        message = str(scheduled.get("message") or scheduled.get("reason") or "not scheduled yet")
        detail = f"{name}: Pending, not scheduled: {message}"
        return PodHealth(name, "unschedulable", detail, _describe(namespace, name), scheduler_message=message)
    if trouble := _init_trouble(namespace, pod):
        return trouble
    statuses = o.container_statuses(pod)
    ordered = sorted(statuses, key=lambda s: s.get("name") != main_container)
    for status in ordered:
        if trouble := _container_trouble(namespace, name, status, ""):
            return trouble
    not_ready = [str(s.get("name")) for s in ordered if s.get("ready") is not True]
    if phase != "Running" or not_ready or not o.condition_true(pod, "Ready"):
        which = ", ".join(not_ready) or "the pod"
        detail = f"{name}: {phase}, {which} not Ready"
        first = not_ready[0] if not_ready else main_container
        return PodHealth(name, "not-ready", detail, _logs(namespace, name, first, False))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    main = next((s for s in statuses if s.get("name") == main_container), {})
    last, _ = _last_exit(main)
    history = f" ({restarts} restarts, {last})" if restarts and last else f" ({restarts} restarts)" if restarts else ""
    return PodHealth(name, "ok", f"{name}: Running, Ready{history}", _logs(namespace, name, main_container, False))


def image_tag(pod: Mapping[str, Any], container: str) -> str | None:
    """The tag of a container's image (`nvcr.io/nvidia/driver:570.211.01-ubuntu24.04` -> `570.211.01-ubuntu24.04`)."""
    image = next((str(c.get("image", "")) for c in o.containers(pod) if c.get("name") == container), "")
    reference = image.split("@", 1)[0]
    last = reference.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def driver_version(pod: Mapping[str, Any], container: str) -> str | None:
    """The driver version, which only the driver image's tag carries (`<version>-<os>`)."""
    tag = image_tag(pod, container)
    return tag.split("-", 1)[0] if tag else None
