"""gpu-pool: Proxmox GPU passthrough and the RKE2 GPU tier as one Pulumi plan."""

from __future__ import annotations

import pulumi

from components.gpu_failure_domain import GpuFailureDomain, GpuFailureDomainArgs
from components.providers import build_providers, proxmox_credential_env
from config.errors import ConfigError
from config.loader import load_config

try:
    loaded = load_config()
except ConfigError as error:
    # RunError: Pulumi prints the message alone, without the program's traceback.
    raise pulumi.RunError("invalid stack config:\n  " + "\n  ".join(error.messages)) from None

cfg = loaded.stack
providers = build_providers(loaded)
credential_env = proxmox_credential_env(loaded)

domains = {
    domain.name: GpuFailureDomain(
        domain.name,
        GpuFailureDomainArgs(
            domain=domain,
            proxmox=cfg.proxmox,
            rke2=cfg.rke2,
            kubernetes=cfg.kubernetes,
            gpu_slots=cfg.slots(domain),
            rke2_token=loaded.secrets.rke2_token,
            proxmox_credential_env=credential_env,
            proxmox_provider=providers.proxmox,
            kubernetes_provider=providers.kubernetes,
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
        }
        for name, domain in domains.items()
    },
)
pulumi.export("schedulableGpuSlots", cfg.total_slots)
