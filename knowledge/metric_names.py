"""Metric and label names of the exporters the GPU alerts and dashboard read.

dcgm-exporter field names are checked against `../shared/upstream/dcgm/dcgm-field-names.txt`,
kube-state-metrics names against `../shared/upstream/kube-state-metrics/metric-names.txt` (contract tests).
"""

from __future__ import annotations

from typing import Final

DCGM_GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"
DCGM_MEM_COPY_UTIL: Final = "DCGM_FI_DEV_MEM_COPY_UTIL"
DCGM_FB_USED: Final = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE: Final = "DCGM_FI_DEV_FB_FREE"
DCGM_GPU_TEMP: Final = "DCGM_FI_DEV_GPU_TEMP"
DCGM_POWER_USAGE: Final = "DCGM_FI_DEV_POWER_USAGE"
DCGM_POWER_LIMIT: Final = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"
DCGM_XID_ERRORS: Final = "DCGM_FI_DEV_XID_ERRORS"

KSM_NODE_ALLOCATABLE: Final = "kube_node_status_allocatable"
KSM_POD_REQUESTS: Final = "kube_pod_container_resource_requests"
KSM_POD_PHASE: Final = "kube_pod_status_phase"
KSM_POD_START_TIME: Final = "kube_pod_start_time"
# Every Node condition, custom ones included (labels node, condition, status=true|false|unknown).
KSM_NODE_CONDITION: Final = "kube_node_status_condition"
KSM_NODE_UNSCHEDULABLE: Final = "kube_node_spec_unschedulable"
KSM_CRONJOB_LAST_SUCCESS: Final = "kube_cronjob_status_last_successful_time"

PROMETHEUS_UP: Final = "up"

# kube-state-metrics turns the extended resource `nvidia.com/gpu` into this label value.
KSM_GPU_RESOURCE: Final = 'resource="nvidia_com_gpu"'
# The labels that identify one physical GPU in dcgm-exporter output.
GPU_IDENTITY: Final = "Hostname, gpu, UUID"
