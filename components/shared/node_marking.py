"""The label GPU pods are steered to and the taint that keeps other pods off, from one source."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Only a type here: the in-cluster health check imports this module without pydantic (day2/doctor/health_check.py).
    from config.kyverno import KyvernoConfig


@dataclass(frozen=True)
class GpuNodeMarking:
    """The label GPU pods are steered to and the taint that keeps other pods off.

    One source for the nodes (RKE2 registration, NodePatch, kubectl taint), the Kyverno policy, the
    operator's tolerations and the smoke test: if they disagreed, GPU pods would be steered to nodes
    they cannot land on.
    """

    label_key: str = "nodepool"
    label_value: str = "gpu"
    taint_key: str = "nvidia.com/gpu"
    taint_value: str = "true"
    taint_effect: str = "NoSchedule"

    @classmethod
    def from_kyverno(cls, cfg: KyvernoConfig) -> GpuNodeMarking:
        return cls(
            label_key=cfg.gpu_node_label_key,
            label_value=cfg.gpu_node_label_value,
            taint_key=cfg.taint_key,
            taint_value=cfg.taint_value,
            taint_effect=cfg.taint_effect,
        )

    def as_document(self) -> dict[str, str]:
        """As the health check's facts document writes it (JSON keys)."""
        return {
            "labelKey": self.label_key,
            "labelValue": self.label_value,
            "taintKey": self.taint_key,
            "taintValue": self.taint_value,
            "taintEffect": self.taint_effect,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> GpuNodeMarking:
        return cls(
            label_key=document["labelKey"],
            label_value=document["labelValue"],
            taint_key=document["taintKey"],
            taint_value=document["taintValue"],
            taint_effect=document["taintEffect"],
        )

    @property
    def taint(self) -> str:
        """`key=value:effect`, the form RKE2's `node-taint` and `kubectl taint` both take."""
        return f"{self.taint_key}={self.taint_value}:{self.taint_effect}"

    @property
    def toleration(self) -> dict[str, str]:
        return {"key": self.taint_key, "operator": "Equal", "value": self.taint_value, "effect": self.taint_effect}


ARTICLE_MARKING = GpuNodeMarking()
