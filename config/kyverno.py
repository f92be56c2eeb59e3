"""`gpu-pool:kyverno`: the admission policy that gives every GPU pod the GPU taint toleration and node rule.

With it, a GPU pod needs exactly one line, `resources.limits["nvidia.com/gpu"]` (article, "Keeping GPU
pods on GPU nodes"); without it, forgetting the toleration or the node selector gives a confusing failure.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.quantities import cpu_quantity
from config.validators import DNS_1123_SUBDOMAIN, dns_labels, label_key, label_value


def _non_empty_label_value(value: str) -> str:
    if not value:
        raise ValueError("must not be empty: an empty value would match nodes and tolerations it should not")
    return label_value(value)


def extended_resource_name(value: str) -> str:
    """An extended resource name such as `nvidia.com/gpu`: a domain prefix is required."""
    prefix, slash, _ = value.rpartition("/")
    if not slash:
        raise ValueError("must be a vendor-prefixed extended resource name, e.g. nvidia.com/gpu")
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        raise ValueError("must not use the kubernetes.io domain: that namespace is reserved for native resources")
    return label_key(value)


class KyvernoConfig(ConfigModel):
    """The Kyverno ClusterPolicy that mutates GPU pods on CREATE (DESIGN.md section 3)."""

    enabled: bool = Field(
        default=True, description="create the GPU steering policy and the multi-GPU refusal (needs Kyverno >= 1.13)"
    )
    policy_api: Literal["cel", "clusterpolicy"] = Field(
        default="cel",
        description=(
            "which Kyverno policy types to create: cel (MutatingPolicy, GeneratingPolicy, ValidatingPolicy in "
            "policies.kyverno.io/v1; Kyverno >= 1.17, the only choice from 1.20) or clusterpolicy (kyverno.io/v1 "
            "ClusterPolicy; for Kyverno 1.13 to 1.16, deprecated since 1.17 and removed in 1.20)"
        ),
    )
    policy_name: str = Field(default="gpu-pods-to-gpu-nodes", description="name of the ClusterPolicy")
    gpu_node_label_key: str = Field(default="nodepool", description="node label key that marks a GPU worker")
    gpu_node_label_value: str = Field(default="gpu", description="value of that label on GPU workers")
    taint_key: str = Field(default="nvidia.com/gpu", description="key of the taint that keeps other pods off")
    taint_value: str = Field(default="true", description="value of that taint")
    taint_effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="effect of that taint"
    )
    excluded_namespaces: list[str] = Field(
        default_factory=lambda: ["gpu-operator", "kube-system"],
        description="namespaces whose pods are never mutated (the operator namespace is always added)",
    )
    failure_policy: Literal["Fail", "Ignore"] = Field(
        default="Fail",
        description="what the API server does with a GPU pod when Kyverno cannot answer; only GPU pods are sent",
    )
    webhook_timeout_seconds: int = Field(
        default=10, ge=1, le=30, strict=True, description="admission webhook timeout, 1 to 30 seconds"
    )
    gpu_resource: str = Field(default="nvidia.com/gpu", description="extended resource a GPU pod asks for")
    min_cpu_per_gpu: str | None = Field(
        default=None,
        description=(
            "off by default; when set (a CPU quantity such as 1 or 500m), a second ClusterPolicy audits GPU pods "
            "whose containers request less CPU than this per GPU: the notebook that holds a whole card at 0.6 "
            "CPU shows in the policy reports (Audit only, nothing is refused)"
        ),
    )

    def pod_spec_lines(self) -> str:
        """What a GPU pod's spec carries itself when no policy adds it (README, "Without Kyverno"): the toleration
        of the nodes' taint and the node selector of their label."""
        return (
            f'tolerations: [{{key: {self.taint_key}, operator: Equal, value: "{self.taint_value}", '
            f"effect: {self.taint_effect}}}]\n"
            f"nodeSelector: {{{self.gpu_node_label_key}: {self.gpu_node_label_value}}}\n"
        )

    @field_validator("policy_name")
    @classmethod
    def _policy_name(cls, value: str) -> str:
        if not DNS_1123_SUBDOMAIN.match(value):
            raise ValueError("must be a Kubernetes object name: lowercase letters, digits, '-' and '.'")
        return value

    @field_validator("gpu_node_label_key", "taint_key")
    @classmethod
    def _label_key(cls, value: str) -> str:
        return label_key(value)

    @field_validator("gpu_node_label_value", "taint_value")
    @classmethod
    def _label_value(cls, value: str) -> str:
        return _non_empty_label_value(value)

    @field_validator("excluded_namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        dns_labels(value)
        return value

    @field_validator("gpu_resource")
    @classmethod
    def _gpu_resource(cls, value: str) -> str:
        return extended_resource_name(value)

    @field_validator("min_cpu_per_gpu")
    @classmethod
    def _min_cpu_per_gpu(cls, value: str | None) -> str | None:
        return cpu_quantity(value)
