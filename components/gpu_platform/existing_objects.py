"""Cluster preflight, third part: the objects the plan creates that the cluster already has.

pulumi-kubernetes 4.29 and later refuse to create an object that already exists (AlreadyExists, with a list of
ways out: pulumi-kubernetes v4.32.0 provider/pkg/await/await.go), where older providers silently took it over
with server-side apply and then deleted it on `pulumi destroy`. A lab that installed the GPU Operator by hand has
its namespace, or Helm-made CRDs the program registers from the chart on disk. So the preflight asks: each object
the plan creates that exists and that no pulumi-kubernetes field manager has written (the provider creates with
the field manager `pulumi-kubernetes` and applies with `pulumi-kubernetes-<id>`: provider.go fieldManagerName) is
refused at preview, naming the object, who made it and the ways out; with `gpu-pool:kubernetes.adoptExisting` the
provider's `upsertExistingObjects` is on, and every preview names the objects it adopts.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

from components.gpu_platform.alert_rules import build_gpu_alert_rules
from components.gpu_platform.cel_policies import (
    build_cpu_guard_validating_policy,
    build_gpu_quota_generating_policies,
    build_gpu_steering_mutating_policy,
    build_multi_gpu_validating_policy,
)
from components.gpu_platform.cpu_guard_policy import build_cpu_guard_policy
from components.gpu_platform.dashboard import build_dashboard_configmap
from components.gpu_platform.dcgm_metrics import build_dcgm_metrics_configmap, deployed_exporter_version
from components.gpu_platform.multi_gpu import WholeCards
from components.gpu_platform.namespaces import build_operator_namespace, build_smoke_namespace
from components.gpu_platform.operator_crds import build_operator_crds
from components.gpu_platform.quota_policy import build_gpu_quota_generate_policy
from components.gpu_platform.quotas import build_gpu_quotas, build_kyverno_quota_rbac
from components.gpu_platform.steering_policy import build_gpu_steering_policy, build_multi_gpu_policy
from components.gpu_platform.time_slicing import build_time_slicing_configmap
from config.stack import StackConfig

PULUMI_FIELD_MANAGER = "pulumi-kubernetes"


class PlannedObject(NamedTuple):
    api_version: str
    kind: str
    namespace: str | None
    name: str
    # The stack-file key that names or brings the object.
    key: str

    @property
    def ref(self) -> str:
        """`plural.group/name`, as kubectl names it (every kind here has a regular English plural)."""
        group = self.api_version.rpartition("/")[0]
        kind = self.kind.lower()
        plural = kind[:-1] + "ies" if kind.endswith("y") else kind + ("es" if kind.endswith("s") else "s")
        return f"{plural}{'.' + group if group else ''}/{self.name}"

    def describe(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.kind} {self.name}{where}"


def _planned(obj: Mapping[str, Any], key: str) -> PlannedObject:
    meta = obj["metadata"]
    return PlannedObject(str(obj["apiVersion"]), str(obj["kind"]), meta.get("namespace"), str(meta["name"]), key)


def planned_objects(cfg: StackConfig) -> list[PlannedObject]:
    """Every object the platform creates by name (not the Helm release, nor the patches of existing Nodes), from the
    same builders GpuPlatform registers; tests/gpu_platform/test_existing_objects.py holds the two lists equal."""
    operator = cfg.gpu_operator
    ns = operator.namespace
    objects = [
        _planned(build_operator_namespace(ns), "gpu-pool:gpuOperator.namespace"),
        _planned(build_time_slicing_configmap(cfg.sharing_profiles, ns), "gpu-pool:gpuOperator.namespace"),
        _planned(
            build_dcgm_metrics_configmap(ns, deployed_exporter_version(operator)), "gpu-pool:gpuOperator.namespace"
        ),
    ]
    chart = operator.local_chart()
    if chart is not None:
        nfd = operator.extra_values.get("nfd")
        nfd_enabled = not (isinstance(nfd, dict) and nfd.get("enabled") is False)
        crds = build_operator_crds(chart, nfd_enabled=nfd_enabled)
        objects += [_planned(crd, "gpu-pool:gpuOperator.chart") for crd in crds]
    cel = cfg.kyverno.policy_api == "cel"
    if cfg.kyverno.enabled:
        steering = build_gpu_steering_mutating_policy if cel else build_gpu_steering_policy
        whole = WholeCards.of(cfg)
        objects.append(
            _planned(steering(cfg.kyverno, operator_namespace=ns, whole=whole), "gpu-pool:kyverno.policyName")
        )
        refusal = build_multi_gpu_validating_policy if cel else build_multi_gpu_policy
        objects.append(_planned(refusal(cfg.kyverno, operator_namespace=ns, whole=whole), "gpu-pool:kyverno.enabled"))
    guard = (build_cpu_guard_validating_policy if cel else build_cpu_guard_policy)(cfg.kyverno, operator_namespace=ns)
    if guard is not None:
        objects.append(_planned(guard, "gpu-pool:kyverno.minCpuPerGpu"))
    if cfg.smoke_test.enabled:
        objects.append(_planned(build_smoke_namespace(cfg.smoke_test), "gpu-pool:smokeTest.namespace"))
    monitoring = cfg.monitoring
    if monitoring.dashboard_enabled:
        objects.append(_planned(build_dashboard_configmap(monitoring), "gpu-pool:monitoring.dashboardNamespace"))
    if monitoring.alerts_enabled:
        rules = build_gpu_alert_rules(
            monitoring, expected_slots_by_node={d.hostname: cfg.slots(d) for d in cfg.failure_domains}, namespace=ns
        )
        objects.append(_planned(rules, "gpu-pool:monitoring.rulesNamespace"))
    for quota in build_gpu_quotas(cfg.gpu_quotas):
        objects.append(_planned(quota, f"gpu-pool:gpuQuotas.namespaces.{quota['metadata']['namespace']}"))
    if cfg.gpu_quotas.selectors:
        objects.append(_planned(build_kyverno_quota_rbac(), "gpu-pool:gpuQuotas.selectors"))
        if cel:
            policies = build_gpu_quota_generating_policies(cfg.gpu_quotas)
        else:
            policy = build_gpu_quota_generate_policy(cfg.gpu_quotas)
            policies = [policy] if policy is not None else []
        objects += [_planned(p, "gpu-pool:gpuQuotas.selectors") for p in policies]
    return objects


def existing_queries(objects: list[PlannedObject]) -> list[str]:
    """kubectl queries (one per namespace, cluster-scoped objects first) for the objects that exist, with their
    field managers; missing ones are left out of the answer instead of failing it."""
    by_namespace: dict[str, list[str]] = {}
    for obj in objects:
        by_namespace.setdefault(obj.namespace or "", []).append(obj.ref)
    queries = []
    for namespace, refs in sorted(by_namespace.items()):
        scope = f" -n {shlex.quote(namespace)}" if namespace else ""
        names = " ".join(shlex.quote(ref) for ref in refs)
        queries.append(f"get {names}{scope} --ignore-not-found --show-managed-fields -o json")
    return queries


def _managers(obj: Mapping[str, Any]) -> list[str]:
    fields = (obj.get("metadata") or {}).get("managedFields") or []
    return sorted({str(e.get("manager")) for e in fields if isinstance(e, Mapping) and e.get("manager")})


def foreign(objects: list[PlannedObject], found: list[Mapping[str, Any]]) -> list[tuple[PlannedObject, list[str]]]:
    """The planned objects the cluster has and no pulumi-kubernetes field manager wrote, with the managers that did."""
    wanted = {(o.kind, o.namespace, o.name): o for o in objects}
    result: list[tuple[PlannedObject, list[str]]] = []
    for item in found:
        meta = item.get("metadata") or {}
        planned = wanted.get((str(item.get("kind")), meta.get("namespace"), str(meta.get("name"))))
        managers = _managers(item)
        if planned is not None and not any(m.startswith(PULUMI_FIELD_MANAGER) for m in managers):
            result.append((planned, managers))
    return result


def _in(obj: PlannedObject) -> str:
    return f" -n {obj.namespace}" if obj.namespace else ""


def _made_by(managers: list[str]) -> str:
    return f"written by {', '.join(managers)}" if managers else "with no field manager recorded"


def foreign_problems(found: list[tuple[PlannedObject, list[str]]]) -> list[str]:
    return [
        f"{obj.key}: the cluster already has {obj.describe()} ({_made_by(managers)}), which this plan creates: "
        "pulumi-kubernetes refuses to create an existing object (and would delete it on destroy if it took it "
        f"over). Delete it if it is a leftover (kubectl delete {obj.ref}{_in(obj)}), "
        "or let the plan adopt it and say so: set gpu-pool:kubernetes.adoptExisting to true"
        for obj, managers in found
    ]


def adoption_notice(found: list[tuple[PlannedObject, list[str]]]) -> str:
    """What the plan adopts (gpu-pool:kubernetes.adoptExisting), for the preview's output."""
    listed = "; ".join(f"{obj.describe()} ({_made_by(managers)})" for obj, managers in found)
    return (
        f"adopting {len(found)} existing object(s) the plan creates (gpu-pool:kubernetes.adoptExisting): {listed}; "
        "from this `up` on they are the stack's, and `pulumi destroy` deletes them"
    )
