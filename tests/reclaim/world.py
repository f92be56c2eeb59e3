"""A Kubeflow pool as the API server returns it, for the reclaim judgement's tests: GPU Nodes (whole or time-sliced,
with GFD's labels), Kubeflow Notebooks and their pods (as the notebook controller makes them), pods waiting for a GPU,
GPU quotas and namespaces; and the card series Prometheus would hold for them.

Pods and core objects are validated against the Kubernetes 1.33 schema (tests/day2/k8s_objects.py); a Notebook against
Kubeflow's own CRD in test_world_fixtures (the upstream reference data), never a shape of its own making.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from components.reclaim.names import (
    RECLAIMED_AT,
    RECLAIMED_BY,
    RECLAIMED_GPUS,
    RECLAIMED_NODE,
    RECLAIMED_POD,
    STOP_AFTER,
    WARNED_AT,
)
from day2.objects import Snapshot
from day2.reclaim.evidence import CardSeries, Evidence, window_minutes
from day2.reclaim.judge import Policy
from knowledge.kubeflow import STOP_ANNOTATION
from tests.day2.k8s_objects import Obj, at, container, node, pod, pod_conditions, running, suffix, uid, validated
from tests.day2.workloads import GPU_TOLERATION, NOTEBOOK_IMAGE

WHOLE, SLICED = "rke2-worker-dc3-gpu-a", "rke2-worker-dc1-gpu-a"
GPU_LABELS = {"nodepool": "gpu", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-RTX-A1000"}
POLICY = Policy(idle_hours=24, idle_percent=5, grace_minutes=60, max_per_hour=2, card_back_minutes=15)
LONG = timedelta(days=10)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_node(name: str, *, cards: int = 1, replicas: int = 1, labelled: bool = True) -> Obj:
    """A GPU worker as GFD labels it: `nvidia.com/gpu.count` cards, each advertised `replicas` times."""
    labels = dict(GPU_LABELS)
    if labelled:
        labels["nvidia.com/gpu.count"] = str(cards)
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing" if replicas > 1 else "none"
    return validated(node(name, labels=labels, gpus=str(cards * replicas)))


def notebook(
    namespace: str,
    name: str,
    *,
    gpus: int = 1,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    age: timedelta = LONG,
) -> Obj:
    """A Kubeflow Notebook (kubeflow.org/v1) as the API server returns it once the controller has reconciled it."""
    main = container(name, NOTEBOOK_IMAGE, limits={"nvidia.com/gpu": str(gpus), "cpu": "600m", "memory": "8Gi"})
    metadata: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": uid("notebook", namespace, name),
        "resourceVersion": "41207",
        "generation": 1,
        "creationTimestamp": at(age),
        "labels": {"app": name, **(labels or {})},
    }
    if annotations:
        metadata["annotations"] = annotations
    ready = 0 if annotations and STOP_ANNOTATION in annotations else 1
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": metadata,
        "spec": {"template": {"spec": {"containers": [main], "serviceAccountName": "default-editor"}}},
        "status": {"conditions": [], "containerState": {}, "readyReplicas": ready},
    }


def notebook_pod(
    namespace: str,
    name: str,
    node_name: str,
    *,
    gpus: int = 1,
    age: timedelta = LONG,
    deleting: bool = False,
    finalizers: list[str] | None = None,
) -> Obj:
    """The notebook's pod as its StatefulSet makes it: `<name>-0`, labelled notebook-name, bound to `node_name`."""
    main = container(name, NOTEBOOK_IMAGE, limits={"nvidia.com/gpu": str(gpus), "cpu": "600m", "memory": "8Gi"})
    made = pod(
        f"{name}-0",
        namespace,
        containers=[main],
        statuses=[running(name, NOTEBOOK_IMAGE, age)],
        phase="Running",
        conditions=pod_conditions(scheduled=age),
        age=age,
        node_name=node_name,
        labels={"notebook-name": name, "statefulset": name, "statefulset.kubernetes.io/pod-name": f"{name}-0"},
        owner=("apps/v1", "StatefulSet", name),
        tolerations=[GPU_TOLERATION],
        deleting_for=timedelta(minutes=20) if deleting else None,
        security_context={"fsGroup": 100},
    )
    if finalizers:
        made["metadata"]["finalizers"] = finalizers
    return validated(made)


def waiting_pod(namespace: str, name: str, *, gpus: int = 1, age: timedelta = timedelta(minutes=30)) -> Obj:
    """A GPU pod the scheduler could not place (PodScheduled False, Unschedulable)."""
    trainer = container("train", "ghcr.io/example/trainer:2026.04", limits={"nvidia.com/gpu": str(gpus), "cpu": "4"})
    message = f"0/4 nodes are available: 3 Insufficient nvidia.com/gpu. {suffix(name)}"
    return validated(
        pod(
            name,
            namespace,
            containers=[trainer],
            statuses=[],
            phase="Pending",
            conditions=pod_conditions(scheduled=None, message=message),
            age=age,
            labels={"app": name},
            tolerations=[GPU_TOLERATION],
        )
    )


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return validated(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
    )


def gpu_quota(namespace_name: str, hard: int, used: int) -> Obj:
    key = "requests.nvidia.com/gpu"
    return validated(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpu-pool-gpus", "namespace": namespace_name, "uid": uid("quota", namespace_name)},
            "spec": {"hard": {key: str(hard)}},
            "status": {"hard": {key: str(hard)}, "used": {key: str(used)}},
        }
    )


def warned(at_: datetime, stop_after: datetime) -> dict[str, str]:
    return {WARNED_AT: stamp(at_), STOP_AFTER: stamp(stop_after)}


def stopped_by_policy(when: datetime, pod_name: str, node_name: str, gpus: int = 1) -> dict[str, str]:
    return {
        STOP_ANNOTATION: stamp(when),
        RECLAIMED_AT: stamp(when),
        RECLAIMED_BY: "gpu-pool-reclaim",
        RECLAIMED_POD: pod_name,
        RECLAIMED_NODE: node_name,
        RECLAIMED_GPUS: str(gpus),
    }


def card(
    node_name: str,
    gpu: str = "0",
    *,
    peak: float = 1.0,
    minutes: int | None = None,
    holders: Iterable[tuple[str, str]] = (),
) -> CardSeries:
    full = window_minutes(POLICY.idle_hours)
    return CardSeries(
        node=node_name,
        gpu=gpu,
        uuid=f"GPU-{uid('card', node_name, gpu)}",
        peak=peak,
        samples=full if minutes is None else minutes,
        holders=tuple(sorted(holders)),
    )


def evidence(*cards: CardSeries, hours: int = POLICY.idle_hours) -> Evidence:
    return Evidence(window_minutes(hours), tuple(cards))


def world(*objects: Obj | list[Obj]) -> Snapshot:
    flat: list[Any] = []
    for item in objects:
        flat.extend(item if isinstance(item, list) else [item])
    return Snapshot.from_items(flat)


def kubectl_list(objects: list[Obj]) -> Obj:
    """What `kubectl get nodes,pods,namespaces,resourcequotas,notebooks.kubeflow.org -A -o json` writes. The core
    objects were validated when built; the Notebooks against Kubeflow's CRD (test_world_fixtures)."""
    return {"apiVersion": "v1", "items": objects, "kind": "List", "metadata": {"resourceVersion": ""}}
