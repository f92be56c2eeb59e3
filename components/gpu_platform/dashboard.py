"""The GPU pool's Grafana dashboard, built in code with grafana-foundation-sdk and shipped as a ConfigMap
the Grafana sidecar loads.

Every query uses the metric names from components.gpu_platform.alert_rules, the single list the tests check
against what dcgm-exporter (our CSV) and kube-state-metrics really emit: a panel that can only ever say
"No data" hides the problem it was built to show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from grafana_foundation_sdk.builders.common import (
    GraphThresholdsStyleConfig,
    ReduceDataOptions,
    VizLegendOptions,
    VizTooltipOptions,
)
from grafana_foundation_sdk.builders.dashboard import (
    Dashboard,
    DatasourceVariable,
    QueryVariable,
    Row,
    ThresholdsConfig,
)
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as StatPanel
from grafana_foundation_sdk.builders.timeseries import Panel as TimeseriesPanel
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    BigValueGraphMode,
    GraphTresholdsStyleMode,
    LegendDisplayMode,
    LegendPlacement,
    SortOrder,
    TooltipDisplayMode,
)
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

from components.gpu_platform.promql import allocated_gpus_by_node, held_gpus_by_pod, schedulable_gpus_by_node
from components.gpu_platform.usage_rules import GPUS_HELD, SLOTS_HELD, gpu_hours_query
from config.monitoring import MonitoringConfig
from config.project import PROJECT
from knowledge.metric_names import (
    DCGM_FB_FREE,
    DCGM_FB_USED,
    DCGM_GPU_TEMP,
    DCGM_GPU_UTIL,
    DCGM_MEM_COPY_UTIL,
    DCGM_POWER_LIMIT,
    DCGM_POWER_USAGE,
    DCGM_XID_ERRORS,
    KSM_GPU_RESOURCE,
    KSM_NODE_ALLOCATABLE,
    dcgm_on_nodes,
)

DASHBOARD_UID = "gpu-pool-gpus"
DASHBOARD_TITLE = "GPU pool"
DASHBOARD_KEY = f"{DASHBOARD_UID}.json"
DASHBOARD_CONFIGMAP = f"{DASHBOARD_UID}-dashboard"

# Panels query whichever Prometheus the `datasource` variable selects, so the dashboard works with
# Rancher Monitoring's datasource whatever its uid is.
_DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
# dcgm-exporter's node label is the Kubernetes node name (NODE_NAME from spec.nodeName), so one variable filters
# both the DCGM series and the kube-state-metrics series (node). The exporter renamed that label from `Hostname`
# to `hostname` (knowledge/metric_names.py): each DCGM query reads either and shows it as `Hostname`, and the
# variable lists the GPU nodes from kube-state-metrics, whose `node` label did not move.
_NODES = "$node"
_KSM_NODE = 'node=~"$node"'
_PER_GPU = "max by (Hostname, gpu)"
_GPU_LEGEND = "{{Hostname}} GPU {{gpu}}"


def _query(expr: str, legend: str, ref_id: str) -> Dataquery:
    return Dataquery().expr(expr).legend_format(legend).ref_id(ref_id)


def _thresholds(*steps: tuple[float | None, str]) -> ThresholdsConfig:
    return (
        ThresholdsConfig()
        .mode(ThresholdsMode.ABSOLUTE)
        .steps([Threshold(value=value, color=color) for value, color in steps])
    )


def _timeseries(title: str, description: str, unit: str, *queries: Dataquery) -> TimeseriesPanel:
    panel = (
        TimeseriesPanel()
        .title(title)
        .description(description)
        .datasource(_DATASOURCE)
        .unit(unit)
        .min(0)
        .span(12)
        .height(8)
        .legend(
            VizLegendOptions().display_mode(LegendDisplayMode.LIST).placement(LegendPlacement.BOTTOM).show_legend(True)
        )
        .tooltip(VizTooltipOptions().mode(TooltipDisplayMode.MULTI).sort(SortOrder.DESCENDING))
    )
    for query in queries:
        panel = panel.with_target(query)
    return panel


def _stat(title: str, description: str, query: Dataquery, thresholds: ThresholdsConfig) -> StatPanel:
    return (
        StatPanel()
        .title(title)
        .description(description)
        .datasource(_DATASOURCE)
        .span(6)
        .height(4)
        .color_mode(BigValueColorMode.VALUE)
        .graph_mode(BigValueGraphMode.NONE)
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .thresholds(thresholds)
        .with_target(query.instant())
    )


def _gpu_panels(cfg: MonitoringConfig) -> list[TimeseriesPanel | StatPanel]:
    limit = cfg.thresholds.gpu_temperature_celsius
    return [
        _timeseries(
            "GPU utilisation",
            "Share of time a kernel ran on each card (NVML, every card reports it).",
            "percent",
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_GPU_UTIL, _NODES)})", _GPU_LEGEND, "A"),
        ).max(100),
        _timeseries(
            "Memory copy utilisation",
            "Share of time device memory was being read or written.",
            "percent",
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_MEM_COPY_UTIL, _NODES)})", _GPU_LEGEND, "A"),
        ).max(100),
        _timeseries(
            "Framebuffer memory used",
            "GPU memory in use. Time-sliced pods share it with no isolation.",
            "mbytes",
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_FB_USED, _NODES)})", _GPU_LEGEND, "A"),
        ),
        _timeseries(
            "Framebuffer memory free",
            "GPU memory left for the next allocation on each card.",
            "mbytes",
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_FB_FREE, _NODES)})", _GPU_LEGEND, "A"),
        ),
        _timeseries(
            "Temperature",
            f"GPU core temperature; GpuTemperatureHigh fires above {limit} °C.",
            "celsius",
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_GPU_TEMP, _NODES)})", _GPU_LEGEND, "A"),
        )
        .thresholds(_thresholds((None, "green"), (float(limit), "red")))
        .thresholds_style(GraphThresholdsStyleConfig().mode(GraphTresholdsStyleMode.DASHED)),
        _timeseries(
            "Power draw",
            "Board power against the limit the driver enforces (the A1000 is fed by its slot, about 50 W).",
            "watt",
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_POWER_USAGE, _NODES)})", _GPU_LEGEND, "A"),
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_POWER_LIMIT, _NODES)})", "{{Hostname}} GPU {{gpu}} limit", "B"),
        ),
        _stat(
            "Last XID error",
            "Code of the most recent XID error per card, 0 if none. The value stays until dcgm-exporter "
            "restarts; GpuXidErrors fires when a new code appears.",
            _query(f"{_PER_GPU} ({dcgm_on_nodes(DCGM_XID_ERRORS, _NODES)})", _GPU_LEGEND, "A"),
            _thresholds((None, "green"), (1.0, "red")),
        ).span(12),
    ]


def _capacity_panels() -> list[TimeseriesPanel | StatPanel]:
    schedulable = schedulable_gpus_by_node(_KSM_NODE)
    allocated = allocated_gpus_by_node(_KSM_NODE)
    pool_schedulable = f"sum({schedulable})"
    pool_allocated = f"sum({allocated}) or on () vector(0)"
    return [
        _stat(
            "Pool: schedulable",
            "nvidia.com/gpu the selected nodes advertise to the scheduler (time-sliced cards count once per replica).",
            _query(pool_schedulable, "schedulable", "A"),
            _thresholds((None, "red"), (1.0, "green")),
        ),
        _stat(
            "Pool: allocated",
            "nvidia.com/gpu held by bound, unfinished pods (Terminating pods still hold theirs).",
            _query(pool_allocated, "allocated", "A"),
            _thresholds((None, "green")),
        ),
        _stat(
            "Pool: free",
            "Schedulable minus allocated: what the next GPU pod can get.",
            _query(f"({pool_schedulable}) - ({pool_allocated})", "free", "A"),
            _thresholds((None, "red"), (1.0, "green")),
        ),
        _stat(
            "Nodes advertising no GPU",
            "Nodes whose nvidia.com/gpu dropped to 0: device plugin or driver down (debug from the driver up).",
            _query(f"count(({schedulable}) == 0) or on () vector(0)", "nodes", "A"),
            _thresholds((None, "green"), (1.0, "red")),
        ),
        _timeseries(
            "Schedulable vs allocated nvidia.com/gpu per node",
            "kube_node_status_allocatable against the GPU requests of the node's bound, unfinished pods.",
            "none",
            _query(schedulable, "{{node}} schedulable", "A"),
            _query(allocated, "{{node}} allocated", "B"),
        ),
        _timeseries(
            "Who holds a GPU",
            "nvidia.com/gpu per pod. A card is free only when its pod is gone, not when replicas=0.",
            "none",
            _query(held_gpus_by_pod(_KSM_NODE), "{{namespace}}/{{pod}} on {{node}}", "A"),
        ),
    ]


def _usage_panels() -> list[TimeseriesPanel | StatPanel]:
    """Who held the GPUs over the dashboard's range, from the usage recording rules (usage_rules.py)."""
    return [
        _timeseries(
            "GPUs held per namespace",
            "Physical GPUs held by Running pods: each pod's nvidia.com/gpu slots divided by its node's slots per card "
            "(1 of a card's 4 time-slices is 0.25). Held, not used: on a shared card every pod sees the whole "
            "card's utilisation, so none is charged by it.",
            "none",
            _query(GPUS_HELD, "{{namespace}}", "A"),
            _query(f"sum({GPUS_HELD})", "all namespaces", "B"),
        ),
        _stat(
            "GPU-hours held over the range",
            "GPUs held x hours, per namespace, over the dashboard's time range (a missing sample counts as zero). "
            "`gpu-pool claims --usage --since <range>` prints the same, with profile owners and idle share.",
            _query(gpu_hours_query(GPUS_HELD, "$__range"), "{{namespace}}", "A"),
            _thresholds((None, "blue")),
        ).span(12),
        _stat(
            "Slot-hours held over the range",
            "nvidia.com/gpu slots x hours per namespace: what the scheduler handed out, time-slices counted whole.",
            _query(gpu_hours_query(SLOTS_HELD, "$__range"), "{{namespace}}", "A"),
            _thresholds((None, "blue")),
        ).span(12),
    ]


def _variables() -> tuple[DatasourceVariable, QueryVariable]:
    datasource = DatasourceVariable("datasource").label("Data source").type("prometheus")
    node = (
        QueryVariable("node")
        .label("Node")
        .datasource(_DATASOURCE)
        .query(f"label_values({KSM_NODE_ALLOCATABLE}{{{KSM_GPU_RESOURCE}}}, node)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(VariableOption(selected=True, text="All", value="$__all"))
    )
    return datasource, node


def _builder(cfg: MonitoringConfig) -> Dashboard:
    datasource, node = _variables()
    dashboard = (
        Dashboard(DASHBOARD_TITLE)
        .uid(DASHBOARD_UID)
        .description("NVIDIA GPUs of the gpu-pool: health from dcgm-exporter, capacity from kube-state-metrics.")
        .tags([PROJECT, "nvidia", "dcgm"])
        .editable()
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .refresh("1m")
        .time("now-6h", "now")
        .timezone("browser")
        .with_variable(datasource)
        .with_variable(node)
    )
    panel_id = 0

    def numbered(panel: TimeseriesPanel | StatPanel) -> TimeseriesPanel | StatPanel:
        nonlocal panel_id
        panel_id += 1
        return panel.id(panel_id)

    # Capacity first: "Insufficient nvidia.com/gpu" is the question people open this dashboard with.
    dashboard = dashboard.with_row(Row("Capacity (nvidia.com/gpu)").id(100))
    for panel in _capacity_panels():
        dashboard = dashboard.with_panel(numbered(panel))
    dashboard = dashboard.with_row(Row("Usage: GPUs held per namespace (time-slice aware)").id(150))
    for panel in _usage_panels():
        dashboard = dashboard.with_panel(numbered(panel))
    dashboard = dashboard.with_row(Row("GPU health (DCGM)").id(200))
    for panel in _gpu_panels(cfg):
        dashboard = dashboard.with_panel(numbered(panel))
    return dashboard


def build_dashboard(cfg: MonitoringConfig) -> dict[str, Any]:
    """The dashboard JSON model (same config, same dict)."""
    encoded = JSONEncoder(sort_keys=True).encode(_builder(cfg).build())
    dashboard: dict[str, Any] = json.loads(encoded)
    return dashboard


def build_dashboard_configmap(cfg: MonitoringConfig) -> dict[str, Any]:
    """The ConfigMap the Grafana sidecar picks up: in `cfg.dashboard_namespace`, with `cfg.dashboard_labels`."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": DASHBOARD_CONFIGMAP,
            "namespace": cfg.dashboard_namespace,
            "labels": {"app.kubernetes.io/part-of": PROJECT, **cfg.dashboard_labels},
        },
        "data": {DASHBOARD_KEY: json.dumps(build_dashboard(cfg), sort_keys=True, indent=2) + "\n"},
    }


def _panels(panels: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    flat: list[Mapping[str, Any]] = []
    for panel in panels:
        flat.append(panel)
        flat.extend(_panels(panel.get("panels") or []))
    return flat


def dashboard_queries(dashboard: Mapping[str, Any]) -> list[str]:
    """Every PromQL expression of every panel (collapsed rows included), in panel order."""
    return [
        str(target["expr"])
        for panel in _panels(dashboard.get("panels") or [])
        for target in panel.get("targets") or []
        if target.get("expr")
    ]
