"""The two namespaces the platform creates: the operator's (privileged) and the smoke test's (restricted)."""

from __future__ import annotations

from typing import Any

from config.smoke_test import SmokeTestConfig
from knowledge.kubernetes import pod_security_labels


def build_operator_namespace(name: str) -> dict[str, Any]:
    # The operands load kernel modules and use host paths: a restricted namespace blocks every one of them.
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": pod_security_labels("privileged")},
    }


def build_smoke_namespace(cfg: SmokeTestConfig) -> dict[str, Any]:
    # Pod Security "restricted": the smoke test must pass where ordinary GPU workloads live, not only
    # in the privileged operator namespace.
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": cfg.namespace, "labels": pod_security_labels("restricted")},
    }
