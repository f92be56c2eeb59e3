"""gpu-pool: Proxmox GPU passthrough and the RKE2 GPU tier as one Pulumi plan."""

from __future__ import annotations

import os

import pulumi

from components.gpu_failure_domain import GpuFailureDomain, GpuFailureDomainArgs
from components.gpu_failure_domain.host_preflight import PreflightError, run_preflight
from components.gpu_platform import GpuPlatform, GpuPlatformArgs
from components.shared.providers import build_providers, proxmox_credential_env
from config.errors import ConfigError
from config.gpu_quotas import quota_warnings
from config.loader import load_config

# Set by the offline preview (`make preview`): there is no Proxmox API to look the cards up in.
OFFLINE = os.environ.get("GPU_POOL_OFFLINE") == "1"

try:
    loaded = load_config()
except ConfigError as error:
    # RunError: Pulumi prints the message alone, without the program's traceback.
    raise pulumi.RunError("invalid stack config:\n  " + "\n  ".join(error.messages)) from None

cfg = loaded.stack
for warning in quota_warnings(cfg.gpu_quotas, cfg.total_slots):
    pulumi.log.warn(warning)

providers = build_providers(loaded)
try:
    preflight = run_preflight(
        cfg.failure_domains,
        enabled=cfg.preflight.enabled,
        host_check=cfg.preflight.host_check,
        ssh_user=cfg.proxmox.ssh.username,
        node_addresses=cfg.proxmox.ssh.node_addresses,
        provider=providers.proxmox,
        offline=OFFLINE,
    )
except PreflightError as error:
    raise pulumi.RunError("Proxmox host preflight failed:\n  " + "\n  ".join(error.messages)) from None

platform = GpuPlatform("gpu-platform", GpuPlatformArgs(stack=cfg, kubernetes_provider=providers.kubernetes))
credential_env = proxmox_credential_env(loaded)
domains = {
    domain.name: GpuFailureDomain(
        domain.name,
        GpuFailureDomainArgs(
            domain=domain,
            stack=cfg,
            rke2_token=loaded.secrets.rke2_token,
            proxmox_credential_env=credential_env,
            proxmox_provider=providers.proxmox,
            kubernetes_provider=providers.kubernetes,
            platform=platform.handles,
        ),
    )
    for domain in cfg.failure_domains
}

pulumi.export(
    "failureDomains",
    {
        name: {
            "nodeName": domain.node_name,
            "vmId": domain.vm_id,
            "zone": domain.zone,
            "sharingProfile": domain.sharing_profile,
            "gpuSlots": domain.gpu_slots,
            "preflight": preflight[name],
        }
        for name, domain in domains.items()
    },
)
pulumi.export("schedulableGpuSlots", cfg.total_slots)
pulumi.export("gpuOperator", {"chart": cfg.gpu_operator.chart_version, "driver": cfg.gpu_operator.driver_version})
