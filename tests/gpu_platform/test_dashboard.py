"""The GPU dashboard: real PromQL over metrics that exist, the panels the pool needs, a ConfigMap the
Grafana sidecar loads, and the same JSON on every build."""

from __future__ import annotations

import json
import re
from typing import Any

import kubernetes_validate
import promql_parser

from components.gpu_platform.dashboard import (
    DASHBOARD_KEY,
    DASHBOARD_UID,
    build_dashboard,
    build_dashboard_configmap,
    dashboard_queries,
)
from components.gpu_platform.promql import (
    DCGM_NAMES_USED,
    KSM_METRICS_USED,
    PROMETHEUS_METRICS_USED,
    RECORDED_METRICS_USED,
)
from config.monitoring import MonitoringConfig
from knowledge.dcgm_fields import exported_metric_names
from tests.gpu_platform.promql_inspection import EXPORTER_VERSIONS, dcgm_tokens, fields_never_emitted, metric_names

# Grafana replaces these before the query reaches Prometheus.
GRAFANA_MACROS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "6h"}


def as_sent(query: str, node: str = "rke2-worker-dc1-gpu-a|rke2-worker-dc2-gpu-a") -> str:
    for macro, value in GRAFANA_MACROS.items():
        query = query.replace(macro, value)
    return query.replace("$node", node)


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    flat: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        flat.append(panel)
        flat.extend(panel.get("panels") or [])
    return [panel for panel in flat if panel["type"] != "row"]


def panel(dashboard: dict[str, Any], title: str) -> dict[str, Any]:
    (match,) = [p for p in panels(dashboard) if p["title"] == title]
    return match


def variable(dashboard: dict[str, Any], name: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [v for v in dashboard["templating"]["list"] if v["name"] == name]
    assert len(matches) == 1
    return matches[0]


def test_every_panel_query_parses_as_promql_once_grafana_fills_in_the_variables() -> None:
    queries = dashboard_queries(build_dashboard(MonitoringConfig()))

    assert len(queries) >= 10
    for query in queries:
        promql_parser.parse(as_sent(query))


def test_every_dcgm_metric_a_panel_or_variable_reads_is_one_our_exporter_csv_emits() -> None:
    dashboard = build_dashboard(MonitoringConfig())

    for query in dashboard_queries(dashboard):
        parsed = {name for name in metric_names(as_sent(query)) if name.startswith("DCGM_")}
        assert dcgm_tokens(query) == parsed, query
        for version in EXPORTER_VERSIONS:
            dead = fields_never_emitted(parsed, exported_metric_names(version))
            assert not dead, f"panel can only say 'No data' under exporter {version}: {dead} in {query}"
    # Variable queries (label_values) are not PromQL: read their metric names from the text.
    assert not dcgm_tokens(json.dumps(dashboard["templating"]))


def test_every_metric_a_panel_reads_is_declared_in_the_shared_metric_lists() -> None:
    declared = DCGM_NAMES_USED | KSM_METRICS_USED | PROMETHEUS_METRICS_USED | RECORDED_METRICS_USED
    queries = dashboard_queries(build_dashboard(MonitoringConfig()))
    used = set().union(*(metric_names(as_sent(query)) for query in queries))

    assert used <= declared, sorted(used - declared)


def test_the_dashboard_shows_load_memory_heat_power_errors_and_capacity() -> None:
    queries = dashboard_queries(build_dashboard(MonitoringConfig()))
    used = set().union(*(metric_names(as_sent(query)) for query in queries))

    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
        "kube_node_status_allocatable",
        "kube_pod_container_resource_requests",
    } <= used


def test_schedulable_and_allocated_gpus_are_plotted_per_node_from_the_gpu_resource() -> None:
    per_node = panel(build_dashboard(MonitoringConfig()), "Schedulable vs allocated nvidia.com/gpu per node")
    schedulable, allocated = (target["expr"] for target in per_node["targets"])

    assert metric_names(as_sent(schedulable)) == {"kube_node_status_allocatable"}
    assert "kube_pod_container_resource_requests" in metric_names(as_sent(allocated))
    for expr in (schedulable, allocated):
        parsed = promql_parser.parse(as_sent(expr))
        assert isinstance(parsed, promql_parser.AggregateExpr)
        assert parsed.modifier is not None and parsed.modifier.labels == ["node"]
        assert 'resource="nvidia_com_gpu"' in expr


def test_panels_use_the_datasource_variable_and_filter_by_the_node_variable() -> None:
    dashboard = build_dashboard(MonitoringConfig())

    datasource = variable(dashboard, "datasource")
    assert datasource["type"] == "datasource" and datasource["query"] == "prometheus"
    node = variable(dashboard, "node")
    # The GPU nodes from kube-state-metrics, whose `node` label dcgm-exporter's rename of its own did not touch.
    assert node["type"] == "query"
    assert node["query"] == 'label_values(kube_node_status_allocatable{resource="nvidia_com_gpu"}, node)'
    assert node["multi"] and node["includeAll"] and node["allValue"] == ".*"
    for p in panels(dashboard):
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        for target in p["targets"]:
            # The usage row is per namespace across the pool: the recorded series carry no node to filter on.
            if metric_names(as_sent(target["expr"])) <= RECORDED_METRICS_USED:
                continue
            assert "$node" in target["expr"], p["title"]


def test_the_dashboard_uid_is_stable_and_panel_ids_unique() -> None:
    dashboard = build_dashboard(MonitoringConfig())
    ids = [p["id"] for p in dashboard["panels"]]

    assert dashboard["uid"] == DASHBOARD_UID == "gpu-pool-gpus"
    assert len(ids) == len(set(ids))
    assert all(isinstance(i, int) and i > 0 for i in ids)


def test_panels_do_not_overlap_on_the_grid() -> None:
    cells: set[tuple[int, int]] = set()
    for p in build_dashboard(MonitoringConfig())["panels"]:
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24, p["title"]
        mine = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine


def test_the_temperature_panel_marks_the_configured_alert_threshold() -> None:
    cfg = MonitoringConfig.model_validate({"thresholds": {"gpuTemperatureCelsius": 78}})

    steps = panel(build_dashboard(cfg), "Temperature")["fieldConfig"]["defaults"]["thresholds"]["steps"]

    assert [step["value"] for step in steps] == [None, 78]


def test_two_builds_give_the_same_dashboard_and_the_same_configmap() -> None:
    cfg = MonitoringConfig()

    assert build_dashboard(cfg) == build_dashboard(cfg)
    assert build_dashboard_configmap(cfg) == build_dashboard_configmap(cfg)


def test_the_configmap_carries_the_dashboard_for_the_sidecar_in_rancher_s_dashboardnamespace() -> None:
    cfg = MonitoringConfig()
    configmap = build_dashboard_configmap(cfg)

    kubernetes_validate.validate(configmap, kubernetes_validate.latest_version(), strict=True)
    assert configmap["metadata"]["namespace"] == "cattle-dashboards"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert list(configmap["data"]) == [DASHBOARD_KEY] == ["gpu-pool-gpus.json"]
    text = configmap["data"][DASHBOARD_KEY]
    assert json.loads(text) == build_dashboard(cfg)
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


def test_the_configmap_follows_a_custom_sidecar_namespace_and_label() -> None:
    cfg = MonitoringConfig.model_validate(
        {"dashboardNamespace": "grafana", "dashboardLabels": {"grafana.example.org/dashboard": "gpu"}}
    )

    metadata = build_dashboard_configmap(cfg)["metadata"]

    assert metadata["namespace"] == "grafana"
    assert metadata["labels"]["grafana.example.org/dashboard"] == "gpu"
    assert "grafana_dashboard" not in metadata["labels"]


def test_dashboard_queries_also_finds_panels_inside_collapsed_rows() -> None:
    dashboard = build_dashboard(MonitoringConfig())
    first = dashboard["panels"][1]
    collapsed = {
        **dashboard,
        "panels": [{"type": "row", "title": "r", "collapsed": True, "panels": [first]}],
    }

    assert dashboard_queries(collapsed) == [t["expr"] for t in first["targets"]]
    assert re.search(r"kube_node_status_allocatable", dashboard_queries(collapsed)[0])
