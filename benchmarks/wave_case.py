"""The critical-path bench's day-2 case: an RKE2 bump on prod, planned as `make diff` plans it (the Nodes the
earlier file's `up` leaves standing in for the cluster), so its waits across domains can be set beside the first
install's."""

from __future__ import annotations

import copy
from typing import Any

from offline.diff import observing, settled_nodes
from offline.render import plan
from offline.runner import PROJECT, read_stack_file, run_stack

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdS1wb29sIHRlc3Qga2V5LCBubyBwcml2YXRlIG9u ops@bench"
BUMP = "v1.33.6+rke2r1"


def rke2_bump_plan() -> dict[str, Any]:
    before = copy.deepcopy(read_stack_file("prod"))
    for domain in before["gpu-pool:failureDomains"]:
        domain["sshAuthorizedKeys"] = [KEY]
    after = copy.deepcopy(before)
    after["gpu-pool:rke2"]["version"] = BUMP
    with observing(settled_nodes(before)):
        recording = run_stack("prod", config=after)
    return plan(recording, PROJECT, "prod")
