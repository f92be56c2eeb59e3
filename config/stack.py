"""The whole stack config (`gpu-pool:*`) and the rules that span several keys."""

from __future__ import annotations

from pydantic import Field

from config.base import ConfigModel
from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
from config.gpu_quotas import GpuQuotasConfig
from config.kyverno import KyvernoConfig
from config.monitoring import MonitoringConfig
from config.preflight import PreflightConfig
from config.proxmox import ProxmoxConfig
from config.rke2 import KubernetesConfig, Rke2Config
from config.sharing import SharingProfile
from config.smoke_test import SmokeTestConfig


class StackConfig(ConfigModel):
    proxmox: ProxmoxConfig
    rke2: Rke2Config
    kubernetes: KubernetesConfig = Field(default_factory=KubernetesConfig)
    sharing_profiles: dict[str, SharingProfile] = Field(min_length=1)
    failure_domains: list[FailureDomainConfig] = Field(min_length=1)
    gpu_operator: GpuOperatorConfig = Field(default_factory=GpuOperatorConfig)
    kyverno: KyvernoConfig = Field(default_factory=KyvernoConfig)
    monitoring: MonitoringConfig = Field(default_factory=MonitoringConfig)
    gpu_quotas: GpuQuotasConfig = Field(default_factory=GpuQuotasConfig)
    smoke_test: SmokeTestConfig = Field(default_factory=SmokeTestConfig)
    preflight: PreflightConfig = Field(default_factory=PreflightConfig)

    def slots(self, domain: FailureDomainConfig) -> int:
        """Schedulable `nvidia.com/gpu` the domain's card advertises under its sharing profile."""
        return self.sharing_profiles[domain.sharing].replicas

    @property
    def total_slots(self) -> int:
        return sum(self.slots(domain) for domain in self.failure_domains)
