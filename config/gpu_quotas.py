"""`gpu-pool:gpuQuotas`: how many GPUs each namespace may hold.

The article's surprise ("Who holds a card"): the profile namespaces' ResourceQuota capped CPU and memory
but did not name `nvidia.com/gpu`, and a quota only limits what it names, so GPU use per namespace was
unbounded while two idle notebooks held whole cards for months.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from config.base import ConfigModel
from config.validators import dns_label, dns_labels, labels


def _namespace_cap(value: int) -> int:
    if value < 0:
        raise ValueError("must be 0 or more: it is the most GPUs the namespace may request (0 forbids GPUs)")
    return value


class NamespaceQuotaRule(ConfigModel):
    """Every namespace whose labels match gets a GPU quota, created and kept by Kyverno."""

    name: str = Field(description="rule name, a DNS label; also suffixes the generated quota's name")
    match_labels: dict[str, str] = Field(
        description="namespace labels that must all match, e.g. {app.kubernetes.io/part-of: kubeflow-profile}"
    )
    max_gpus: int = Field(ge=0, strict=True, description="most GPUs each matching namespace may request")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return dns_label(value)

    @field_validator("match_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("must name at least one label: a rule without labels would cap every namespace")
        return labels(value)


class GpuQuotasConfig(ConfigModel):
    """Per-namespace caps on `requests.nvidia.com/gpu`: explicit namespaces, and label selectors for the rest.

    A quota counts schedulable GPUs, so on a time-sliced card one physical A1000 is several of them.
    """

    namespaces: dict[str, Annotated[int, Field(strict=True), AfterValidator(_namespace_cap)]] = Field(
        default_factory=dict, description="namespace -> most GPUs it may request; Pulumi owns these quotas"
    )
    selectors: list[NamespaceQuotaRule] = Field(
        default_factory=list, description="label rules; Kyverno generates a quota in every matching namespace"
    )
    quota_name: str = Field(default="gpu-quota", description="name of the ResourceQuota objects")
    failure_policy: Literal["Fail", "Ignore"] = Field(
        default="Fail",
        description="what the API server does with a labelled namespace when Kyverno cannot answer",
    )

    @field_validator("namespaces")
    @classmethod
    def _namespace_names(cls, value: dict[str, int]) -> dict[str, int]:
        dns_labels(value)
        return value

    @field_validator("quota_name")
    @classmethod
    def _quota_name(cls, value: str) -> str:
        return dns_label(value)

    @field_validator("selectors")
    @classmethod
    def _unique_rule_names(cls, value: list[NamespaceQuotaRule]) -> list[NamespaceQuotaRule]:
        # Rule names become Kyverno rule names and quota-name suffixes; a repeat would make two rules write one object.
        repeated = sorted(name for name, count in Counter(rule.name for rule in value).items() if count > 1)
        if repeated:
            raise ValueError(f"rule names must be unique; repeated: {', '.join(repeated)}")
        return value


def quota_warnings(quotas: GpuQuotasConfig, schedulable_slots: int) -> list[str]:
    """One warning per quota larger than the pool can ever schedule: such a cap never binds.

    Not an error: the pool may grow later, and a generous cap is still a cap.
    """
    warnings: list[str] = []
    for namespace, max_gpus in sorted(quotas.namespaces.items()):
        if max_gpus > schedulable_slots:
            warnings.append(
                f"gpu-pool:gpuQuotas.namespaces.{namespace}: quota of {max_gpus} GPUs is larger than the pool's "
                f"{schedulable_slots} schedulable GPUs, so it never limits anything"
            )
    for index, rule in enumerate(quotas.selectors):
        if rule.max_gpus > schedulable_slots:
            warnings.append(
                f"gpu-pool:gpuQuotas.selectors[{index}].maxGpus: rule {rule.name!r} allows {rule.max_gpus} GPUs "
                f"per namespace, more than the pool's {schedulable_slots} schedulable GPUs, so it never limits anything"
            )
    return warnings
