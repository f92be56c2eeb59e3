"""Monitoring against upstream: DCGM field ids, the exporter's default counters, kube-state-metrics
metric names, the GPU Operator's custom-metrics contract and the PrometheusRule CRD schema."""

from __future__ import annotations

import copy
import csv
import io
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs in the dev group
import pytest
import yaml

from components.gpu_platform.alert_rules import build_gpu_alert_rules, rule_expressions
from components.gpu_platform.dashboard import build_dashboard, dashboard_queries
from components.gpu_platform.promql import KSM_METRICS_USED
from config.monitoring import MonitoringConfig
from knowledge.dcgm_fields import DROPPED_DEFAULT_FIELDS, dcgm_fields
from knowledge.gpu_operator import DCGM_METRICS_KEY
from tests.contract import crd_schemas
from tests.gpu_platform.promql_inspection import ARTICLE_NODES, metric_names

# The chart version the project pins; its dcgm-exporter is 4.5.3-4.8.2, the exporter files' version.
PINNED_CHART = "v26.3.2"
EXPORTER_DEFAULT_FILES = ("default-counters.csv", "dcp-metrics-included.csv")


def upstream_counters(path: Path) -> dict[str, str]:
    """The exporter's enabled records: field id -> Prometheus type ('#' lines are comments)."""
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return {row[0].strip(): row[1].strip() for row in csv.reader(io.StringIO("\n".join(lines)))}


def article_rule() -> dict[str, Any]:
    return build_gpu_alert_rules(MonitoringConfig(), expected_slots_by_node=ARTICLE_NODES, namespace="gpu-operator")


@pytest.fixture(scope="module")
def rule_validator(upstream: Path) -> jsonschema.Draft7Validator:
    return crd_schemas.strict_validator(upstream, crd_schemas.PROMETHEUS_RULE_CRD)


# --- DCGM ---------------------------------------------------------------------------------------------


def test_every_field_in_our_csv_is_a_real_dcgm_field(upstream: Path) -> None:
    real = set((upstream / "dcgm" / "dcgm-field-names.txt").read_text().split())
    ours = {field.field_id for field in dcgm_fields()}

    assert not ours - real, f"not DCGM fields (the exporter would refuse the file): {sorted(ours - real)}"


@pytest.mark.parametrize("name", EXPORTER_DEFAULT_FILES)
def test_our_csv_keeps_every_field_the_exporter_emits_by_default(upstream: Path, name: str) -> None:
    # The operator runs dcp-metrics-included.csv unless pointed at our ConfigMap: switching must not
    # silently drop a default metric someone's query relies on.
    defaults = upstream_counters(upstream / "dcgm-exporter" / name)
    ours = {field.field_id: field.prom_type for field in dcgm_fields()}

    missing = set(defaults) - set(ours) - set(DROPPED_DEFAULT_FIELDS)
    assert not missing, f"default fields dropped without a reason in DROPPED_DEFAULT_FIELDS: {sorted(missing)}"
    for field_id in set(defaults) & set(ours):
        assert ours[field_id] == defaults[field_id], f"{field_id} changes type from {defaults[field_id]}"


def test_every_deliberately_dropped_field_is_really_an_exporter_default(upstream: Path) -> None:
    defaults = set().union(*(upstream_counters(upstream / "dcgm-exporter" / name) for name in EXPORTER_DEFAULT_FILES))

    assert set(DROPPED_DEFAULT_FIELDS) <= defaults


def test_the_gpu_operator_reads_custom_metrics_from_the_key_we_write(upstream: Path) -> None:
    chart = upstream / "gpu-operator" / PINNED_CHART / "chart"
    values = (chart / "values.yaml").read_text()
    crd = (chart / "crds" / "nvidia.com_clusterpolicies.yaml").read_text()

    assert f"key called `{DCGM_METRICS_KEY}`" in values
    assert f"ConfigMap name with file {DCGM_METRICS_KEY}" in crd


def test_the_pinned_chart_ships_the_exporter_version_our_csv_was_checked_against(upstream: Path) -> None:
    values = yaml.safe_load((upstream / "gpu-operator" / PINNED_CHART / "chart" / "values.yaml").read_text())

    assert values["dcgmExporter"]["version"].startswith("4.5.3-4.8.2")


def test_the_pinned_chart_leaves_honor_labels_off_so_exporter_pod_labels_are_renamed(upstream: Path) -> None:
    # Why holders come from kube-state-metrics, not from dcgm-exporter's pod/namespace labels: with
    # honorLabels false Prometheus keeps the target's own pod/namespace and renames the exporter's.
    values = yaml.safe_load((upstream / "gpu-operator" / PINNED_CHART / "chart" / "values.yaml").read_text())

    assert values["dcgmExporter"]["serviceMonitor"]["honorLabels"] is False


# --- kube-state-metrics --------------------------------------------------------------------------------


def test_every_kube_state_metric_the_alerts_and_dashboard_read_is_one_it_documents(upstream: Path) -> None:
    documented = set((upstream / "kube-state-metrics" / "metric-names.txt").read_text().split())
    queries = rule_expressions(article_rule()) + [
        query.replace("$node", ".*").replace("$__range", "6h")
        for query in dashboard_queries(build_dashboard(MonitoringConfig()))
    ]
    used = {name for query in queries for name in metric_names(query) if name.startswith("kube_")}

    assert used, "the capacity alerts and panels must read kube-state-metrics"
    assert used <= KSM_METRICS_USED
    assert not KSM_METRICS_USED - documented, sorted(KSM_METRICS_USED - documented)


# --- PrometheusRule CRD --------------------------------------------------------------------------------


def test_the_prometheus_rule_validates_against_the_crd_schema(rule_validator: jsonschema.Draft7Validator) -> None:
    rule = article_rule()

    rule_validator.validate(rule)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert set(rule["metadata"]) == {"name", "namespace", "labels"}


def test_the_prometheus_rule_with_the_recording_rules_validates_against_the_crd_schema(
    rule_validator: jsonschema.Draft7Validator,
) -> None:
    rule = build_gpu_alert_rules(
        MonitoringConfig(),
        expected_slots_by_node=ARTICLE_NODES,
        namespace="gpu-operator",
        slots_per_card_by_node={node: min(slots, 4) for node, slots in ARTICLE_NODES.items()},
    )

    rule_validator.validate(rule)
    assert [group["name"] for group in rule["spec"]["groups"]] == ["gpu-pool.gpus", "gpu-pool.usage", "gpu-pool.cards"]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r["spec"]["groups"][0]["rules"][0].update(annotation={"summary": "x"}),
        lambda r: r["spec"]["groups"][0]["rules"][0].update(keepFiringFor="5m"),
        lambda r: r["spec"]["groups"][0].update(rule=[]),
        lambda r: r["spec"].update(group=[]),
        lambda r: r["spec"]["groups"][0]["rules"][0].update({"for": "5 minutes"}),
    ],
    ids=["annotation", "keepFiringFor", "group.rule", "spec.group", "for-not-a-duration"],
)
def test_a_misspelt_or_malformed_rule_field_is_rejected(
    rule_validator: jsonschema.Draft7Validator, mutate: Any
) -> None:
    rule = copy.deepcopy(article_rule())
    mutate(rule)

    with pytest.raises(jsonschema.ValidationError):
        rule_validator.validate(rule)
