"""`gpu-pool:proxmox`: how the stack reaches the Proxmox VE cluster that holds the GPU hosts."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from config.base import ConfigModel
from config.validators import https_url

FILE_ID = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*:(import|iso|vztmpl)/[^/\s]+$")


class ProxmoxSshConfig(ConfigModel):
    """The provider uploads cloud-init snippets over SSH: the Proxmox API has no upload for `snippets`."""

    username: str = Field(default="root", description="SSH user on the Proxmox nodes")
    agent: bool = Field(default=True, description="use the local ssh-agent for the key")
    node_addresses: dict[str, str] = Field(
        default_factory=dict, description="Proxmox node name -> address, where the node name does not resolve"
    )
    port: int = Field(
        default=22,
        ge=1,
        le=65535,
        description=(
            "SSH port of the Proxmox nodes; another port than 22 needs every domain's node in nodeAddresses "
            "(the provider takes a port only with an address)"
        ),
    )


class ProxmoxConfig(ConfigModel):
    endpoint: str = Field(
        description="Proxmox VE API URL, the server alone, e.g. https://pve1.lab:8006/",
        json_schema_extra={"pattern": "^https://[^/?#]+/?$"},
    )
    insecure: bool = Field(default=False, description="skip TLS verification (self-signed Proxmox certificate)")
    auth: Literal["apiToken", "rootPassword"] = Field(
        default="apiToken",
        description="apiToken (secret gpu-pool:proxmoxApiToken) or rootPassword (root@pam, only for raw PCI ids)",
    )
    snippets_datastore: str = Field(default="local", description="datastore with the `snippets` content type")
    disk_datastore: str = Field(default="local-lvm", description="datastore for VM disks and the cloud-init drive")
    cloud_image: str = Field(
        description="file id of the cloud image the VM disk is imported from, e.g. local:import/noble.qcow2",
        json_schema_extra={"pattern": FILE_ID.pattern},
    )
    ssh: ProxmoxSshConfig = Field(
        default_factory=ProxmoxSshConfig, description="how the provider reaches the nodes over SSH (snippet upload)"
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

    @field_validator("cloud_image")
    @classmethod
    def _cloud_image(cls, value: str) -> str:
        if not FILE_ID.match(value):
            raise ValueError(
                "is not a Proxmox file id; expected <datastore>:import/<file>, e.g. local:import/noble.qcow2"
            )
        return value
