"""A program of gpu-pool's own that runs in the cluster from a ConfigMap, as plain dicts: the unattended repair's
watcher and the notebook reclaim policy are both one. Its code is a zip packed from this checkout
(components/shared/payload.py) beside its facts (JSON the stack writes from its config); a stock python image runs it
as a Deployment of one replica, `strategy: Recreate` (never two at once, not even during a rollout), under Pod
Security restricted (non-root, no privilege escalation, every capability dropped, a read-only root filesystem,
RuntimeDefault seccomp), as its own ServiceAccount; it serves /metrics on one port, which a Service and, where the
stack has the Prometheus Operator, a ServiceMonitor expose.

The pod template carries the digest of the code and facts: the program reads both once, at start, so a changed fact
or new code must start a new pod, and a Deployment rolls only when its template changes (FIELD-REVIEW-6 WRONG-2). A
digest, not a re-read each pass: the facts and the code that acts on them change together.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.shared.pod_security import restricted_container, restricted_pod

CODE_DIGEST_ANNOTATION = "gpu-pool.dev/code-digest"
FACTS_KEY = "facts.json"
MOUNT = "/opt/gpu-pool"


def program_labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "gpu-pool"}


def program_meta(program: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """An object of `program`'s, named `name`, labelled as the program's."""
    data: dict[str, Any] = {"name": name, "labels": program_labels(program)}
    if namespace is not None:
        data["namespace"] = namespace
    return data


def code_digest(code: Mapping[str, Any]) -> str:
    """sha256 of the code ConfigMap's data and binaryData (the facts and the zip)."""
    content = {"data": code.get("data") or {}, "binaryData": code.get("binaryData") or {}}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class InClusterProgram:
    """`name`: its Deployment, ServiceAccount, Service and ServiceMonitor, and its `app.kubernetes.io/name`;
    `container`: its container's name; `code_key`: the zip's key in the ConfigMap `code_configmap`."""

    name: str
    namespace: str
    image: str
    container: str
    code_configmap: str
    code_key: str
    port: int

    def labels(self) -> dict[str, str]:
        return program_labels(self.name)

    def meta(self, name: str, namespaced: bool = True) -> dict[str, Any]:
        return program_meta(self.name, name, self.namespace if namespaced else None)

    def code(self, code: bytes, facts: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": self.meta(self.code_configmap),
            "data": {FACTS_KEY: json.dumps(facts, indent=2, sort_keys=True)},
            "binaryData": {self.code_key: base64.b64encode(code).decode()},
        }

    def deployment(self, digest: str) -> dict[str, Any]:
        """`digest`: code_digest of the code ConfigMap (the pod template's annotation)."""
        container = {
            "name": self.container,
            "image": self.image,
            "command": ["python3", f"{MOUNT}/{self.code_key}", "--facts", f"{MOUNT}/{FACTS_KEY}"],
            # Nothing to write: the code is read from the zip, never compiled to disk.
            "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
            "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            "securityContext": restricted_container(),
            "volumeMounts": [{"name": "code", "mountPath": MOUNT, "readOnly": True}],
            "ports": [{"name": "metrics", "containerPort": self.port, "protocol": "TCP"}],
        }
        pod = {
            "serviceAccountName": self.name,
            "securityContext": restricted_pod(),
            "containers": [container],
            "volumes": [{"name": "code", "configMap": {"name": self.code_configmap}}],
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self.meta(self.name),
            "spec": {
                "replicas": 1,
                # Never two at once, not even during a rollout.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": self.labels()},
                "template": {
                    "metadata": {"labels": self.labels(), "annotations": {CODE_DIGEST_ANNOTATION: digest}},
                    "spec": pod,
                },
            },
        }

    def service(self) -> dict[str, Any]:
        """The Service the ServiceMonitor selects: the program's /metrics."""
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.meta(self.name),
            "spec": {
                "selector": self.labels(),
                "ports": [{"name": "metrics", "port": self.port, "targetPort": "metrics"}],
            },
        }

    def service_monitor(self, selector_labels: Mapping[str, str]) -> dict[str, Any]:
        """The Prometheus Operator's ServiceMonitor for its metrics, labelled for the Prometheus's
        serviceMonitorSelector (monitoring.serviceMonitorLabels, as the DCGM exporter's)."""
        metadata = self.meta(self.name)
        metadata["labels"] = {**metadata["labels"], **selector_labels}
        return {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": metadata,
            "spec": {"selector": {"matchLabels": self.labels()}, "endpoints": [{"port": "metrics", "interval": "60s"}]},
        }
