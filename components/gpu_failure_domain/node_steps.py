"""The full power-cycle step that makes q35/hostpci changes take effect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.gpu_failure_domain.proxmox_vm import passthrough_settings, pci_mapping_args
from config.failure_domain import FailureDomainConfig
from config.proxmox import ProxmoxConfig

SCRIPT = Path(__file__).parent / "power_cycle_script.py"


def power_cycle_script() -> str:
    """The script text itself (not its path), so the command does not change with the checkout location."""
    return SCRIPT.read_text(encoding="utf-8")


def power_cycle_triggers(domain: FailureDomainConfig) -> list[Any]:
    """A change to any of these replaces the step, which re-runs it: exactly the passthrough settings."""
    settings = passthrough_settings(domain)
    # With a mapping, hostpci0 only names it: the device behind the name is what the guest sees at boot.
    mapped = pci_mapping_args(domain)["maps"] if domain.gpu.passthrough == "mapping" else []
    return [domain.proxmox_node, domain.vm_id, settings["machine"], settings["bios"], settings["hostpci0"], mapped]


def power_cycle_environment(domain: FailureDomainConfig, proxmox: ProxmoxConfig) -> dict[str, str]:
    """Non-secret environment; the component adds the credential as a secret."""
    return {
        "PROXMOX_ENDPOINT": proxmox.endpoint,
        "PROXMOX_NODE": domain.proxmox_node,
        "PROXMOX_VMID": str(domain.vm_id),
        "PROXMOX_INSECURE": "true" if proxmox.insecure else "false",
    }
