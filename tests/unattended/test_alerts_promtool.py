"""The unattended repair's alerts, evaluated by Prometheus' own rule engine on the watcher's series: each fires on
its case and stays silent on the near miss. Skipped without promtool locally; on CI a missing promtool fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.unattended.alerts import BREAKER_OPEN, METRICS, REPAIRS, build_unattended_alert_rules
from config.monitoring import MonitoringConfig
from config.repair import UnattendedConfig
from tests.contract import crd_schemas
from tests.gpu_platform.alert_cases import DC1, DC2, Case, Expected
from tests.gpu_platform.prometheus_tools import require
from tests.gpu_platform.promql_inspection import metric_names
from tests.gpu_platform.test_alert_rules_promtool import promtool_cases, promtool_check, rules_of

WATCHER = 'job="gpu-pool-repair", instance="10.42.0.20:9400"'


def rule() -> dict[str, object]:
    return build_unattended_alert_rules(MonitoringConfig(), UnattendedConfig(), stack="prod", labels={})


def repairs(node: str, result: str, values: str) -> tuple[str, str]:
    return f'{REPAIRS}{{node="{node}", result="{result}", {WATCHER}}}', values


CASES = [
    Case(
        "GpuPoolRepairBreakerOpen",
        "an open breaker fires at once",
        [(f"{BREAKER_OPEN}{{{WATCHER}}}", "0x5 1x20")],
        {"3m": [], "8m": [Expected({"severity": "critical"}, "1")]},
    ),
    Case(
        "GpuPoolRepairBreakerOpen",
        "a closed breaker stays silent",
        [(f"{BREAKER_OPEN}{{{WATCHER}}}", "0x30")],
        {"20m": []},
    ),
    Case(
        "GpuPoolRepairDidNotFix",
        "a repair that did not fix fires with its node; one that fixed beside it does not",
        [repairs(DC1, "not-fixed", "0x10 1x50"), repairs(DC2, "fixed", "0x10 1x50")],
        {"5m": [], "15m": [Expected({"node": DC1, "severity": "warning"}, "1")]},
    ),
    Case(
        "GpuPoolRepairDidNotFix",
        "repairs that fixed stay silent",
        [repairs(DC2, "fixed", "0x10 1x10 2x40")],
        {"30m": []},
    ),
]


@pytest.fixture(scope="module")
def promtool() -> str:
    return require("promtool")


def test_every_alert_has_a_case_that_fires_it_and_one_that_stays_silent() -> None:
    alerts = {r["alert"] for r in rules_of(rule())}

    assert {c.alert for c in CASES if any(c.evals.values())} == alerts
    assert {c.alert for c in CASES if any(not e for e in c.evals.values())} == alerts


def test_the_alerts_read_only_the_watchers_declared_metrics_and_name_the_reset() -> None:
    used = set().union(*(metric_names(str(r["expr"])) for r in rules_of(rule())))

    assert used <= set(METRICS)
    breaker = next(r for r in rules_of(rule()) if r["alert"] == "GpuPoolRepairBreakerOpen")
    assert "gpu-pool repair --reset-breaker --stack prod" in str(breaker["annotations"])


def test_promtool_accepts_the_rule_group(promtool: str, tmp_path: Path) -> None:
    result = promtool_check(promtool, rule(), tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rules found" in result.stdout


@pytest.mark.parametrize("alert", sorted({c.alert for c in CASES}))
def test_the_rule_engine_fires_each_alert_on_its_series_and_not_on_the_near_misses(
    promtool: str, tmp_path: Path, alert: str
) -> None:
    result = promtool_cases(promtool, rule(), [c for c in CASES if c.alert == alert], tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rule_validates_against_the_prometheus_rule_crd(upstream: Path) -> None:
    crd_schemas.strict_validator(upstream, crd_schemas.PROMETHEUS_RULE_CRD).validate(rule())


def test_each_alerts_runbook_anchor_is_a_section_of_docs_alerts() -> None:
    from components.unattended.alerts import RUNBOOK_ANCHORS

    text = (Path(__file__).resolve().parents[2] / "docs" / "alerts.md").read_text(encoding="utf-8")
    headings = {line[3:].strip() for line in text.splitlines() if line.startswith("## ")}
    for alert, anchor in RUNBOOK_ANCHORS.items():
        assert f"Alert: {alert}" in headings and anchor == f"alert-{alert.lower()}"
