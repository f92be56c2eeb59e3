"""What the policy writes for a decision, as plain data: the merge patch of the Notebook and the Event on it. Pure, so
what a stop records is tested without a cluster; the policy (day2/reclaim/policy.py) sends them.

A stop is Kubeflow's own: `kubeflow-resource-stopped` set to the time in RFC 3339 (culling_controller.go
setStopAnnotation), on which its controller scales the notebook's StatefulSet to 0 and keeps its volume. Beside it,
who stopped it, why, the pod, node and slots it held, the hours held and the peak DCGM saw. The stop carries the
Notebook's resourceVersion: a Notebook changed since it was read (its owner labelled it to keep its card) is not
stopped on stale evidence, the next pass judges it again. Nothing is ever deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from components.reclaim.names import (
    COMPONENT,
    EVENT_STOPPED,
    EVENT_WARNED,
    EVENT_WITHDRAWN,
    RECLAIMED_AT,
    RECLAIMED_BY,
    RECLAIMED_GPUS,
    RECLAIMED_HELD_HOURS,
    RECLAIMED_NODE,
    RECLAIMED_PEAK_PERCENT,
    RECLAIMED_POD,
    RECLAIMED_WHY,
    STOP_AFTER,
    WARNED_AT,
)
from day2 import objects as o
from day2.reclaim.judge import Action, Decision, NotBack, Policy, slots_per_card
from knowledge.kubeflow import NOTEBOOK_KIND, STOP_ANNOTATION, STOP_TIME_FORMAT

WHO = f"{COMPONENT} (gpu-pool:reclaim.idleNotebooks)"


def stamp(at: datetime) -> str:
    return at.strftime(STOP_TIME_FORMAT)


def keep_hint(decision: Decision, policy: Policy) -> str:
    return (
        f"to keep its GPU, use it, or label it: kubectl -n {decision.namespace} label notebook {decision.notebook} "
        f"{policy.exclusion_label}=true"
    )


def notebook_patch(notebook: Mapping[str, Any], decision: Decision, now: datetime) -> dict[str, Any] | None:
    """The Notebook's merge patch for the decision, None when there is nothing to write."""
    if decision.action is Action.WARN and decision.stop_at is not None:
        return {"metadata": {"annotations": {WARNED_AT: stamp(now), STOP_AFTER: stamp(decision.stop_at)}}}
    if decision.action is Action.STOP:
        at = stamp(now)
        annotations: dict[str, str | None] = {
            STOP_ANNOTATION: at,
            RECLAIMED_AT: at,
            RECLAIMED_BY: WHO,
            RECLAIMED_WHY: decision.detail,
            RECLAIMED_POD: decision.pod,
            RECLAIMED_NODE: decision.node,
            RECLAIMED_GPUS: str(decision.gpus),
            RECLAIMED_HELD_HOURS: f"{decision.held_seconds / 3600:.1f}",
            RECLAIMED_PEAK_PERCENT: f"{decision.peak_percent or 0:g}",
            WARNED_AT: None,
            STOP_AFTER: None,
        }
        version = o.metadata(notebook).get("resourceVersion")
        return {"metadata": {"resourceVersion": version, "annotations": annotations}}
    if decision.withdraw_warning:
        return {"metadata": {"annotations": {WARNED_AT: None, STOP_AFTER: None}}}
    return None


def event_text(decision: Decision, policy: Policy) -> tuple[str, str, str] | None:
    """(type, reason, message) of the Event the decision posts on the Notebook, None when it posts none."""
    if decision.action is Action.WARN and decision.stop_at is not None:
        message = (
            f"Its GPU sat idle while others wait: it will be stopped after {stamp(decision.stop_at)} if it still is "
            f"({decision.detail}); {keep_hint(decision, policy)}"
        )
        return ("Warning", EVENT_WARNED, message)
    if decision.action is Action.STOP:
        message = (
            f"Stopped by gpu-pool to give its GPU back ({decision.detail}); its volume and files stay: start it "
            f"again from Kubeflow's notebooks page; {keep_hint(decision, policy)}"
        )
        return ("Warning", EVENT_STOPPED, message)
    if decision.withdraw_warning:
        return ("Normal", EVENT_WITHDRAWN, f"No longer to be stopped: {decision.detail}")
    return None


def notebook_event(
    notebook: Mapping[str, Any], kind: str, reason: str, message: str, now: datetime, host: str
) -> dict[str, Any]:
    """A core/v1 Event with the Notebook as its involved object (what `kubectl describe notebook` lists)."""
    meta = o.metadata(notebook)
    at = stamp(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": meta.get("namespace")},
        "involvedObject": {
            "apiVersion": str(notebook.get("apiVersion", "kubeflow.org/v1")),
            "kind": NOTEBOOK_KIND,
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "type": kind,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": COMPONENT, "host": host},
        "reportingComponent": COMPONENT,
        "reportingInstance": host,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }


def freed_gpus(world: o.Snapshot, not_back: tuple[NotBack, ...]) -> float:
    """Physical GPUs the policy's stops hold free now: each notebook it stopped that is still stopped and whose card
    is back, its slots as a share of the node's cards (a slot of a card sliced 4 ways is 0.25)."""
    nodes = {o.name(n): n for n in world.nodes}
    waiting = {(s.namespace, s.notebook) for s in not_back}
    freed = 0.0
    for notebook in world.notebooks:
        notes = o.annotations_of(notebook)
        if STOP_ANNOTATION not in notes or notes.get(RECLAIMED_AT) != notes[STOP_ANNOTATION]:
            continue
        if (o.namespace(notebook), o.name(notebook)) in waiting:
            continue
        slots = notes.get(RECLAIMED_GPUS, "0")
        per_card = slots_per_card(nodes.get(notes.get(RECLAIMED_NODE, ""))) or 1
        freed += (int(slots) if slots.isdigit() else 0) / per_card
    return freed
