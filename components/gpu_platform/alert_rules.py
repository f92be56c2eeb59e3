"""GPU alert rules (a prometheus-operator `PrometheusRule`) and the one list of metric names they and the
dashboard use.

Label facts the expressions rely on (checked against NVIDIA's sources):
- dcgm-exporter labels every series with the GPU's identity: `gpu`, `UUID`, `device`, `modelName`,
  `pci_bus_id`, and `Hostname`, which is the `NODE_NAME` env var when set (internal/pkg/hostname). The
  operator's exporter DaemonSet sets `NODE_NAME` from `spec.nodeName`, so `Hostname` equals the
  kube-state-metrics `node` label and the two sources join on it.
- The XID field (knowledge.metric_names.DCGM_XID_ERRORS) carries `err_code` (= the value) and `err_msg` labels
  and is sticky: it keeps the last XID code until the exporter restarts (DCGM#277, dcgm-exporter#500).
- Pod mapping: the operator runs the exporter with `DCGM_EXPORTER_KUBERNETES=true` and the kubelet
  pod-resources socket mounted (assets/state-dcgm-exporter/0800_daemonset.yaml; there is no values.yaml
  key for it, `dcgmExporter.enablePodLabels`/`enablePodUID` only add pod labels/UID on top), so a GPU
  held by a pod gets `pod`, `namespace` and `container` labels. They are not used to find who holds a
  card: the chart's ServiceMonitor defaults to `honorLabels: false` (v26.3.2 values.yaml), so Prometheus
  renames them `exported_pod`/`exported_namespace` because the target's own `pod`/`namespace` win; and
  on a time-sliced card the exporter names only one of the pods sharing it. The scheduler's view from
  kube-state-metrics names every holder, Terminating pods included (the article's "replicas=0 isn't proof
  a card came back"). DCGM alerts aggregate `by` the GPU identity so that pods coming and going (which
  changes those labels) neither reset an alert's `for` nor fork it into several alerts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from components.gpu_platform.card_rules import build_card_group
from components.gpu_platform.promql import held_gpus_by_pod, node_regex
from components.gpu_platform.usage_rules import build_usage_group
from components.shared.prometheus_rules import alert, prometheus_rule
from config.monitoring import MonitoringConfig
from config.project import PROJECT
from knowledge.metric_names import (
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DCGM_GPU_TEMP,
    DCGM_GPU_UTIL,
    DCGM_XID_ERRORS,
    GPU_IDENTITY,
    KSM_GPU_RESOURCE,
    KSM_NODE_ALLOCATABLE,
    KSM_POD_START_TIME,
    PROMETHEUS_UP,
    dcgm_series,
)

RULE_NAME = "gpu-pool-gpus"
GROUP_NAME = "gpu-pool.gpus"

# docs/alerts.md sections the runbook links point at: a heading "Alert: GpuXidErrors" gets the GitHub anchor
# "alert-gpuxiderrors".
RUNBOOK_ANCHORS: Mapping[str, str] = MappingProxyType(
    {
        "GpuXidErrors": "alert-gpuxiderrors",
        "GpuTemperatureHigh": "alert-gputemperaturehigh",
        "GpuFramebufferNearlyFull": "alert-gpuframebuffernearlyfull",
        "GpuNodeAllocatableBelowProfile": "alert-gpunodeallocatablebelowprofile",
        "GpuPoolCapacityBelowConfigured": "alert-gpupoolcapacitybelowconfigured",
        "GpuHeldWhileIdle": "alert-gpuheldwhileidle",
        "DcgmExporterDown": "alert-dcgmexporterdown",
    }
)

_NODE_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _alert(cfg: MonitoringConfig, name: str, **fields: Any) -> dict[str, Any]:
    return alert(cfg, name, anchor=RUNBOOK_ANCHORS[name], **fields)


def _xid_errors(cfg: MonitoringConfig) -> dict[str, Any]:
    window = f"{cfg.thresholds.xid_window_minutes}m"
    by = f"max by ({GPU_IDENTITY}, err_code, err_msg)"
    # The gauge is sticky (it keeps the last code until the exporter restarts), so `> 0` would fire
    # forever after one XID. A new code is a new err_code series: fire while it is younger than the
    # window. A repeat of the same code cannot be seen in this gauge at all.
    now, before = dcgm_series(DCGM_XID_ERRORS), dcgm_series(DCGM_XID_ERRORS, offset=window)
    expr = f"{by} ({now}) > 0 unless {by} ({before})"
    return _alert(
        cfg,
        "GpuXidErrors",
        expr=expr,
        for_="0m",
        severity="warning",
        summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $labels.err_code }}",
        description=(
            "The driver reported XID {{ $labels.err_code }} ({{ $labels.err_msg }}) on GPU {{ $labels.gpu }} "
            "({{ $labels.UUID }}) of node {{ $labels.Hostname }}. Some XIDs are application faults (13, 31, "
            "43), others mean the card or its PCIe passthrough is failing (48, 63, 64, 74, 79, 92, 94, 95). "
            "Check the driver pod's log and dmesg on the node."
        ),
    )


def _temperature(cfg: MonitoringConfig) -> dict[str, Any]:
    limit = cfg.thresholds.gpu_temperature_celsius
    return _alert(
        cfg,
        "GpuTemperatureHigh",
        expr=f"max by ({GPU_IDENTITY}) ({dcgm_series(DCGM_GPU_TEMP)}) > {limit}",
        for_="5m",
        severity="warning",
        summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is at {{ $value }} °C",
        description=(
            f"GPU {{{{ $labels.gpu }}}} on node {{{{ $labels.Hostname }}}} has been above {limit} °C for 5 minutes "
            "and will throttle its clocks. The card is cooled by its host's airflow: check the host's fans and "
            "intake."
        ),
    )


def _framebuffer(cfg: MonitoringConfig) -> dict[str, Any]:
    ratio = cfg.thresholds.framebuffer_used_ratio
    used = f"max by ({GPU_IDENTITY}) ({dcgm_series(DCGM_FB_USED)})"
    free = f"max by ({GPU_IDENTITY}) ({dcgm_series(DCGM_FB_FREE)})"
    return _alert(
        cfg,
        "GpuFramebufferNearlyFull",
        expr=f"{used} / ({used} + {free}) > {ratio}",
        for_="10m",
        severity="warning",
        summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} memory is {{ $value | humanizePercentage }} full",
        description=(
            f"More than {ratio:.0%} of GPU {{{{ $labels.gpu }}}}'s memory on node {{{{ $labels.Hostname }}}} has "
            "been in use for 10 minutes. Time-slicing shares memory without isolation: the next pod to allocate "
            "on this card fails with CUDA out-of-memory."
        ),
    )


def _node_allocatable(cfg: MonitoringConfig, node: str, slots: int) -> dict[str, Any]:
    # `or on () vector(0)`: a node whose device plugin never registered has no nvidia_com_gpu series at
    # all; that is the worst case (zero schedulable) and must not read as "no data, no alert".
    selector = f'{KSM_NODE_ALLOCATABLE}{{{KSM_GPU_RESOURCE}, node="{node}"}}'
    return _alert(
        cfg,
        "GpuNodeAllocatableBelowProfile",
        expr=f"(sum({selector}) or on () vector(0)) < {slots}",
        for_="10m",
        severity="warning",
        extra_labels={"node": node},
        summary=f"{node} advertises {{{{ $value }}}} of {slots} nvidia.com/gpu",
        description=(
            f"Node {node} should advertise {slots} schedulable nvidia.com/gpu under its sharing profile but "
            "advertises {{ $value }}. Zero means the device plugin or the driver below it is down, or the "
            "node's nvidia.com/device-plugin.config label names a profile missing from the time-slicing "
            "ConfigMap. Debug from the driver up: driver pod, toolkit, then device plugin."
        ),
    )


def _pool_capacity(cfg: MonitoringConfig, expected: Mapping[str, int]) -> dict[str, Any]:
    total = sum(expected.values())
    selector = f'{KSM_NODE_ALLOCATABLE}{{{KSM_GPU_RESOURCE}, node=~"{node_regex(list(expected))}"}}'
    return _alert(
        cfg,
        "GpuPoolCapacityBelowConfigured",
        expr=f"(sum({selector}) or on () vector(0)) < {total}",
        for_="15m",
        severity="critical",
        summary=f"The GPU pool advertises {{{{ $value }}}} of {total} nvidia.com/gpu",
        description=(
            f"The GPU nodes ({', '.join(sorted(expected))}) should advertise {total} schedulable "
            "nvidia.com/gpu together and advertise {{ $value }}. GPU pods beyond that stay Pending with "
            "'Insufficient nvidia.com/gpu'. GpuNodeAllocatableBelowProfile names the node."
        ),
    )


def _held_while_idle(cfg: MonitoringConfig) -> dict[str, Any]:
    hours = cfg.thresholds.idle_gpu_hours
    percent = cfg.thresholds.idle_utilisation_percent
    held_long = (
        f"({held_gpus_by_pod()}) "
        f"and on (namespace, pod) (time() - max by (namespace, pod) ({KSM_POD_START_TIME}) > {hours * 3600})"
    )
    idle_node = (
        f"label_replace(max by (Hostname) ({dcgm_series(DCGM_GPU_UTIL, over_time=('max_over_time', f'{hours}h'))})"
        f" < {percent}, "
        '"node", "$1", "Hostname", "(.+)")'
    )
    return _alert(
        cfg,
        "GpuHeldWhileIdle",
        expr=f"({held_long}) and on (node) ({idle_node})",
        for_="15m",
        severity="info",
        summary="{{ $labels.namespace }}/{{ $labels.pod }} holds an idle GPU on {{ $labels.node }}",
        description=(
            f"Pod {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} has held {{{{ $value }}}} nvidia.com/gpu on "
            f"node {{{{ $labels.node }}}} for over {hours} h while the card's utilisation never passed "
            f"{percent}%. nvidia.com/gpu cannot be oversubscribed: the card is unavailable to everyone else "
            "(a notebook once held one for three and a half months). Stop the notebook or scale the workload "
            "to zero; the card is free only once the pod is gone, not when replicas=0."
        ),
    )


def _exporter_down(cfg: MonitoringConfig, namespace: str, gpu_nodes: int) -> dict[str, Any]:
    up = f'{PROMETHEUS_UP}{{job="{cfg.dcgm_exporter_job}", namespace="{namespace}"}}'
    # Per-target `== 0` names the broken exporter; the count catches targets that vanished or never
    # appeared (DaemonSet not scheduled, ServiceMonitor not selected), where there is no `up` at all.
    return _alert(
        cfg,
        "DcgmExporterDown",
        expr=f"{up} == 0 or (count({up} == 1) or on () vector(0)) < {gpu_nodes}",
        for_="10m",
        severity="warning",
        summary="DCGM exporter metrics are missing from the GPU nodes",
        description=(
            f"Fewer than {gpu_nodes} DCGM exporter targets (job {cfg.dcgm_exporter_job}, namespace {namespace}) "
            "are up. Every GPU alert and dashboard panel depends on them: while this fires, the other GPU "
            "alerts are blind. The exporter is OOM-killed below about 1Gi (dcgmExporter.resources)."
        ),
    )


def _check_expected(expected_slots_by_node: Mapping[str, int]) -> None:
    if not expected_slots_by_node:
        raise ValueError("expected_slots_by_node is empty: the GPU alerts need at least one GPU node")
    for node, slots in expected_slots_by_node.items():
        if not _NODE_NAME.match(node):
            raise ValueError(f"{node!r} is not a Kubernetes node name (a DNS-1123 subdomain)")
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"node {node!r} must expect at least 1 schedulable nvidia.com/gpu, got {slots!r}")


def prometheus_rule_labels(cfg: MonitoringConfig) -> dict[str, str]:
    """The PrometheusRule's labels: what a Prometheus's ruleSelector must match (the cluster preflight checks)."""
    return {"app.kubernetes.io/part-of": PROJECT, **cfg.rule_labels}


def build_gpu_alert_rules(
    cfg: MonitoringConfig,
    *,
    expected_slots_by_node: Mapping[str, int],
    namespace: str,
    slots_per_card_by_node: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The `PrometheusRule` with the GPU alerts, in `cfg.rules_namespace`, and with `slots_per_card_by_node` the
    recording rules, each kind in a group of its own: usage (components/gpu_platform/usage_rules.py) and per card
    (components/gpu_platform/card_rules.py, what the notebook reclaim policy judges by).

    expected_slots_by_node: Kubernetes node name -> schedulable nvidia.com/gpu its sharing profile
    promises (replicas; 1 for a whole card). namespace: the GPU Operator's namespace, where dcgm-exporter
    runs (its `up` series carry it). slots_per_card_by_node: node name -> its profile's replicas (1 for whole).
    """
    _check_expected(expected_slots_by_node)
    if slots_per_card_by_node is not None:
        _check_expected(slots_per_card_by_node)
    rules = [
        _xid_errors(cfg),
        _temperature(cfg),
        _framebuffer(cfg),
        *(_node_allocatable(cfg, node, expected_slots_by_node[node]) for node in sorted(expected_slots_by_node)),
        _pool_capacity(cfg, expected_slots_by_node),
        _held_while_idle(cfg),
        _exporter_down(cfg, namespace, len(expected_slots_by_node)),
    ]
    recorded = (
        [build_usage_group(slots_per_card_by_node, cfg.thresholds.idle_utilisation_percent), build_card_group()]
        if slots_per_card_by_node is not None
        else []
    )
    return prometheus_rule(
        RULE_NAME,
        cfg.rules_namespace,
        prometheus_rule_labels(cfg),
        [{"name": GROUP_NAME, "rules": rules}, *recorded],
    )


def rule_expressions(rule: Mapping[str, Any]) -> list[str]:
    """Every `expr` in a PrometheusRule (alerts and recording rules), in order."""
    return [str(r["expr"]) for group in rule["spec"]["groups"] for r in group["rules"]]
