"""The labels and taint that mark a GPU worker, and the kubectl commands that wait for and taint its node."""

from __future__ import annotations

import shlex

from components.shared.node_marking import ARTICLE_MARKING, GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from knowledge.gpu_operator import DEVICE_PLUGIN_CONFIG_LABEL
from knowledge.kubernetes import ZONE_LABEL


def node_labels(domain: FailureDomainConfig, marking: GpuNodeMarking = ARTICLE_MARKING) -> dict[str, str]:
    """Labels that let GPU workloads find the node and let the device plugin pick the domain's profile."""
    return {
        marking.label_key: marking.label_value,
        ZONE_LABEL: domain.name,
        DEVICE_PLUGIN_CONFIG_LABEL: domain.sharing,
    }


def kubectl_prefix(kubeconfig: str | None, context: str | None) -> str:
    parts = ["kubectl"]
    if kubeconfig:
        parts += ["--kubeconfig", kubeconfig]
    if context:
        parts += ["--context", context]
    return shlex.join(parts)


def taint_command(node: str, kubectl: str, marking: GpuNodeMarking = ARTICLE_MARKING) -> str:
    # `kubectl taint --overwrite` merges one taint by key. Server-side apply of spec.taints would
    # replace the whole atomic list and wipe taints other controllers own (cordon, unreachable).
    return f"{kubectl} taint node {shlex.quote(node)} {shlex.quote(marking.taint)} --overwrite"


def untaint_command(node: str, kubectl: str, marking: GpuNodeMarking = ARTICLE_MARKING) -> str:
    # The node may already be gone when its domain is destroyed: removing its taint is then moot.
    return f"{kubectl} taint node {shlex.quote(node)} {shlex.quote(marking.taint_key + '-')} || true"


def node_ready_command(node: str, kubectl: str, timeout_minutes: int = 30) -> str:
    """Wait for the node to register, then to be Ready. `kubectl wait` alone fails at once on a missing node."""
    seconds = timeout_minutes * 60
    quoted = shlex.quote(node)
    return (
        f"deadline=$(( $(date +%s) + {seconds} )); "
        f"until {kubectl} get node {quoted} >/dev/null 2>&1; do "
        f'if [ "$(date +%s)" -ge "$deadline" ]; then echo "node {node} did not register with RKE2 within '
        f'{timeout_minutes} minutes: check cloud-init on the VM (journalctl -u rke2-agent)" >&2; exit 1; fi; '
        f"sleep 10; done; "
        f"{kubectl} wait --for=condition=Ready node/{quoted} --timeout={seconds}s"
    )
