"""What the cluster says the GPU workers run, read at preview: the Nodes (observed.py) and the servers' version.
Offline, a saved `kubectl get nodes -o json` stands in for the cluster (`make diff`: NODES=, or the Nodes the
earlier stack file's `up` leaves)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from components.gpu_failure_domain.observed import NODES_ENV, ObservedNode, nodes_by_domain
from components.shared.local_run import run_quietly
from components.shared.preflight import PreflightError
from config.stack import StackConfig

SERVER_VERSION_ENV = "GPU_POOL_SERVER_VERSION"


@dataclass
class ClusterState:
    nodes: dict[str, ObservedNode | None] = field(default_factory=dict)
    server_version: str | None = None
    source: str = "none"


def offline_state(stack: StackConfig, environ: Mapping[str, str]) -> ClusterState:
    path = environ.get(NODES_ENV)
    if not path:
        return ClusterState(source="offline: a first install")
    try:
        listing = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PreflightError([f"{NODES_ENV}: cannot read {path} as `kubectl get nodes -o json` ({error})"]) from None
    if not isinstance(listing, dict) or not isinstance(listing.get("items"), list):
        raise PreflightError([f"{NODES_ENV}: {path} is not a `kubectl get nodes -o json` answer (no `items` list)"])
    return ClusterState(nodes_by_domain(stack, listing), environ.get(SERVER_VERSION_ENV), f"offline: {path}")


def read_cluster_state(stack: StackConfig, kubectl: str, *, offline: bool) -> ClusterState:
    """Ask the cluster (read-only kubectl at preview). Raises PreflightError when it cannot be read."""
    if offline:
        return offline_state(stack, os.environ)
    if not stack.preflight.cluster_check:
        return ClusterState(source="skipped: gpu-pool:preflight.clusterCheck is false, no wave is planned")

    nodes = run_quietly(f"{kubectl} get nodes -o json 2>&1; echo kubectl-exit=$?").stdout
    text, _, code = nodes.rpartition("kubectl-exit=")
    if code.strip() != "0":
        said = text.strip()[-300:] or "no output"
        raise PreflightError(
            [
                f"gpu-pool:kubernetes: kubectl could not list the cluster's nodes ({said}) "
                "to plan the day-2 wave; check gpu-pool:kubernetes.kubeconfig and context, or set "
                "gpu-pool:preflight.clusterCheck to false (then changes roll to all domains at once)"
            ]
        )
    version = run_quietly(f"{kubectl} version -o json 2>/dev/null || true").stdout
    try:
        server = (json.loads(version).get("serverVersion") or {}).get("gitVersion")
    except ValueError:
        server = None
    return ClusterState(nodes_by_domain(stack, json.loads(text)), server, "the cluster")
