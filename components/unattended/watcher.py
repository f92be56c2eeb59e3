"""The watcher's code and Deployment: the loop (day2/repair/watcher.py) packed as one zip as the health check's is
(components/shared/payload.py: its import closure and PyYAML's pure-Python modules, for doctor's sharing floor), in
a ConfigMap beside the stack's facts (components/unattended/watcher_facts.py), run by a stock python image (the
health check's pinned one).

One replica, `strategy: Recreate` (a rollout never runs two watchers; the repair Lease covers one gone wrong), in the
watcher's namespace under Pod Security restricted: non-root, no privilege escalation, every capability dropped, a
read-only root filesystem, RuntimeDefault seccomp. Its ServiceAccount's token is what the watcher calls the API
with; its Roles are components/unattended/objects.py's and rbac.py's.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from components.shared.payload import module_closure, pack, pyyaml_files
from components.shared.pod_security import restricted_container, restricted_pod
from components.unattended.objects import NAME, labels, meta

if TYPE_CHECKING:
    from config.repair import UnattendedConfig

# The loop, named here, not imported: the program ships it, never runs it.
WATCHER_ENTRY = "day2.repair.watcher"
CODE_CONFIGMAP = "gpu-pool-repair-code"
CODE_KEY = "watcher.pyz"
FACTS_KEY = "facts.json"
MOUNT = "/opt/gpu-pool"
# The port the watcher serves /metrics on (day2/repair/watcher.py METRICS_PORT; a test keeps them equal).
METRICS_PORT = 9400
# The digest of the code ConfigMap in the pod template: the watcher reads its facts and code once, at start, so a
# changed fact (a driver wave's new pin, a profile's new slot count) or new code must start a new pod; a Deployment
# rolls only when its template changes (FIELD-REVIEW-6 WRONG-2). A digest, not a re-read each pass: the facts and the
# code that acts on them change together, and a pass never runs new facts with old code.
CODE_DIGEST_ANNOTATION = "gpu-pool.dev/code-digest"


def code_digest(code: Mapping[str, Any]) -> str:
    """sha256 of the code ConfigMap's data and binaryData (the facts and the zip)."""
    content = {"data": code.get("data") or {}, "binaryData": code.get("binaryData") or {}}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def watcher_files() -> tuple[str, ...]:
    return tuple(sorted(module_closure([WATCHER_ENTRY])))


def watcher_zip() -> bytes:
    return pack(WATCHER_ENTRY, extra=pyyaml_files())


def watcher_code(cfg: UnattendedConfig, code: bytes, facts: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(CODE_CONFIGMAP, cfg.namespace),
        "data": {FACTS_KEY: json.dumps(facts, indent=2, sort_keys=True)},
        "binaryData": {CODE_KEY: base64.b64encode(code).decode()},
    }


def watcher_deployment(cfg: UnattendedConfig, digest: str) -> dict[str, Any]:
    """`digest`: code_digest of the code ConfigMap (the pod template's annotation)."""
    container = {
        "name": "watcher",
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
            # Never two watchers at once, not even during a rollout.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels()},
            "template": {
                "metadata": {"labels": labels(), "annotations": {CODE_DIGEST_ANNOTATION: digest}},
                "spec": pod,
            },
        },
    }


def watcher_service(cfg: UnattendedConfig) -> dict[str, Any]:
    """The Service the ServiceMonitor selects: the watcher's /metrics."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(NAME, cfg.namespace),
        "spec": {"selector": labels(), "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}]},
    }


def watcher_service_monitor(cfg: UnattendedConfig, selector_labels: Mapping[str, str]) -> dict[str, Any]:
    """The Prometheus Operator's ServiceMonitor for the watcher's metrics, labelled for the Prometheus's
    serviceMonitorSelector (monitoring.serviceMonitorLabels, as the DCGM exporter's)."""
    metadata = meta(NAME, cfg.namespace)
    metadata["labels"] = {**metadata["labels"], **selector_labels}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata,
        "spec": {"selector": {"matchLabels": labels()}, "endpoints": [{"port": "metrics", "interval": "60s"}]},
    }
