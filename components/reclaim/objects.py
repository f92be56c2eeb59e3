"""The notebook reclaim policy's Kubernetes objects, as plain dicts, planned from the stack's config by one pure
function (`plan_objects`); components/reclaim/component.py registers exactly these.

- its namespace under Pod Security restricted, its ServiceAccount, and a ClusterRole bound to it with the rules derived
  from its requests (components/reclaim/api.py): list Nodes, Pods, Namespaces, ResourceQuotas and Notebooks, patch
  Notebooks, create Events; nothing else;
- its code: the loop (day2/reclaim/policy.py) packed with its import closure (components/shared/payload.py) as one
  zip, beside its facts (the policy's values from reclaim.idleNotebooks), in a ConfigMap, run by a stock python image
  like the unattended repair's watcher;
- its Deployment: one replica, `Recreate` (never two policies judging at once: each stop waits for the previous card),
  non-root, no privilege escalation, every capability dropped, a read-only root filesystem, RuntimeDefault seccomp,
  its pod template carrying the digest of its code and facts so a change to either starts a new pod;
- its metrics Service and, with monitoring.serviceMonitor, the ServiceMonitor; with monitoring.alertsEnabled its
  alerts (components/reclaim/alerts.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.reclaim.alerts import build_reclaim_alert_rules
from components.reclaim.api import cluster_rules
from components.reclaim.names import CODE_CONFIGMAP, METRICS_PORT, NAME
from components.shared.in_cluster import (
    FACTS_KEY,
    InClusterProgram,
    code_digest,
    program_labels,
    program_meta,
)
from components.shared.payload import module_closure, pack
from config.monitoring import MonitoringConfig
from config.prometheus_access import POLICY_AUTH_ENV
from config.reclaim import IdleNotebooksConfig
from knowledge.kubernetes import pod_security_labels

# The loop, named here, not imported: the program ships it, never runs it.
POLICY_ENTRY = "day2.reclaim.policy"
CODE_KEY = "reclaim.pyz"
RBAC = "rbac.authorization.k8s.io"
__all__ = ["FACTS_KEY"]


def program(cfg: IdleNotebooksConfig) -> InClusterProgram:
    """The policy as one of gpu-pool's in-cluster programs (components/shared/in_cluster.py)."""
    return InClusterProgram(NAME, cfg.namespace, cfg.image, "policy", CODE_CONFIGMAP, CODE_KEY, METRICS_PORT)


def _with_login(deployment: dict[str, Any], login: bool) -> dict[str, Any]:
    if login:
        deployment["spec"]["template"]["spec"]["containers"][0]["env"].append(prometheus_login_env())
    return deployment


def labels() -> dict[str, str]:
    return program_labels(NAME)


def meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    return program_meta(NAME, name, namespace)


def policy_files() -> tuple[str, ...]:
    return tuple(sorted(module_closure([POLICY_ENTRY])))


def policy_zip() -> bytes:
    return pack(POLICY_ENTRY)


def facts_document(cfg: IdleNotebooksConfig) -> dict[str, Any]:
    """What the policy reads at start (day2/reclaim/policy.py PolicyFacts): the config's values, camelCase."""
    return cfg.model_dump(mode="json", by_alias=True)


def access(cfg: IdleNotebooksConfig) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, and the ClusterRole (components/reclaim/api.py) bound to it."""
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": cfg.namespace}]
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": cfg.namespace, "labels": {**labels(), **pod_security_labels("restricted")}},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME, cfg.namespace)},
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": meta(NAME), "rules": cluster_rules()},
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(NAME),
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": NAME},
            "subjects": subject,
        },
    ]


@dataclass(frozen=True)
class ReclaimObjects:
    """What the component registers, in order: `placed` after the namespace, the Deployment after all of them."""

    namespace: dict[str, Any]
    placed: tuple[dict[str, Any], ...]
    deployment: dict[str, Any]
    monitoring: tuple[dict[str, Any], ...]

    def all(self) -> list[dict[str, Any]]:
        return [self.namespace, *self.placed, self.deployment, *self.monitoring]


# The Secret made of gpu-pool:prometheusAuth, and its key: the policy container reads it as POLICY_AUTH_ENV.
PROMETHEUS_SECRET = "gpu-pool-reclaim-prometheus"
PROMETHEUS_SECRET_KEY = "auth"


def prometheus_login_env() -> dict[str, Any]:
    """The container's variable from the Secret (secretKeyRef): the login is never in the Deployment itself."""
    ref = {"name": PROMETHEUS_SECRET, "key": PROMETHEUS_SECRET_KEY}
    return {"name": POLICY_AUTH_ENV, "valueFrom": {"secretKeyRef": ref}}


def plan_objects(
    cfg: IdleNotebooksConfig,
    monitoring: MonitoringConfig,
    rule_labels: Mapping[str, str],
    code: bytes,
    *,
    prometheus_login: bool = False,
) -> ReclaimObjects:
    """Every object of the policy for this config (`code`: the packed policy, policy_zip()). `prometheus_login`:
    the stack sets gpu-pool:prometheusAuth, whose Secret the component registers beside these."""
    namespace, *rest = access(cfg)
    policy = program(cfg)
    configmap = policy.code(code, facts_document(cfg))
    watched: list[dict[str, Any]] = [policy.service()]
    if monitoring.service_monitor:
        watched.append(policy.service_monitor(monitoring.service_monitor_labels))
    if monitoring.alerts_enabled:
        watched.append(build_reclaim_alert_rules(monitoring, cfg, labels=rule_labels))
    return ReclaimObjects(
        namespace=namespace,
        placed=(*rest, configmap),
        deployment=_with_login(policy.deployment(code_digest(configmap)), prometheus_login),
        monitoring=tuple(watched),
    )
