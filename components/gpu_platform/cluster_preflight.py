"""Cluster preflight: the CRDs the enabled features create objects of exist, checked with kubectl at preview; then
the namespaces and the Prometheus that must be there (cluster_objects.py).

Without them the plan fails late: a PrometheusRule or a Kyverno ClusterPolicy is refused during `up`, and a
ServiceMonitor the operator cannot create leaves the ClusterPolicy notReady for good ("Install Prometheus and
necessary CRDs", gpu-operator controllers/object_controls.go).
"""

from __future__ import annotations

import shlex
from typing import Any, NamedTuple

from components.gpu_platform.cluster_objects import (
    PROMETHEUSES,
    namespace_labels,
    namespace_problems,
    namespaces_query,
    needed_namespaces,
    parse_answer,
    query_command,
    rule_selector_problems,
)
from components.shared.preflight import SKIPPED_OFFLINE, PreflightError
from config.stack import StackConfig

CRD_LISTED = "customresourcedefinition.apiextensions.k8s.io/"
EXIT_MARK = "kubectl-exit="


class NeededCrd(NamedTuple):
    name: str
    why: str
    fix: str


def needed_crds(cfg: StackConfig) -> list[NeededCrd]:
    needed: list[NeededCrd] = []
    monitoring = "install the Prometheus Operator (Rancher Monitoring, kube-prometheus-stack)"
    if cfg.monitoring.service_monitor:
        needed.append(
            NeededCrd(
                "servicemonitors.monitoring.coreos.com",
                "gpu-pool:monitoring.serviceMonitor is true (the GPU Operator creates the DCGM exporter's "
                "ServiceMonitor, and stays notReady without the CRD)",
                f"{monitoring}, or set gpu-pool:monitoring.serviceMonitor and alertsEnabled to false",
            )
        )
    if cfg.monitoring.alerts_enabled:
        needed.append(
            NeededCrd(
                "prometheusrules.monitoring.coreos.com",
                "gpu-pool:monitoring.alertsEnabled is true (the GPU alerts are a PrometheusRule)",
                f"{monitoring}, or set gpu-pool:monitoring.alertsEnabled to false",
            )
        )
    kyverno_users = [
        (cfg.kyverno.enabled, "gpu-pool:kyverno.enabled is true (the GPU steering policy)"),
        (bool(cfg.gpu_quotas.selectors), "gpu-pool:gpuQuotas.selectors is set (the quota generate policy)"),
        (cfg.kyverno.min_cpu_per_gpu is not None, "gpu-pool:kyverno.minCpuPerGpu is set (the CPU audit policy)"),
    ]
    if any(flag for flag, _ in kyverno_users):
        needed.append(
            NeededCrd(
                "clusterpolicies.kyverno.io",
                " and ".join(reason for flag, reason in kyverno_users if flag),
                "install Kyverno (1.13 or newer), or set gpu-pool:kyverno.enabled to false and drop "
                "gpu-pool:gpuQuotas.selectors and gpu-pool:kyverno.minCpuPerGpu",
            )
        )
    return needed


def crd_check_command(kubectl: str, crds: list[NeededCrd]) -> str:
    """Read-only, and exits 0 whatever happens, so the answer (or kubectl's error) always comes back."""
    names = " ".join(shlex.quote(crd.name) for crd in crds)
    return f"{kubectl} get crd {names} --ignore-not-found -o name 2>&1; echo {EXIT_MARK}$?"


def crd_problems(crds: list[NeededCrd], output: str) -> list[str]:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    exit_code = next((line[len(EXIT_MARK) :] for line in lines if line.startswith(EXIT_MARK)), "?")
    if exit_code != "0":
        said = "; ".join(line for line in lines if not line.startswith(EXIT_MARK)) or "nothing"
        return [
            f"gpu-pool:kubernetes: kubectl could not list the cluster's CRDs (exit {exit_code}: {said}); check "
            "gpu-pool:kubernetes.kubeconfig and context, or set gpu-pool:preflight.clusterCheck to false"
        ]
    present = {line[len(CRD_LISTED) :] for line in lines if line.startswith(CRD_LISTED)}
    return [f"the cluster has no {crd.name} CRD, but {crd.why}: {crd.fix}" for crd in crds if crd.name not in present]


def run_cluster_preflight(cfg: StackConfig, kubectl: str, *, offline: bool) -> str:
    """Ask the cluster for the CRDs the stack needs (a read-only kubectl run at preview). Raises PreflightError."""
    import pulumi_command as command

    crds = needed_crds(cfg)
    namespaces = needed_namespaces(cfg)
    if offline:
        return SKIPPED_OFFLINE
    if not cfg.preflight.cluster_check:
        return "skipped: gpu-pool:preflight.clusterCheck is false"
    if not crds and not namespaces:
        return "passed: no CRD or namespace needed"
    if crds:
        ran = command.local.run(command=crd_check_command(kubectl, crds))
        if problems := crd_problems(crds, ran.stdout):
            raise PreflightError(problems)
    passed = [crd.name for crd in crds]
    if namespaces:
        passed.append("namespaces " + ", ".join(sorted({n.name for n in namespaces})))
        existing = namespace_labels(_listed(kubectl, namespaces_query(namespaces), "namespaces"))
        problems = namespace_problems(namespaces, existing)
        if cfg.monitoring.alerts_enabled:
            problems += rule_selector_problems(cfg, _listed(kubectl, PROMETHEUSES, "Prometheus objects"), existing)
            passed.append("a Prometheus loads the GPU alerts")
        if problems:
            raise PreflightError(problems)
    return "passed: " + ", ".join(passed)


def _listed(kubectl: str, query: str, what: str) -> list[Any]:
    import pulumi_command as command

    ran = command.local.run(command=query_command(kubectl, query))
    try:
        return parse_answer(ran.stdout, ran.stderr, what)
    except ValueError as error:
        raise PreflightError(
            [
                f"gpu-pool:kubernetes: {error}; check gpu-pool:kubernetes.kubeconfig and context (and that it may "
                "list them), or set gpu-pool:preflight.clusterCheck to false"
            ]
        ) from None
