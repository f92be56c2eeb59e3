"""The labels and taint that mark a GPU worker, and the kubectl commands that reconcile the taint."""

from __future__ import annotations

import shlex

from config.failure_domain import FailureDomainConfig

GPU_POOL_LABEL = ("nodepool", "gpu")
ZONE_LABEL = "topology.kubernetes.io/zone"
# The device plugin reads its time-slicing profile from this label (DESIGN.md section 3).
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NoSchedule"


def node_labels(domain: FailureDomainConfig) -> dict[str, str]:
    """Labels that let GPU workloads find the node and let the device plugin pick the domain's profile."""
    return {
        GPU_POOL_LABEL[0]: GPU_POOL_LABEL[1],
        ZONE_LABEL: domain.name,
        DEVICE_PLUGIN_CONFIG_LABEL: domain.sharing,
    }


def gpu_taint() -> str:
    """`key=value:effect`, the form RKE2's `node-taint` and `kubectl taint` both take."""
    return f"{GPU_TAINT_KEY}={GPU_TAINT_VALUE}:{GPU_TAINT_EFFECT}"


def kubectl_prefix(kubeconfig: str | None, context: str | None) -> str:
    parts = ["kubectl"]
    if kubeconfig:
        parts += ["--kubeconfig", kubeconfig]
    if context:
        parts += ["--context", context]
    return shlex.join(parts)


def taint_command(node: str, kubectl: str) -> str:
    # `kubectl taint --overwrite` merges one taint by key. Server-side apply of spec.taints would
    # replace the whole atomic list and wipe taints other controllers own (cordon, unreachable).
    return f"{kubectl} taint node {shlex.quote(node)} {shlex.quote(gpu_taint())} --overwrite"


def untaint_command(node: str, kubectl: str) -> str:
    # The node may already be gone when its domain is destroyed: removing its taint is then moot.
    return f"{kubectl} taint node {shlex.quote(node)} {shlex.quote(GPU_TAINT_KEY + '-')} || true"


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
