"""Schema-less stand-ins for the Prometheus Operator CRDs the upstream data holds no copy of.

The program's cluster preflight checks that ServiceMonitor and Prometheus are served and reads the Prometheus
objects' rule selectors; it never validates against their schemas, so a CRD that keeps unknown fields is enough.
(The PrometheusRule CRD, which the stack writes to, is the real one from ../shared/upstream.)
"""

from __future__ import annotations

from typing import Any


def schema_less_crd(plural: str, singular: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


SERVICE_MONITOR_CRD = schema_less_crd("servicemonitors", "servicemonitor", "ServiceMonitor")
PROMETHEUS_CRD = schema_less_crd("prometheuses", "prometheus", "Prometheus")


def rancher_monitoring_prometheus(namespace: str) -> dict[str, Any]:
    """The Prometheus of a lab's rancher-monitoring as the preflight reads it: empty selectors load every rule."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": "rancher-monitoring-prometheus", "namespace": namespace},
        "spec": {
            "ruleSelector": {},
            "ruleNamespaceSelector": {},
            "serviceMonitorSelector": {},
            "serviceMonitorNamespaceSelector": {},
        },
    }
