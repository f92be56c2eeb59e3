"""GPU alert rules: every expression real PromQL over real metrics, thresholds from config, one node
alert per GPU node expecting what its sharing profile promises; and the monitoring config they read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest
from pydantic import ValidationError

from components.gpu_platform.alert_rules import GROUP_NAME, RUNBOOK_ANCHORS, build_gpu_alert_rules, rule_expressions
from components.gpu_platform.promql import DCGM_NAMES_USED, KSM_METRICS_USED, PROMETHEUS_METRICS_USED
from config.monitoring import MonitoringConfig
from knowledge.dcgm_fields import exported_metric_names
from tests.gpu_platform.promql_inspection import (
    ARTICLE_NODES,
    EXPORTER_VERSIONS,
    POD_LABELS,
    dcgm_tokens,
    fields_never_emitted,
    metric_names,
    selectors,
)


def rules_of(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def article_rule(cfg: MonitoringConfig | None = None) -> dict[str, Any]:
    return build_gpu_alert_rules(
        cfg or MonitoringConfig(), expected_slots_by_node=ARTICLE_NODES, namespace="gpu-operator"
    )


def node_rule(rule: dict[str, Any], node: str) -> dict[str, Any]:
    matches = [
        r for r in rules_of(rule) if r["alert"] == "GpuNodeAllocatableBelowProfile" and r["labels"]["node"] == node
    ]
    assert len(matches) == 1
    return matches[0]


def alert(rule: dict[str, Any], name: str) -> dict[str, Any]:
    (match,) = [r for r in rules_of(rule) if r["alert"] == name]
    return match


def comparison(expr: str) -> tuple[str, float]:
    """The top-level comparison of `<something> <op> <number>`."""
    parsed = promql_parser.parse(expr)
    assert isinstance(parsed, promql_parser.BinaryExpr)
    assert isinstance(parsed.rhs, promql_parser.NumberLiteral)
    return str(parsed.op), parsed.rhs.val


def ancestors_of_selectors(expr: str) -> Iterator[tuple[promql_parser.VectorSelector, list[promql_parser.Expr]]]:
    stack: list[promql_parser.Expr] = []
    found: list[tuple[promql_parser.VectorSelector, list[promql_parser.Expr]]] = []

    def pre(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append((node, list(stack)))
        stack.append(node)

    def post(node: promql_parser.Expr) -> None:
        stack.pop()

    promql_parser.walk(promql_parser.parse(expr), pre, post)
    yield from found


# --- PromQL and metric names -------------------------------------------------------------------------


def test_every_alert_expression_parses_as_promql() -> None:
    for expr in rule_expressions(article_rule()):
        promql_parser.parse(expr)


def test_every_dcgm_metric_an_alert_reads_is_one_our_exporter_csv_emits() -> None:
    for expr in rule_expressions(article_rule()):
        parsed = {name for name in metric_names(expr) if name.startswith("DCGM_")}
        # The regex also sees names hidden in strings, where the AST would not look.
        assert dcgm_tokens(expr) == parsed, expr
        for version in EXPORTER_VERSIONS:
            dead = fields_never_emitted(parsed, exported_metric_names(version))
            assert not dead, f"dead alert under exporter {version}, metric never exported: {dead} in {expr}"


def test_every_metric_an_alert_reads_is_declared_in_the_shared_metric_lists() -> None:
    declared = DCGM_NAMES_USED | KSM_METRICS_USED | PROMETHEUS_METRICS_USED
    used = set().union(*(metric_names(expr) for expr in rule_expressions(article_rule())))

    assert used <= declared, sorted(used - declared)


def test_dcgm_alerts_aggregate_away_the_pod_labels_that_change_when_pods_come_and_go() -> None:
    for expr in rule_expressions(article_rule()):
        for selector, ancestors in ancestors_of_selectors(expr):
            if not (selector.name or "").startswith("DCGM_"):
                continue
            groupings = [
                set(node.modifier.labels)
                for node in ancestors
                if isinstance(node, promql_parser.AggregateExpr)
                and node.modifier is not None
                and node.modifier.type == promql_parser.AggModifierType.By
            ]
            assert groupings, f"{selector.name} is not aggregated by GPU identity in: {expr}"
            assert not groupings[0] & POD_LABELS, expr


# --- The rule object ---------------------------------------------------------------------------------


def test_one_group_holds_every_alert_with_a_runbook_anchor() -> None:
    rule = article_rule()

    assert [group["name"] for group in rule["spec"]["groups"]] == [GROUP_NAME] == ["gpu-pool.gpus"]
    assert (
        {r["alert"] for r in rules_of(rule)}
        == set(RUNBOOK_ANCHORS)
        == {
            "GpuXidErrors",
            "GpuTemperatureHigh",
            "GpuFramebufferNearlyFull",
            "GpuNodeAllocatableBelowProfile",
            "GpuPoolCapacityBelowConfigured",
            "GpuHeldWhileIdle",
            "DcgmExporterDown",
        }
    )


def test_every_alert_has_for_severity_summary_description_and_runbook() -> None:
    for r in rules_of(article_rule()):
        assert re.fullmatch(r"\d+[smh]", r["for"]), r
        assert r["labels"]["severity"] in {"critical", "warning", "info"}, r
        assert r["annotations"]["summary"].strip(), r
        assert len(r["annotations"]["description"]) > 40, r
        assert r["annotations"]["runbook_url"], r


def test_runbook_links_are_the_configured_page_plus_each_alert_s_anchor() -> None:
    cfg = MonitoringConfig.model_validate({"runbookBaseUrl": "https://git.example.org/lab/gpu-pool/README.md"})

    for r in rules_of(article_rule(cfg)):
        assert r["annotations"]["runbook_url"] == (
            f"https://git.example.org/lab/gpu-pool/README.md#{RUNBOOK_ANCHORS[r['alert']]}"
        )
    assert all(re.fullmatch(r"alert-[a-z]+", anchor) for anchor in RUNBOOK_ANCHORS.values())


def test_the_rule_lives_in_the_configured_namespace_with_the_configured_labels() -> None:
    cfg = MonitoringConfig.model_validate({"rulesNamespace": "monitoring", "ruleLabels": {"release": "kps"}})

    metadata = article_rule(cfg)["metadata"]

    assert metadata["namespace"] == "monitoring"
    assert metadata["labels"]["release"] == "kps"


def test_two_builds_are_equal_whatever_order_the_nodes_come_in() -> None:
    reordered = dict(reversed(list(ARTICLE_NODES.items())))

    assert article_rule() == article_rule()
    assert article_rule() == build_gpu_alert_rules(
        MonitoringConfig(), expected_slots_by_node=reordered, namespace="gpu-operator"
    )


# --- Capacity alerts ---------------------------------------------------------------------------------


def test_a_node_whose_profile_has_4_replicas_alerts_below_4() -> None:
    r = node_rule(article_rule(), "rke2-worker-dc1-gpu-a")

    assert comparison(r["expr"]) == ("<", 4.0)
    node_matchers = {(m.name, m.value) for s in selectors(r["expr"]) for m in s.matchers.matchers if m.name == "node"}
    assert node_matchers == {("node", "rke2-worker-dc1-gpu-a")}


def test_a_whole_card_node_alerts_only_when_it_advertises_no_gpu() -> None:
    r = node_rule(article_rule(), "rke2-worker-dc3-gpu-a")

    assert comparison(r["expr"]) == ("<", 1.0)


def test_there_is_one_node_alert_per_gpu_node() -> None:
    nodes = [r["labels"]["node"] for r in rules_of(article_rule()) if r["alert"] == "GpuNodeAllocatableBelowProfile"]

    assert sorted(nodes) == sorted(ARTICLE_NODES)


def test_a_node_that_never_registered_the_gpu_resource_counts_as_zero_not_as_no_data() -> None:
    # No nvidia_com_gpu series at all is the article's "zero schedulable"; `or vector(0)` makes it fire.
    r = node_rule(article_rule(), "rke2-worker-dc2-gpu-a")
    parsed = promql_parser.parse(r["expr"])
    calls: list[str] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.Call):
            calls.append(node.func.name)

    promql_parser.walk(parsed, visit)
    assert "vector" in calls
    assert " or on () vector(0)" in r["expr"]


def test_the_pool_alert_expects_the_sum_of_all_profiles_on_exactly_the_configured_nodes() -> None:
    r = alert(article_rule(), "GpuPoolCapacityBelowConfigured")

    assert comparison(r["expr"]) == ("<", 9.0)
    (regex,) = [m.value for s in selectors(r["expr"]) for m in s.matchers.matchers if m.name == "node"]
    for node in ARTICLE_NODES:
        assert re.fullmatch(regex, node)
    assert not re.fullmatch(regex, "rke2-worker-dc4-gpu-a")


def test_node_names_with_dots_are_matched_literally() -> None:
    rule = build_gpu_alert_rules(
        MonitoringConfig(), expected_slots_by_node={"gpu1.lab.internal": 2}, namespace="gpu-operator"
    )
    (regex,) = [
        m.value
        for s in selectors(alert(rule, "GpuPoolCapacityBelowConfigured")["expr"])
        for m in s.matchers.matchers
        if m.name == "node"
    ]

    assert re.fullmatch(regex, "gpu1.lab.internal")
    assert not re.fullmatch(regex, "gpu1xlabxinternal")


@pytest.mark.parametrize(
    "expected", [{}, {"Bad_Node": 1}, {"gpu-1": 0}, {"gpu-1": True}], ids=["empty", "name", "zero", "bool"]
)
def test_an_impossible_node_expectation_is_refused(expected: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        build_gpu_alert_rules(MonitoringConfig(), expected_slots_by_node=expected, namespace="gpu-operator")


# --- Thresholds and per-alert behaviour --------------------------------------------------------------


def test_thresholds_come_from_config() -> None:
    cfg = MonitoringConfig.model_validate(
        {
            "thresholds": {
                "gpuTemperatureCelsius": 80,
                "framebufferUsedRatio": 0.9,
                "idleGpuHours": 36,
                "idleUtilisationPercent": 3,
                "xidWindowMinutes": 30,
            }
        }
    )
    rule = article_rule(cfg)

    assert comparison(alert(rule, "GpuTemperatureHigh")["expr"]) == (">", 80.0)
    assert comparison(alert(rule, "GpuFramebufferNearlyFull")["expr"]) == (">", 0.9)
    idle = alert(rule, "GpuHeldWhileIdle")["expr"]
    assert "[36h]" in idle and "> 129600" in idle and "< 3," in idle
    assert "offset 30m" in alert(rule, "GpuXidErrors")["expr"]


def test_the_xid_alert_fires_on_a_new_error_code_not_forever_on_the_sticky_gauge() -> None:
    # DCGM_FI_DEV_XID_ERRORS keeps the last code until the exporter restarts (DCGM#277): `> 0` alone
    # would page forever after one application fault.
    parsed = promql_parser.parse(alert(article_rule(), "GpuXidErrors")["expr"])

    assert isinstance(parsed, promql_parser.BinaryExpr)
    assert str(parsed.op) == "unless"
    offsets = [s.offset for s in selectors(str(parsed.rhs)) if s.offset is not None]
    # Both of the field's names (DCGM_FI_DEV_XID_ERRORS up to exporter 4.8, DCGM_FI_DEV_XID_ERROR after), 15 min ago.
    assert [offset.total_seconds() for offset in offsets] == [15 * 60, 15 * 60]
    assert {s.name for s in selectors(str(parsed.rhs))} == {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"}
    current = parsed.lhs
    assert isinstance(current, promql_parser.BinaryExpr)
    assert isinstance(current.lhs, promql_parser.AggregateExpr) and current.lhs.modifier is not None
    assert {"err_code", "UUID", "Hostname"} <= set(current.lhs.modifier.labels)


def test_the_idle_alert_names_the_holding_pod_from_the_scheduler_s_books_and_joins_dcgm_by_node() -> None:
    expr = alert(article_rule(), "GpuHeldWhileIdle")["expr"]
    names = metric_names(expr)

    assert {"kube_pod_container_resource_requests", "kube_pod_status_phase", "DCGM_FI_DEV_GPU_UTIL"} <= names
    assert "DCGM_FI_DEV_GPU_UTIL_RATIO" in names  # the field's newer name (knowledge/metric_names.py)
    # dcgm-exporter's Hostname (or hostname, its newer name) is the node name; rename it so the two sources join.
    inner = (
        "label_replace((max_over_time(DCGM_FI_DEV_GPU_UTIL[24h]) or max_over_time(DCGM_FI_DEV_GPU_UTIL_RATIO[24h])), "
        '"Hostname", "$1", "hostname", "(.+)")'
    )
    assert f'label_replace(max by (Hostname) ({inner}) < 5, "node"' in expr
    assert 'phase=~"Pending|Running"' in expr


def test_the_exporter_alert_watches_the_operator_namespace_and_expects_one_target_per_gpu_node() -> None:
    cfg = MonitoringConfig.model_validate({"dcgmExporterJob": "dcgm"})
    r = alert(
        build_gpu_alert_rules(cfg, expected_slots_by_node=ARTICLE_NODES, namespace="nvidia-system"),
        "DcgmExporterDown",
    )

    for selector in selectors(r["expr"]):
        assert selector.name == "up"
        assert {(m.name, m.value) for m in selector.matchers.matchers} == {
            ("job", "dcgm"),
            ("namespace", "nvidia-system"),
        }
    parsed = promql_parser.parse(r["expr"])
    assert isinstance(parsed, promql_parser.BinaryExpr) and str(parsed.op) == "or"
    assert comparison(str(parsed.rhs)) == ("<", 3.0)


# --- The monitoring config ---------------------------------------------------------------------------


def test_monitoring_defaults_suit_rancher_monitoring_and_the_article() -> None:
    cfg = MonitoringConfig()

    assert cfg.dashboard_namespace == "cattle-dashboards"
    assert cfg.dashboard_labels == {"grafana_dashboard": "1"}
    assert cfg.rules_namespace == "cattle-monitoring-system"
    assert cfg.rule_labels == {}
    assert cfg.thresholds.idle_gpu_hours == 24
    assert cfg.thresholds.gpu_temperature_celsius == 85
    assert cfg.thresholds.framebuffer_used_ratio == 0.95


def test_monitoring_config_reads_camel_case_keys() -> None:
    cfg = MonitoringConfig.model_validate(
        {"dashboardNamespace": "grafana", "thresholds": {"idleGpuHours": 12, "xidWindowMinutes": 20}}
    )

    assert cfg.dashboard_namespace == "grafana"
    assert cfg.thresholds.idle_gpu_hours == 12
    assert cfg.thresholds.xid_window_minutes == 20


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"rulesNamespace": "Cattle_Monitoring"}, "DNS label"),
        ({"dashboardNamespace": "-x"}, "DNS label"),
        ({"dashboardLabels": {}}, "at least 1"),
        ({"dashboardLabels": {"grafana dashboard": "1"}}, "label name"),
        ({"ruleLabels": {"Example.COM/role": "x"}}, "invalid prefix"),
        ({"ruleLabels": {"release": "a" * 64}}, "invalid value"),
        ({"runbookBaseUrl": "http://example.org/README.md"}, "https"),
        ({"runbookBaseUrl": "https://example.org/README.md#alerts"}, "#"),
        ({"thresholds": {"framebufferUsedRatio": 1.0}}, "less than 1"),
        ({"thresholds": {"gpuTemperatureCelsius": "85"}}, "integer"),
        ({"alertsEnabled": True, "serviceMonitor": False}, "serviceMonitor"),
        ({"dashbordNamespace": "x"}, "did you mean 'dashboardNamespace'"),
    ],
)
def test_monitoring_config_refuses_mistakes_with_a_message_that_says_what_is_expected(
    raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        MonitoringConfig.model_validate(raw)


def test_the_exporter_may_go_unscraped_when_alerts_are_off() -> None:
    cfg = MonitoringConfig.model_validate({"alertsEnabled": False, "serviceMonitor": False})

    assert not cfg.service_monitor
