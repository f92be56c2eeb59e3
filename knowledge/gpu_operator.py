"""Names the NVIDIA GPU Operator and its operands read or set on nodes and pods (v26.3.2)."""

from __future__ import annotations

from typing import Final

# The extended resource the device plugin advertises (time-slicing keeps the name: renameByDefault false).
GPU_RESOURCE: Final = "nvidia.com/gpu"
# The device plugin reads a node's time-slicing profile from this label (the operator's NODE_LABEL).
DEVICE_PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
# GPU Feature Discovery's count of the physical GPUs on a node (NVIDIA/k8s-device-plugin README.md, "Generated
# Labels": `nvidia.com/gpu.count | Integer | Number of GPUs`); the operator deploys GFD on every GPU node.
GPU_COUNT_LABEL: Final = "nvidia.com/gpu.count"
# GFD's sharing labels for nvidia.com/gpu, written under the node's time-slicing profile (k8s-device-plugin v0.19.3
# internal/lm/resource.go baseLabeler; recorded on an H200 in tests/fixtures/deviceplugin/h200/gfd): the replicas per
# card, the strategy (none unless replicas > 1), and the product with SHARED_PRODUCT_SUFFIX appended while the card
# is shared under the plain name (not renamed).
GPU_REPLICAS_LABEL: Final = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL: Final = "nvidia.com/gpu.sharing-strategy"
GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
SHARED_PRODUCT_SUFFIX: Final = "-SHARED"
# The pods of the driver DaemonSet (assets/state-driver/0500_daemonset.yaml).
DRIVER_POD_SELECTOR: Final = "app=nvidia-driver-daemonset"
# The operator mounts the DCGM metrics ConfigMap and reads exactly this key.
DCGM_METRICS_KEY: Final = "dcgm-metrics.csv"

# --- Operand pods (day-2 tool) ---------------------------------------------------------------------
# Each operand DaemonSet's pod template carries `app: <name>`; the operator selects its own pods by it.
# Checked in gpu-operator v26.3.2 assets/ (the DaemonSet name is the same string):
OPERAND_APP_LABEL: Final = "app"
# assets/state-driver/0500_daemonset.yaml (pods also carry app.kubernetes.io/component=nvidia-driver);
# init container k8s-driver-manager, container nvidia-driver-ctr.
DRIVER_APP: Final = "nvidia-driver-daemonset"
DRIVER_CONTAINER: Final = "nvidia-driver-ctr"
DRIVER_MANAGER_INIT_CONTAINER: Final = "k8s-driver-manager"
# assets/state-container-toolkit/0500_daemonset.yaml: init driver-validation, container nvidia-container-toolkit-ctr.
TOOLKIT_APP: Final = "nvidia-container-toolkit-daemonset"
TOOLKIT_CONTAINER: Final = "nvidia-container-toolkit-ctr"
# assets/state-device-plugin/0500_daemonset.yaml: init toolkit-validation and config-manager-init,
# containers nvidia-device-plugin and config-manager.
DEVICE_PLUGIN_APP: Final = "nvidia-device-plugin-daemonset"
DEVICE_PLUGIN_CONTAINER: Final = "nvidia-device-plugin"
# Watches the node's nvidia.com/device-plugin.config label and switches the plugin to that profile.
CONFIG_MANAGER_CONTAINER: Final = "config-manager"
# assets/state-dcgm-exporter/0800_daemonset.yaml: init toolkit-validation, container nvidia-dcgm-exporter.
DCGM_EXPORTER_APP: Final = "nvidia-dcgm-exporter"
DCGM_EXPORTER_CONTAINER: Final = "nvidia-dcgm-exporter"
# assets/gpu-feature-discovery/0500_daemonset.yaml: init toolkit-validation and config-manager-init.
GPU_FEATURE_DISCOVERY_APP: Final = "gpu-feature-discovery"
# assets/state-operator-validation/0500_daemonset.yaml: init driver-, toolkit-, cuda- and plugin-validation.
OPERATOR_VALIDATOR_APP: Final = "nvidia-operator-validator"
OPERATOR_VALIDATOR_CONTAINER: Final = "nvidia-operator-validator"
# Only the validator's toolkit-validation writes /run/nvidia/validations/toolkit-ready, after running nvidia-smi
# in a container that needs the runtime and CDI injection (cmd/nvidia-validator/main.go:1132-1158 at v26.3.2);
# the device plugin, DCGM exporter and GFD init containers wait for that file. The toolkit container itself has
# no probe, so it is Ready while containerd never loads the runtime or the CDI spec.
VALIDATOR_INIT_CONTAINERS: Final = ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
# The driver version is only in the driver container's image tag: nvcr.io/nvidia/driver:<version>-<os>,
# e.g. 570.211.01-ubuntu24.04.
DRIVER_IMAGE_NAME: Final = "driver"
# Set by the operator's upgrade controller on each GPU node (values include upgrade-done, upgrade-failed).
DRIVER_UPGRADE_STATE_LABEL: Final = "nvidia.com/gpu-driver-upgrade-state"
DRIVER_UPGRADE_FAILED: Final = "upgrade-failed"
DRIVER_UPGRADE_DONE: Final = "upgrade-done"
# The upgrade controller's mark on a node that was unschedulable when its upgrade began: it then leaves the node
# cordoned when the upgrade is done instead of uncordoning it (k8s-operator-libs pkg/upgrade/consts.go
# UpgradeInitialStateAnnotationKeyFmt with the driver name "gpu" cmd/gpu-operator sets; common_manager.go
# updateNodeToUncordonOrDoneState). A wave's drain sets it so that only the turn's last step, after the gate and
# smoke test, uncordons a node the operator upgraded.
DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
# A node labelled so (value "true") is left alone by the upgrade controller (k8s-operator-libs pkg/upgrade/consts.go
# UpgradeSkipNodeLabelKeyFmt with driver name "gpu"; upgrade_inplace.go SkipNodeUpgrade).
DRIVER_UPGRADE_SKIP_LABEL: Final = "nvidia.com/gpu-driver-upgrade.skip"
# NFD labels a node with an NVIDIA (PCI vendor 10de) device; every operand is scheduled only where it is.
NFD_NVIDIA_PCI_LABEL: Final = "feature.node.kubernetes.io/pci-10de.present"

# --- dcgm-exporter per-pod series (4.5.3-4.8.2, what v26.3.2 ships) --------------------------------
# With the kubelet pod-resources socket mounted, a GPU held by a pod gets these labels; `Hostname` is the
# node name, `gpu` and `UUID` the card. Behind the operator's ServiceMonitor (honorLabels false) Prometheus
# keeps the target's own pod/namespace and renames the exporter's to exported_pod/exported_namespace.
# On a time-sliced card only one of the pods sharing it is named per series (KUBERNETES_VIRTUAL_GPUS=false,
# the default).
DCGM_POD_LABEL: Final = "pod"
DCGM_NAMESPACE_LABEL: Final = "namespace"
DCGM_EXPORTED_POD_LABEL: Final = "exported_pod"
DCGM_EXPORTED_NAMESPACE_LABEL: Final = "exported_namespace"
DCGM_HOSTNAME_LABEL: Final = "Hostname"

# Node labels others write, which a stack's own GPU node label must not be: the operator's (nvidia.com/gpu.present,
# nvidia.com/gpu.deploy.*, nvidia.com/gpu.workload.config, nvidia.com/mig.config: gpu-operator v26.7.0
# controllers/state_manager.go and object_controls.go), GPU Feature Discovery's (nvidia.com/gpu.*, cuda.*, mig.*,
# vgpu.*, gfd.timestamp: NVIDIA/k8s-device-plugin README, "Generated Labels"), the device plugin's profile label,
# and NFD's feature.node.kubernetes.io/*. Whichever writes last wins, and the steering selector misses the node.
MANAGED_LABEL_PREFIXES: Final = (
    "nvidia.com/gpu.",
    "nvidia.com/gpu-",
    "nvidia.com/cuda.",
    "nvidia.com/mig.",
    "nvidia.com/vgpu.",
    "nvidia.com/gfd.",
    DEVICE_PLUGIN_CONFIG_LABEL,
    "feature.node.kubernetes.io/",
)
