"""The whole stack config (`gpu-pool:*`) and the rules that span several keys."""

from __future__ import annotations

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.failure_domain import FailureDomainConfig
from config.gpu_operator import GpuOperatorConfig
from config.gpu_quotas import GpuQuotasConfig
from config.kyverno import KyvernoConfig
from config.monitoring import MonitoringConfig
from config.preflight import PreflightConfig
from config.proxmox import ProxmoxConfig
from config.proxy import AptMirrorConfig, ProxyConfig
from config.reclaim import ReclaimConfig
from config.registries import RegistryMirrorConfig, registry_mirrors
from config.repair import RepairConfig
from config.rke2 import KubernetesConfig, Rke2Config
from config.rollout import RolloutConfig
from config.sharing import SharingProfile
from config.smoke_test import SmokeTestConfig
from config.trust import certificates_of, read_bundle
from config.validators import LABEL_VALUE


class StackConfig(ConfigModel):
    """The `gpu-pool:` keys of a Pulumi.<stack>.yaml."""

    proxmox: ProxmoxConfig = Field(description="how the stack reaches the Proxmox VE cluster that holds the GPU hosts")
    rke2: Rke2Config = Field(description="the RKE2 cluster the GPU workers join")
    registry_mirrors: dict[str, list[str] | RegistryMirrorConfig] = Field(
        default_factory=dict,
        description="registry -> mirror endpoints every new VM's containerd pulls through, written as "
        "/etc/rancher/rke2/registries.yaml (mirrors.<registry>.endpoint), e.g. {docker.io: "
        "[https://mirror.lab:5000]}, or {endpoint: [...], rewrite: {...}} for a Harbor project; `*` for every "
        "registry (docs/air-gap.md)",
    )
    trusted_ca: str | None = Field(
        default=None,
        description="the lab's CA, one PEM bundle (a file path, relative to the project directory, or the PEM "
        "text): trusted by every VM (cloud-init ca_certs), by containerd for each registry mirror (registries.yaml "
        "tls.ca_file) and by the GPU Operator's driver container (driver.certConfig) (docs/air-gap.md)",
    )
    proxy: ProxyConfig = Field(
        default_factory=ProxyConfig,
        description="the HTTP(S) proxy a lab behind one downloads through: the RKE2 installer and agent, apt, the "
        "GPU Operator's driver container (docs/air-gap.md)",
    )
    apt_mirror: AptMirrorConfig | None = Field(
        default=None,
        description="the Ubuntu archive mirror every new VM's apt and the GPU Operator's driver container use "
        "(docs/air-gap.md)",
    )
    air_gapped: bool = Field(
        default=False,
        description="the lab has no route out, not even a proxy: the preview refuses every URL and image a node or "
        "the cluster would fetch that no lab copy serves (installer, apt, chart, images), naming the key that points "
        "it at one; `make preview ARGS=--inventory` lists them (docs/air-gap.md)",
    )
    kubernetes: KubernetesConfig = Field(
        default_factory=KubernetesConfig, description="the Kubernetes API the stack and its kubectl steps talk to"
    )
    sharing_profiles: dict[str, SharingProfile] = Field(
        min_length=1,
        description="named sharing profiles; each domain's card advertises its profile's replicas as nvidia.com/gpu",
        json_schema_extra={"propertyNames": {"pattern": LABEL_VALUE.pattern}},
    )
    failure_domains: list[FailureDomainConfig] = Field(
        min_length=1, description="one entry per Proxmox host with a GPU: its card, its worker VM, its sharing profile"
    )
    gpu_operator: GpuOperatorConfig = Field(
        default_factory=GpuOperatorConfig, description="the NVIDIA GPU Operator release: chart, driver, resources"
    )
    kyverno: KyvernoConfig = Field(
        default_factory=KyvernoConfig, description="the Kyverno policy that steers GPU pods to GPU nodes"
    )
    monitoring: MonitoringConfig = Field(
        default_factory=MonitoringConfig, description="DCGM ServiceMonitor, Grafana dashboard and GPU alert rules"
    )
    gpu_quotas: GpuQuotasConfig = Field(
        default_factory=GpuQuotasConfig, description="how many GPUs each namespace may request"
    )
    smoke_test: SmokeTestConfig = Field(
        default_factory=SmokeTestConfig, description="the CUDA vector-add Job that proves each domain's GPU chain"
    )
    rollout: RolloutConfig = Field(
        default_factory=RolloutConfig,
        description="day-2 waves: the order in which changes that drain GPU workers go through the domains",
    )
    repair: RepairConfig = Field(
        default_factory=RepairConfig,
        description="`gpu-pool repair`: its daily power-cycle budget per domain, and the optional in-cluster "
        "health check",
    )
    reclaim: ReclaimConfig = Field(
        default_factory=ReclaimConfig,
        description="opt-in policies that give idle GPUs back: stop a Kubeflow notebook holding an idle card while "
        "others wait (docs/day2.md)",
    )
    preflight: PreflightConfig = Field(
        default_factory=PreflightConfig, description="read-only checks of the hosts and the cluster at preview"
    )

    _mirrors = field_validator("registry_mirrors", mode="before")(
        classmethod(lambda cls, v: registry_mirrors(v) if isinstance(v, dict) else v)
    )
    _trusted_ca = field_validator("trusted_ca")(classmethod(lambda cls, v: read_bundle(v) if v is not None else None))

    @property
    def mirrors(self) -> dict[str, RegistryMirrorConfig]:
        """registryMirrors, each as {endpoint, rewrite} (the validator made them so)."""
        return registry_mirrors(self.registry_mirrors)

    @property
    def trusted_certificates(self) -> tuple[str, ...]:
        return certificates_of(self.trusted_ca)

    def slots(self, domain: FailureDomainConfig) -> int:
        """Schedulable `nvidia.com/gpu` the domain's cards advertise under its sharing profile (per card, each)."""
        return self.sharing_profiles[domain.sharing].replicas * len(domain.cards)

    @property
    def total_slots(self) -> int:
        return sum(self.slots(domain) for domain in self.failure_domains)
