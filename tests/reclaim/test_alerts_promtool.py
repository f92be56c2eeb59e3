"""The reclaim policy's alerts, evaluated by Prometheus' own rule engine on the policy's series: each fires on its
case, naming the pod, its node and its finalizers, and stays silent on the near miss. Skipped without promtool
locally; on CI a missing promtool fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.reclaim.alerts import RUNBOOK_ANCHORS, build_reclaim_alert_rules
from components.reclaim.names import LAST_PASS, METRICS, NOT_BACK_SECONDS
from config.monitoring import MonitoringConfig
from config.reclaim import IdleNotebooksConfig
from tests.contract import crd_schemas
from tests.gpu_platform.alert_cases import DC3, Case, Expected
from tests.gpu_platform.prometheus_tools import require
from tests.gpu_platform.promql_inspection import metric_names
from tests.gpu_platform.test_alert_rules_promtool import promtool_cases, promtool_check, rules_of

POLICY_TARGET = 'job="gpu-pool-reclaim", instance="10.42.0.31:9401"'
HELD = {
    "namespace": "team-a",
    "notebook": "old",
    "pod": "old-0",
    "node": DC3,
    "phase": "Terminating",
    "finalizers": "example.com/hold",
}


def rule() -> dict[str, object]:
    cfg = IdleNotebooksConfig.model_validate({"cardBackMinutes": 15, "checkEveryMinutes": 5})
    return build_reclaim_alert_rules(MonitoringConfig(), cfg, labels={})


def not_back(values: str, **labels: str) -> tuple[str, str]:
    merged = {**HELD, **labels}
    rendered = ", ".join(f'{key}="{value}"' for key, value in merged.items())
    return f"{NOT_BACK_SECONDS}{{{rendered}, {POLICY_TARGET}}}", values


CASES = [
    Case(
        "GpuNotebookCardNotBack",
        "a stopped notebook's pod held in Terminating by a finalizer past the deadline fires, naming it",
        # The policy reports 10 minutes after the stop, then every minute: past 15 minutes from minute 6.
        [not_back("600+60x30")],
        {"4m": [], "10m": [Expected({**HELD, "severity": "warning"}, "20m 0s")]},
    ),
    Case(
        "GpuNotebookCardNotBack",
        "a pod that goes within the deadline stays silent",
        [not_back("60+60x8 stale")],
        {"5m": [], "20m": []},
    ),
    Case(
        "GpuNotebookReclaimStalled",
        "a policy whose last pass is older than three intervals fires",
        [(f"{LAST_PASS}{{{POLICY_TARGET}}}", "0x40")],
        {"10m": [], "30m": [Expected({"severity": "warning"}, "30m 0s")]},
    ),
    Case(
        "GpuNotebookReclaimStalled",
        "a policy passing every five minutes stays silent",
        [(f"{LAST_PASS}{{{POLICY_TARGET}}}", "0x4 300x4 600x4 900x4 1200x4 1500x4 1800x4 2100x4")],
        {"30m": []},
    ),
]


@pytest.fixture(scope="module")
def promtool() -> str:
    return require("promtool")


def test_every_alert_has_a_case_that_fires_it_and_one_that_stays_silent() -> None:
    alerts = {r["alert"] for r in rules_of(rule())}

    assert {c.alert for c in CASES if any(c.evals.values())} == alerts == set(RUNBOOK_ANCHORS)
    assert {c.alert for c in CASES if any(not e for e in c.evals.values())} == alerts


def test_the_alerts_read_only_the_policys_declared_metrics() -> None:
    used = set().union(*(metric_names(str(r["expr"])) for r in rules_of(rule())))

    assert used <= set(METRICS)


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
    text = (Path(__file__).resolve().parents[2] / "docs" / "alerts.md").read_text(encoding="utf-8")
    headings = {line[3:].strip() for line in text.splitlines() if line.startswith("## ")}
    for alert, anchor in RUNBOOK_ANCHORS.items():
        assert f"Alert: {alert}" in headings and anchor == f"alert-{alert.lower()}"
