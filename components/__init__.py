"""The two halves of the GPU tier: `gpu_failure_domain` (one per Proxmox host) and `gpu_platform` (cluster-wide).

`shared` holds what both register resources with. Builders in each package return plain dicts and strings;
only each package's `component.py` registers Pulumi resources. Importing the package does nothing else: the rules
on the rendered plan run where a stack is validated (stack_check.py), not because of what was imported first.
"""
