"""What the cluster says the GPU workers run, read at preview: the Nodes' rollout state and kubelet versions,
and the servers' version. Offline (`make diff`), the earlier stack file stands in for the cluster."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.gpu_failure_domain.rollout import ROLLOUT_ANNOTATION, DeployedNode, WavePlan
from components.shared.local_run import run_quietly
from components.shared.preflight import PreflightError
from config.stack import StackConfig
from knowledge.kubernetes import KUBELET_MAX_MINORS_PER_UPGRADE

# Offline only: JSON {domain: {"rollout": {...}, "kubeletVersion": "..."}}, what `make diff` derives from the
# earlier stack file. Unset: a first install (no Node exists yet).
DEPLOYED_ENV = "GPU_POOL_DEPLOYED"
SERVER_VERSION_ENV = "GPU_POOL_SERVER_VERSION"
_MINOR = re.compile(r"^v?(\d+)\.(\d+)")


@dataclass
class ClusterState:
    nodes: dict[str, DeployedNode | None] = field(default_factory=dict)
    server_version: str | None = None
    source: str = "none"


def _minor(version: str) -> tuple[int, int] | None:
    match = _MINOR.match(version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def nodes_by_domain(stack: StackConfig, node_list: Mapping[str, Any]) -> dict[str, DeployedNode | None]:
    """`kubectl get nodes -o json` -> each domain's Node (None where it is not registered yet)."""
    items = {str((item.get("metadata") or {}).get("name")): item for item in node_list.get("items") or []}
    found: dict[str, DeployedNode | None] = {}
    for domain in stack.failure_domains:
        item = items.get(domain.hostname)
        if item is None:
            found[domain.name] = None
            continue
        raw = ((item.get("metadata") or {}).get("annotations") or {}).get(ROLLOUT_ANNOTATION)
        try:
            rollout = json.loads(raw) if raw else None
        except ValueError:
            rollout = None
        kubelet = ((item.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
        found[domain.name] = DeployedNode(rollout if isinstance(rollout, dict) else None, kubelet)
    return found


def offline_state(environ: Mapping[str, str]) -> ClusterState:
    raw = environ.get(DEPLOYED_ENV)
    if not raw:
        return ClusterState(source="offline: a first install")
    parsed = json.loads(raw)
    nodes: dict[str, DeployedNode | None] = {
        name: DeployedNode(entry.get("rollout"), entry.get("kubeletVersion")) if entry else None
        for name, entry in parsed.items()
    }
    return ClusterState(nodes, environ.get(SERVER_VERSION_ENV), "offline: the earlier stack file")


def read_cluster_state(stack: StackConfig, kubectl: str, *, offline: bool) -> ClusterState:
    """Ask the cluster (read-only kubectl at preview). Raises PreflightError when it cannot be read."""
    if offline:
        return offline_state(os.environ)
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


def rke2_problems(stack: StackConfig, state: ClusterState, plan: WavePlan) -> list[str]:
    """The version-skew refusals (knowledge/kubernetes.py): a worker newer than the servers, or a jump of more
    than one minor, and an upgrade that cannot log in to its VM."""
    pin = stack.rke2.version
    target = _minor(pin)
    problems: list[str] = []
    server = _minor(state.server_version or "")
    if target and server and target > server:
        problems.append(
            f"gpu-pool:rke2.version: {pin} is newer than the cluster's servers ({state.server_version}); a kubelet "
            "must not be newer than kube-apiserver (Kubernetes version-skew policy): upgrade the servers first, "
            "then the workers"
        )
    jumps: dict[str, list[str]] = {}
    downgrades: dict[str, list[str]] = {}
    for domain in stack.failure_domains:
        node = state.nodes.get(domain.name)
        running = (node.kubelet_version or (node.rollout or {}).get("rke2")) if node else None
        now = _minor(running or "")
        if target is None or now is None or running is None:
            continue
        if target[0] != now[0] or target[1] - now[1] > KUBELET_MAX_MINORS_PER_UPGRADE:
            jumps.setdefault(running, []).append(domain.name)
        elif target < now:
            downgrades.setdefault(running, []).append(domain.name)
    # One message per finding, naming every domain it concerns.
    for running, names in jumps.items():
        now = _minor(running)
        assert now is not None
        problems.append(
            f"gpu-pool:rke2.version: {pin} is more than one minor from {running}, which domain"
            f"{'s' if len(names) > 1 else ''} {', '.join(names)} run{'' if len(names) > 1 else 's'}; RKE2 upgrades "
            f"one minor at a time: pin the latest v{now[0]}.{now[1] + 1} release first, `pulumi up`, then the next"
        )
    for running, names in downgrades.items():
        problems.append(
            f"gpu-pool:rke2.version: {pin} is older than {running}, which domain{'s' if len(names) > 1 else ''} "
            f"{', '.join(names)} run{'' if len(names) > 1 else 's'}; RKE2 does not downgrade a node in place: pin "
            "the version they run (or newer)"
        )
    no_key = [
        d.name for d in stack.failure_domains if "rke2" in plan.changes.get(d.name, []) and not d.ssh_authorized_keys
    ]
    if no_key:
        problems.append(
            f"gpu-pool:failureDomains[{no_key[0]}].sshAuthorizedKeys: the RKE2 upgrade to {pin} runs the installer "
            f"on the VM over SSH, but domain{'s' if len(no_key) > 1 else ''} {', '.join(no_key)} "
            f"ha{'ve' if len(no_key) > 1 else 's'} no key: a VM only trusts the keys it was created with, so "
            "upgrade those workers by hand (INSTALL_RKE2_VERSION, then restart rke2-agent) or recreate them"
        )
    return problems
