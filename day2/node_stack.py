"""What node-check expects of one node, read from the stack file (where the project's environment is).

On the node itself there is no pydantic and no stack file: there the same expectations are given as flags,
which `gpu-pool node-check --stack NAME --node NODE --print-flags` writes out.
"""

from __future__ import annotations

from pathlib import Path

from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig
from day2.errors import Day2Error
from day2.node_check.facts import NodeInputError
from day2.node_check.floors import Expected
from day2.pool import read_stack


def expected_from_stack(stack: str, root: Path, node: str | None) -> Expected:
    try:
        cfg = read_stack(stack, root)
    except Day2Error as error:  # node-check's own error, the same one line
        raise NodeInputError(str(error)) from None
    names = [d.hostname for d in cfg.failure_domains]
    domain = next((d for d in cfg.failure_domains if d.hostname == node), None)
    if domain is None:
        raise NodeInputError(f"--node {node}: not a GPU node of stack {stack}; its GPU nodes: {', '.join(names)}")
    return expected_of(cfg, domain)


def expected_of(cfg: StackConfig, domain: FailureDomainConfig) -> Expected:
    """What the stack says the domain's node has."""
    return Expected(
        # Every card of the node, in the order the stack passes them through (gpus: [...] or the one gpu:).
        ids=tuple(card.vendor_device_id for card in domain.cards),
        subsystems=tuple(card.subsystem_id for card in domain.cards),
        driver=cfg.gpu_operator.driver_version,
        proxmox_node=domain.proxmox_node,
        vm_id=domain.vm_id,
    )


def as_flags(expected: Expected) -> list[str]:
    """The same expectations as node-check flags, to run on the node."""
    flags: list[str] = []
    for card_id in expected.ids:
        flags += ["--expect-id", card_id]
    for subsystem in expected.subsystems:
        flags += ["--expect-subsystem", subsystem]
    if expected.driver:
        flags += ["--expect-driver", expected.driver]
    if expected.proxmox_node:
        flags += ["--proxmox-node", expected.proxmox_node]
    if expected.vm_id is not None:
        flags += ["--vm-id", str(expected.vm_id)]
    return flags
