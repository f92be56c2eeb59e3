"""A Node and its pods in a MemoryApi, and a Turn over it with the one client: what node/'s tests start from."""

from __future__ import annotations

import datetime
import io
from typing import Any

from node.kube import Kube
from node.turn import Turn
from tests.node.memory_api import MemoryApi

NODE = "n1"
NODE_PATH = f"/api/v1/nodes/{NODE}"
NOW = datetime.datetime(2026, 12, 5, 3, 0, tzinfo=datetime.UTC)


def a_node(
    *,
    ready: str = "True",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    unschedulable: bool = False,
    boot: str = "boot-1",
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": ready}] if ready else []
    return {
        "kind": "Node",
        "metadata": {"name": NODE, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"conditions": conditions, "nodeInfo": {"bootID": boot}, "allocatable": {"nvidia.com/gpu": "4"}},
    }


def pod(
    name: str, *, owner: str | None = "ReplicaSet", phase: str = "Running", mirror: bool = False, namespace: str = "ml"
) -> dict[str, dict[str, Any]]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner", "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    body = {"kind": "Pod", "metadata": meta, "spec": {"nodeName": NODE}, "status": {"phase": phase}}
    return {f"/api/v1/namespaces/{namespace}/pods/{name}": body}


def cluster(node: dict[str, Any] | None = None, *extra: dict[str, dict[str, Any]]) -> MemoryApi:
    objects: dict[str, dict[str, Any]] = {NODE_PATH: node or a_node()}
    for more in extra:
        objects.update(more)
    return MemoryApi(objects=objects)


def turn(api: MemoryApi, holder: str = "up:prod", mark: str = "dc1") -> tuple[Turn, io.StringIO]:
    out = io.StringIO()
    kube = Kube(api, sleep=lambda _s: None)
    made = Turn(kube, NODE, holder, mark, out, clock=lambda: NOW)
    return made, out


def after(api: MemoryApi) -> dict[str, Any]:
    return api.node(NODE)


def labels_of(api: MemoryApi) -> dict[str, str]:
    return dict(after(api)["metadata"].get("labels") or {})


def annotations_of(api: MemoryApi) -> dict[str, str]:
    return dict(after(api)["metadata"].get("annotations") or {})
