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

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.reclaim.alerts import build_reclaim_alert_rules
from components.reclaim.api import cluster_rules
from components.reclaim.names import CODE_CONFIGMAP, METRICS_PORT, NAME
from components.shared.payload import module_closure, pack
from components.shared.pod_security import restricted_container, restricted_pod
from config.monitoring import MonitoringConfig
from config.reclaim import IdleNotebooksConfig
from knowledge.kubernetes import pod_security_labels

# The loop, named here, not imported: the program ships it, never runs it.
POLICY_ENTRY = "day2.reclaim.policy"
CODE_KEY = "reclaim.pyz"
FACTS_KEY = "facts.json"
MOUNT = "/opt/gpu-pool"
RBAC = "rbac.authorization.k8s.io"
# The pod template's digest of the code and facts: the policy reads both once, at start.
CODE_DIGEST_ANNOTATION = "gpu-pool.dev/code-digest"


def labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpu-pool"}


def meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name, "labels": labels()}
    if namespace is not None:
        data["namespace"] = namespace
    return data


def policy_files() -> tuple[str, ...]:
    return tuple(sorted(module_closure([POLICY_ENTRY])))


def policy_zip() -> bytes:
    return pack(POLICY_ENTRY)


def facts_document(cfg: IdleNotebooksConfig) -> dict[str, Any]:
    """What the policy reads at start (day2/reclaim/policy.py PolicyFacts): the config's values, camelCase."""
    return cfg.model_dump(mode="json", by_alias=True)


def code_digest(code: Mapping[str, Any]) -> str:
    content = {"data": code.get("data") or {}, "binaryData": code.get("binaryData") or {}}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def code_configmap(cfg: IdleNotebooksConfig, code: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(CODE_CONFIGMAP, cfg.namespace),
        "data": {FACTS_KEY: json.dumps(facts_document(cfg), indent=2, sort_keys=True)},
        "binaryData": {CODE_KEY: base64.b64encode(code).decode()},
    }


def deployment(cfg: IdleNotebooksConfig, digest: str) -> dict[str, Any]:
    container = {
        "name": "policy",
        "image": cfg.image,
        "command": ["python3", f"{MOUNT}/{CODE_KEY}", "--facts", f"{MOUNT}/{FACTS_KEY}"],
        # Nothing to write: the code is read from the zip, never compiled to disk.
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": restricted_container(),
        "volumeMounts": [{"name": "code", "mountPath": MOUNT, "readOnly": True}],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
    }
    pod = {
        "serviceAccountName": NAME,
        "securityContext": restricted_pod(),
        "containers": [container],
        "volumes": [{"name": "code", "configMap": {"name": CODE_CONFIGMAP}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(NAME, cfg.namespace),
        "spec": {
            "replicas": 1,
            # Never two policies at once, not even during a rollout.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels()},
            "template": {
                "metadata": {"labels": labels(), "annotations": {CODE_DIGEST_ANNOTATION: digest}},
                "spec": pod,
            },
        },
    }


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


def metrics_service(cfg: IdleNotebooksConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(NAME, cfg.namespace),
        "spec": {"selector": labels(), "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}]},
    }


def service_monitor(cfg: IdleNotebooksConfig, selector_labels: Mapping[str, str]) -> dict[str, Any]:
    """Labelled for the Prometheus's serviceMonitorSelector (monitoring.serviceMonitorLabels, as the exporter's)."""
    metadata = meta(NAME, cfg.namespace)
    metadata["labels"] = {**metadata["labels"], **selector_labels}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata,
        "spec": {"selector": {"matchLabels": labels()}, "endpoints": [{"port": "metrics", "interval": "60s"}]},
    }


@dataclass(frozen=True)
class ReclaimObjects:
    """What the component registers, in order: `placed` after the namespace, the Deployment after all of them."""

    namespace: dict[str, Any]
    placed: tuple[dict[str, Any], ...]
    deployment: dict[str, Any]
    monitoring: tuple[dict[str, Any], ...]

    def all(self) -> list[dict[str, Any]]:
        return [self.namespace, *self.placed, self.deployment, *self.monitoring]


def plan_objects(
    cfg: IdleNotebooksConfig, monitoring: MonitoringConfig, rule_labels: Mapping[str, str], code: bytes
) -> ReclaimObjects:
    """Every object of the policy for this config (`code`: the packed policy, policy_zip())."""
    namespace, *rest = access(cfg)
    configmap = code_configmap(cfg, code)
    watched: list[dict[str, Any]] = [metrics_service(cfg)]
    if monitoring.service_monitor:
        watched.append(service_monitor(cfg, monitoring.service_monitor_labels))
    if monitoring.alerts_enabled:
        watched.append(build_reclaim_alert_rules(monitoring, cfg, labels=rule_labels))
    return ReclaimObjects(
        namespace=namespace,
        placed=(*rest, configmap),
        deployment=deployment(cfg, code_digest(configmap)),
        monitoring=tuple(watched),
    )
