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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from components.shared.in_cluster import CODE_DIGEST_ANNOTATION, FACTS_KEY, MOUNT, InClusterProgram, code_digest
from components.shared.payload import module_closure, pack, pyyaml_files
from components.unattended.objects import NAME

if TYPE_CHECKING:
    from config.repair import UnattendedConfig

# The loop, named here, not imported: the program ships it, never runs it.
WATCHER_ENTRY = "day2.repair.watcher"
CODE_CONFIGMAP = "gpu-pool-repair-code"
CODE_KEY = "watcher.pyz"
# The port the watcher serves /metrics on (day2/repair/watcher.py METRICS_PORT; a test keeps them equal).
METRICS_PORT = 9400
# What the component and the tests read of the watcher's ConfigMap and pod template, here as before.
__all__ = ["CODE_DIGEST_ANNOTATION", "FACTS_KEY", "MOUNT", "code_digest"]


def watcher_files() -> tuple[str, ...]:
    return tuple(sorted(module_closure([WATCHER_ENTRY])))


def watcher_zip() -> bytes:
    return pack(WATCHER_ENTRY, extra=pyyaml_files())


def program(cfg: UnattendedConfig) -> InClusterProgram:
    """The watcher as one of gpu-pool's in-cluster programs (components/shared/in_cluster.py)."""
    return InClusterProgram(NAME, cfg.namespace, cfg.image, "watcher", CODE_CONFIGMAP, CODE_KEY, METRICS_PORT)


def watcher_code(cfg: UnattendedConfig, code: bytes, facts: Mapping[str, Any]) -> dict[str, Any]:
    return program(cfg).code(code, facts)


def watcher_deployment(cfg: UnattendedConfig, digest: str) -> dict[str, Any]:
    """`digest`: code_digest of the code ConfigMap (the pod template's annotation)."""
    return program(cfg).deployment(digest)


def watcher_service(cfg: UnattendedConfig) -> dict[str, Any]:
    """The Service the ServiceMonitor selects: the watcher's /metrics."""
    return program(cfg).service()


def watcher_service_monitor(cfg: UnattendedConfig, selector_labels: Mapping[str, str]) -> dict[str, Any]:
    return program(cfg).service_monitor(selector_labels)
