"""`gpu-pool:proxmox`: how the stack reaches the Proxmox VE cluster that holds the GPU hosts."""

from __future__ import annotations

import re
from typing import Literal, get_args
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from config.base import ConfigModel
from config.secrets import DEFAULT_AUTH, Auth
from config.validators import https_url

# A Proxmox volume id, `<datastore>:<content type>/<file>` (pve-storage src/PVE/Storage/Plugin.pm parse_volname).
FILE_ID = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*:(import|iso|vztmpl)/[^/\s]+$")
# What the VM's disk can be imported from: qemu-server's `import-from` takes only an `images` or `import` volume
# ("has wrong type '$vtype' - needs to be 'images' or 'import'", src/PVE/API2/Qemu.pm @ e6352be6), and an `import`
# volume is one of .ova, .ovf, .qcow2, .raw or .vmdk, case as written (pve-storage src/PVE/Storage.pm
# IMPORT_EXT_RE_1 and Plugin.pm parse_volname @ 0c56bad8); a disk image, not an .ova or .ovf appliance.
SSH_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
# A host name (RFC 1123 labels) or an IPv4/IPv6 address, nothing else.
HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*|[0-9a-fA-F:]+)$"
)
# pve-common PVE/JSONSchema.pm parse_storage_id: "storage ID '...' contains illegal characters".
STORAGE_ID = re.compile(r"^[a-zA-Z][-a-zA-Z0-9_.]*[a-zA-Z0-9]$")
IMPORT_DISK = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*:import/[-A-Za-z0-9.+=_]+\.(qcow2|raw|vmdk)$")


class ProxmoxSshConfig(ConfigModel):
    """The provider uploads cloud-init snippets over SSH: the Proxmox API has no upload for `snippets`."""

    username: str = Field(default="root", description="SSH user on the Proxmox nodes")
    agent: bool = Field(default=True, description="use the local ssh-agent for the key")
    node_addresses: dict[str, str] = Field(
        default_factory=dict, description="Proxmox node name -> address, where the node name does not resolve"
    )

    @field_validator("username")
    @classmethod
    def _username(cls, value: str) -> str:
        if not SSH_USER.match(value):
            raise ValueError(
                "is not a user name to log in to the Proxmox nodes with: lowercase letters, digits, '_' and '-', "
                "e.g. root"
            )
        return value

    @field_validator("node_addresses")
    @classmethod
    def _addresses(cls, value: dict[str, str]) -> dict[str, str]:
        for node, address in value.items():
            # The provider opens an SSH connection to exactly this (with proxmox.ssh.port): a host name or an IP.
            if not HOST.match(address):
                raise ValueError(
                    f"{node}: {address!r} is not a host name or IP address to SSH to (no scheme, port or path: the "
                    "port is proxmox.ssh.port), e.g. 10.0.0.5"
                )
        return value

    port: int = Field(
        default=22,
        ge=1,
        le=65535,
        description=(
            "SSH port of the Proxmox nodes; another port than 22 needs every domain's node in nodeAddresses "
            "(the provider takes a port only with an address)"
        ),
    )


# The guest releases the supported GPU Operator line's driver images are built for (NVIDIA/cloud-native-docs
# gpu-operator/platform-support.rst at 52dcb7b8: Ubuntu 22.04, 24.04 and 26.04; knowledge/rke2.py cites the same
# table). cloud-init's user data, the kernel holds and the driver container (it installs the running kernel's
# headers from the Ubuntu archive) all assume Ubuntu.
GuestOs = Literal["ubuntu-22.04", "ubuntu-24.04", "ubuntu-26.04"]
GUEST_OSES: tuple[str, ...] = get_args(GuestOs)
# Ubuntu's cloud image file names say the release by codename (noble-server-cloudimg-amd64.img) or number.
UBUNTU_CODENAMES = {"jammy": "ubuntu-22.04", "noble": "ubuntu-24.04"}
# Each supported release's codename: its archive's suites (an apt mirror's sources, components/gpu_platform).
CODENAME_OF: dict[str, str] = {"ubuntu-22.04": "jammy", "ubuntu-24.04": "noble", "ubuntu-26.04": "resolute"}
_UBUNTU_NUMBER = re.compile(r"ubuntu[-_]?(\d{2}\.\d{2})", re.IGNORECASE)
OTHER_DISTROS = ("debian", "rocky", "alma", "centos", "fedora", "rhel", "opensuse", "sles", "arch", "alpine")


def guest_os_of(cloud_image: str) -> str | None:
    """The Ubuntu release a cloud image's file name says, or None."""
    name = cloud_image.rsplit("/", 1)[-1].lower()
    for codename, release in UBUNTU_CODENAMES.items():
        if codename in name:
            return release
    number = _UBUNTU_NUMBER.search(name)
    return f"ubuntu-{number[1]}" if number else None


class ProxmoxConfig(ConfigModel):
    endpoint: str = Field(
        description="Proxmox VE API URL, the server alone, e.g. https://pve1.lab:8006/",
        json_schema_extra={"pattern": "^https://[^/?#]+/?$"},
    )
    insecure: bool = Field(default=False, description="skip TLS verification (self-signed Proxmox certificate)")
    auth: Auth = Field(
        default=DEFAULT_AUTH,
        description="apiToken (secret gpu-pool:proxmoxApiToken) or rootPassword (root@pam, only for raw PCI ids)",
    )
    snippets_datastore: str = Field(
        default="local",
        description="datastore with the `snippets` content type",
        json_schema_extra={"pattern": STORAGE_ID.pattern},
    )
    disk_datastore: str = Field(
        default="local-lvm",
        description="datastore for VM disks and the cloud-init drive (content type `images`)",
        json_schema_extra={"pattern": STORAGE_ID.pattern},
    )
    cloud_image: str = Field(
        description="file id of the cloud image the VM disk is imported from, e.g. local:import/noble.qcow2",
        json_schema_extra={"pattern": IMPORT_DISK.pattern},
    )
    ssh: ProxmoxSshConfig = Field(
        default_factory=ProxmoxSshConfig, description="how the provider reaches the nodes over SSH (snippet upload)"
    )
    guest_os: GuestOs | None = Field(
        default=None,
        description="the cloud image's Ubuntu release (ubuntu-22.04, ubuntu-24.04, ubuntu-26.04: what the GPU "
        "Operator's driver images support); default: the release the image's file name says (noble: 24.04, jammy: "
        "22.04), required where it says none",
    )

    @model_validator(mode="after")
    def _guest_os_is_ubuntu(self) -> ProxmoxConfig:
        name = self.cloud_image.rsplit("/", 1)[-1]
        found = guest_os_of(self.cloud_image)
        if self.guest_os is not None:
            if found in GUEST_OSES and found != self.guest_os:
                # The driver container's package sources (driver.repoConfig), the VM's apt sources and the
                # precompiled driver image are all of guestOs: the wrong release's suites on this image.
                raise ValueError(
                    f"guestOs is {self.guest_os}, but cloudImage {name!r} is {found} ({CODENAME_OF[found]}): the apt "
                    f"sources and the driver images would be {CODENAME_OF[self.guest_os]}'s; leave guestOs out (the "
                    f"image's name says it) or set it to {found}"
                )
            return self
        if found in GUEST_OSES:
            # The model is frozen once built; this is its own default, set while it is being built.
            object.__setattr__(self, "guest_os", found)
            return self
        other = next((d for d in OTHER_DISTROS if d in name.lower()), None)
        if other is not None:
            raise ValueError(
                f"cloudImage {name!r} looks like {other}'s: cloud-init's user data, the kernel holds and the GPU "
                f"Operator's driver images assume Ubuntu ({', '.join(GUEST_OSES)}); import an Ubuntu cloud image "
                "(e.g. noble-server-cloudimg-amd64.img as noble.qcow2)"
            )
        if found is not None:
            raise ValueError(
                f"cloudImage {name!r} is Ubuntu {found.removeprefix('ubuntu-')}, which the GPU Operator's driver "
                f"images do not cover ({', '.join(GUEST_OSES)}): import one of those releases' cloud images"
            )
        raise ValueError(
            f"cloudImage {name!r} names no Ubuntu release: set guestOs to the image's release "
            f"({', '.join(GUEST_OSES)}), as the kernel pins and the driver images are judged by it"
        )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        url = https_url(value)
        parts = urlsplit(url)
        extra = parts.path.rstrip("/") + (f"?{parts.query}" if parts.query else "")
        if extra:
            raise ValueError(
                f"drop {extra!r}: the endpoint is the server alone, https://{parts.netloc}/ (the provider and the "
                "power-cycle step add /api2/json themselves)"
            )
        return url + "/"

    @field_validator("snippets_datastore", "disk_datastore")
    @classmethod
    def _datastore(cls, value: str) -> str:
        if ":" in value or "/" in value:
            raise ValueError(
                f"names a volume or path, not a datastore: give the datastore's id alone, e.g. {value.split(':')[0]}"
            )
        if not STORAGE_ID.match(value):
            raise ValueError("is not a Proxmox datastore id: letters, digits, '-', '_' and '.', e.g. local-lvm")
        return value

    @field_validator("cloud_image")
    @classmethod
    def _cloud_image(cls, value: str) -> str:
        if not FILE_ID.match(value):
            raise ValueError(
                "is not a Proxmox file id; expected <datastore>:import/<file>, e.g. local:import/noble.qcow2"
            )
        datastore, _, volume = value.partition(":")
        kind, _, name = volume.partition("/")
        stem, dot, extension = name.rpartition(".")
        disk = name if dot and extension in ("qcow2", "raw", "vmdk") else f"{stem or name}.qcow2"
        renamed = "" if disk == name else f" renamed {disk} (Ubuntu's cloud image .img is a qcow2)"
        if kind != "import":
            raise ValueError(
                f"is a volume of content type {kind!r}, and Proxmox imports a VM disk only from an 'import' (or "
                f"'images') volume: enable the import content type on {datastore}, put the image in its import "
                f"folder{renamed} and write {datastore}:import/{disk}"
            )
        if not IMPORT_DISK.match(value):
            raise ValueError(
                f"{name!r} is not a disk image Proxmox imports: the file must end in .qcow2, .raw or .vmdk: put it in "
                f"the import folder{renamed or ' under a name of letters, digits and -._+='} and write "
                f"{datastore}:import/{disk}"
            )
        return value
