"""A day-2 scenario made real in the e2e API server, the way the cluster's own writers would have made it.

Objects are created (the server assigns uids, timestamps and a Job's selector), then each writer's status is
set through the status subresource as the kubelet and the Job controller set it, and a pod the scenario shows
Terminating is held by a finalizer and deleted, so the server itself stamps its deletionTimestamp. There is no
controller manager or kubelet here: nothing changes the objects afterwards.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from tests.e2e.kube import Kubectl

Obj = dict[str, Any]
SETUP_MANAGER = "e2e-setup"
# Holds a deleted pod Terminating, as a kubelet that has not confirmed the stop yet would.
HOLD_FINALIZER = "e2e.gpu-pool.dev/hold"
# Fields the API server owns: a create that carries them is refused or has them overwritten.
SERVER_OWNED = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
# The Job controller's labels on a Job's pod template: the server generates them with the Job's new uid.
JOB_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
CREATE_ORDER = ("Node", "ConfigMap", "Job", "Pod")


def _as_list(objects: Iterable[Obj]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})


def _for_create(obj: Obj) -> Obj:
    created = copy.deepcopy(obj)
    created.pop("status", None)
    metadata = created["metadata"]
    for key in SERVER_OWNED:
        metadata.pop(key, None)
    if obj["kind"] == "Job":
        # A Job's selector is generated from its uid unless manualSelector: the server refuses one given.
        created["spec"].pop("selector", None)
        template_labels = created["spec"]["template"]["metadata"].get("labels", {})
        for label in JOB_UID_LABELS:
            template_labels.pop(label, None)
    if obj["kind"] == "Pod" and obj["metadata"].get("deletionTimestamp"):
        metadata["finalizers"] = [*metadata.get("finalizers", []), HOLD_FINALIZER]
    return created


def _with_uids(obj: Obj, uids: dict[str, str]) -> Obj:
    """A pod whose owner the server re-created points at the owner's new uid, as its controller would have."""
    metadata = obj["metadata"]
    for reference in metadata.get("ownerReferences", []):
        reference["uid"] = uids.get(reference["uid"], reference["uid"])
    labels = metadata.get("labels", {})
    for label in JOB_UID_LABELS:
        if label in labels:
            labels[label] = uids.get(labels[label], labels[label])
    return obj


def _documents(text: str) -> list[Obj]:
    """kubectl's `-o json` for several objects: one JSON document after another."""
    decoder, found, at = json.JSONDecoder(), list[Obj](), 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        obj, at = decoder.raw_decode(text, at)
        found += obj["items"] if obj.get("kind") == "List" else [obj]
    return found


def _key(obj: Obj) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _namespaces(objects: list[Obj]) -> list[Obj]:
    """Each namespace, and the ServiceAccounts its pods run as (the ServiceAccount admission plugin needs them)."""
    accounts = {
        (o["metadata"]["namespace"], o["spec"].get("serviceAccountName") or "default")
        for o in objects
        if o["kind"] == "Pod"
    }
    names = sorted({o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")})
    created: list[Obj] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names]
    created += [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": ns, "name": sa}}
        for ns, sa in sorted(accounts)
    ]
    return created


def clear(kubectl: Kubectl) -> None:
    """Remove every scenario object (namespaces stay: without a namespace controller they never finish)."""
    pods = kubectl.json("get", "pods", "-A")["items"]
    held = [p for p in pods if p["metadata"].get("finalizers")]
    for pod in held:
        patch = json.dumps({"metadata": {"finalizers": None}})
        kubectl(
            "patch", "pod", "-n", pod["metadata"]["namespace"], pod["metadata"]["name"], "--type=merge", "-p", patch
        )
    # A forced delete of an object without finalizers removes it from storage before the call returns: the names
    # are free for the next scenario without waiting.
    kubectl("delete", "pods,jobs,configmaps,nodes", "--all", "-A", "--force", "--grace-period=0", "--wait=false")


def load(kubectl: Kubectl, objects: list[Obj]) -> None:
    """Create the scenario's objects, then set their status and deletions as the cluster's writers would."""
    clear(kubectl)
    existing = {o["metadata"]["name"] for o in kubectl.json("get", "namespaces")["items"]}
    setup = [o for o in _namespaces(objects) if o["kind"] != "Namespace" or o["metadata"]["name"] not in existing]
    if setup:
        kubectl("apply", "--server-side", "--field-manager", SETUP_MANAGER, "-f", "-", stdin=_as_list(setup))

    uids: dict[str, str] = {}
    for kind in CREATE_ORDER:
        # In the scenario's own order: the newest of two objects is created last, as it was in the cluster.
        batch = [_with_uids(_for_create(o), uids) for o in objects if o["kind"] == kind]
        if not batch:
            continue
        items = _documents(
            kubectl("create", "--field-manager", SETUP_MANAGER, "-o", "json", "-f", "-", stdin=_as_list(batch))
        )
        by_key = {_key(o): o for o in items}
        for original in (o for o in objects if o["kind"] == kind):
            uids[original["metadata"]["uid"]] = by_key[_key(original)]["metadata"]["uid"]

    # The API server taints every new Node not-ready (TaintNodesByCondition); the scenario's taints are what the
    # node lifecycle controller leaves once the kubelet reports Ready.
    nodes = [o for o in objects if o["kind"] == "Node"]
    for node in nodes:
        taints = json.dumps({"spec": {"taints": node["spec"].get("taints")}})
        kubectl("patch", "node", node["metadata"]["name"], "--type=merge", "-p", taints)

    statuses = [
        _with_uids({**_for_create(o), "status": copy.deepcopy(o["status"])}, uids) for o in objects if o.get("status")
    ]
    if statuses:
        kubectl("replace", "--subresource=status", "-f", "-", stdin=_as_list(statuses))

    terminating = [o for o in objects if o["kind"] == "Pod" and o["metadata"].get("deletionTimestamp")]
    for pod in terminating:
        grace = str(pod["metadata"].get("deletionGracePeriodSeconds", 30))
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        kubectl("delete", "pod", "-n", namespace, name, f"--grace-period={grace}", "--wait=false")
