"""The drain, by `kubectl drain --ignore-daemonsets --delete-emptydir-data`'s rules (k8s.io/kubectl pkg/drain
filters.go, v0.33.5), over the one client: the same for the wave, `gpu-pool repair` and the watcher.

Which pods (`to_evict`, pure): a finished pod (Succeeded, Failed) is evicted whatever owns it; a DaemonSet's running
pod is left (it would come back at once), a mirror pod (the kubelet's static pod) too; a pod with emptyDir data is
evicted (its data goes with it); a pod with no controller is **refused**: the drain stops and names it, as kubectl
does without --force ("cannot delete Pods that declare no controller"), since nothing would recreate it
(FIELD-REVIEW-6 WRONG-7). The drain then evicts (policy/v1 Eviction: PodDisruptionBudgets are respected; a 429 is
tried again) until every evicted pod is gone or the timeout.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node.kube import ApiError, Kube
from node.waiting import Out, StepFailed, Waiter

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass(frozen=True)
class Picked:
    evict: tuple[Mapping[str, Any], ...]
    # `namespace/name` of each pod with no controller: the drain refuses them.
    unmanaged: tuple[str, ...]


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """metav1.GetControllerOf: the owner reference marked `controller: true` (an owner that is not the pod's
    controller, a bare ownerReference, does not recreate it)."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if o.get("controller") is True), None)


def _name(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def to_evict(pods: Sequence[Mapping[str, Any]]) -> Picked:
    """The pods a drain evicts and those it refuses, by kubectl's filters in their order."""
    evict, unmanaged = [], []
    for pod in pods:
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        controller = _controller(pod)
        daemon = controller is not None and controller.get("kind") == "DaemonSet"
        mirror = MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})
        if finished:
            evict.append(pod)
        elif daemon or mirror:
            continue
        elif controller is None:
            unmanaged.append(_name(pod))
        else:
            evict.append(pod)
    return Picked(tuple(evict), tuple(unmanaged))


def eviction(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
    }


def pods_on(kube: Kube, node: str) -> list[dict[str, Any]]:
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    return kube.list(f"/api/v1/pods?fieldSelector={selector}", "Pod")


class DrainRefused(StepFailed):
    """The drain would delete a pod nothing recreates: it stops before evicting anything."""


def drain(
    kube: Kube, node: str, minutes: float, out: Out | None = None, tick: Any = None, poll: float | None = None
) -> None:
    """Evicts the node's pods as `to_evict` picks them and waits until they are gone; DrainRefused naming the pods
    with no controller (nothing evicted), StepFailed naming the pods left at the timeout."""
    picked = to_evict(pods_on(kube, node))
    if picked.unmanaged:
        raise DrainRefused(
            f"cannot delete Pods that declare no controller: {', '.join(picked.unmanaged)} (nothing would recreate "
            "them: move or delete them yourself, then run the turn again)"
        )
    uids = {str((p.get("metadata") or {}).get("uid") or _name(p)) for p in picked.evict}
    refused: dict[str, str] = {}
    said: set[str] = set()

    def say(line: str) -> None:
        if out is not None:
            out.write(line + "\n")
            out.flush()

    def gone() -> tuple[bool, str, str]:
        left = [p for p in pods_on(kube, node) if str((p.get("metadata") or {}).get("uid") or _name(p)) in uids]
        for pod in left:
            meta = pod.get("metadata") or {}
            path = f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta.get('name')}/eviction"
            if meta.get("deletionTimestamp"):
                continue
            if _name(pod) not in said:
                # kubectl drain's own words (pkg/drain/drain.go evictPods), so a drain reads as it always did.
                say(f"evicting pod {_name(pod)}")
                said.add(_name(pod))
            try:
                kube.create(path, eviction(pod), retry=False)
            except ApiError as error:
                if error.status == 429:
                    refused[_name(pod)] = str(error).rsplit(": ", 1)[-1]
                    say(
                        f'error when evicting pods/"{meta.get("name")}" -n "{meta.get("namespace")}" (will retry): '
                        f"{refused[_name(pod)]}"
                    )
                elif error.status != 404:
                    raise
        names = ", ".join(_name(p) for p in left)
        why = "; ".join(f"{name}: {reason}" for name, reason in refused.items() if name in names)
        return (
            not left,
            f"{len(left)} pods left ({names})" if left else "every pod evicted",
            f"pods that do not leave: {why or names}; kubectl get pdb -A",
        )

    waiter = Waiter(f"the drain of {node}", minutes, out, tick=tick)
    if poll is not None:
        waiter.poll = poll
    waiter.until(gone)
    say(f"node/{node} drained")
