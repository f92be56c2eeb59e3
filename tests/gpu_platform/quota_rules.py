"""Sample namespace quota rules shared by the quota policy's semantic and contract tests."""

from __future__ import annotations

from typing import Any

from config.gpu_quotas import GpuQuotasConfig

KUBEFLOW_LABELS = {"app.kubernetes.io/part-of": "kubeflow-profile"}
TEAM_LABELS = {"example.org/team": "research", "example.org/tier": "gpu"}
KUBEFLOW: dict[str, Any] = {"name": "kubeflow-profiles", "matchLabels": KUBEFLOW_LABELS, "maxGpus": 1}
TEAM: dict[str, Any] = {"name": "research", "matchLabels": TEAM_LABELS, "maxGpus": 2}


def quotas(**raw: Any) -> GpuQuotasConfig:
    return GpuQuotasConfig.model_validate(raw)


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
