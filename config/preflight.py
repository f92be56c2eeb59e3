"""`gpu-pool:preflight`: checks of the Proxmox hosts and the cluster at preview time, before anything is changed."""

from __future__ import annotations

from pydantic import Field

from config.base import ConfigModel


class PreflightConfig(ConfigModel):
    enabled: bool = Field(
        default=True, description="look each card up through the Proxmox API (address, ids, IOMMU group)"
    )
    host_check: bool = Field(
        default=False,
        description="also ssh to each host (read-only) and check the card is bound to vfio-pci and IOMMU is on",
    )
    cluster_check: bool = Field(
        default=True,
        description="check with kubectl that the cluster has the CRDs the enabled features need (ServiceMonitor, "
        "PrometheusRule, Kyverno ClusterPolicy)",
    )
