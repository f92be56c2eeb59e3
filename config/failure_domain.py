"""`gpu-pool:failureDomains[]`: one Proxmox host, its GPUs (one or several), one RKE2 worker VM."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config.base import ConfigModel
from config.errors import SECRET_VALUE_ERROR
from config.validators import (
    DNS_1123_SUBDOMAIN,
    DNS_LABEL,
    PCI_ADDRESS,
    dns_1123_name,
    dns_label,
    pci_address,
    ssh_public_key_problem,
    vendor_device_id,
)
from knowledge.gpu_cards import FUNCTION_NAMES, card_facts
from knowledge.vm_firmware import OVMF_CLASSIC_MMIO64_MIB, aperture_mib, mmio64_window_mib, size_text, windows_mib

NVIDIA_VENDOR_ID = "10de"
SUBSYSTEM_ID = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$")
KERNEL_RELEASE = re.compile(r"^\d+\.\d+\.\d+-\d+-[a-z0-9]+$")
USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")

# An RKE2 agent, the driver container compiling nvidia.ko (limit 4Gi) and a CUDA workload need
# this much; below it the article's exit-137 trap returns through the back door.
MIN_MEMORY_MIB = 8192
# Driver, toolkit and CUDA images are several GB each; containerd's image GC starts evicting
# at 85% disk, which on a small disk means re-pulling the driver image on every reboot.
MIN_DISK_GIB = 40
# 16 TiB: far beyond any worker's root disk, and below the number a size in MiB comes to (204800 for 200 GiB).
MAX_DISK_GIB = 16384


class GpuConfig(ConfigModel):
    pci_address: str = Field(
        description="the card's address on its Proxmox host, DDDD:BB:DD[.F], e.g. 0000:01:00",
        json_schema_extra={"pattern": PCI_ADDRESS.pattern},
    )
    vendor_device_id: str = Field(
        description="PCI vendor:device id, e.g. 10de:25b0 for an RTX A1000",
        json_schema_extra={"pattern": "^10[dD][eE]:[0-9a-fA-F]{4}$"},
    )
    model: str = Field(description="human name of the card, e.g. NVIDIA RTX A1000")
    iommu_group: int = Field(ge=0, description="the card's IOMMU group (`pvesh get /nodes/<n>/hardware/pci`)")
    subsystem_id: str = Field(
        description="PCI subsystem vendor:device id; the mapping is incomplete without it",
        json_schema_extra={"pattern": SUBSYSTEM_ID.pattern},
    )
    bar_mib: int | None = Field(
        default=None,
        alias="barMiB",
        ge=1,
        description="the card's memory BARs added up, in MiB (host: `lspci -vv -s <address>`, the Region sizes); "
        "checks that the VM firmware can map them",
    )
    passthrough: Literal["mapping", "raw"] = Field(
        default="mapping",
        description="mapping: PCI resource mapping (works with an API token); raw: raw hostpci id (root@pam only)",
    )

    _pci = field_validator("pci_address")(classmethod(lambda cls, v: pci_address(v)))

    @field_validator("vendor_device_id")
    @classmethod
    def _vendor_device(cls, value: str) -> str:
        value = vendor_device_id(value)
        if not value.startswith(NVIDIA_VENDOR_ID + ":"):
            raise ValueError(f"is not an NVIDIA device; NVIDIA's PCI vendor id is {NVIDIA_VENDOR_ID}")
        facts = card_facts(value)
        if facts.function not in ("gpu", "unknown"):
            # The card's audio (or USB) function comes with the card through the mapping; named as the card, the
            # preview would pass and the host preflight or the driver would not find a GPU at that id.
            raise ValueError(
                f"is {FUNCTION_NAMES[facts.function]} ({facts.chip}), not the GPU: give the id of the card's function "
                ".0, the display or 3D controller (`gpu-pool discover` prints it)"
            )
        return value

    @field_validator("subsystem_id")
    @classmethod
    def _subsystem(cls, value: str) -> str:
        if not SUBSYSTEM_ID.match(value):
            raise ValueError("is not a subsystem id; expected vvvv:dddd in hex, e.g. 10de:16e6")
        return value.lower()


# Proxmox's `bridge` (pve-common PVE/JSONSchema.pm, format pve-bridge-id: [-_.\w\d]+) names a Linux interface,
# at most 15 characters (IFNAMSIZ 16 with its NUL).
BRIDGE = re.compile(r"^[-_.A-Za-z0-9]{1,15}$")


class NetworkConfig(ConfigModel):
    bridge: str = Field(default="vmbr0", description="Proxmox bridge", json_schema_extra={"pattern": BRIDGE.pattern})
    vlan_id: int | None = Field(default=None, ge=1, le=4094, description="VLAN tag")
    ipv4: str = Field(default="dhcp", description="dhcp or a CIDR address, e.g. 10.0.20.31/24")
    gateway: str | None = Field(default=None, description="IPv4 gateway (with a static address)")
    dns_servers: list[str] = Field(default_factory=list, description="DNS servers for cloud-init")

    @field_validator("bridge")
    @classmethod
    def _bridge(cls, value: str) -> str:
        if not BRIDGE.match(value):
            raise ValueError(
                "is not a Proxmox bridge name: letters, digits, '-', '_' and '.', at most 15 characters, e.g. vmbr0"
            )
        return value

    @field_validator("ipv4")
    @classmethod
    def _ipv4(cls, value: str) -> str:
        if value == "dhcp":
            return value
        try:
            interface = ipaddress.IPv4Interface(value)
        except ValueError:
            raise ValueError("must be 'dhcp' or an IPv4 address with prefix, e.g. 10.0.20.31/24") from None
        if "/" not in value:
            raise ValueError("needs a prefix length, e.g. 10.0.20.31/24")
        address, network = interface.ip, interface.network
        if address.is_loopback or address.is_multicast or address.is_unspecified or address.is_link_local:
            raise ValueError(
                f"{address} is not an address a VM can have on a LAN; give the VM's own, e.g. 10.0.20.31/24"
            )
        # Below /31 the first and last address of a subnet are its network and broadcast address, which no host may
        # take (RFC 3021 makes /31's two addresses usable).
        if network.prefixlen <= 30 and address in (network.network_address, network.broadcast_address):
            which = "network" if address == network.network_address else "broadcast"
            raise ValueError(
                f"{address} is the {which} address of {network}, which no host can have: give the VM an address "
                f"between {network.network_address + 1} and {network.broadcast_address - 1}"
            )
        return value

    @field_validator("gateway")
    @classmethod
    def _gateway(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ipaddress.IPv4Address(value)
            except ValueError:
                raise ValueError("must be an IPv4 address") from None
        return value

    @field_validator("dns_servers")
    @classmethod
    def _dns_servers(cls, value: list[str]) -> list[str]:
        for server in value:
            try:
                ipaddress.ip_address(server)
            except ValueError:
                raise ValueError(
                    f"{server!r} is not an IP address: cloud-init writes nameservers as addresses, e.g. 10.0.20.1"
                ) from None
        return value

    @model_validator(mode="after")
    def _gateway_in_subnet(self) -> NetworkConfig:
        # cloud-init writes the route as given; outside the VM's subnet the route is unreachable, the VM boots
        # without a default route, and the RKE2 install never downloads: a silent 30-minute node-ready timeout.
        if self.ipv4 == "dhcp":
            if self.gateway is not None:
                raise ValueError(
                    f"gateway {self.gateway} has no effect with ipv4: dhcp (the DHCP server gives the route): "
                    "remove the gateway, or give the VM a static ipv4 such as 10.0.20.31/24"
                )
            return self
        interface = ipaddress.IPv4Interface(self.ipv4)
        subnet = interface.network
        if self.gateway is None:
            raise ValueError(
                f"ipv4 {self.ipv4} is static but no gateway is given: the VM would boot without a default route "
                "and never download RKE2 (nor the driver container its kernel headers); add the subnet's gateway"
            )
        gateway = ipaddress.IPv4Address(self.gateway)
        if gateway not in subnet:
            raise ValueError(
                f"gateway {self.gateway} is outside the VM's subnet {subnet} (ipv4: {self.ipv4}): the VM would "
                "have no route out; give the gateway of that subnet or fix the prefix length"
            )
        if gateway == interface.ip:
            raise ValueError(
                f"gateway {self.gateway} is the VM's own address (ipv4: {self.ipv4}): the VM would route to itself; "
                "give the router's address as gateway and the VM another address"
            )
        if subnet.prefixlen <= 30 and gateway in (subnet.network_address, subnet.broadcast_address):
            raise ValueError(
                f"gateway {self.gateway} is the {'network' if gateway == subnet.network_address else 'broadcast'} "
                f"address of {subnet}, not a router: give the router's address"
            )
        return self


def _one_of_gpu_or_gpus(schema: dict[str, Any]) -> None:
    """Editor schema: a domain names its cards with `gpu` (one) or `gpus` (several), exactly one of them; neither
    may be null (pydantic's `X | None` would let an editor accept `gpu: null`, which the program refuses)."""
    for key in ("gpu", "gpus"):
        prop = schema["properties"][key]
        options = [option for option in prop.pop("anyOf", []) if option.get("type") != "null"]
        if options:
            prop.update(options[0])
        prop.pop("default", None)
    schema["oneOf"] = [{"required": ["gpu"]}, {"required": ["gpus"]}]


class FailureDomainConfig(ConfigModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(**ConfigModel.model_config, json_schema_extra=_one_of_gpu_or_gpus)

    name: str = Field(
        description="domain name, a DNS label; becomes topology.kubernetes.io/zone",
        json_schema_extra={"pattern": DNS_LABEL.pattern},
    )
    proxmox_node: str = Field(
        description="the Proxmox node (physical host) that holds the card",
        json_schema_extra={"pattern": DNS_LABEL.pattern},
    )
    vm_id: int = Field(ge=100, le=999_999_999, description="Proxmox VM id of the GPU worker")
    hostname: str = Field(
        description="VM hostname = Kubernetes node name, e.g. rke2-worker-dc1-gpu-a",
        json_schema_extra={"pattern": DNS_1123_SUBDOMAIN.pattern},
    )
    gpu: GpuConfig | None = Field(
        default=None,
        description="the card on this host, as `pvesh get /nodes/<node>/hardware/pci` shows it (or `gpus` for several)",
    )
    gpus: list[GpuConfig] | None = Field(
        default=None,
        min_length=1,
        description="several cards of this host, all passed into its one VM; append new ones at the end: a card's "
        "place in the list is its hostpci slot and mapping name",
    )
    sharing: str = Field(description="name of a gpu-pool:sharingProfiles entry")
    cores: int = Field(default=8, ge=1, le=512, description="vCPUs (CPU type host)")
    memory_mib: int = Field(
        default=16384,
        alias="memoryMiB",
        ge=MIN_MEMORY_MIB,
        description=f"memory in MiB, at least {MIN_MEMORY_MIB}",
    )
    disk_gib: int = Field(
        default=100,
        alias="diskGiB",
        ge=MIN_DISK_GIB,
        le=MAX_DISK_GIB,
        description=f"root disk in GiB, {MIN_DISK_GIB} to {MAX_DISK_GIB}",
    )
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="the VM's network (cloud-init)")
    firmware: Literal["seabios", "ovmf"] = Field(default="seabios", description="seabios (default) or ovmf (UEFI)")
    host_address_bits: int | None = Field(
        default=None,
        ge=36,
        le=57,
        description="the Proxmox host CPU's physical address width (`grep -m1 'address sizes' /proc/cpuinfo`): the "
        "VM inherits it, and it sizes the firmware's window for large-BAR cards; needed when the cards' BARs "
        "need more than 32 GiB",
    )
    secure_boot: bool = Field(default=False, description="UEFI Secure Boot in the VM (ovmf only)")
    module_signing: bool = Field(
        default=False, description="you enrol a key and sign nvidia.ko yourself: required for secure boot"
    )
    protect: bool = Field(default=True, description="Pulumi protect on the VM: a rename never silently destroys it")
    kernel: str | None = Field(
        default=None,
        description="pinned guest kernel release, e.g. 6.8.0-60-generic; changing it runs the kernel upgrade",
        json_schema_extra={"pattern": KERNEL_RELEASE.pattern},
    )
    username: str = Field(default="ubuntu", description="cloud-init login user")
    ssh_authorized_keys: list[str] = Field(default_factory=list, description="SSH public keys for that user")

    _name = field_validator("name")(classmethod(lambda cls, v: dns_label(v)))
    _node = field_validator("proxmox_node")(classmethod(lambda cls, v: dns_label(v)))
    _hostname = field_validator("hostname")(classmethod(lambda cls, v: dns_1123_name(v)))

    @field_validator("ssh_authorized_keys")
    @classmethod
    def _public_keys_only(cls, value: list[str]) -> list[str]:
        for index, key in enumerate(value):
            if "PRIVATE KEY" in key or key.lstrip().startswith("-----BEGIN"):
                # Raised without the value: the message must not spread the key it warns about.
                raise PydanticCustomError(
                    SECRET_VALUE_ERROR,
                    f"entry {index} is a private key (value not shown): paste the public half (the .pub file, "
                    "`ssh-keygen -y -f <key>` prints it) and treat that private key as leaked if this file was "
                    "committed",
                )
            # cloud-init writes each entry as an authorized_keys line once, at first boot: a key cut short is a VM
            # nobody can log in to, found on day 2 when the kernel upgrade or a wave needs SSH.
            problem = ssh_public_key_problem(key)
            if problem:
                raise ValueError(f"entry {index} {problem}")
        return value

    @field_validator("username")
    @classmethod
    def _username(cls, value: str) -> str:
        # shadow's useradd (chkname.c is_valid_user_name, as Ubuntu 24.04 builds it) takes [a-z_][a-z0-9_-]*, at most
        # 32 characters; cloud-init creates the user with it, and a refused name is a VM without its login.
        if not USERNAME.match(value):
            raise ValueError(
                "is not a Linux user name useradd accepts: lowercase letters, digits, '_' and '-', starting with a "
                "letter or '_', at most 32 characters, e.g. ubuntu"
            )
        return value

    @field_validator("kernel")
    @classmethod
    def _kernel(cls, value: str | None) -> str | None:
        if value is not None and not KERNEL_RELEASE.match(value):
            raise ValueError("is not a kernel release; expected what `uname -r` prints, e.g. 6.8.0-60-generic")
        return value

    @model_validator(mode="after")
    def _one_way_to_name_cards(self) -> FailureDomainConfig:
        if self.gpu is None and self.gpus is None:
            raise ValueError(
                "names no card: add gpu: {pciAddress: ..., vendorDeviceId: ...} (`gpu-pool discover` prints it), "
                "or gpus: [...] for several"
            )
        if self.gpu is not None and self.gpus is not None:
            raise ValueError("gives both gpu and gpus: keep one (gpus: [...] lists every card, gpu is one card)")
        return self

    @property
    def cards(self) -> list[GpuConfig]:
        """Every card of the domain in its stable order: index i is hostpci{i} and the i-th mapping."""
        return [self.gpu] if self.gpu is not None else list(self.gpus or [])

    def card_key(self, index: int) -> str:
        """The key a card is written under in the stack file, for messages: `gpu` or `gpus[1]`."""
        return "gpu" if self.gpu is not None else f"gpus[{index}]"

    def bar_mib(self, index: int) -> int | None:
        """A card's BARs in MiB: as the stack gives them, else as measured for its model (the card table)."""
        card = self.cards[index]
        return card.bar_mib if card.bar_mib is not None else card_facts(card.vendor_device_id).measured_bar_mib

    @model_validator(mode="after")
    def _large_bars_fit_the_firmware(self) -> FailureDomainConfig:
        # Every card's window adds up in the one aperture (FIELD-REVIEW-4 WRONG-6): a card whose BAR stays
        # unassigned has no driver, and `gpu-ready` times out 45 minutes into `up` (knowledge/vm_firmware.py).
        sized = [(index, bar) for index in range(len(self.cards)) if (bar := self.bar_mib(index)) is not None]
        if not sized:
            return self
        needed = windows_mib([bar for _, bar in sized])
        if needed <= OVMF_CLASSIC_MMIO64_MIB:
            return self  # within what both firmwares always have
        cards = " + ".join(f"{self.card_key(index)} {size_text(mmio64_window_mib(bar))}" for index, bar in sized)
        room = aperture_mib(self.firmware, self.host_address_bits, self.memory_mib)
        if room is None or self.host_address_bits is None:
            raise ValueError(
                f"the cards' BARs need a {size_text(needed)} 64-bit MMIO window ({cards}); whether {self.firmware} "
                "can place it depends on the host CPU's physical address width, which the VM inherits (cpu host): "
                f"set hostAddressBits to what `grep -m1 'address sizes' /proc/cpuinfo` prints on {self.proxmox_node}"
            )
        if needed > room:
            other: Literal["seabios", "ovmf"] = "seabios" if self.firmware == "ovmf" else "ovmf"
            other_room = aperture_mib(other, self.host_address_bits, self.memory_mib) or 0
            fix = (
                f"use firmware: {other}, which has {size_text(other_room)} on this host"
                if needed <= other_room
                else "put these cards on a host with a wider CPU address width, or fewer of them in one VM"
            )
            raise ValueError(
                f"the cards' BARs need a {size_text(needed)} 64-bit MMIO window ({cards}), but {self.firmware} on a "
                f"{self.host_address_bits}-bit host has {size_text(room)}: the BARs would stay unassigned and the "
                f"driver find no GPU; {fix}"
            )
        return self

    @model_validator(mode="after")
    def _secure_boot_needs_signing(self) -> FailureDomainConfig:
        if self.secure_boot and self.firmware != "ovmf":
            raise ValueError("secureBoot needs firmware: ovmf (SeaBIOS has no Secure Boot)")
        if self.secure_boot and not self.module_signing:
            raise ValueError(
                "UEFI Secure Boot refuses the unsigned NVIDIA kernel module: set moduleSigning: true once you "
                "sign it, or use firmware: seabios (the article's choice)"
            )
        return self
