"""The gpu-operator Helm chart (v26.3.2, v26.7.0): its name, values sections, keys it ignores, defaults we keep."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

CHART_NAME: Final = "gpu-operator"

# Top-level keys of the gpu-operator v26.3.2 chart's values.yaml, plus those v26.7.0 added (below); the contract
# test checks both lists against both charts. `extraValues` may only touch the sections of the pinned chart.
KNOWN_CHART_SECTIONS: Final[tuple[str, ...]] = (
    "platform",
    "nfd",
    "psa",
    "cdi",
    "sandboxWorkloads",
    "hostPaths",
    "daemonsets",
    "validator",
    "operator",
    "mig",
    "driver",
    "toolkit",
    "devicePlugin",
    "dcgm",
    "dcgmExporter",
    "gfd",
    "migManager",
    "nodeStatusExporter",
    "gds",
    "gdrcopy",
    "vgpuManager",
    "vgpuDeviceManager",
    "vfioManager",
    "kataManager",
    "sandboxDevicePlugin",
    "kataSandboxDevicePlugin",
    "ccManager",
    "extraObjects",
    "node-feature-discovery",
    "clusterPolicy",
    "gpuCluster",
    "draDriver",
)

# Sections a chart line introduced (v26.7.0 values.yaml: `clusterPolicy`, and the DRA driver's `gpuCluster` and
# `draDriver`, templates/gpucluster.yaml): setting one on an older chart is a value nothing reads.
SECTIONS_SINCE: Final[Mapping[str, str]] = {
    "clusterPolicy": "v26.7.0",
    "gpuCluster": "v26.7.0",
    "draDriver": "v26.7.0",
}

# Keys the chart no longer reads (or never read where people put them): setting them changes
# nothing, so a value there is a mistake that looks like a fix.
DEAD_KEYS: Final[Mapping[str, str]] = {
    "operator.defaultRuntime": (
        "the operator no longer reads it (the ClusterPolicy CRD marks it deprecated: the container "
        "runtime is detected at run time); point the toolkit at RKE2's containerd with gpuOperator.toolkit"
    ),
    "psp": (
        "PodSecurityPolicy is gone from Kubernetes and the chart no longer reads psp; "
        "Pod Security is set on the gpu-operator namespace"
    ),
    "driver.useOpenKernelModules": "it is deprecated and ignored; use gpuOperator.kernelModuleType",
    "nfd.master": (
        "the NFD subchart reads its settings from node-feature-discovery.master; nfd.master is silently ignored"
    ),
    "nfd.worker": (
        "the NFD subchart reads its settings from node-feature-discovery.worker; nfd.worker is silently ignored"
    ),
}


# Keys the chart's templates consume although values.yaml does not declare them. Each one must be
# absent from the pinned values.yaml and present in the ClusterPolicy CRD (the contract test checks).
TEMPLATE_ONLY_KEYS: Final[Mapping[str, str]] = {
    # values.yaml only shows `dcgmExporter.config` as a comment; the chart copies the block into
    # ClusterPolicy spec.dcgmExporter.config, whose `name` is the custom-metrics ConfigMap.
    "dcgmExporter.config.name": "commented out in values.yaml; ClusterPolicy spec.dcgmExporter.config.name",
}

CONTROL_PLANE_TOLERATION: Final[Mapping[str, str]] = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Equal",
    "value": "",
    "effect": "NoSchedule",
}
GPU_TAINT_TOLERATION: Final[Mapping[str, str]] = {
    "key": "nvidia.com/gpu",
    "operator": "Exists",
    "effect": "NoSchedule",
}
# The chart's own defaults for the two toleration lists we set (v26.3.2 values.yaml
# `daemonsets.tolerations`, NFD subchart values.yaml `master.tolerations`). Helm replaces lists
# instead of merging them, so setting either list without these would silently drop them.
DAEMONSETS_DEFAULT_TOLERATIONS: Final[tuple[Mapping[str, str], ...]] = (GPU_TAINT_TOLERATION,)
NFD_MASTER_DEFAULT_TOLERATIONS: Final[tuple[Mapping[str, str], ...]] = (CONTROL_PLANE_TOLERATION,)
# The parent chart's own `node-feature-discovery.worker.tolerations` (v26.3.2 and v26.7.0 values.yaml): NFD's
# worker labels each node (feature.node.kubernetes.io/pci-10de.present), and every operand is scheduled only where
# that label is; a worker that does not tolerate the GPU nodes' taint labels nothing, so nothing else runs there.
NFD_WORKER_DEFAULT_TOLERATIONS: Final[tuple[Mapping[str, str], ...]] = (CONTROL_PLANE_TOLERATION, GPU_TAINT_TOLERATION)

# The operator's own Deployment in the chart (templates/operator.yaml) and the label on its pods: what the
# platform waits for after the release (the contract test reads both from the pinned chart).
OPERATOR_DEPLOYMENT: Final = "gpu-operator"
OPERATOR_POD_SELECTOR: Final = "app=gpu-operator"
