"""The floors of one GPU node, bottom up, stopping at the first broken one (the article: debug from the driver up).

Every floor above the driver waits for the one below, so a broken driver makes the toolkit, the device plugin
and everything else look broken too: only the lowest broken floor is worth reading.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from day2 import objects as o
from day2.doctor.floors_operands import (
    dcgm_exporter_floor,
    device_plugin_floor,
    driver_floor,
    operator_validator_floor,
    toolkit_floor,
)
from day2.doctor.floors_pool import (
    first_boot_floor,
    gpu_capacity_floor,
    labels_floor,
    node_floor,
    sharing_floor,
    smoke_floor,
    taint_floor,
)
from day2.doctor.floors_types import Check, Fix, NodeContext
from day2.doctor.node_report import GPU_PRODUCT_LABEL, NodeCheck, NodeExpectations, recheck
from day2.errors import Day2Error
from day2.node_check.floors import Floor
from day2.pool import PoolFacts

FLOORS: tuple[tuple[str, Callable[[NodeContext], Check]], ...] = (
    ("node", node_floor),
    ("labels", labels_floor),
    ("sharing-config", sharing_floor),
    ("taint", taint_floor),
    ("driver", driver_floor),
    ("toolkit", toolkit_floor),
    ("operator-validator", operator_validator_floor),
    ("device-plugin", device_plugin_floor),
    ("gpu-capacity", gpu_capacity_floor),
    ("dcgm-exporter", dcgm_exporter_floor),
    ("smoke-test", smoke_floor),
    # Last: a step the first boot left undone (the guest agent, the kernel holds) while the node still joined is
    # worth fixing, but every floor above works without it, and a floor it does break (a driver after an unheld
    # kernel moved) is named by that floor first.
    ("first-boot", first_boot_floor),
)
FLOOR_NAMES = tuple(name for name, _ in FLOORS)
# node-check's floors (the node's own: pci, link, driver, nvml, health) stand right below this one.
NODE_FLOORS_BEFORE = "driver"
NOT_CHECKED = "not checked: a floor below is broken"


@dataclass(frozen=True)
class Diagnosis:
    node: str
    floors: tuple[Floor, ...]
    first_broken: str | None
    fix: Fix | None
    # node-check's report as the walk read it (re-checked against the stack and the Node), if one was given.
    below: NodeCheck | None = None

    @property
    def healthy(self) -> bool:
        return self.first_broken is None


def diagnose(snapshot: o.Snapshot, facts: PoolFacts, node: str, below: NodeCheck | None = None) -> Diagnosis:
    """Check the floors in order; the first broken one ends the walk and the rest are left unchecked.

    `below` is node-check's report from the node itself: its floors (pci ... health) stand below the driver pod,
    so a card that never arrived in the VM is named instead of the driver pod it makes crash."""
    ctx = NodeContext.of(snapshot, facts, node)
    if below is not None:
        below = recheck(below, _expectations(ctx))
    floors: list[Floor] = []
    broken: tuple[str, Check] | None = None
    for name, check in FLOORS:
        if name == NODE_FLOORS_BEFORE and below is not None:
            notes = "".join(f"; note: {note}" for note in below.notes)
            floors += [
                Floor(
                    f"node:{f.name}",
                    *(
                        (f.ok, f.detail + (notes if f.name == "pci" and f.ok else ""))
                        if broken is None
                        else (None, NOT_CHECKED)
                    ),
                )
                for f in below.floors
            ]
            if broken is None and below.first_broken is not None:
                broken = (f"node:{below.first_broken}", Check(False, "", below.fix))
        if broken is not None:
            floors.append(Floor(name, None, NOT_CHECKED))
            continue
        result = check(ctx)
        floors.append(Floor(name, result.ok, result.detail))
        if not result.ok:
            broken = (name, result)
    if broken is None:
        return Diagnosis(node, tuple(floors), None, None, below)
    name, result = broken
    return Diagnosis(node, tuple(floors), name, result.fix or Fix((), f"kubectl describe node {node}"), below)


def _expectations(ctx: NodeContext) -> NodeExpectations:
    """What the stack and the cluster's Node say of the node, for re-checking node-check's report."""
    info: Mapping[str, Any] = {}
    if ctx.node is not None:
        status = ctx.node.get("status")
        found = status.get("nodeInfo") if isinstance(status, Mapping) else None
        info = found if isinstance(found, Mapping) else {}
    return NodeExpectations(
        cards=ctx.domain.cards if ctx.domain is not None else (),
        driver=ctx.facts.driver_version if ctx.facts.stack else None,
        machine_id=str(info["machineID"]) if info.get("machineID") else None,
        boot_id=str(info["bootID"]) if info.get("bootID") else None,
        product=o.labels(ctx.node).get(GPU_PRODUCT_LABEL) if ctx.node is not None else None,
    )


def gpu_nodes(snapshot: o.Snapshot, facts: PoolFacts) -> list[str]:
    """Nodes carrying the GPU node label, and the stack's nodes (a missing one is a finding, not a skip)."""
    key, value = facts.marking.label_key, facts.marking.label_value
    labelled = {o.name(n) for n in snapshot.nodes if o.labels(n).get(key) == value}
    return sorted(labelled | {d.hostname for d in facts.domains})


def require_known_node(snapshot: o.Snapshot, facts: PoolFacts, node: str, where: str) -> None:
    """A NODE neither in the cluster nor in the stack is a typo, not an outage: exit 2 listing the GPU nodes seen.

    A stack's node missing from the cluster stays a finding (the node floor says so, exit 1)."""
    if node in {o.name(n) for n in snapshot.nodes} | {d.hostname for d in facts.domains}:
        return
    seen = gpu_nodes(snapshot, facts)
    label = f"{facts.marking.label_key}={facts.marking.label_value}"
    listed = f"the GPU nodes it has: {', '.join(seen)}" if seen else f"it has no GPU node (none carries {label})"
    raise Day2Error(f"doctor {node}: no node of that name in {where}; {listed}")


def diagnose_all(
    snapshot: o.Snapshot,
    facts: PoolFacts,
    node: str | None = None,
    node_checks: Mapping[str, NodeCheck] | None = None,
) -> list[Diagnosis]:
    names = [node] if node else gpu_nodes(snapshot, facts)
    checks = node_checks or {}
    return [diagnose(snapshot, facts, name, checks.get(name)) for name in names]


def fix_as_dict(fix: Fix | None) -> Mapping[str, Any] | None:
    return None if fix is None else {"traps": list(fix.traps), "command": fix.command}
