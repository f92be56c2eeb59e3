"""Recording rules for who holds the GPUs, time-slice aware: the `gpu-pool.usage` group of the GPU PrometheusRule.

Held capacity, not utilisation: NVML reports the same utilisation for every pod on a time-sliced card
(NVIDIA/dcgm-exporter#642), so "used" per pod means nothing there. A pod holding 1 of a card's 4 slots holds a
quarter of a GPU; the slots per card are the node's sharing profile, which only the stack knows, so the rule group
carries them as one constant series per domain. Names follow Prometheus' `level:metric:operations` convention.

- `gpu_pool_node_slots_per_card{node}`: the profile's replicas (1 for a whole card). A profile change takes
  effect from the `pulumi up` that ships the rule; history keeps the value each sample was recorded with.
- `namespace:gpu_pool_slots_held:sum`: nvidia.com/gpu requested by Running pods, by namespace.
- `namespace:gpu_pool_gpus_held:sum`: each Running pod's slots / its node's slots per card, by namespace
  (4 pods x 1 slot on an x4 node = 1). Pending (even bound) and finished pods hold nothing here.
- `namespace:gpu_pool_gpus_held_idle:sum`: GPUs held on nodes whose cards were all below the idle threshold
  (GpuHeldWhileIdle's `idleUtilisationPercent`) at that evaluation: `gpu-pool claims --usage` divides its hours by
  the held hours for the idle share.
- `namespace:gpu_pool_gpus_used:sum`: utilisation-weighted GPUs (GPU_UTIL / 100), only on cards with a single
  holder: whole-card nodes, or nodes where one pod holds every slot in use. On a shared card the exporter names
  one of its pods and measures the whole card, so the series is left out rather than guessed.

GPU-hours over a range R: sum_over_time(namespace:gpu_pool_gpus_held:sum[R]) * USAGE_INTERVAL_SECONDS / 3600; the
group's interval is fixed here so that product is exact (a missing sample counts as zero).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from knowledge.gpu_operator import (
    DCGM_EXPORTED_NAMESPACE_LABEL,
    DCGM_EXPORTED_POD_LABEL,
    DCGM_NAMESPACE_LABEL,
    DCGM_POD_LABEL,
)
from knowledge.metric_names import (
    DCGM_GPU_UTIL,
    DCGM_NODE_LABEL,
    KSM_GPU_RESOURCE,
    KSM_POD_PHASE,
    KSM_POD_REQUESTS,
    dcgm_series,
)

USAGE_GROUP_NAME: Final = "gpu-pool.usage"
USAGE_INTERVAL: Final = "1m"
USAGE_INTERVAL_SECONDS: Final = 60

SLOTS_PER_CARD: Final = "gpu_pool_node_slots_per_card"
SLOTS_HELD: Final = "namespace:gpu_pool_slots_held:sum"
GPUS_HELD: Final = "namespace:gpu_pool_gpus_held:sum"
GPUS_HELD_IDLE: Final = "namespace:gpu_pool_gpus_held_idle:sum"
GPUS_USED: Final = "namespace:gpu_pool_gpus_used:sum"
RECORDED: Final = (SLOTS_PER_CARD, SLOTS_HELD, GPUS_HELD, GPUS_HELD_IDLE, GPUS_USED)


def running_slots_by_pod() -> str:
    """nvidia.com/gpu each Running pod requests, by namespace, pod and node (its containers summed)."""
    return (
        f'sum by (namespace, pod, node) ({KSM_POD_REQUESTS}{{{KSM_GPU_RESOURCE}, node!=""}} > 0) '
        "and on (namespace, pod) "
        f'(max by (namespace, pod) ({KSM_POD_PHASE}{{phase="Running"}}) == 1)'
    )


def gpus_held_by_pod() -> str:
    """Each Running pod's share of physical GPUs: its slots / its node's slots per card."""
    return f"({running_slots_by_pod()}) / on (node) group_left () max by (node) ({SLOTS_PER_CARD})"


def _node_utilisation() -> str:
    """The busiest card's utilisation per node (percent), from DCGM, with the node in `node` as kube-state-metrics
    names it."""
    util = f'label_replace({dcgm_series(DCGM_GPU_UTIL)}, "node", "$1", "{DCGM_NODE_LABEL}", "(.+)")'
    return f"max by (node) ({util})"


def gpus_held_idle_by_pod(idle_percent: float) -> str:
    """GPUs held (as gpus_held_by_pod) on nodes whose every card is below `idle_percent` now."""
    return f"({gpus_held_by_pod()}) and on (node) (({_node_utilisation()}) < {idle_percent:g})"


def holder_labels(expr: str) -> str:
    """DCGM series with the pod they name in `namespace`/`pod`: Prometheus renames the exporter's own labels to
    `exported_*` behind a ServiceMonitor with honorLabels false (the chart's default); where those exist they win."""
    for exported, plain in (
        (DCGM_EXPORTED_NAMESPACE_LABEL, DCGM_NAMESPACE_LABEL),
        (DCGM_EXPORTED_POD_LABEL, DCGM_POD_LABEL),
    ):
        expr = f'label_replace({expr}, "{plain}", "$1", "{exported}", "(.+)")'
    return expr


def gpus_used_by_pod() -> str:
    """Utilisation-weighted GPUs per holder pod, on single-holder nodes only (see the module docstring)."""
    util = f'label_replace({dcgm_series(DCGM_GPU_UTIL)}, "node", "$1", "{DCGM_NODE_LABEL}", "(.+)")'
    per_card = f"max by (namespace, pod, node, gpu) ({holder_labels(util)}) / 100"
    holders = f"count by (node) ({running_slots_by_pod()})"
    single = f"(max by (node) ({SLOTS_PER_CARD}) == 1) or on (node) (({holders}) == 1)"
    return (
        f"sum by (namespace, pod, node) ({per_card}) "
        f"and on (namespace, pod) ({running_slots_by_pod()}) "
        f"and on (node) ({single})"
    )


def build_usage_group(slots_per_card_by_node: Mapping[str, int], idle_percent: float) -> dict[str, Any]:
    """The recording-rule group: one slots-per-card series per GPU node, then the per-namespace usage series.
    idle_percent: below it a card counts as idle (the GpuHeldWhileIdle threshold)."""
    constants = [
        {"record": SLOTS_PER_CARD, "expr": f"vector({slots})", "labels": {"node": node}}
        for node, slots in sorted(slots_per_card_by_node.items())
    ]
    return {
        "name": USAGE_GROUP_NAME,
        "interval": USAGE_INTERVAL,
        "rules": [
            *constants,
            {"record": SLOTS_HELD, "expr": f"sum by (namespace) ({running_slots_by_pod()})"},
            {"record": GPUS_HELD, "expr": f"sum by (namespace) ({gpus_held_by_pod()})"},
            {"record": GPUS_HELD_IDLE, "expr": f"sum by (namespace) ({gpus_held_idle_by_pod(idle_percent)})"},
            {"record": GPUS_USED, "expr": f"sum by (namespace) ({gpus_used_by_pod()})"},
        ],
    }


def data_since_query(window: str) -> str:
    """The time of the first usage sample in the window (the slots-per-card constants are recorded every interval
    from the moment the rule is loaded, whoever holds what)."""
    return f"min(min_over_time(timestamp({SLOTS_PER_CARD})[{window}:{USAGE_INTERVAL}]))"


def gpu_hours_query(record: str, window: str) -> str:
    """Hours of `record` (GPUs or slots held) summed over the window: each sample stands for one group interval."""
    return f"sum by (namespace) (sum_over_time({record}[{window}])) * {USAGE_INTERVAL_SECONDS} / 3600"
