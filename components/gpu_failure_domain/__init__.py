"""GpuFailureDomain (component.py): one Proxmox host's GPU passed into one RKE2 worker VM, joined, labelled,
tainted, smoke-tested. The other modules are pure builders; importing one of them loads no Pulumi SDK."""
