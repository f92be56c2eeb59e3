"""The two halves of the GPU tier: `gpu_failure_domain` (one per Proxmox host) and `gpu_platform` (cluster-wide).

`shared` holds what both register resources with. Builders in each package return plain dicts and strings;
only each package's `component.py` registers Pulumi resources.
"""
