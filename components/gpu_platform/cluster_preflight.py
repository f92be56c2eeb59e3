"""Cluster preflight: the CRDs the enabled features create objects of exist, checked with kubectl at preview; then
the namespaces and the Prometheus that must be there (cluster_objects.py).

Without them the plan fails late: a PrometheusRule or a Kyverno policy is refused during `up`, and a
ServiceMonitor the operator cannot create leaves the ClusterPolicy notReady for good ("Install Prometheus and
necessary CRDs", gpu-operator controllers/object_controls.go). Kyverno's policy types must be served at the version
the stack writes (policies.kyverno.io/v1 from Kyverno 1.17; kyverno.io/v1 ClusterPolicy until 1.20), and the GPU
Operator CRDs the program registers must not already store a version the pinned chart drops: the API server
refuses such a CRD update (status.storedVersions must stay in spec.versions), which `up` would find too late.
"""

from __future__ import annotations

import shlex
from typing import Any, NamedTuple

from components.gpu_platform.cluster_objects import (
    PROMETHEUSES,
    explicit_quota_overlaps,
    namespace_labels,
    namespace_problems,
    namespaces_query,
    needed_namespaces,
    parse_answer,
    query_command,
    rule_selector_problems,
    service_monitor_selector_problems,
)
from components.gpu_platform.existing_objects import (
    adoption_notice,
    existing_queries,
    foreign,
    foreign_problems,
    planned_objects,
)
from components.gpu_platform.kyverno_version import KYVERNO_QUERY, kyverno_version_problems
from components.gpu_platform.release_values import nfd_enabled
from components.shared.local_run import run_quietly
from components.shared.preflight import SKIPPED_OFFLINE, PreflightError
from config.stack import StackConfig

EXIT_MARK = "kubectl-exit="


class NeededCrd(NamedTuple):
    name: str
    why: str
    fix: str
    # The version that must be served (the apiVersion the stack writes), None when any will do.
    served: str | None = None
    # False: the program creates it itself (the chart's CRDs); only what the cluster already stores is checked.
    required: bool = True
    # For the chart's CRDs: the versions the pinned chart defines; a stored version outside them is a downgrade.
    chart_versions: tuple[str, ...] = ()


def _kyverno_crds(cfg: StackConfig, users: list[tuple[bool, str, str]]) -> list[NeededCrd]:
    cel = cfg.kyverno.policy_api == "cel"
    install = "install Kyverno (1.17 or newer for policyApi cel, 1.13 to 1.19 for clusterpolicy)"
    other = (
        "or set gpu-pool:kyverno.policyApi: clusterpolicy on Kyverno 1.13 to 1.16"
        if cel
        else "or set gpu-pool:kyverno.policyApi: cel (Kyverno 1.20 has no ClusterPolicy)"
    )
    drop = (
        "or set gpu-pool:kyverno.enabled to false and drop gpu-pool:gpuQuotas.selectors and "
        "gpu-pool:kyverno.minCpuPerGpu"
    )
    if not cel:
        reasons = [why for flag, why, _ in users if flag]
        if not reasons:
            return []
        return [NeededCrd("clusterpolicies.kyverno.io", " and ".join(reasons), f"{install}, {other}, {drop}", "v1")]
    return [
        NeededCrd(f"{plural}.policies.kyverno.io", why, f"{install}, {other}, {drop}", "v1")
        for flag, why, plural in users
        if flag
    ]


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
        (cfg.kyverno.enabled, "gpu-pool:kyverno.enabled is true (the GPU steering policy)", "mutatingpolicies"),
        (
            bool(cfg.gpu_quotas.selectors),
            "gpu-pool:gpuQuotas.selectors is set (the quota generate policy)",
            "generatingpolicies",
        ),
    ]
    validating = [
        why
        for flag, why in (
            (cfg.kyverno.enabled, "gpu-pool:kyverno.enabled is true (the multi-GPU refusal policy)"),
            (cfg.kyverno.min_cpu_per_gpu is not None, "gpu-pool:kyverno.minCpuPerGpu is set (the CPU audit policy)"),
        )
        if flag
    ]
    kyverno_users.append((bool(validating), " and ".join(validating), "validatingpolicies"))
    needed += _kyverno_crds(cfg, kyverno_users)
    if not nfd_enabled(cfg.gpu_operator):
        # The chart's NFD is off: another NFD must label the nodes (feature.node.kubernetes.io/pci-10de.present),
        # which every operand is scheduled by. NFD's own CRDs (the subchart's crds/nfd-api-crds.yaml) show one is
        # installed.
        needed.append(
            NeededCrd(
                "nodefeatures.nfd.k8s-sigs.io",
                "gpu-pool:gpuOperator.extraValues.nfd.enabled is false (the chart's Node Feature Discovery off), and "
                "without an NFD nothing labels the GPU nodes, so no operand is ever scheduled there",
                "install Node Feature Discovery, or remove nfd.enabled: false",
            )
        )
    chart = cfg.gpu_operator.local_chart()
    if chart is not None:
        for crd in chart.crds():
            versions = tuple(str(v["name"]) for v in crd["spec"]["versions"])
            needed.append(
                NeededCrd(
                    str(crd["metadata"]["name"]),
                    f"gpu-pool:gpuOperator.chart is GPU Operator {chart.version}, whose CRD defines only "
                    f"{', '.join(versions)}",
                    "a chart older than the operator that installed this CRD cannot take it back (the API server "
                    "refuses to drop a stored version): pin a chartVersion at least as new as the cluster's operator",
                    required=False,
                    chart_versions=versions,
                )
            )
    return needed


# One line per CRD found: its name, the versions it serves, the versions it has stored (comma-separated).
CRD_COLUMNS = (
    "custom-columns=NAME:.metadata.name,SERVED:.spec.versions[?(@.served==true)].name,STORED:.status.storedVersions[*]"
)


def crd_check_command(kubectl: str, crds: list[NeededCrd]) -> str:
    """Read-only, and exits 0 whatever happens, so the answer (or kubectl's error) always comes back."""
    names = " ".join(shlex.quote(crd.name) for crd in crds)
    listing = f"--ignore-not-found --no-headers -o {shlex.quote(CRD_COLUMNS)}"
    return f"{kubectl} get crd {names} {listing} 2>&1; echo {EXIT_MARK}$?"


def _listed(lines: list[str]) -> dict[str, tuple[set[str], set[str]]]:
    found: dict[str, tuple[set[str], set[str]]] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and not line.startswith(EXIT_MARK):
            name, served, stored = parts
            found[name] = (set(served.split(",")) - {"<none>"}, set(stored.split(",")) - {"<none>"})
    return found


def crd_problems(crds: list[NeededCrd], output: str) -> list[str]:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    exit_code = next((line[len(EXIT_MARK) :] for line in lines if line.startswith(EXIT_MARK)), "?")
    if exit_code != "0":
        said = "; ".join(line for line in lines if not line.startswith(EXIT_MARK)) or "nothing"
        return [
            f"gpu-pool:kubernetes: kubectl could not list the cluster's CRDs (exit {exit_code}: {said}); check "
            "gpu-pool:kubernetes.kubeconfig and context, or set gpu-pool:preflight.clusterCheck to false"
        ]
    listed = _listed(lines)
    problems: list[str] = []
    for crd in crds:
        if crd.name not in listed:
            if crd.required:
                problems.append(f"the cluster has no {crd.name} CRD, but {crd.why}: {crd.fix}")
            continue
        served, stored = listed[crd.name]
        if crd.served and crd.served not in served:
            problems.append(
                f"the cluster's {crd.name} CRD serves {', '.join(sorted(served)) or 'nothing'}, not {crd.served}, "
                f"but {crd.why}: {crd.fix}"
            )
        dropped = sorted(stored - set(crd.chart_versions)) if crd.chart_versions else []
        if dropped:
            problems.append(
                f"the cluster's {crd.name} CRD has objects stored as {', '.join(dropped)}, but {crd.why}: {crd.fix}"
            )
    return problems


class ClusterPreflight(NamedTuple):
    summary: str
    # Objects the plan creates that the cluster already has, adopted because gpu-pool:kubernetes.adoptExisting
    # says so (existing_objects.py): the preview says which.
    adopting: bool = False


def run_cluster_preflight(cfg: StackConfig, kubectl: str, *, offline: bool) -> ClusterPreflight:
    """Ask the cluster what the stack needs and what it already has (read-only kubectl runs at preview).
    Raises PreflightError with every problem found."""

    crds = needed_crds(cfg)
    namespaces = needed_namespaces(cfg)
    if offline:
        return ClusterPreflight(SKIPPED_OFFLINE)
    if not cfg.preflight.cluster_check:
        return ClusterPreflight("skipped: gpu-pool:preflight.clusterCheck is false")
    if crds:
        ran = run_quietly(crd_check_command(kubectl, crds))
        if missing := crd_problems(crds, ran.stdout):
            raise PreflightError(missing)
    passed = [crd.name for crd in crds if crd.required]
    problems: list[str] = []
    existing: dict[str, Any] = {}
    if namespaces:
        passed.append("namespaces " + ", ".join(sorted({n.name for n in namespaces})))
        existing = namespace_labels(_kubectl_list(kubectl, namespaces_query(namespaces), "namespaces"))
        problems += namespace_problems(namespaces, existing)
        passed += explicit_quota_overlaps(cfg, existing)
    if cfg.monitoring.alerts_enabled or cfg.monitoring.service_monitor:
        prometheuses = _kubectl_list(kubectl, PROMETHEUSES, "Prometheus objects")
        if cfg.monitoring.alerts_enabled:
            problems += rule_selector_problems(cfg, prometheuses, existing)
            passed.append("a Prometheus loads the GPU alerts")
        if cfg.monitoring.service_monitor:
            problems += service_monitor_selector_problems(cfg, prometheuses, existing)
            passed.append("a Prometheus scrapes the DCGM exporter")
    if any(crd.name.endswith("kyverno.io") for crd in crds):
        problems += kyverno_version_problems(cfg.kyverno, _kubectl_list(kubectl, KYVERNO_QUERY, "Deployments"))
    planned = planned_objects(cfg)
    found = [item for query in existing_queries(planned) for item in _kubectl_list(kubectl, query, "objects")]
    taken = foreign(planned, found)
    adopting = bool(taken) and cfg.kubernetes.adopt_existing
    if taken and not adopting:
        problems += foreign_problems(taken)
    if problems:
        raise PreflightError(problems)
    passed.append(adoption_notice(taken) if adopting else "no object the plan creates is someone else's")
    return ClusterPreflight("passed: " + ", ".join(passed), adopting)


def _kubectl_list(kubectl: str, query: str, what: str) -> list[Any]:

    ran = run_quietly(query_command(kubectl, query))
    try:
        return parse_answer(ran.stdout, ran.stderr, what)
    except ValueError as error:
        raise PreflightError(
            [
                f"gpu-pool:kubernetes: {error}; check gpu-pool:kubernetes.kubeconfig and context (and that it may "
                "list them), or set gpu-pool:preflight.clusterCheck to false"
            ]
        ) from None
