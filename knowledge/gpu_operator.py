"""Names the NVIDIA GPU Operator and its operands read or set on nodes and pods (v26.3.2)."""

from __future__ import annotations

from typing import Final

# The extended resource the device plugin advertises (time-slicing keeps the name: renameByDefault false).
GPU_RESOURCE: Final = "nvidia.com/gpu"
# The device plugin reads a node's time-slicing profile from this label (the operator's NODE_LABEL).
DEVICE_PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
# The pods of the driver DaemonSet (assets/state-driver/0500_daemonset.yaml).
DRIVER_POD_SELECTOR: Final = "app=nvidia-driver-daemonset"
# The operator mounts the DCGM metrics ConfigMap and reads exactly this key.
DCGM_METRICS_KEY: Final = "dcgm-metrics.csv"
