"""The optional in-cluster health check (`repair.healthCheck.enabled`): a CronJob that runs doctor's floors on
every GPU node and writes the verdict on the Node as the condition GpuPoolHealthy (day2/doctor/health_check.py), and the
alerts that read it through kube-state-metrics.

No image to build: a stock python image runs the check from a ConfigMap holding its code as one zip and the pool's
facts as JSON (the program builds both from the checkout and the stack: __main__.py). Least privilege: Nodes
(list, and patch their status), and in the operator's and the smoke test's namespaces only what doctor reads there.
No Proxmox credential: the repair stays a human's `gpu-pool repair ... --yes`, which the alert's runbook names.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP
from components.shared.health_condition import CONDITION
from components.shared.node_marking import GpuNodeMarking
from components.shared.payload import module_closure, pack, pyyaml_files
from components.shared.pod_security import restricted_container, restricted_pod
from components.shared.prometheus_rules import alert, prometheus_rule
from config.monitoring import MonitoringConfig
from config.project import PROJECT
from config.repair import HealthCheckConfig, longest_gap_minutes
from config.stack import StackConfig
from knowledge.kubernetes import pod_security_labels
from knowledge.metric_names import KSM_CRONJOB_LAST_SUCCESS, KSM_NODE_CONDITION, KSM_NODE_UNSCHEDULABLE

NAME = "gpu-pool-health"
CODE_KEY = "health-check.pyz"
FACTS_KEY = "facts.json"
MOUNT = "/opt/gpu-pool"
RULE_NAME = "gpu-pool-health"
GROUP_NAME = "gpu-pool.health"
# docs/alerts.md sections (GitHub anchors).
RUNBOOK_ANCHORS: Mapping[str, str] = {
    "GpuNodeFloorBroken": "alert-gpunodefloorbroken",
    "GpuPoolHealthCheckNotRunning": "alert-gpupoolhealthchecknotrunning",
}
# The check is stale after three of its longest waits between runs (one missed run is a blip).
STALE_RUNS = 3
# Each run takes seconds; a run that hangs on the API is cut short well before the next.
RUN_DEADLINE_SECONDS = 300


@dataclass(frozen=True)
class HealthCheckBundle:
    """What the CronJob runs: the zip of the check's code and the pool's facts (JSON)."""

    code: bytes
    facts: str

    @classmethod
    def of(cls, cfg: StackConfig, stack: str) -> HealthCheckBundle:
        """The check's code from this checkout and the pool's facts from the stack."""
        return cls(code=health_check_zip(), facts=json.dumps(pool_facts_document(cfg, stack), indent=2))


# The check is doctor's floors run in the cluster (day2/doctor/health_check.py), named here, not imported: the
# payload is packed from its source (components/shared/payload.py), with PyYAML for the sharing profiles.
CHECK_ENTRY = "day2.doctor.health_check"


def health_check_files() -> tuple[str, ...]:
    """The project files the check's zip holds: the entry's import closure."""
    return tuple(sorted(module_closure([CHECK_ENTRY])))


def health_check_zip() -> bytes:
    return pack(CHECK_ENTRY, extra=pyyaml_files())


def pool_facts_document(cfg: StackConfig, stack: str) -> dict[str, Any]:
    """What `--stack` tells doctor, as the JSON the stack writes into the health check's ConfigMap (the check reads
    it with day2.pool.facts_from_document; doctor --stack reads the stack through the same document)."""
    return {
        "stack": stack,
        "marking": GpuNodeMarking.from_kyverno(cfg.kyverno).as_document(),
        "operatorNamespace": cfg.gpu_operator.namespace,
        "smokeNamespace": cfg.smoke_test.namespace,
        "smokeTestEnabled": cfg.smoke_test.enabled,
        "timeSlicingConfigMap": TIME_SLICING_CONFIGMAP,
        "domains": [
            {
                "name": d.name,
                "hostname": d.hostname,
                "sharing": d.sharing,
                "slots": cfg.slots(d),
                "cards": [card.vendor_device_id for card in d.cards],
            }
            for d in cfg.failure_domains
        ],
        "profileSlots": dict(sorted((name, profile.replicas) for name, profile in cfg.sharing_profiles.items())),
        "driverVersion": cfg.gpu_operator.driver_version,
    }


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": PROJECT}


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": _labels()}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _role(namespace: str, rules: list[dict[str, Any]], account_namespace: str) -> list[dict[str, Any]]:
    """A Role in `namespace` with `rules`, bound to the check's ServiceAccount."""
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": _meta(NAME, namespace), "rules": rules},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": _meta(NAME, namespace),
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": account_namespace}],
        },
    ]


def build_health_check(
    cfg: HealthCheckConfig,
    bundle: HealthCheckBundle,
    *,
    operator_namespace: str,
    time_slicing_configmap: str,
    smoke_namespace: str | None,
) -> list[dict[str, Any]]:
    """Every object of the health check, in an order they can be created in (the namespace first)."""
    namespace = cfg.namespace
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {**_labels(), **pod_security_labels("restricted")}},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, namespace)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(NAME),
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
                # The verdict is a Node condition: the status subresource, nothing else of the Node.
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(NAME),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
    ]
    operator_rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": [time_slicing_configmap]},
    ]
    grants = [(operator_namespace, operator_rules)]
    if smoke_namespace is not None:
        grants.append((smoke_namespace, [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]}]))
    for where, rules in grants:
        objects += _role(where, rules, namespace)
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(NAME, namespace),
            "data": {FACTS_KEY: bundle.facts},
            "binaryData": {CODE_KEY: base64.b64encode(bundle.code).decode()},
        }
    )
    objects.append(_cronjob(cfg))
    return objects


def _cronjob(cfg: HealthCheckConfig) -> dict[str, Any]:
    container = {
        "name": "health-check",
        "image": cfg.image,
        "command": ["python3", f"{MOUNT}/{CODE_KEY}", "--facts", f"{MOUNT}/{FACTS_KEY}"],
        # Nothing to write: the code is read from the zip, never compiled to disk.
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": restricted_container(),
        "volumeMounts": [{"name": "code", "mountPath": MOUNT, "readOnly": True}],
    }
    pod = {
        "serviceAccountName": NAME,
        "restartPolicy": "Never",
        "securityContext": restricted_pod(),
        "containers": [container],
        "volumes": [{"name": "code", "configMap": {"name": NAME}}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(NAME, cfg.namespace),
        "spec": {
            "schedule": cfg.schedule,
            # One run at a time, and a run missed by more than the deadline is skipped, not made up for.
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": RUN_DEADLINE_SECONDS,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": RUN_DEADLINE_SECONDS,
                    "template": {"metadata": {"labels": _labels()}, "spec": pod},
                }
            },
        },
    }


# ---------------------------------------------------------------------------------------------------- alerts


def _alert(monitoring: MonitoringConfig, name: str, **fields: Any) -> dict[str, Any]:
    return alert(monitoring, name, anchor=RUNBOOK_ANCHORS[name], **fields)


def build_health_alert_rules(
    monitoring: MonitoringConfig, cfg: HealthCheckConfig, *, stack: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """The PrometheusRule reading the health check's verdicts (kube-state-metrics exports every Node condition)."""
    broken = f'max by (node) ({KSM_NODE_CONDITION}{{condition="{CONDITION}", status="false"}}) == 1'
    # A cordoned node is out of service on purpose (a wave's turn, a repair, an admin): not a surprise to page on.
    cordoned = f"max by (node) ({KSM_NODE_UNSCHEDULABLE}) == 1"
    last = f'{KSM_CRONJOB_LAST_SUCCESS}{{namespace="{cfg.namespace}", cronjob="{NAME}"}}'
    stale = STALE_RUNS * longest_gap_minutes(cfg.schedule) * 60
    node = "{{ $labels.node }}"
    condition = f"kubectl get node {node} -o jsonpath='{{.status.conditions[?(@.type==\"{CONDITION}\")].message}}'"
    rules = [
        _alert(
            monitoring,
            "GpuNodeFloorBroken",
            expr=f"({broken}) unless on (node) ({cordoned})",
            for_="15m",
            severity="warning",
            summary=f"A floor of {node}'s GPU stack is broken",
            description=(
                f"The health check (CronJob {cfg.namespace}/{NAME}: doctor's floors, in the cluster) "
                f"finds a floor of {node} broken; the node condition {CONDITION} names it: "
                f"{condition}. Debug from the driver up: gpu-pool doctor {node} --stack {stack}. A "
                f"faulted card (an Xid, a card off the bus): gpu-pool repair {node} --stack {stack} "
                "decides whether a power cycle of its VM fixes it and, with --yes, does it."
            ),
        ),
        _alert(
            monitoring,
            "GpuPoolHealthCheckNotRunning",
            expr=f"(time() - max({last}) > {stale}) or absent({last})",
            for_="30m",
            severity="warning",
            summary="The GPU pool's health check has not run",
            description=(
                f"CronJob {cfg.namespace}/{NAME} has not succeeded for {STALE_RUNS} of its periods "
                f"(schedule {cfg.schedule}), or never: the {CONDITION} conditions are stale and "
                "GpuNodeFloorBroken cannot fire. kubectl -n "
                f"{cfg.namespace} get jobs,pods -l app.kubernetes.io/name={NAME}; the last Job's log."
            ),
        ),
    ]
    return prometheus_rule(RULE_NAME, monitoring.rules_namespace, labels, [{"name": GROUP_NAME, "rules": rules}])
