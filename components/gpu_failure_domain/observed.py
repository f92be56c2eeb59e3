"""What the cluster says about a domain's GPU worker: its Node, read from `kubectl get nodes -o json`.

The day-2 plan (plan.py) is a function of this and of the stack file. The same reader takes the live answer at
preview and, offline, a saved answer (`make diff NODES=<file>`) or the Nodes an earlier stack file's `up` leaves
(`settled_nodes` in settled.py, written by `make diff` as `nodes.json` so that a user can edit one and pass it back).

The Node's annotations (the contract between a turn and the next preview) are declared in node/vocabulary.py.
"""

from __future__ import annotations

__all__ = [
    "ACTIVE_TURN_STATES",
    "FIRST_BOOT_ANNOTATION",
    "NODES_ENV",
    "REPAIRS_ANNOTATION",
    "ROLLOUT_ANNOTATION",
    "TURN_HOLDER_ANNOTATION",
    "TURN_STATES",
    "TURN_STATE_LABEL",
    "WAVE_CORDON_ANNOTATION",
    "WAVE_SKIP_ANNOTATION",
    "WAVE_STOPPED_ANNOTATION",
    "WAVE_TURN_ANNOTATION",
    "ObservedNode",
    "node_document",
    "nodes_by_domain",
    "observed_node",
]

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.gpu_operator import GPU_RESOURCE
from knowledge.kubernetes import HOSTNAME_LABEL

# The Node's vocabulary is node/'s (node/vocabulary.py, declared once); this reader re-exports what the plan reads.
from node.vocabulary import (
    ACTIVE_TURN_STATES,
    FIRST_BOOT_ANNOTATION,
    REPAIRS_ANNOTATION,
    ROLLOUT_ANNOTATION,
    TURN_HOLDER_ANNOTATION,
    TURN_STATE_LABEL,
    TURN_STATES,
    WAVE_CORDON_ANNOTATION,
    WAVE_SKIP_ANNOTATION,
    WAVE_STOPPED_ANNOTATION,
    WAVE_TURN_ANNOTATION,
)

# Type-only: the unattended repair's watcher runs this reader in the cluster (the health check's
# code packaging, components/shared/payload.py, leaves TYPE_CHECKING imports out), so nothing here may need the
# pydantic-bound config at run time; nodes_by_domain reads the stack's fields by name.
if TYPE_CHECKING:
    from config.stack import StackConfig

# Offline only: the path of a saved `kubectl get nodes -o json` the preview plans against instead of a cluster
# (`make diff` sets it: NODES=, or the Nodes the earlier stack file's `up` leaves). Unset: a first install.
NODES_ENV = "GPU_POOL_NODES"


@dataclass(frozen=True)
class ObservedNode:
    """One GPU worker's Node as the API server reports it (None in a mapping: not registered)."""

    rollout: Mapping[str, str] | None = None
    kubelet_version: str | None = None
    kernel_version: str | None = None
    unschedulable: bool = False
    wave_cordoned: str | None = None
    wave_turn: str | None = None
    wave_stopped: str | None = None
    # The kubelet's Ready condition (a Node that never reported one is not Ready).
    ready: bool = True
    # REPAIRS_ANNOTATION's entries, oldest first ({"at", "event": power-cycle | repaired | stopped, "reason", ...}).
    repairs: tuple[Mapping[str, str], ...] = ()
    # TURN_STATE_LABEL and TURN_HOLDER_ANNOTATION ('' where absent).
    turn_state: str = ""
    turn_holder: str = ""

    @property
    def held(self) -> bool:
        """Someone's turn holds the node: its state is set and not done."""
        return bool(self.turn_state) and self.turn_state != "done"

    @property
    def holder_kind(self) -> str:
        """`up` or `repair` (the holder annotation's prefix), '' when not held."""
        return self.turn_holder.split(":", 1)[0] if self.held else ""

    @property
    def out(self) -> bool:
        """Not serving GPU pods: cordoned, not Ready, or in the middle of a turn."""
        return self.unschedulable or not self.ready or self.turn_in_progress

    @property
    def turn_in_progress(self) -> bool:
        """A wave's drain ran on this node and its last step has not: the turn must finish before anything else.
        A node a gpu-pool from before WAVE_TURN_ANNOTATION cordoned has only the cordon mark."""
        return bool(self.wave_turn) or (self.unschedulable and bool(self.wave_cordoned))

    @property
    def resume_token(self) -> str:
        """Unique to the drain that started the turn: the turn's steps are keyed on it, so a resumed turn re-runs
        them even where an earlier turn left equal steps in the state."""
        return self.wave_turn or f"cordoned by the wave of {self.wave_cordoned}"

    @property
    def cordoned_by_someone_else(self) -> bool:
        return self.unschedulable and not self.wave_cordoned


def _rollout(raw: object) -> Mapping[str, str] | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else None


def _repairs(raw: object) -> tuple[Mapping[str, str], ...]:
    if not isinstance(raw, str) or not raw:
        return ()
    try:
        parsed = json.loads(raw)
    except ValueError:
        return ()
    if not isinstance(parsed, list):
        return ()
    return tuple({str(k): str(v) for k, v in entry.items()} for entry in parsed if isinstance(entry, dict))


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def observed_node(item: Mapping[str, Any]) -> ObservedNode:
    metadata = item.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    status = item.get("status") or {}
    info = status.get("nodeInfo") or {}
    return ObservedNode(
        rollout=_rollout(annotations.get(ROLLOUT_ANNOTATION)),
        kubelet_version=info.get("kubeletVersion") or None,
        kernel_version=info.get("kernelVersion") or None,
        unschedulable=bool((item.get("spec") or {}).get("unschedulable")),
        wave_cordoned=annotations.get(WAVE_CORDON_ANNOTATION) or None,
        wave_turn=annotations.get(WAVE_TURN_ANNOTATION) or None,
        wave_stopped=annotations.get(WAVE_STOPPED_ANNOTATION) or None,
        ready=_ready(status),
        repairs=_repairs(annotations.get(REPAIRS_ANNOTATION)),
        turn_state=str((metadata.get("labels") or {}).get(TURN_STATE_LABEL) or ""),
        turn_holder=str(annotations.get(TURN_HOLDER_ANNOTATION) or ""),
    )


def nodes_by_domain(stack: StackConfig, node_list: Mapping[str, Any]) -> dict[str, ObservedNode | None]:
    """`kubectl get nodes -o json` -> each domain's Node (None where it is not registered)."""
    items = {str((item.get("metadata") or {}).get("name")): item for item in node_list.get("items") or []}
    return {
        domain.name: observed_node(items[domain.hostname]) if domain.hostname in items else None
        for domain in stack.failure_domains
    }


def node_document(
    name: str,
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    kubelet: str,
    kernel: str,
    gpus: int,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node as `kubectl get nodes -o json` lists it, with what the plan reads (and what a valid Node needs)."""
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110", GPU_RESOURCE: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, **labels}, "annotations": dict(annotations)},
        "spec": spec,
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": kernel,
                "kubeProxyVersion": "",
                "kubeletVersion": kubelet,
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 24.04 LTS",
                "systemUUID": "",
            },
        },
    }
