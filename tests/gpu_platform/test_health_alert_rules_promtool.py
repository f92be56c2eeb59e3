"""The health check's alerts evaluated by Prometheus' own rule engine (`promtool`), on the series
kube-state-metrics exports for a Node condition, a cordon and a CronJob; every metric one kube-state-metrics
documents. Skipped without promtool locally; on CI (`CI` set) a missing promtool fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.gpu_platform.health_check import build_health_alert_rules
from components.gpu_platform.promql import KSM_METRICS_USED
from config.monitoring import MonitoringConfig
from config.repair import HealthCheckConfig
from tests.gpu_platform.alert_cases import DC1, DC2, OTHER, Case, Expected
from tests.gpu_platform.prometheus_tools import require
from tests.gpu_platform.promql_inspection import metric_names
from tests.gpu_platform.test_alert_rules_promtool import promtool_cases, promtool_check, rules_of

CRONJOB = 'namespace="gpu-pool-health", cronjob="gpu-pool-health"'


def rule() -> dict[str, object]:
    return build_health_alert_rules(MonitoringConfig(), HealthCheckConfig(), stack="prod", labels={})


def condition(node: str, status: str) -> str:
    return f'kube_node_status_condition{{node="{node}", condition="GpuPoolHealthy", status="{status}", {OTHER}}}'


def verdict(node: str, healthy: bool, samples: int) -> list[tuple[str, str]]:
    """The three series kube-state-metrics exports for one condition: 1 on the status it has, 0 on the others."""
    now = "true" if healthy else "false"
    return [(condition(node, s), f"{1 if s == now else 0}x{samples}") for s in ("true", "false", "unknown")]


def unschedulable(node: str, value: int, samples: int) -> tuple[str, str]:
    return f'kube_node_spec_unschedulable{{node="{node}", {OTHER}}}', f"{value}x{samples}"


CASES = [
    Case(
        "GpuNodeFloorBroken",
        "a node the check finds broken for 15 minutes fires, with its name; a healthy one beside it does not",
        [*verdict(DC2, False, 40), *verdict(DC1, True, 40), unschedulable(DC2, 0, 40), unschedulable(DC1, 0, 40)],
        {"10m": [], "16m": [Expected({"node": DC2, "severity": "warning"}, "1")]},
    ),
    Case(
        "GpuNodeFloorBroken",
        "a broken node that is cordoned (a wave's turn, a repair, an admin) stays silent",
        [*verdict(DC2, False, 40), unschedulable(DC2, 1, 40)],
        {"20m": []},
    ),
    Case(
        "GpuPoolHealthCheckNotRunning",
        "a check whose last success is older than three of its periods fires after 30 minutes",
        [(f"kube_cronjob_status_last_successful_time{{{CRONJOB}, {OTHER}}}", "0x120")],
        {"40m": [], "65m": [Expected({"severity": "warning"}, "3900")]},
    ),
    Case(
        "GpuPoolHealthCheckNotRunning",
        "a check that keeps succeeding stays silent",
        [(f"kube_cronjob_status_last_successful_time{{{CRONJOB}, {OTHER}}}", "0+60x120")],
        {"65m": [], "110m": []},
    ),
    Case(
        "GpuPoolHealthCheckNotRunning",
        "a check that never succeeded (no series at all) fires",
        [unschedulable(DC1, 0, 60)],
        {
            "20m": [],
            "35m": [
                Expected({"namespace": "gpu-pool-health", "cronjob": "gpu-pool-health", "severity": "warning"}, "1")
            ],
        },
    ),
]


@pytest.fixture(scope="module")
def promtool() -> str:
    return require("promtool")


def test_every_health_alert_has_a_case_that_fires_it_and_one_that_must_stay_silent() -> None:
    alerts = {r["alert"] for r in rules_of(rule())}

    assert {c.alert for c in CASES if any(c.evals.values())} == alerts
    assert {c.alert for c in CASES if any(not e for e in c.evals.values())} == alerts


def test_every_metric_the_health_alerts_read_is_a_kube_state_metric_the_project_declares(upstream: Path) -> None:
    documented = set((upstream / "kube-state-metrics" / "metric-names.txt").read_text().split())
    used = set().union(*(metric_names(str(r["expr"])) for r in rules_of(rule())))

    assert used == {
        "kube_node_status_condition",
        "kube_node_spec_unschedulable",
        "kube_cronjob_status_last_successful_time",
    }
    assert used <= KSM_METRICS_USED and used <= documented


def test_promtool_accepts_the_health_rule_group(promtool: str, tmp_path: Path) -> None:
    result = promtool_check(promtool, rule(), tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rules found" in result.stdout


@pytest.mark.parametrize("alert", sorted({c.alert for c in CASES}))
def test_the_rule_engine_fires_the_health_alert_on_its_series_and_not_on_the_near_misses(
    promtool: str, tmp_path: Path, alert: str
) -> None:
    result = promtool_cases(promtool, rule(), [c for c in CASES if c.alert == alert], tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
