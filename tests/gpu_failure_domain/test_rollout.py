"""The wave's pure parts: what a Node says it was rolled to, and the commands a domain's turn runs."""

from __future__ import annotations

import json

from components.gpu_failure_domain.rollout import (
    ROLLOUT_ANNOTATION,
    DeployedNode,
    rke2_upgrade_command,
    rollout_done_command,
    wave_drain_command,
)
from components.gpu_failure_domain.rollout_state import nodes_by_domain
from config.loader import validate_stack
from config.stack import StackConfig
from offline.runner import read_stack_file


def prod() -> StackConfig:
    return validate_stack({k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()})


def test_each_domain_reads_its_own_node_and_a_missing_node_is_a_first_install() -> None:
    state = {"rke2": "v1.33.5+rke2r1"}
    listing = {
        "items": [
            {
                "metadata": {"name": "rke2-worker-dc1-gpu-a", "annotations": {ROLLOUT_ANNOTATION: json.dumps(state)}},
                "status": {"nodeInfo": {"kubeletVersion": "v1.33.5+rke2r1"}},
            },
            {"metadata": {"name": "rke2-worker-dc2-gpu-a"}, "status": {"nodeInfo": {"kubeletVersion": "v1.32.9"}}},
            {"metadata": {"name": "someone-elses-node"}},
        ]
    }
    assert nodes_by_domain(prod(), listing) == {
        "dc1": DeployedNode(state, "v1.33.5+rke2r1"),
        "dc2": DeployedNode(None, "v1.32.9"),
        "dc3": None,
    }


def test_the_rke2_upgrade_is_the_official_installer_at_the_pin_then_an_agent_restart() -> None:
    command = rke2_upgrade_command("v1.33.6+rke2r1")
    assert command.startswith("set -e; curl -sfL https://get.rke2.io -o /tmp/install-rke2.sh; ")
    assert "sudo INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION=v1.33.6+rke2r1 sh /tmp/install-rke2.sh" in command
    assert command.index("sh /tmp/install-rke2.sh") < command.index("systemctl restart rke2-agent")


def test_the_wave_uncordons_only_a_node_it_cordoned_itself() -> None:
    drain = wave_drain_command("n1", "kubectl", "dc1")
    done = rollout_done_command("n1", "kubectl", {"rke2": "v1"})
    # The mark is set only when the node was schedulable, and the uncordon happens only where the mark is.
    assert drain.index("!= true ]; then kubectl annotate node n1 --overwrite gpu-pool.dev/wave-cordoned=dc1") > 0
    assert (
        "if [ -n \"$(kubectl get node n1 -o jsonpath='{.metadata.annotations.gpu-pool\\.dev/wave-cordoned}')\" ]"
        in done
    )
    assert done.index("uncordon n1") < done.index(f"{ROLLOUT_ANNOTATION}=")
