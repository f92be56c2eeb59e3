"""Cluster preflight, second half: the namespaces the stack puts objects in exist, and a Prometheus loads the GPU
alerts. Both pass the offline checks and fail late: a ResourceQuota or a dashboard ConfigMap in a missing namespace
fails `up` with 'namespaces "katib-sweeps" not found' after the GPU nodes came up, and a PrometheusRule no
Prometheus selects is created fine and never evaluated: the alerts are silently not there.

Selector semantics (prometheus-operator v0.93.0, pkg/apis/monitoring/v1/prometheus_types.go, the RuleSelector and
RuleNamespaceSelector doc comments, and the same for ServiceMonitorSelector and ServiceMonitorNamespaceSelector):
a selector empty matches everything, null matches nothing; a namespace selector empty matches every namespace, null
(the default) only the Prometheus's own namespace. The same holds for the DCGM exporter's ServiceMonitor, which
the operator creates in its own namespace labelled app=nvidia-dcgm-exporter plus
`dcgmExporter.serviceMonitor.additionalLabels` (gpu-operator v26.7.0 assets/state-dcgm-exporter/
0500_service_monitor.yaml, controllers/object_controls.go applyServiceMonitorCustomEdits): a Prometheus that
selects neither scrapes no GPU metric, and DcgmExporterDown fires although the exporter runs fine.
kube-prometheus-stack renders `ruleSelector: {matchLabels: {release: <its release name>}}` unless
`prometheusSpec.ruleSelectorNilUsesHelmValues` is false (templates/prometheus/prometheus.yaml), so a rule
without that label is ignored there; the check reads the cluster's own Prometheus objects, whichever chart made
them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

from components.gpu_platform.alert_rules import prometheus_rule_labels
from components.gpu_platform.namespaces import build_operator_namespace
from config.stack import StackConfig
from knowledge.gpu_operator import DCGM_EXPORTER_APP

EXIT_MARK = "kubectl-exit="
PROMETHEUSES = "get prometheuses.monitoring.coreos.com -A -o json"


class NeededNamespace(NamedTuple):
    name: str
    key: str
    what: str


def needed_namespaces(cfg: StackConfig) -> list[NeededNamespace]:
    """Namespaces the program puts objects in but does not create (it creates the operator's and the smoke test's)."""
    needed = [
        NeededNamespace(ns, f"gpu-pool:gpuQuotas.namespaces.{ns}", "its GPU ResourceQuota")
        for ns in sorted(cfg.gpu_quotas.namespaces)
    ]
    monitoring = cfg.monitoring
    if monitoring.alerts_enabled:
        needed.append(
            NeededNamespace(monitoring.rules_namespace, "gpu-pool:monitoring.rulesNamespace", "the GPU alerts")
        )
    if monitoring.dashboard_enabled:
        needed.append(
            NeededNamespace(monitoring.dashboard_namespace, "gpu-pool:monitoring.dashboardNamespace", "the dashboard")
        )
    return needed


def namespaces_query(namespaces: list[NeededNamespace]) -> str:
    """Only the namespaces needed, missing ones left out of the List instead of failing the command."""
    names = " ".join(shlex.quote(name) for name in sorted({n.name for n in namespaces}))
    return f"get namespaces {names} --ignore-not-found -o json"


def query_command(kubectl: str, query: str) -> str:
    """Read-only and always exit 0: the JSON on stdout, kubectl's own words and its exit code on stderr."""
    return f"{kubectl} {query}; echo {EXIT_MARK}$? >&2"


def parse_answer(stdout: str, stderr: str, what: str) -> list[Mapping[str, Any]]:
    """The items of kubectl's JSON List. Raises ValueError with kubectl's words when it failed."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    code = next((line[len(EXIT_MARK) :] for line in lines if line.startswith(EXIT_MARK)), "?")
    said = "; ".join(line for line in lines if not line.startswith(EXIT_MARK)) or "nothing"
    if code != "0":
        raise ValueError(f"kubectl could not list the cluster's {what} (exit {code}: {said})")
    # `--ignore-not-found` with nothing found prints nothing; one name asked for prints that object, not a List.
    if not stdout.strip():
        return []
    try:
        document = json.loads(stdout)
    except ValueError:
        document = None
    if isinstance(document, Mapping) and document.get("kind") != "List" and "metadata" in document:
        return [document]
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list):
        raise ValueError(f"kubectl listed the cluster's {what}, but not as JSON")
    return [item for item in items if isinstance(item, Mapping)]


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def namespace_labels(namespaces: list[Mapping[str, Any]]) -> dict[str, Mapping[str, str]]:
    return {str(_metadata(ns).get("name")): _metadata(ns).get("labels") or {} for ns in namespaces}


def namespace_problems(needed: list[NeededNamespace], existing: Mapping[str, Any]) -> list[str]:
    return [
        f"{n.key}: the cluster has no namespace {n.name}, so {n.what} would fail during `up` ('namespaces "
        f'"{n.name}" not found\'): create it first (kubectl create namespace {n.name}) or name one that exists'
        for n in needed
        if n.name not in existing
    ]


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector against labels; a null selector is the caller's to interpret."""
    if not isinstance(selector, Mapping):
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _loads_rule(prometheus: Mapping[str, Any], labels: Mapping[str, str], namespace: str, ns_labels: Any) -> bool:
    spec = _spec(prometheus)
    namespace_selector = spec.get("ruleNamespaceSelector")
    in_scope = (
        _metadata(prometheus).get("namespace") == namespace
        if namespace_selector is None
        else selects(namespace_selector, ns_labels)
    )
    return in_scope and selects(spec.get("ruleSelector"), labels)


def rule_selector_problems(
    cfg: StackConfig, prometheuses: list[Mapping[str, Any]], ns_labels: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The GPU alerts must be loaded by at least one Prometheus; otherwise say which labels or namespace would be."""
    monitoring = cfg.monitoring
    if not monitoring.alerts_enabled or monitoring.rules_namespace not in ns_labels:
        return []
    labels = prometheus_rule_labels(monitoring)
    namespace = monitoring.rules_namespace
    if any(_loads_rule(p, labels, namespace, ns_labels[namespace]) for p in prometheuses):
        return []
    key = "gpu-pool:monitoring.ruleLabels"
    if not prometheuses:
        return [
            f"{key}: the cluster has no Prometheus object, so the GPU alerts would never be evaluated: install "
            "Rancher Monitoring or kube-prometheus-stack, or set gpu-pool:monitoring.alertsEnabled to false"
        ]
    hints: list[str] = []
    for p in prometheuses:
        meta, spec = _metadata(p), _spec(p)
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        selector = spec.get("ruleSelector")
        wanted = (selector or {}).get("matchLabels") if isinstance(selector, Mapping) else None
        if selector is None:
            hints.append(f"{name} has no ruleSelector (it loads no rules at all)")
        elif not selects(selector, labels):
            shown = ", ".join(f"{k}: {v}" for k, v in sorted((wanted or {}).items())) or json.dumps(selector)
            hints.append(f"{name} loads rules labelled {{{shown}}}: add them to ruleLabels")
        else:
            hints.append(
                f"{name} does not look for rules in namespace {namespace}: set gpu-pool:monitoring.rulesNamespace "
                f"to {meta.get('namespace')}"
            )
    return [
        f"{key}: no Prometheus in the cluster loads the GPU alerts (a PrometheusRule in {namespace} labelled "
        f"{', '.join(f'{k}={v}' for k, v in sorted(labels.items()))}), so they would be created and never fire: "
        + "; ".join(hints)
    ]


def dcgm_service_monitor_labels(cfg: StackConfig) -> dict[str, str]:
    """The labels the operator gives the DCGM exporter's ServiceMonitor."""
    return {"app": DCGM_EXPORTER_APP, **cfg.monitoring.service_monitor_labels}


def _operator_namespace_labels(cfg: StackConfig, existing: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    """The operator namespace's labels: as the cluster has them, else as the program will create it (the API
    server adds kubernetes.io/metadata.name)."""
    namespace = cfg.gpu_operator.namespace
    if namespace in existing:
        return existing[namespace]
    labels = build_operator_namespace(namespace)["metadata"]["labels"]
    return {**labels, "kubernetes.io/metadata.name": namespace}


def _selects_monitor(prometheus: Mapping[str, Any], labels: Mapping[str, str], namespace: str, ns_labels: Any) -> bool:
    spec = _spec(prometheus)
    namespace_selector = spec.get("serviceMonitorNamespaceSelector")
    in_scope = (
        _metadata(prometheus).get("namespace") == namespace
        if namespace_selector is None
        else selects(namespace_selector, ns_labels)
    )
    return in_scope and selects(spec.get("serviceMonitorSelector"), labels)


def service_monitor_selector_problems(
    cfg: StackConfig, prometheuses: list[Mapping[str, Any]], existing: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The DCGM exporter's ServiceMonitor must be selected by at least one Prometheus, or nothing scrapes the GPUs."""
    if not cfg.monitoring.service_monitor:
        return []
    if not prometheuses:
        if cfg.monitoring.alerts_enabled:
            return []  # the alerts' check says the cluster has no Prometheus
        return [
            "gpu-pool:monitoring.serviceMonitor: the cluster has no Prometheus object, so the DCGM exporter's "
            "ServiceMonitor would scrape nothing and the dashboard stay empty: install Rancher Monitoring or "
            "kube-prometheus-stack, or set serviceMonitor (and dashboardEnabled) to false"
        ]
    labels = dcgm_service_monitor_labels(cfg)
    namespace = cfg.gpu_operator.namespace
    ns_labels = _operator_namespace_labels(cfg, existing)
    if any(_selects_monitor(p, labels, namespace, ns_labels) for p in prometheuses):
        return []
    hints: list[str] = []
    for p in prometheuses:
        meta, spec = _metadata(p), _spec(p)
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        selector = spec.get("serviceMonitorSelector")
        wanted = (selector or {}).get("matchLabels") if isinstance(selector, Mapping) else None
        if selector is None:
            hints.append(f"{name} has no serviceMonitorSelector (it selects no ServiceMonitor)")
        elif not selects(selector, labels):
            shown = ", ".join(f"{k}: {v}" for k, v in sorted((wanted or {}).items())) or json.dumps(selector)
            hints.append(f"{name} selects ServiceMonitors labelled {{{shown}}}: add them to serviceMonitorLabels")
        else:
            hints.append(
                f"{name} does not look for ServiceMonitors in namespace {namespace} (serviceMonitorNamespaceSelector): "
                "widen that selector on the Prometheus"
            )
    return [
        "gpu-pool:monitoring.serviceMonitorLabels: no Prometheus in the cluster selects the DCGM exporter's "
        f"ServiceMonitor (in {namespace}, labelled {', '.join(f'{k}={v}' for k, v in sorted(labels.items()))}), so "
        "no GPU metric is scraped and DcgmExporterDown fires while the exporter runs: " + "; ".join(hints)
    ]


def explicit_quota_overlaps(cfg: StackConfig, existing: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Information, not a problem: explicit gpuQuotas.namespaces entries whose namespace a selector rule also
    matches. The explicit entry wins (the generating policy skips it), so each has exactly one GPU quota."""
    notes = []
    for name in sorted(cfg.gpu_quotas.namespaces):
        labels = existing.get(name)
        if labels is None:
            continue
        rules = [rule.name for rule in cfg.gpu_quotas.selectors if rule.match_labels.items() <= labels.items()]
        if rules:
            notes.append(
                f"namespace {name}: its explicit gpuQuotas.namespaces entry ({cfg.gpu_quotas.namespaces[name]} GPUs) "
                f"wins over selector rule {', '.join(rules)}"
            )
    return notes
