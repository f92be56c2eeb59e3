"""The two halves of the GPU tier: `gpu_failure_domain` (one per Proxmox host) and `gpu_platform` (cluster-wide).

`shared` holds what both register resources with. Builders in each package return plain dicts and strings;
only each package's `component.py` registers Pulumi resources.

Importing the package registers the invariant pass over the rendered plan (`rendered_plan.py`) with the config
loader, which may not import the builders itself: any program that builds the plan imports this package before it
loads its config, so no config reaches a component without the pass.
"""

from components.rendered_plan import rendered_problems
from config.rendered_checks import register

register(rendered_problems)
