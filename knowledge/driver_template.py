"""What renders into the GPU Operator's driver DaemonSet's pod template, through both of its layers, and the upstream
files that say so (FIELD-REVIEW-6 WRONG-1).

Layer 1, the chart: templates/clusterpolicy.yaml turns the release's values into the ClusterPolicy. `driver.*`
becomes `spec.driver` (its `manager`, `rdma`, `env`, `repoConfig`, `certConfig`, `secretEnv`, `hostNetwork`, ...);
`daemonsets.*` becomes `spec.daemonsets`, whose `labels` are `gpu-operator.operand-labels` (templates/_helpers.tpl:
the `helm.sh/chart` label, so every chart version, plus `daemonsets.labels`); `hostPaths`, `gds`, `gdrcopy` become
their sections. The chart's version also moves the defaults it renders (v26.3.2 -> v26.7.0: `driver.manager.version`
v0.11.0 -> v0.12.0) and the operator image, whose assets and transforms are layer 2.

Layer 2, the operator: controllers/object_controls.go `preProcessDaemonSet` applies `applyCommonDaemonsetConfig`
(daemonsets.updateStrategy, priorityClassName, tolerations, podSecurityContext), `transformForHostRoot` and
`transformForDriverInstallDir` (hostPaths), then `TransformDriver` (the driver manager init container with
driver.manager and driver.rdma; the driver container with driver's image, resources, args, kernelModuleType, probes,
env, repoConfig, certConfig, kernelModuleConfig, secretEnv, licensingConfig, virtualTopology; the peermem, GDS and
GDRCopy sidecars; usePrecompiled; hostNetwork), then `applyCommonDaemonsetMetadata` (daemonsets.labels and
annotations) on assets/state-driver/0500_daemonset.yaml. ConfigMaps (repoConfig, certConfig) are mounted per key with
subPath (`createConfigMapVolumeMounts`), so a change of their content never reaches a running driver pod by itself.

`driver.upgradePolicy` is in the ClusterPolicy but not in the template: the upgrade controller reads it
(controllers/upgrade_controller.go), TransformDriver does not.

When one of the files below changes (a new chart or operator pinned, refdata re-fetched), the contract test
tests/contract/test_driver_template_contract.py fails naming it: re-read it, update the sections here if what
renders into the driver's pod template moved, then the pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# The chart's values sections that reach the driver DaemonSet's pod template (layer 1 into layer 2, above).
DRIVER_TEMPLATE_SECTIONS: Final[tuple[str, ...]] = ("driver", "daemonsets", "hostPaths", "gds", "gdrcopy")
# Keys of those sections the template does not carry: the upgrade controller's own policy.
NOT_IN_TEMPLATE: Final[Mapping[str, str]] = {
    "driver.upgradePolicy": "read by the operator's upgrade controller (controllers/upgrade_controller.go), "
    "not rendered by TransformDriver",
}
# Sections TransformDriver reads only when they are enabled (transformPeerMemoryContainer, transformGDSContainer,
# transformGDRCopyContainer and the driver manager's GPUDirectRDMA env return early otherwise): disabled, their other
# keys render nothing into the template. A digest that moved with them would plan a turn whose operator never
# replaces the driver pod, and the turn's gate waits for exactly that (node/gate.py).
ONLY_WHEN_ENABLED: Final[tuple[str, ...]] = ("gds", "gdrcopy", "driver.rdma")
# The operator's own image (values `operator.repository/image/version`): its assets and TransformDriver are layer 2.
OPERATOR_IMAGE_KEYS: Final[tuple[str, ...]] = ("repository", "image", "version")

# The driver container's variable carrying the content digest of the ConfigMaps it mounts (apt sources, lab CA): the
# operator mounts them with subPath, which never sees an edit, and the driver's spec has no annotations of its own.
DRIVER_MOUNTS_ENV: Final = "GPU_POOL_DRIVER_MOUNTS_SHA256"

# sha256 of each upstream file read for the above, by its path under the upstream reference data (refdata/).
DRIVER_TEMPLATE_SOURCES: Final[Mapping[str, str]] = {
    "gpu-operator/v26.3.2/chart/templates/clusterpolicy.yaml": (
        "5cfce4aced6fb9a5593f709531f706b024f95e73c048bdcb47d371248301875c"
    ),
    "gpu-operator/v26.7.0/chart/templates/clusterpolicy.yaml": (
        "c03280944972f10438c8971d56ba9dfd0af515713a3c00db861f4ef8db40b9f7"
    ),
    "gpu-operator/v26.3.2/chart/templates/_helpers.tpl": (
        "825d60c377899db5240a803b622aa322753a146c9071e76eba9cbbacfe12588a"
    ),
    "gpu-operator/v26.7.0/chart/templates/_helpers.tpl": (
        "4b3cdd6156369e0e5d8727544e1a8177cf4904260d57d0c6bd70f91331d066de"
    ),
    # TransformDriver and every transform it and preProcessDaemonSet call live in this one file.
    "gpu-operator-src/v26.7.0/controllers/object_controls.go": (
        "341e7e0d465ffcef9e787050ff8ca2238445876d694b85c99a594f0f27646007"
    ),
    "gpu-operator-src/v26.7.0/assets/state-driver/0500_daemonset.yaml": (
        "ffe621cc003b0c0f6954ef9e6f726f7453acc2d5eb5d4496e72d4a75cede3d18"
    ),
}
