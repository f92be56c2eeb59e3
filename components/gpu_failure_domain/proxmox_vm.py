"""Arguments for the PCI resource mapping and the GPU worker VM, as plain dicts."""

from __future__ import annotations

from typing import Any

from config.failure_domain import FailureDomainConfig, GpuConfig
from config.proxmox import ProxmoxConfig

# q35 gives the card a real PCIe slot (pcie=1 needs it); the default i440fx only has legacy PCI.
MACHINE = "q35"
# SeaBIOS: no Secure Boot in the VM, so the unsigned NVIDIA module loads with no key enrolment (article).
SEABIOS = "seabios"


def mapping_name(domain: FailureDomainConfig, index: int = 0) -> str:
    """Cluster-wide name of a card's PCI resource mapping (Datacenter -> Resource Mappings).

    The first card keeps the one-card name (`gpu-<domain>`), so a stack that grows from `gpu:` to `gpus:`
    neither renames nor replaces its existing mapping; later cards get `-1`, `-2`... by their place in the list.
    """
    return f"gpu-{domain.name}" if index == 0 else f"gpu-{domain.name}-{index}"


def pci_path(card: GpuConfig) -> str:
    """The mapped path is the whole device (all functions) unless a function was given."""
    return card.pci_address


def pci_mapping_args(domain: FailureDomainConfig, index: int = 0) -> dict[str, Any]:
    """`hardware.mapping.Pci` arguments: iommu group and subsystem id are included, or the mapping is incomplete."""
    card = domain.cards[index]
    return {
        "name": mapping_name(domain, index),
        "comment": f"{card.model} for gpu-pool domain {domain.name}",
        "maps": [
            {
                "node": domain.proxmox_node,
                "path": pci_path(card),
                "id": card.vendor_device_id,
                "iommu_group": card.iommu_group,
                "subsystem_id": card.subsystem_id,
            }
        ],
    }


def mapped_indexes(domain: FailureDomainConfig) -> list[int]:
    """The cards passed through a resource mapping (the others by raw id), in their stable order."""
    return [index for index, card in enumerate(domain.cards) if card.passthrough == "mapping"]


def hostpci(domain: FailureDomainConfig, index: int = 0) -> dict[str, Any]:
    card = domain.cards[index]
    device = f"hostpci{index}"
    if card.passthrough == "raw":
        # Explicit opt-in: a raw id works only for root@pam (the article's trap), never with an API token.
        return {"device": device, "id": pci_path(card), "pcie": True, "rombar": True}
    # A mapping works with an API token that has Mapping.Use on it.
    return {"device": device, "mapping": mapping_name(domain, index), "pcie": True, "rombar": True}


def hostpcis(domain: FailureDomainConfig) -> list[dict[str, Any]]:
    """One hostpci entry per card, numbered by its place in the list, so adding a card never renumbers another."""
    return [hostpci(domain, index) for index in range(len(domain.cards))]


def passthrough_settings(domain: FailureDomainConfig) -> dict[str, Any]:
    """What only takes effect after a full power cycle of the VM (article: not a soft reboot)."""
    return {"machine": MACHINE, "bios": bios(domain), **{entry["device"]: entry for entry in hostpcis(domain)}}


def models(domain: FailureDomainConfig) -> str:
    """`NVIDIA RTX A1000`, or `2x NVIDIA RTX A1000`, or the models joined: for descriptions."""
    names = [card.model for card in domain.cards]
    if len(set(names)) == 1:
        return names[0] if len(names) == 1 else f"{len(names)}x {names[0]}"
    return " + ".join(names)


def reboot_settings(domain: FailureDomainConfig) -> dict[str, Any]:
    """Every VM setting Proxmox leaves pending until the VM's next cold start (no CPU or memory hotplug)."""
    return {
        **passthrough_settings(domain),
        "cores": domain.cores,
        "memory": domain.memory_mib,
        "network": domain.network.model_dump(mode="json"),
    }


def snippet_file_name(domain: FailureDomainConfig) -> str:
    return f"{domain.hostname}-user-data.yaml"


def snippet_file_id(domain: FailureDomainConfig, proxmox: ProxmoxConfig) -> str:
    """The snippet's volume id, which is also the FileLegacy's resource id (bpg: `<datastore>:snippets/<file>`).

    The VM names it as a plain string, not through the snippet's id output: an unknown id in a preview would
    make the provider plan a replacement of the VM (user_data_file_id forces one).
    """
    return f"{proxmox.snippets_datastore}:snippets/{snippet_file_name(domain)}"


def bios(domain: FailureDomainConfig) -> str:
    return SEABIOS if domain.firmware == "seabios" else "ovmf"


def vm_args(domain: FailureDomainConfig, proxmox: ProxmoxConfig) -> dict[str, Any]:
    """`VmLegacy` arguments."""
    ip_config: dict[str, Any] = {"address": domain.network.ipv4}
    if domain.network.gateway:
        ip_config["gateway"] = domain.network.gateway
    network_device: dict[str, Any] = {"bridge": domain.network.bridge, "model": "virtio"}
    if domain.network.vlan_id is not None:
        network_device["vlan_id"] = domain.network.vlan_id
    initialization: dict[str, Any] = {
        "datastore_id": proxmox.disk_datastore,
        "ip_configs": [{"ipv4": ip_config}],
        "user_data_file_id": snippet_file_id(domain, proxmox),
    }
    if domain.network.dns_servers:
        initialization["dns"] = {"servers": list(domain.network.dns_servers)}
    args: dict[str, Any] = {
        "name": domain.hostname,
        "node_name": domain.proxmox_node,
        "vm_id": domain.vm_id,
        "description": f"gpu-pool failure domain {domain.name}: RKE2 GPU worker with {models(domain)}",
        "tags": ["gpu-pool", "rke2", "gpu", domain.name],
        "machine": MACHINE,
        "bios": bios(domain),
        "on_boot": True,
        "started": True,
        # Never let the provider reboot a GPU worker: it would do it undrained, through the API, for any
        # change that needs one. Such changes stay pending, and the power-cycle step applies them drained.
        "reboot_after_update": False,
        "stop_on_destroy": True,
        "agent": {"enabled": True},
        "cpu": {"type": "host", "cores": domain.cores, "sockets": 1},
        "memory": {"dedicated": domain.memory_mib},
        "operating_system": {"type": "l26"},
        "scsi_hardware": "virtio-scsi-single",
        "disks": [
            {
                "interface": "scsi0",
                "datastore_id": proxmox.disk_datastore,
                "import_from": proxmox.cloud_image,
                "size": domain.disk_gib,
                "iothread": True,
                "discard": "on",
                "ssd": True,
            }
        ],
        "network_devices": [network_device],
        "serial_devices": [{"device": "socket"}],
        "hostpcis": hostpcis(domain),
        "initialization": initialization,
    }
    if domain.firmware == "ovmf":
        args["efi_disk"] = {
            "datastore_id": proxmox.disk_datastore,
            "type": "4m",
            "pre_enrolled_keys": domain.secure_boot,
        }
    return args
