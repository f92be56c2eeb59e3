"""A PrometheusRule and its alerts, as every rule set of the program writes them (the GPU alerts, the health
check's, the unattended repair's): one shape, so each alert carries its severity and its runbook link the same way
and docs/alerts.md's anchors are the only thing a rule set adds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from config.monitoring import MonitoringConfig


def alert(
    monitoring: MonitoringConfig,
    name: str,
    *,
    anchor: str,
    expr: str,
    for_: str,
    severity: str,
    summary: str,
    description: str,
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One alerting rule; `anchor` is its section in the runbook (docs/alerts.md)."""
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, **(extra_labels or {})},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{monitoring.runbook_base_url}#{anchor}",
        },
    }


def prometheus_rule(
    name: str, namespace: str, labels: Mapping[str, str], groups: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The prometheus-operator object holding `groups`, in the namespace its Prometheus reads rules from."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"groups": [dict(group) for group in groups]},
    }
