"""The DCGM metrics contract (knowledge/metric_names.py): every rule, alert and panel reads a DCGM field under both
of its names, through dcgm_series(), in one unit; no DCGM name is written anywhere else; the counters file suits
the exporter the stack deploys; and every dashboard panel shows the same on 4.8-named series as on 4.9+/4.10-named
ones (with the `hostname` label), evaluated by Prometheus' own engine (promtool)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.alert_rules import build_gpu_alert_rules, rule_expressions
from components.gpu_platform.dashboard import build_dashboard, dashboard_queries
from components.gpu_platform.dcgm_metrics import build_dcgm_metrics_csv, deployed_exporter_version
from components.gpu_platform.promql import DCGM_METRICS_USED
from config.gpu_operator import GpuOperatorConfig
from config.monitoring import MonitoringConfig
from knowledge.dcgm_fields import dcgm_fields
from knowledge.metric_names import (
    CHART_DCGM_EXPORTER_VERSION,
    DCGM_CONTRACT,
    DCGM_SM_CLOCK,
    contract_of,
    dcgm_series,
    exporter_line,
    uses_current_names,
)
from tests.gpu_platform.alert_cases import DC1, DC3, dcgm, newer_names
from tests.gpu_platform.prometheus_tools import require
from tests.gpu_platform.promql_inspection import ARTICLE_NODES, dcgm_tokens, metric_names

ROOT = Path(__file__).resolve().parents[2]
# The only modules that may spell a DCGM field: the contract and the table of what the exporter collects.
CONTRACT_MODULES = {ROOT / "knowledge" / "metric_names.py", ROOT / "knowledge" / "dcgm_fields.py"}
PROGRAM_DIRS = ("components", "config", "day2", "knowledge", "node")


def all_queries() -> list[str]:
    rule = build_gpu_alert_rules(
        MonitoringConfig(),
        expected_slots_by_node=ARTICLE_NODES,
        namespace="gpu-operator",
        slots_per_card_by_node=dict.fromkeys(ARTICLE_NODES, 1),
    )
    panels = [
        query.replace("$node", ".*").replace("$__range", "6h")
        for query in dashboard_queries(build_dashboard(MonitoringConfig()))
    ]
    return rule_expressions(rule) + panels


def all_queries_and_records() -> list[str]:
    rule = build_gpu_alert_rules(
        MonitoringConfig(),
        expected_slots_by_node=ARTICLE_NODES,
        namespace="gpu-operator",
        slots_per_card_by_node=dict.fromkeys(ARTICLE_NODES, 1),
    )
    return [str(r.get("record", r.get("alert"))) for group in rule["spec"]["groups"] for r in group["rules"]]


def test_no_program_module_spells_a_dcgm_field_outside_the_contract() -> None:
    known = {name for metric in DCGM_CONTRACT for name in metric.names} | {f.field_id for f in dcgm_fields()}
    offenders = [
        f"{path.relative_to(ROOT)}: {sorted(tokens & known)}"
        for folder in PROGRAM_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path not in CONTRACT_MODULES and (tokens := dcgm_tokens(path.read_text(encoding="utf-8"))) & known
    ]

    assert not offenders, "read DCGM fields through knowledge.metric_names.dcgm_series(): " + "; ".join(offenders)


def test_every_query_reads_each_dcgm_field_it_uses_under_both_of_its_names() -> None:
    assert any("namespace:gpu_pool_gpus_used:sum" in q for q in all_queries_and_records())
    for query in all_queries():
        names = {name for name in metric_names(query) if name.startswith("DCGM_")}
        for name in names:
            metric = contract_of(name)
            assert metric is not None, f"{name} is not in the contract: {query}"
            assert set(metric.names) <= names, f"{query} reads {metric.legacy} under one name only"


def test_a_dcgm_name_outside_the_contract_is_caught_by_the_contract_check() -> None:
    # The check above must be able to fail: a query naming a field the contract does not know.
    assert contract_of("DCGM_FI_DEV_PCIE_TX_THROUGHPUT") is None
    assert contract_of("DCGM_FI_DEV_GPU_TEMP") is contract_of("DCGM_FI_DEV_GPU_TEMP_CELSIUS") is not None


def test_every_field_the_alerts_and_panels_use_is_in_the_contract() -> None:
    assert set(DCGM_CONTRACT) >= DCGM_METRICS_USED


def test_the_newer_name_of_every_renamed_field_is_a_real_dcgm_field(upstream: Path) -> None:
    real = set((upstream / "dcgm" / "dcgm-field-names.txt").read_text().split())
    aliases = [metric for metric in DCGM_CONTRACT if metric.same_field]

    assert not [m.current for m in aliases if m.current not in real]
    assert not [m.legacy for m in DCGM_CONTRACT if m.legacy not in real]


@pytest.mark.parametrize("chart", sorted(CHART_DCGM_EXPORTER_VERSION))
def test_the_chart_default_exporter_version_is_the_one_its_values_ship(upstream: Path, chart: str) -> None:
    values = yaml.safe_load((upstream / "gpu-operator" / chart / "chart" / "values.yaml").read_text())

    assert values["dcgmExporter"]["version"] == CHART_DCGM_EXPORTER_VERSION[chart]


@pytest.mark.parametrize(
    ("version", "line", "current"),
    [
        ("4.5.3-4.8.2-distroless", (4, 8), False),
        ("4.6.0-4.8.3-ubuntu22.04", (4, 8), False),
        ("4.7.0-4.9.0", (4, 9), True),
        ("4.7.1-4.10.0-distroless", (4, 10), True),
        ("latest", None, False),
        ("", None, False),
    ],
)
def test_the_exporter_line_decides_which_names_the_counters_file_uses(
    version: str, line: tuple[int, int] | None, current: bool
) -> None:
    assert exporter_line(version) == line
    assert uses_current_names(version) is current


def records(csv: str) -> list[str]:
    return [line.split(",")[0].strip() for line in csv.splitlines() if line.strip() and not line.startswith("#")]


def test_the_counters_file_for_the_chart_default_exporter_uses_only_the_names_4_8_resolves() -> None:
    for chart in CHART_DCGM_EXPORTER_VERSION:
        version = deployed_exporter_version(GpuOperatorConfig().model_copy(update={"chart_version": chart}))
        assert version == CHART_DCGM_EXPORTER_VERSION[chart]
        names = records(build_dcgm_metrics_csv(version))
        # exporter 4.5.3-4.8.2's go-dcgm (ec245c0) knows no newer name: one in the file fails the whole file.
        assert not [n for n in names if (m := contract_of(n)) and m.same_field and n == m.current != m.legacy]
        assert names == [field.field_id for field in dcgm_fields()]


def test_an_extra_values_exporter_override_to_4_10_ships_the_newer_names() -> None:
    operator = GpuOperatorConfig.model_validate({"extraValues": {"dcgmExporter": {"version": "4.7.1-4.10.0"}}})
    names = records(build_dcgm_metrics_csv(deployed_exporter_version(operator)))

    assert deployed_exporter_version(operator) == "4.7.1-4.10.0"
    assert "DCGM_FI_DEV_GPU_TEMP_CELSIUS" in names and "DCGM_FI_DEV_GPU_TEMP" not in names
    assert "DCGM_FI_DEV_XID_ERROR" in names and "DCGM_FI_DEV_BOARD_POWER_WATTS" in names
    # A unit change is a new field id, not a rename: the MHz field stays (the Hz one is not in DCGM 4.6.0).
    assert "DCGM_FI_DEV_SM_CLOCK" in names
    assert len(names) == len(dcgm_fields())


# --- Prometheus' engine: the same panels on both exporter lines -------------------------------------------------

NODES = (DC1, DC3)
# One value per field and node; each panel's expected samples come from here, not from its query.
FIXTURE_VALUES = {
    metric.legacy: {DC1: 11.0 + index, DC3: 50.0 + index}
    for index, metric in enumerate(sorted(DCGM_METRICS_USED, key=str))
}


def fixture_series(newer: bool) -> list[dict[str, str]]:
    series = []
    for name, by_node in FIXTURE_VALUES.items():
        for node in NODES:
            labels, values = dcgm(name, node), f"{by_node[node]:g}x30"
            if newer:
                labels, values = newer_names(labels, values)
            series.append({"series": labels, "values": values})
    return series


def dcgm_panel_queries() -> list[str]:
    return [
        q.replace("$node", ".*").replace("$__range", "6h")
        for q in dashboard_queries(build_dashboard(MonitoringConfig()))
        if "DCGM_" in q
    ]


def expected_samples(query: str) -> list[dict[str, Any]]:
    # Every DCGM panel shows one line per card: max by (Hostname, gpu) of one field.
    assert query.startswith("max by (Hostname, gpu) ("), query
    (field,) = {contract_of(name) for name in metric_names(query)} - {None}
    assert field is not None
    return [
        {"labels": f'{{Hostname="{node}", gpu="0"}}', "value": FIXTURE_VALUES[field.legacy][node]} for node in NODES
    ]


@pytest.mark.parametrize("newer", [False, True], ids=["4.8 names, Hostname", "4.10 names, hostname"])
def test_every_dcgm_panel_shows_the_same_cards_and_values_on_either_exporter_line(tmp_path: Path, newer: bool) -> None:
    promtool = require("promtool")
    (tmp_path / "empty.yaml").write_text("groups: []\n", encoding="utf-8")
    queries = dcgm_panel_queries()
    tests = {
        "rule_files": ["empty.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": fixture_series(newer),
                "promql_expr_test": [
                    {"expr": query, "eval_time": "10m", "exp_samples": expected_samples(query)} for query in queries
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert len(queries) >= 7
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_newer_name_fixtures_carry_no_4_8_name_so_the_comparison_is_real() -> None:
    newer = " ".join(s["series"] for s in fixture_series(True))
    legacy_only = {m.legacy for m in DCGM_METRICS_USED if m.legacy != m.current}

    assert legacy_only and not dcgm_tokens(newer) & legacy_only
    assert 'Hostname="' not in newer and 'hostname="' in newer


def test_a_field_whose_newer_name_changed_unit_reads_in_the_contract_unit(tmp_path: Path) -> None:
    promtool = require("promtool")
    (tmp_path / "empty.yaml").write_text("groups: []\n", encoding="utf-8")
    query = f"max by (Hostname) ({dcgm_series(DCGM_SM_CLOCK)})"
    tests = {
        "rule_files": ["empty.yaml"],
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'DCGM_FI_DEV_SM_CLOCK_HERTZ{{hostname="{DC1}", gpu="0"}}', "values": "1500000000x5"},
                    {"series": f'DCGM_FI_DEV_SM_CLOCK{{Hostname="{DC3}", gpu="0"}}', "values": "1200x5"},
                ],
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": "2m",
                        "exp_samples": [
                            {"labels": f'{{Hostname="{DC1}"}}', "value": 1500},
                            {"labels": f'{{Hostname="{DC3}"}}', "value": 1200},
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
