"""The unattended repair's metrics (what the watcher exports on /metrics: day2/repair/watcher.py Metrics) and the
alerts that read them, naming what to do; promtool evaluates them on those series
(tests/unattended/test_alerts_promtool.py). Registered with the watcher where monitoring.alertsEnabled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.shared.prometheus_rules import alert, prometheus_rule
from config.monitoring import MonitoringConfig
from config.repair import UnattendedConfig

# Counter, by node and result (`fixed`, `not-fixed`): repairs the watcher ran to the end.
REPAIRS = "gpu_pool_unattended_repairs_total"
# Counter, by node and reason (day2/repair/unattended.py Reason): repairs the guard rails refused.
REFUSALS = "gpu_pool_unattended_refusals_total"
# Gauge, 1 while the pool-wide breaker is open.
BREAKER_OPEN = "gpu_pool_unattended_breaker_open"
METRICS = (REPAIRS, REFUSALS, BREAKER_OPEN)
RULE_NAME = "gpu-pool-unattended-repair"
GROUP_NAME = "gpu-pool.unattended-repair"
RUNBOOK_ANCHORS: Mapping[str, str] = {
    "GpuPoolRepairBreakerOpen": "alert-gpupoolrepairbreakeropen",
    "GpuPoolRepairDidNotFix": "alert-gpupoolrepairdidnotfix",
}


def _alert(monitoring: MonitoringConfig, name: str, **fields: Any) -> dict[str, Any]:
    return alert(monitoring, name, anchor=RUNBOOK_ANCHORS[name], **fields)


def build_unattended_alert_rules(
    monitoring: MonitoringConfig, cfg: UnattendedConfig, *, stack: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    node = "{{ $labels.node }}"
    breaker = f"kubectl -n {cfg.namespace} get configmap gpu-pool-repair-breaker -o jsonpath='{{.data}}'"
    rules = [
        _alert(
            monitoring,
            "GpuPoolRepairBreakerOpen",
            expr=f"max({BREAKER_OPEN}) == 1",
            for_="0m",
            severity="critical",
            summary="The unattended repair's breaker is open: nothing is repaired unattended",
            description=(
                f"{cfg.breaker_failures} repairs within {cfg.breaker_window} did not fix: the cards "
                "keep faulting, which a power cycle does not cure. Which nodes and why: "
                f"{breaker}. Look at their hardware (seating, riser, power, cooling; the card), then "
                f"close the breaker: gpu-pool repair --reset-breaker --stack {stack}."
            ),
        ),
        _alert(
            monitoring,
            "GpuPoolRepairDidNotFix",
            expr=f'sum by (node) (increase({REPAIRS}{{result="not-fixed"}}[1h])) > 0',
            for_="0m",
            severity="warning",
            summary=f"An unattended repair of {node} did not fix it",
            description=(
                f"The watcher power-cycled {node}'s VM and node-check or the smoke test still fails; "
                f"the node stays cordoned. gpu-pool doctor {node} --stack {stack} says which floor; "
                f"gpu-pool node-check on the node says why. {breaker} counts it toward the breaker."
            ),
        ),
    ]
    return prometheus_rule(RULE_NAME, monitoring.rules_namespace, labels, [{"name": GROUP_NAME, "rules": rules}])
