"""The security contexts of the stack's own small Python pods (the health check, the unattended watcher): what Pod
Security's `restricted` level asks, and no more. The stock Python image runs as root; nobody (65534) is enough to
read the mounted code and call the API."""

from __future__ import annotations

from typing import Any


def restricted_pod() -> dict[str, Any]:
    """A pod's securityContext under Pod Security `restricted` (a fresh dict: callers may add to it)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_container() -> dict[str, Any]:
    """A container's securityContext under Pod Security `restricted`: nothing to write, no capability."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
