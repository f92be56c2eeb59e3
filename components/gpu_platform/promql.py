"""PromQL the alerts and the dashboard share, and the one list of metrics they use (tests check each set
against what its source really emits)."""

from __future__ import annotations

from components.gpu_platform.usage_rules import RECORDED
from knowledge.metric_names import (
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DCGM_GPU_TEMP,
    DCGM_GPU_UTIL,
    DCGM_MEM_COPY_UTIL,
    DCGM_POWER_LIMIT,
    DCGM_POWER_USAGE,
    DCGM_XID_ERRORS,
    KSM_CRONJOB_LAST_SUCCESS,
    KSM_GPU_RESOURCE,
    KSM_NODE_ALLOCATABLE,
    KSM_NODE_CONDITION,
    KSM_NODE_UNSCHEDULABLE,
    KSM_POD_PHASE,
    KSM_POD_REQUESTS,
    KSM_POD_START_TIME,
    PROMETHEUS_UP,
    DcgmMetric,
)

# Read through knowledge.metric_names.dcgm_series(): each under its 4.8 and its newer name.
DCGM_METRICS_USED: frozenset[DcgmMetric] = frozenset(
    {
        DCGM_GPU_UTIL,
        DCGM_MEM_COPY_UTIL,
        DCGM_FB_USED,
        DCGM_FB_FREE,
        DCGM_GPU_TEMP,
        DCGM_POWER_USAGE,
        DCGM_POWER_LIMIT,
        DCGM_XID_ERRORS,
    }
)
KSM_METRICS_USED: frozenset[str] = frozenset(
    {
        KSM_NODE_ALLOCATABLE,
        KSM_POD_REQUESTS,
        KSM_POD_PHASE,
        KSM_POD_START_TIME,
        # The health check's alerts (repair.healthCheck).
        KSM_NODE_CONDITION,
        KSM_NODE_UNSCHEDULABLE,
        KSM_CRONJOB_LAST_SUCCESS,
    }
)
PROMETHEUS_METRICS_USED: frozenset[str] = frozenset({PROMETHEUS_UP})
# gpu-pool's own recording rules (usage_rules.py), which the dashboard's usage row reads.
RECORDED_METRICS_USED: frozenset[str] = frozenset(RECORDED)
# Every DCGM name a query may select: both names of each field used.
DCGM_NAMES_USED: frozenset[str] = frozenset(name for metric in DCGM_METRICS_USED for name in metric.names)


def node_regex(nodes: list[str]) -> str:
    """A PromQL regex (as written inside a double-quoted PromQL string) matching exactly these nodes."""
    # Node names may contain '.', a regex metacharacter; `\\.` in PromQL source is `\.` to the regex.
    return "|".join(node.replace(".", "\\\\.") for node in sorted(nodes))


def held_gpus_by_pod(node_matcher: str = "") -> str:
    """GPU slots each pod holds in the scheduler's books, by namespace, pod and node.

    A pod holds its card from binding until it is gone: Pending-but-bound and Running pods (a
    Terminating pod is still Running), not Succeeded or Failed ones. Unbound pods have no node.
    """
    extra = f", {node_matcher}" if node_matcher else ""
    return (
        f'sum by (namespace, pod, node) ({KSM_POD_REQUESTS}{{{KSM_GPU_RESOURCE}, node!=""{extra}}} > 0) '
        "and on (namespace, pod) "
        f'(max by (namespace, pod) ({KSM_POD_PHASE}{{phase=~"Pending|Running"}}) == 1)'
    )


def allocated_gpus_by_node(node_matcher: str = "") -> str:
    """GPU slots allocated per node: what `kubectl describe node` shows under Allocated resources."""
    return f"sum by (node) ({held_gpus_by_pod(node_matcher)})"


def schedulable_gpus_by_node(node_matcher: str = "") -> str:
    extra = f", {node_matcher}" if node_matcher else ""
    return f"sum by (node) ({KSM_NODE_ALLOCATABLE}{{{KSM_GPU_RESOURCE}{extra}}})"
