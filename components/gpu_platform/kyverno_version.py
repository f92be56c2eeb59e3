"""Cluster preflight: the running Kyverno's version against the policy API the stack writes.

The CRD check (cluster_preflight.py) sees which policy types the API server serves; it cannot see that a Kyverno
upgraded to 1.20 left the ClusterPolicy CRD behind (Helm never deletes CRDs) with no controller reading it. The
admission controller's image says which Kyverno runs (knowledge/kyverno.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from config.kyverno import KyvernoConfig
from knowledge.kyverno import (
    KYVERNO_ADMISSION_SELECTOR,
    KYVERNO_IMAGE_SUFFIX,
    KYVERNO_WITHOUT_CLUSTERPOLICY,
    MINIMUM_KYVERNO_VERSION_CEL,
)

KYVERNO_QUERY = f"get deployments -A -l {KYVERNO_ADMISSION_SELECTOR} -o json"
_TAG = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?")


def _version(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(part) for part in text.split("."))
    return major, minor, patch


def running_kyverno(deployments: list[Mapping[str, Any]]) -> list[tuple[str, tuple[int, int, int]]]:
    """(namespace/name, version) of each Kyverno admission controller whose image tag is a release."""
    found = []
    for deployment in deployments:
        meta = deployment.get("metadata") or {}
        containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        for container in containers:
            reference = str(container.get("image", "")).split("@", 1)[0]
            tagged = ":" in reference.rsplit("/", 1)[-1]
            repository, tag = reference.rsplit(":", 1) if tagged else (reference, "")
            match = _TAG.fullmatch(tag)
            if repository.endswith(KYVERNO_IMAGE_SUFFIX) and match:
                version = (int(match[1]), int(match[2]), int(match[3]))
                found.append((f"{meta.get('namespace')}/{meta.get('name')}", version))
    return found


def kyverno_version_problems(cfg: KyvernoConfig, deployments: list[Mapping[str, Any]]) -> list[str]:
    problems = []
    for where, version in running_kyverno(deployments):
        shown = ".".join(map(str, version))
        if cfg.policy_api == "clusterpolicy" and version >= _version(KYVERNO_WITHOUT_CLUSTERPOLICY):
            problems.append(
                f"gpu-pool:kyverno.policyApi: the cluster runs Kyverno {shown} ({where}), which has no ClusterPolicy "
                f"(removed in {KYVERNO_WITHOUT_CLUSTERPOLICY}; a CRD left behind by the upgrade is read by no "
                "controller, so the policies would be created and never applied): set gpu-pool:kyverno.policyApi: cel"
            )
        if cfg.policy_api == "cel" and version < _version(MINIMUM_KYVERNO_VERSION_CEL):
            problems.append(
                f"gpu-pool:kyverno.policyApi: the cluster runs Kyverno {shown} ({where}), older than "
                f"{MINIMUM_KYVERNO_VERSION_CEL}, which serves the CEL policy types at policies.kyverno.io/v1: "
                f"upgrade Kyverno, or set gpu-pool:kyverno.policyApi: clusterpolicy (Kyverno 1.13 to 1.19)"
            )
    return problems
