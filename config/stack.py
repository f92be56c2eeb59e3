"""The whole stack config (`gpu-pool:*`) and the rules that span several keys."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

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
from config.validators import LABEL_VALUE
from knowledge.gpu_operator import GPU_RESOURCE


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


def _duplicates(values: Iterable[object]) -> set[object]:
    return {value for value, count in Counter(values).items() if count > 1}


def cross_key_problems(cfg: StackConfig) -> list[str]:
    """Rules no single key can check. Each message names the key path of the offending entry."""
    problems: list[str] = []
    domains = cfg.failure_domains

    def first_dupes(attr: str, what: str, why: str) -> None:
        dupes = _duplicates(getattr(d, attr) for d in domains)
        for i, domain in enumerate(domains):
            value = getattr(domain, attr)
            if value in dupes:
                first = next(j for j, d in enumerate(domains) if getattr(d, attr) == value)
                if first != i:
                    alias = FailureDomainConfig.model_fields[attr].alias or attr
                    problems.append(
                        f"gpu-pool:failureDomains[{i}].{alias}: {value!r} is already used by "
                        f"failureDomains[{first}]; {what} must be unique{why}"
                    )

    first_dupes("name", "domain names", "")
    first_dupes("hostname", "hostnames", " (they are Kubernetes node names)")
    first_dupes("vm_id", "VM ids", " (Proxmox VM ids are cluster-wide)")
    first_dupes(
        "proxmox_node",
        "Proxmox nodes",
        ": a failure domain is a physical host, and two GPU domains on one host both die with it",
    )
    for i, domain in enumerate(domains):
        if domain.sharing not in cfg.sharing_profiles:
            defined = ", ".join(sorted(cfg.sharing_profiles))
            problems.append(
                f"gpu-pool:failureDomains[{i}].sharing: {domain.sharing!r} is not a defined sharing profile "
                f"(defined in gpu-pool:sharingProfiles: {defined}); a node label naming a missing profile "
                "takes that card from 1 schedulable GPU to 0"
            )
        if domain.kernel is not None and not domain.ssh_authorized_keys:
            problems.append(
                f"gpu-pool:failureDomains[{i}].kernel: the kernel upgrade logs in to the VM over SSH as "
                f"{domain.username!r}, but the domain has no sshAuthorizedKeys: add the public key whose private "
                "half is in your ssh-agent or in the secret gpu-pool:sshPrivateKey"
            )
        if domain.gpu.passthrough == "raw" and cfg.proxmox.auth != "rootPassword":
            problems.append(
                f"gpu-pool:failureDomains[{i}].gpu.passthrough: 'raw' assigns a raw PCI id, which Proxmox only "
                "allows root@pam to do (an API token fails with an unhelpful error); use 'mapping', or set "
                "gpu-pool:proxmox.auth to rootPassword"
            )
    for name in cfg.sharing_profiles:
        if not name or not LABEL_VALUE.match(name):
            problems.append(
                f"gpu-pool:sharingProfiles.{name}: the profile name is also the value of the node label "
                "nvidia.com/device-plugin.config: at most 63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit"
            )
    if cfg.kyverno.gpu_resource != GPU_RESOURCE:
        problems.append(
            f"gpu-pool:kyverno.gpuResource: {cfg.kyverno.gpu_resource!r} is not what the device plugin advertises "
            f"({GPU_RESOURCE}; the time-slicing profiles keep renameByDefault false), so the policy "
            "would never see a GPU pod"
        )
    operator_ns = cfg.gpu_operator.namespace
    if cfg.smoke_test.namespace == operator_ns:
        problems.append(
            f"gpu-pool:smokeTest.namespace: {operator_ns!r} is the operator's privileged namespace; the smoke test "
            "must prove a GPU pod works under the restricted Pod Security Standard"
        )
    return problems
