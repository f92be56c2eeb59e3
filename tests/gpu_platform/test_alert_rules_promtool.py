"""Every GPU alert evaluated by Prometheus' own rule engine (`promtool`), not only parsed.

For each alert: series that must fire it, with the labels and rendered annotations it must carry, and near
misses that must stay silent (tests/gpu_platform/alert_cases.py). `promtool check rules` accepts the generated
groups. Skipped without promtool locally; on CI (`CI` set) a missing promtool fails.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_platform.alert_rules import build_gpu_alert_rules
from config.monitoring import MonitoringConfig
from tests.gpu_platform.alert_cases import CASES, Case, Expected, newer_names
from tests.gpu_platform.prometheus_tools import require
from tests.gpu_platform.promql_inspection import ARTICLE_NODES


@pytest.fixture(scope="module")
def promtool() -> str:
    return require("promtool")


def article_rule(cfg: MonitoringConfig | None = None, nodes: dict[str, int] | None = None) -> dict[str, Any]:
    return build_gpu_alert_rules(
        cfg or MonitoringConfig(), expected_slots_by_node=nodes or ARTICLE_NODES, namespace="gpu-operator"
    )


def rules_of(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def write_rules(rule: dict[str, Any], directory: Path, alert: str | None = None) -> Path:
    """The PrometheusRule's groups as a Prometheus rule file (what the operator hands Prometheus); with `alert`,
    only that alert's rules. An alert rule reads series, never another rule (there are no recording rules), so
    one alert evaluates the same alone; the others, evaluated at every step of a 26 h case, were 5 of its 6 s."""
    groups = rule["spec"]["groups"]
    if alert is not None:
        groups = [{**group, "rules": [r for r in group["rules"] if r["alert"] == alert]} for group in groups]
        groups = [group for group in groups if group["rules"]]
    path = directory / "gpu-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False), encoding="utf-8")
    return path


def render(template: str, labels: dict[str, str], value: str) -> str:
    """The annotation as Prometheus renders it, for the templates the rules use."""

    def substitute(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        if expression.startswith("$labels."):
            return labels[expression.removeprefix("$labels.")]
        if expression in ("$value", "$value | humanizePercentage", "$value | humanizeDuration"):
            return value
        raise AssertionError(f"template {{{{ {expression} }}}} is not known to this test")

    return re.sub(r"\{\{(.*?)\}\}", substitute, template)


def rule_for(rule: dict[str, Any], alert: str, labels: dict[str, str]) -> dict[str, Any]:
    """The rule of this alert whose own labels the expected alert carries (one per node for the node alert)."""
    (match,) = [r for r in rules_of(rule) if r["alert"] == alert and r["labels"].items() <= labels.items()]
    return match


def expected_alert(rule: dict[str, Any], alert: str, expected: Expected) -> dict[str, Any]:
    annotations = rule_for(rule, alert, expected.labels)["annotations"]
    return {
        "exp_labels": expected.labels,
        "exp_annotations": {key: render(text, expected.labels, expected.value) for key, text in annotations.items()},
    }


def unit_test_file(rule: dict[str, Any], rules_path: Path, cases: list[Case]) -> dict[str, Any]:
    return {
        "rule_files": [str(rules_path)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": case.why,
                "interval": case.interval,
                "input_series": [{"series": series, "values": values} for series, values in case.series],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": case.alert,
                        "exp_alerts": [expected_alert(rule, case.alert, e) for e in expected],
                    }
                    for at, expected in case.evals.items()
                ],
            }
            for case in cases
        ],
    }


def run(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def promtool_check(promtool: str, rule: dict[str, Any], directory: Path) -> subprocess.CompletedProcess[str]:
    """`promtool check rules` on the PrometheusRule's groups."""
    return run(promtool, "check", "rules", str(write_rules(rule, directory)), cwd=directory)


def promtool_cases(
    promtool: str, rule: dict[str, Any], cases: list[Case], directory: Path
) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of these cases against the PrometheusRule's groups (the rule engine itself)."""
    tests = unit_test_file(rule, write_rules(rule, directory), cases)
    path = directory / "tests.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return run(promtool, "test", "rules", str(path), cwd=directory)


def test_every_alert_has_a_case_that_fires_it_and_one_that_must_stay_silent() -> None:
    alerts = {r["alert"] for r in rules_of(article_rule())}
    firing = {c.alert for c in CASES if any(c.evals.values())}
    silent = {c.alert for c in CASES if any(not expected for expected in c.evals.values())}

    assert firing == alerts
    assert silent == alerts


@pytest.mark.parametrize(
    "cfg",
    [
        MonitoringConfig(),
        MonitoringConfig.model_validate(
            {"thresholds": {"gpuTemperatureCelsius": 80, "idleGpuHours": 48, "xidWindowMinutes": 30}}
        ),
    ],
    ids=["defaults", "custom thresholds"],
)
def test_promtool_accepts_the_generated_rule_groups(promtool: str, tmp_path: Path, cfg: MonitoringConfig) -> None:
    rule = article_rule(cfg, {**ARTICLE_NODES, "gpu.worker.lab": 2})
    result = promtool_check(promtool, rule, tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules_of(rule))} rules found" in result.stdout


def renamed_node_label(case: Case) -> Case:
    """The case as a 4.9+/4.10 exporter with gpu-pool's counters file for it writes it: the node in `hostname`
    (NVIDIA/dcgm-exporter#655), each field under its newer name (knowledge/metric_names.py), in that name's unit."""
    return replace(case, series=[newer_names(name, values) for name, values in case.series])


ALERTS = sorted({c.alert for c in CASES})


def test_no_rule_reads_another_so_each_alert_can_be_evaluated_alone() -> None:
    rules = rules_of(article_rule())
    assert all("alert" in r and "record" not in r for r in rules)
    assert sorted({r["alert"] for r in rules}) == ALERTS


@pytest.mark.parametrize("alert", ALERTS)
def test_the_rule_engine_fires_the_alert_on_its_series_and_not_on_the_near_misses(
    promtool: str, tmp_path: Path, alert: str
) -> None:
    rule = article_rule()
    rules_path = write_rules(rule, tmp_path, alert)
    tests = unit_test_file(rule, rules_path, [c for c in CASES if c.alert == alert])
    tests_path = tmp_path / "tests.yaml"
    tests_path.write_text(yaml.safe_dump(tests, sort_keys=False, allow_unicode=True), encoding="utf-8")

    result = run(promtool, "test", "rules", str(tests_path), cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("alert", ALERTS)
def test_every_alert_fires_the_same_on_series_with_the_exporters_newer_field_and_node_label_names(
    promtool: str, tmp_path: Path, alert: str
) -> None:
    """Every case of the alert, each series written as dcgm-exporter after NVIDIA/dcgm-exporter#655 writes it
    (`hostname`): the same alerts, with the node in `Hostname`, whichever name the exporter gives the label."""
    rule = article_rule()
    rules_path = write_rules(rule, tmp_path, alert)
    tests = unit_test_file(rule, rules_path, [renamed_node_label(c) for c in CASES if c.alert == alert])
    tests_path = tmp_path / "tests.yaml"
    tests_path.write_text(yaml.safe_dump(tests, sort_keys=False, allow_unicode=True), encoding="utf-8")

    result = run(promtool, "test", "rules", str(tests_path), cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
