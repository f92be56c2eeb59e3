"""The gate a node passes before it serves again, the same for a wave's turn, a repair and the watcher: Ready (at the
pinned kubelet, where a turn gates on it), the operator's driver upgrade on it done, its driver pod Ready on the
pinned driver, and every GPU slot its sharing profile promises advertised. And the driver's rebuild after a
kernel change. Over the one client; the operator's own words (its labels, its driver pods) from knowledge/."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from knowledge.gpu_operator import DRIVER_CONTAINER, DRIVER_POD_SELECTOR, DRIVER_UPGRADE_DONE, DRIVER_UPGRADE_FAILED
from node.kube import Kube
from node.turn import Turn, record, set_state
from node.vocabulary import (
    DRIVER_REVISION_ANNOTATION,
    TurnState,
    allocatable_gpus,
    annotations_of,
    ready,
    upgrade_state,
)
from node.waiting import StepFailed

REVISION_HASH_LABEL = "controller-revision-hash"


@dataclass(frozen=True)
class Pins:
    """What the node must run to pass: its slots, the driver, and (a wave's turn) the kubelet."""

    slots: int
    driver: str
    namespace: str
    kubelet: str = ""
    # A turn that rolls a driver change (its version or its DaemonSet's template): only a driver pod of a newer
    # revision than the one the turn started on passes (note_driver_revision).
    fresh_driver: bool = False


def driver_log_command(namespace: str, node: str) -> str:
    return (
        f"kubectl -n {namespace} logs -l {DRIVER_POD_SELECTOR} --field-selector spec.nodeName={node} "
        f"-c {DRIVER_CONTAINER}"
    )


def driver_pods(kube: Kube, namespace: str, node: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"labelSelector": DRIVER_POD_SELECTOR, "fieldSelector": f"spec.nodeName={node}"})
    return kube.list(f"/api/v1/namespaces/{namespace}/pods?{query}", "Pod")


def pod_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def newest_revision_hash(kube: Kube, namespace: str, pod: Mapping[str, Any]) -> str | None:
    """The hash of the driver DaemonSet's newest ControllerRevision, as k8s-operator-libs' podInSyncWithDS reads
    it (pkg/upgrade pod_manager.go GetDaemonsetControllerRevisionHash: the revisions matching the DaemonSet's
    selector whose name starts with its name, the highest `revision`, its name less `<ds>-`). None: not known."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    owner = next((o for o in owners if o.get("kind") == "DaemonSet"), None)
    if owner is None:
        return None
    ds_name = str(owner.get("name"))
    daemonset = kube.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{ds_name}") or {}
    match = (daemonset.get("spec") or {}).get("selector", {}).get("matchLabels") or {}
    if not match:
        return None
    selector = urllib.parse.quote(",".join(f"{k}={v}" for k, v in sorted(match.items())))
    found = kube.list(f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions?labelSelector={selector}", "x")
    revisions = [r for r in found if str((r.get("metadata") or {}).get("name", "")).startswith(ds_name)]
    if not revisions:
        return None
    newest = max(revisions, key=lambda r: int(r.get("revision") or 0))
    return str(newest["metadata"]["name"]).removeprefix(f"{ds_name}-")


def pod_revision(pod: Mapping[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_HASH_LABEL) or "")


def note_driver_revision(turn: Turn, namespace: str) -> None:
    """At a turn's start, while it holds the node and the operator (skip label) and before its cordon: the revision
    of the node's driver pod. A driver change reaches the node only through a new pod of a newer revision of the
    OnDelete DaemonSet, which the operator creates after the node is cordoned; until the operator has rendered the
    new ClusterPolicy into the DaemonSet, the old pod is "in sync" and on the same driver version (a change of the
    template alone), and a gate that passed on it would end the turn before the operator marks the node
    upgrade-required, where it then stays (FIELD-REVIEW-6 WRONG-1). A resumed turn keeps what its first start
    noted."""
    revisions = sorted({pod_revision(p) for p in driver_pods(turn.kube, namespace, turn.node)} - {""})

    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        if DRIVER_REVISION_ANNOTATION in annotations_of(node):
            return None
        return {"metadata": {"annotations": {DRIVER_REVISION_ANNOTATION: ",".join(revisions)}}}

    turn.patch(change)


def _stale_driver(turn: Turn, node: Mapping[str, Any], pins: Pins, pods: list[dict[str, Any]]) -> str | None:
    """Why the driver pods do not yet carry this turn's driver change ('' when they do): a pod on the revision the
    turn started on, or on an older revision than the DaemonSet's newest."""
    before = set(filter(None, str(annotations_of(node).get(DRIVER_REVISION_ANNOTATION) or "").split(",")))
    for pod in pods:
        if pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        revision = pod_revision(pod)
        if revision in before:
            return (
                f"the driver pod is still on revision {revision}, the one this turn started on: the operator has not "
                "replaced it yet (it renders the release's new ClusterPolicy into its DaemonSet, then marks the node "
                "upgrade-required and, the node cordoned, replaces the pod: kubectl get ds -n "
                f"{pins.namespace} nvidia-driver-daemonset, and the operator's log). Where the change does not reach "
                f"the driver's pod template at all, remove the annotation {DRIVER_REVISION_ANNOTATION} from the node "
                "and `pulumi up` again"
            )
        newest = newest_revision_hash(turn.kube, pins.namespace, pod)
        if newest is not None and revision != newest:
            return f"the driver pod is on revision {revision}, the DaemonSet's newest is {newest}"
    return None


def replace_out_of_sync_driver_pod(turn: Turn, namespace: str) -> bool:
    """`upgrade-failed` is left only when the node's driver pod is in sync with the DaemonSet's newest revision and
    Ready (k8s-operator-libs common_manager.go ProcessUpgradeFailedNodes); the driver DaemonSet is OnDelete, so
    nothing replaces a pod of an older revision. Deletes that pod (recreated on the newest revision), says so and
    records it on the Node: True. False when the pod is already on the newest revision (a real failure)."""
    for pod in driver_pods(turn.kube, namespace, turn.node):
        pod_hash = ((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_HASH_LABEL)
        newest = newest_revision_hash(turn.kube, namespace, pod)
        if newest is None or pod_hash is None or pod_hash == newest:
            continue
        name = str(pod["metadata"]["name"])
        turn.kube.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
        why = f"upgrade-failed with driver pod {name} on revision {pod_hash}, the DaemonSet's newest is {newest}"
        turn.say(f"{turn.node}: {why}: deleted it, so the operator's DaemonSet recreates it on {newest}; waiting")
        record(turn, {"event": "driver-pod-deleted", "reason": why})
        return True
    return False


def _upgrade_failed(turn: Turn, pins: Pins, replaced: set[str]) -> tuple[bool, str, str]:
    """A node in upgrade-failed: an out-of-sync driver pod is deleted once (the recreated pod must pass on its own:
    FIELD-REVIEW-5 WRONG-2) and the gate waits; a pod on the newest revision is a real failure."""
    if not replaced and replace_out_of_sync_driver_pod(turn, pins.namespace):
        replaced.add(turn.node)
        return False, "upgrade-failed, out-of-sync driver pod deleted", "the recreated driver pod"
    if replaced:
        cause = "the recreated driver pod did not bring the node out of upgrade-failed: "
        return (
            False,
            "upgrade-failed, waiting for the recreated driver pod",
            cause + driver_log_command(pins.namespace, turn.node),
        )
    raise StepFailed(
        f"the GPU Operator's driver upgrade failed on {turn.node} (nvidia.com/gpu-driver-upgrade-state="
        f"upgrade-failed): " + driver_log_command(pins.namespace, turn.node)
    )


def gate_check(turn: Turn, pins: Pins, replaced: set[str]) -> tuple[bool, str, str]:
    """One look at the node for the gate: (passes, what it sees, the likeliest cause if it never does)."""
    node, name, namespace = turn.kube.node(turn.node), turn.node, pins.namespace
    if node is None:
        return False, "node not found", f"node {name} is gone"
    running = str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "")
    if pins.kubelet and (running != pins.kubelet or not ready(node)):
        return (
            False,
            f"kubelet {running or 'unknown'}, {'Ready' if ready(node) else 'not Ready'}",
            f"{name} is not Ready on kubelet {pins.kubelet}: on the VM, journalctl -u rke2-agent (the stack pins RKE2 "
            f"{pins.kubelet}: a node on another release is pending an RKE2 upgrade, which the plan shows)",
        )
    state = upgrade_state(node)
    if state == DRIVER_UPGRADE_FAILED:
        return _upgrade_failed(turn, pins, replaced)
    pods = driver_pods(turn.kube, namespace, name)
    images = [c.get("image", "") for p in pods for c in (p.get("spec") or {}).get("containers") or []]
    on_version = any(f":{pins.driver}" in image for image in images)
    pod_is_ready = any(pod_ready(p) for p in pods)
    allocatable = allocatable_gpus(node)
    status = (
        f"allocatable nvidia.com/gpu={allocatable}/{pins.slots}, driver pod "
        f"{'Ready' if pod_is_ready else 'not Ready' if pods else 'missing'}"
        f"{'' if on_version or not pods else ' on another driver'}, upgrade state {state or 'none'}"
    )
    if not pods:
        return (
            False,
            status,
            (
                f"no driver pod on {name}: is the node labelled for the operator (nvidia.com/gpu.deploy.driver) and "
                f"does NFD see the card? kubectl -n {namespace} get pods -o wide"
            ),
        )
    if not on_version:
        return False, status, f"the driver pod on {name} still runs another driver; the operator upgrades one at a time"
    if state not in ("", DRIVER_UPGRADE_DONE):
        return False, status, f"the operator's driver upgrade on {name} is still at {state}"
    if pins.fresh_driver and (stale := _stale_driver(turn, node, pins, pods)):
        return False, status + ", driver pod not yet replaced", f"{stale} ({name})"
    if not pod_is_ready:
        return (
            False,
            status,
            "the driver pod is not Ready (the first build compiles nvidia.ko): " + driver_log_command(namespace, name),
        )
    if allocatable != str(pins.slots):
        return (
            False,
            status,
            (
                f"the device plugin advertises {allocatable} of {pins.slots} GPUs: debug from the driver up (toolkit, "
                f"then device plugin): kubectl -n {namespace} get pods -o wide --field-selector spec.nodeName={name}"
            ),
        )
    return True, status, ""


def gate(turn: Turn, pins: Pins, minutes: float, *, in_turn: bool = False) -> str:
    """Waits until the node passes the gate; what it saw. `in_turn`: a turn's own gate, its node shows `gating`
    (a repair's stays `repairing`)."""
    if in_turn:
        set_state(turn, TurnState.GATING)
    replaced: set[str] = set()
    what = f"{turn.node} to advertise {pins.slots} nvidia.com/gpu on driver {pins.driver}"
    return turn.waiter(what, minutes).until(lambda: gate_check(turn, pins, replaced))


def rebuild_driver(turn: Turn, kernel: str, namespace: str, minutes: float) -> None:
    """After a kernel change: the node back Ready on `kernel`, then only its driver pod deleted (the driver
    DaemonSet is OnDelete, so `rollout status` cannot follow it) and its replacement awaited Ready."""

    def back_on_kernel() -> tuple[bool, str, str]:
        node = turn.kube.node(turn.node)
        running = str(((node or {}).get("status") or {}).get("nodeInfo", {}).get("kernelVersion") or "unknown")
        if node is None or running != kernel or not ready(node):
            return (
                False,
                f"kernel {running}, {'Ready' if node and ready(node) else 'not Ready'}",
                f"the VM did not boot kernel {kernel}: check /etc/default/grub.d/99-gpu-pool-kernel.cfg on the VM",
            )
        return True, f"kernel {running}, Ready", ""

    turn.waiter(f"{turn.node} to come back Ready on kernel {kernel}", minutes).until(back_on_kernel)
    old = {str(p["metadata"]["name"]) for p in driver_pods(turn.kube, namespace, turn.node)}
    for name in sorted(old):
        turn.kube.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def rebuilt() -> tuple[bool, str, str]:
        pods = [p for p in driver_pods(turn.kube, namespace, turn.node) if p["metadata"]["name"] not in old]
        if not pods:
            return False, "no new driver pod yet", "the driver DaemonSet did not recreate its pod on this node"
        if not any(pod_ready(p) for p in pods):
            return (
                False,
                "driver pod not Ready",
                (
                    f"the driver did not build for {kernel} (does the Ubuntu archive still serve its headers?): "
                    + driver_log_command(namespace, turn.node)
                ),
            )
        return True, "driver pod Ready", ""

    turn.waiter(f"the driver on {turn.node} to rebuild for kernel {kernel}", minutes).until(rebuilt)
