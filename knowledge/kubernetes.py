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

# What a kubelet may set on its own Node (`--node-labels`, which RKE2's `node-label:` becomes). Outside the
# kubernetes.io and k8s.io namespaces anything goes; inside them only these keys and the two namespaces below,
# else the kubelet refuses to start: "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels"
# (kubernetes v1.33.5 cmd/kubelet/app/options/options.go ValidateKubeletFlags, isKubernetesLabel; k8s.io/kubelet
# v0.33.5 pkg/apis/well_known_labels.go IsKubeletLabel; k8s.io/api v0.33.5 core/v1/well_known_labels.go).
KUBELET_SELF_LABELS: Final = frozenset(
    {
        HOSTNAME_LABEL,
        ZONE_LABEL,
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
KUBELET_SELF_LABEL_NAMESPACES: Final = ("kubelet.kubernetes.io", "node.kubernetes.io")
RESERVED_LABEL_NAMESPACES: Final = ("kubernetes.io", "k8s.io")
# apimachinery validation.IsValidLabelValue: at most 63 characters (LabelValueMaxLength).
LABEL_VALUE_MAX_LENGTH: Final = 63


def _in_namespace(key: str, namespaces: tuple[str, ...]) -> bool:
    prefix, slash, _ = key.partition("/")
    return bool(slash) and any(prefix == ns or prefix.endswith("." + ns) for ns in namespaces)


def kubelet_may_self_label(key: str) -> bool:
    """Whether a kubelet accepts `key` in its own --node-labels (the kubelet's own rule, restated)."""
    if not _in_namespace(key, RESERVED_LABEL_NAMESPACES):
        return True
    return key in KUBELET_SELF_LABELS or _in_namespace(key, KUBELET_SELF_LABEL_NAMESPACES)
