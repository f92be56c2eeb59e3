"""Well-known Kubernetes label names and Pod Security levels the stack relies on."""

from __future__ import annotations

from typing import Final

ZONE_LABEL: Final = "topology.kubernetes.io/zone"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
# A cordoned node carries this taint (NodeUnschedulable).
UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"
POD_SECURITY_MODES: Final = ("enforce", "audit", "warn")


def pod_security_labels(level: str) -> dict[str, str]:
    """Namespace labels that enforce, audit and warn at one Pod Security Standard level."""
    return {f"pod-security.kubernetes.io/{mode}": level for mode in POD_SECURITY_MODES}


# Version skew between an RKE2 agent's kubelet and the servers' kube-apiserver
# (https://kubernetes.io/releases/version-skew-policy/#kubelet): "kubelet must not be newer than kube-apiserver",
# compared by minor version. RKE2 upgrades go one minor at a time and servers first
# (https://docs.rke2.io/upgrades/manual: "Upgrade the server nodes first, one at a time... Ensure that your plan
# does not skip intermediate minor versions when upgrading").
KUBELET_MAX_MINORS_PER_UPGRADE: Final = 1
