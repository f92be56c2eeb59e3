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
# The node a DCGM series comes from: `Hostname` up to dcgm-exporter 4.5.3-4.8.2 (the GPU Operator v26.3.2's), then
# `hostname` (NVIDIA/dcgm-exporter#655, commit d5e5f510 of 2026-05-12 on main after that tag: "Rename Hostname label
# to hostname", in internal/pkg/rendermetrics/render_metrics.go). Which release first ships it is not in the public
# snapshot (the newest tag there is 4.5.3-4.8.2; the GPU Operator v26.7.0 runs 4.6.0-4.8.3), so every query reads
# either: dcgm_node() copies `hostname` into `Hostname` where the exporter wrote the new name.
DCGM_NODE_LABEL: Final = "Hostname"
DCGM_NODE_LABEL_RENAMED: Final = "hostname"


def dcgm_node(expr: str) -> str:
    """`expr` (an instant vector of DCGM series) with its node in `Hostname`, whichever name the exporter used."""
    return f'label_replace({expr}, "{DCGM_NODE_LABEL}", "$1", "{DCGM_NODE_LABEL_RENAMED}", "(.+)")'


def dcgm_on_nodes(metric: str, node_regex: str) -> str:
    """A DCGM metric on the nodes `node_regex` matches, under either node label name, normalised by dcgm_node()."""
    either = f'{metric}{{{DCGM_NODE_LABEL}=~"{node_regex}"}} or {metric}{{{DCGM_NODE_LABEL_RENAMED}=~"{node_regex}"}}'
    return dcgm_node(f"({either})")
