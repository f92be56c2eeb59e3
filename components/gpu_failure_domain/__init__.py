"""GpuFailureDomain: one Proxmox host's GPU passed into one RKE2 worker VM, joined, labelled, tainted, smoke-tested."""

from components.gpu_failure_domain.component import GpuFailureDomain, GpuFailureDomainArgs

__all__ = ["GpuFailureDomain", "GpuFailureDomainArgs"]
