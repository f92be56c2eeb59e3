"""`gpu-pool repair`, decided as pure data: whether a power cycle of the node's VM fixes what doctor and node-check
found, and whether the guard rails let it run now.

- **Decide.** Only the lowest broken floor counts (debug from the driver up): a repair runs when it is one of the
  node's own floors and node-check says a power cycle of the VM is its fix (a card off the bus, a driver that
  cannot initialise the card, an Xid whose catalogue action resets the GPU: day2/node_check/floors.py). Any other
  broken floor (a missing profile, an OOM-killed driver build, a BAR the firmware cannot map) is not fixed by a
  power cycle: the answer says what is, with exit 1.
- **Guard rails** (exit 2): one domain at a time, as a wave (`rollout.maxUnavailable`, counting every other
  domain that is out: cordoned, not Ready, unregistered or in a turn); at most `repair.maxPerDay` power cycles of
  one domain in 24 hours (the Node's gpu-pool.dev/repairs record); the VM Proxmox runs under the node's name is
  the stack's (its id and host), or the power cycle would stop another VM; the VM holds no lock (a backup's: Proxmox
  refuses its stop and start) and is not HA-managed unless `repair.allowHaManaged` (its stop and start would be HA
  requests the CRM places, maybe on another host).
- **The host** (`host_check`, before anything stops): the card is still in the host's own list
  (`GET /nodes/<proxmoxNode>/hardware/pci`, as `discover` reads it). A card the host lost is not a VM power cycle:
  qemu-server refuses to start a VM whose hostpci device is gone (`no pci device info`, qemu-server PCI.pm), so the
  repair would turn a Ready node into a stopped VM (FIELD-REVIEW-5 WRONG-4): the host must reset it (PCI
  remove/rescan or a host reboot), exit 1. A card there but not the stack's (another model or subsystem) is a
  mapping or hardware change, exit 1. A card still listed but dead cannot be told this way.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.gpu_failure_domain.observed import ACTIVE_TURN_STATES, ObservedNode
from day2.discover.cards import Device, parse_answer
from day2.doctor.walk import Diagnosis
from day2.errors import Day2Error
from day2.node_check.floors import CardMismatch, Floor

# Type-only: `decide` and what the unattended guard rails take from here run in the cluster's watcher without the
# pydantic-bound config (components/shared/payload.py leaves TYPE_CHECKING imports out of its zip); the functions
# that take the stack read its fields by name.
if TYPE_CHECKING:
    from config.failure_domain import FailureDomainConfig
    from config.stack import StackConfig

DAY = datetime.timedelta(hours=24)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Decision:
    repair: bool
    # The broken floor a power cycle fixes (repair), or why no repair and what to do instead.
    reason: str


def _floor(diagnosis: Diagnosis, name: str | None) -> Floor | None:
    return next((f for f in diagnosis.floors if f.name == name), None)


def decide(diagnosis: Diagnosis, why_no_node_check: str = "") -> Decision:
    """Repair or not, from doctor's walk (with node-check's floors below the driver pod where it ran, as doctor
    re-checked them: a report from another machine, or of other cards, is no reason to power-cycle this VM)."""
    node_check = diagnosis.below
    if diagnosis.healthy:
        if node_check is None:
            return Decision(
                False,
                f"no repair needed: doctor finds every floor of {diagnosis.node} ok, but node-check did not run "
                f"({why_no_node_check or 'no report'}): a card off the bus or an Xid shows only there; give its "
                "report with --node-check FILE",
            )
        return Decision(False, f"no repair needed: every floor of {diagnosis.node} is ok, node-check's included")
    name = diagnosis.first_broken
    floor = _floor(diagnosis, name)
    detail = floor.detail if floor is not None and floor.detail else "broken"
    fix = diagnosis.fix
    if name is not None and name.startswith("node:") and node_check is not None:
        if node_check.power_cycle:
            return Decision(True, f"{name}: {detail}")
        command = fix.command if fix is not None else f"gpu-pool node-check on {diagnosis.node}"
        return Decision(False, f"{name} is broken ({detail}), which a power cycle of the VM does not fix: {command}")
    traps = f"{'; '.join(fix.traps)}; " if fix is not None and fix.traps else ""
    command = fix.command if fix is not None else f"kubectl describe node {diagnosis.node}"
    return Decision(
        False, f"{name} is broken ({detail}), which a power cycle of the VM does not fix: {traps}next: {command}"
    )


# ---------------------------------------------------------------------------------------------------- guard rails


def parse_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(text, TIME_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


def power_cycles_within_a_day(node: ObservedNode, now: datetime.datetime) -> list[str]:
    """The times of the repair's power cycles of the node's VM in the 24 hours before `now`."""
    times = []
    for entry in node.repairs:
        at = parse_time(entry.get("at", ""))
        if entry.get("event") == "power-cycle" and at is not None and now - DAY < at <= now:
            times.append(entry["at"])
    return times


def _why_out(node: ObservedNode | None) -> str:
    if node is None:
        return "no Node registered"
    if node.turn_in_progress:
        return f"a turn in progress since {node.resume_token}"
    if node.unschedulable:
        return "cordoned"
    return "not Ready"


def refusals(
    stack: StackConfig,
    domain: FailureDomainConfig,
    observed: Mapping[str, ObservedNode | None],
    now: datetime.datetime,
) -> list[str]:
    """What forbids repairing `domain` now, each as one sentence with what to do (empty: nothing)."""
    problems: list[str] = []
    others = {
        d.name: observed.get(d.name)
        for d in stack.failure_domains
        if d.name != domain.name and ((node := observed.get(d.name)) is None or node.out)
    }
    size = stack.rollout.max_unavailable
    if others and len(others) + 1 > size:
        listed = "; ".join(f"{name} is out ({_why_out(node)})" for name, node in others.items())
        problems.append(
            f"{listed}: repairing {domain.name} too would take {len(others) + 1} domains out while "
            f"gpu-pool:rollout.maxUnavailable is {size} (one failure domain at a time): bring "
            f"{'them' if len(others) > 1 else 'it'} back first (`kubectl uncordon`, or `pulumi up` to finish a "
            f"turn), then repair {domain.name}"
        )
    node = observed.get(domain.name)
    if node is not None and node.holder_kind == "up" and node.turn_state in ACTIVE_TURN_STATES:
        # A wave is at work on the node (FIELD-REVIEW-5 H2): its drain, change or gate would race the power cycle.
        problems.append(
            f"{domain.hostname} is held by {node.turn_holder} (gpu-pool.dev/turn-state {node.turn_state}): a wave "
            "is turning it; let that `pulumi up` finish or stop (a stopped wave's node can be repaired), then repair"
        )
    if node is not None:
        cycles = power_cycles_within_a_day(node, now)
        budget = stack.repair.max_per_day
        if len(cycles) >= budget:
            problems.append(
                f"{domain.name}'s VM was power-cycled by gpu-pool repair {len(cycles)} time"
                f"{'s' if len(cycles) > 1 else ''} in the last 24 hours ({', '.join(cycles)}) and "
                f"gpu-pool:repair.maxPerDay is {budget}: a card that keeps faulting needs its hardware looked at "
                f"(seating, riser, power, cooling of {domain.proxmox_node}; the card itself), not another power cycle"
            )
    return problems


def vm_problem(domain: FailureDomainConfig, resources: Sequence[Mapping[str, Any]]) -> str | None:
    """The stack's VM for the domain against what Proxmox runs (`GET /cluster/resources?type=vm`, pve-manager
    PVE/API2/Cluster.pm: one entry per guest with `vmid`, `name`, `node`, `type`): the power cycle addresses
    `/nodes/<proxmoxNode>/qemu/<vmId>`, so that must be the VM named after the node."""
    guests = [r for r in resources if r.get("type") in ("qemu", None) and "vmid" in r]
    by_id = next((r for r in guests if str(r.get("vmid")) == str(domain.vm_id)), None)
    named = [r for r in guests if r.get("name") == domain.hostname]
    stack_vm = f"VM {domain.vm_id} on {domain.proxmox_node}"
    fix = (
        f"correct gpu-pool:failureDomains[{domain.name}].vmId/proxmoxNode (or the VM) so that they agree, then "
        "repair again"
    )
    if by_id is None:
        seen = ", ".join(f"VM {r.get('vmid')} on {r.get('node')}" for r in named) or "none"
        return (
            f"the stack's {stack_vm} does not exist in Proxmox (VMs named {domain.hostname}: {seen}): the power "
            f"cycle would stop nothing or the wrong VM; {fix}"
        )
    if by_id.get("name") != domain.hostname:
        return (
            f"Proxmox runs VM {domain.vm_id} as {by_id.get('name') or 'an unnamed VM'!s}, not {domain.hostname}"
            + (f" (VM {', '.join(str(r.get('vmid')) for r in named)} is named {domain.hostname})" if named else "")
            + f": the stack's VM id is not the node's VM; {fix}"
        )
    if by_id.get("node") != domain.proxmox_node:
        return (
            f"Proxmox runs VM {domain.vm_id} ({domain.hostname}) on {by_id.get('node')}, the stack says "
            f"{domain.proxmox_node} (migrated?): the power cycle addresses the VM on its host; {fix}"
        )
    if len(named) > 1:
        ids = ", ".join(f"VM {r.get('vmid')} on {r.get('node')}" for r in named)
        return f"Proxmox has {len(named)} VMs named {domain.hostname} ({ids}): which one is the node is not certain"
    return None


# ---------------------------------------------------------------------------------------------------- the host


@dataclass(frozen=True)
class HostCheck:
    """What Proxmox says of the domain's VM and card, before anything stops."""

    # Nothing changed, nothing may run now (exit 2): a lock, an HA-managed VM without allowHaManaged.
    refusals: tuple[str, ...] = ()
    # Not a power-cycle fix (exit 1): a card the host lost, another card where the stack's was.
    failures: tuple[str, ...] = ()
    # Said with the plan: a VM that is not running (`--yes` only starts it), an HA-managed one repaired through HA.
    notes: tuple[str, ...] = ()


def _device_at(devices: Sequence[Device], address: str) -> Device | None:
    wanted = address.lower() if "." in address else f"{address.lower()}.0"
    return next((d for d in devices if d.id == wanted), None)


def host_check(
    domain: FailureDomainConfig,
    guests: Sequence[Mapping[str, Any]],
    pci_answer: Any,
    allow_ha: bool,
    source: str = "",
) -> HostCheck:
    """The VM's lock, HA state and status (`GET /cluster/resources?type=vm`: `lock`, `hastate`, `status`) and each
    of the domain's cards in the host's list (`GET /nodes/<proxmoxNode>/hardware/pci`)."""
    refusals: list[str] = []
    failures: list[str] = []
    notes: list[str] = []
    vm = f"VM {domain.vm_id}"
    entry = next((g for g in guests if str(g.get("vmid")) == str(domain.vm_id)), None) or {}
    lock = entry.get("lock")
    if lock:
        refusals.append(
            f"{vm} is locked ({lock}) in Proxmox: Proxmox refuses its stop and start while a {lock} holds it (a "
            f"nightly vzdump holds `lock: backup`); wait until `qm config {domain.vm_id}` on {domain.proxmox_node} "
            "shows no lock, then repair again"
        )
    hastate = entry.get("hastate")
    if hastate and hastate != "ignored":
        if allow_ha:
            notes.append(
                f"{vm} is HA-managed ({hastate}): its stop and start are HA requests; the repair checks afterwards "
                f"that it runs on {domain.proxmox_node} (gpu-pool:repair.allowHaManaged)"
            )
        else:
            refusals.append(
                f"{vm} is HA-managed in Proxmox (hastate {hastate}): its stop and start would be HA requests the CRM "
                "places, possibly on another host with the mapping, and the failure domain with it; set "
                "gpu-pool:repair.allowHaManaged: true to repair it through HA (checked afterwards to run on "
                f"{domain.proxmox_node}), or take it out of HA (`ha-manager remove vm:{domain.vm_id}`) first"
            )
    status = entry.get("status")
    if status and status != "running":
        notes.append(f"{vm} is {status} in Proxmox: --yes only starts it (nothing to stop, no power cycle charged)")
    where = source or f"`pvesh get /nodes/{domain.proxmox_node}/hardware/pci`"
    try:
        devices = parse_answer(pci_answer, where)
    except Day2Error as error:
        return HostCheck((*refusals, str(error)), tuple(failures), tuple(notes))
    for index, card in enumerate(domain.cards):
        key = f"gpu-pool:failureDomains[{domain.name}].{domain.card_key(index)}"
        found = _device_at(devices, card.pci_address)
        elsewhere = [
            d.id
            for d in devices
            if f"{d.vendor}:{d.device}" == card.vendor_device_id.lower()
            and d.slot != card.pci_address.lower().split(".")[0]
        ]
        if found is None and elsewhere:
            failures.append(
                f"the host {domain.proxmox_node} has no device at {card.pci_address} but {CardMismatch.OTHER_ADDRESS} "
                f"({card.vendor_device_id} at {', '.join(elsewhere)}; {key}): the card moved to another slot, a "
                "mapping change that a power cycle does not fix; point the stack's card (and the PCI mapping) at it "
                "(`gpu-pool discover --stack <stack>`), then `pulumi up`"
            )
            continue
        if found is None:
            failures.append(
                f"the host {domain.proxmox_node} no longer lists the card at {card.pci_address} ({card.model}, "
                f"{key}) in {where}: it lost it (a link down, removed by pciehp or AER). A power cycle of the VM "
                "cannot bring it back, and Proxmox would refuse to start the VM (qemu-server: no pci device info): "
                f"reset it on the host (echo 1 > /sys/bus/pci/devices/{card.pci_address.lower()}.0/remove; echo 1 > "
                "/sys/bus/pci/rescan), or reboot the host (its whole failure domain), then repair again"
            )
            continue
        found_id, found_sub = f"{found.vendor}:{found.device}", found.subsystem
        if found_id != card.vendor_device_id.lower() or found_sub != card.subsystem_id.lower():
            failures.append(
                f"the host {domain.proxmox_node} has {CardMismatch.OTHER_MODEL} at {card.pci_address}: {found_id} "
                f"(subsystem {found_sub}), but {key} names {card.vendor_device_id} (subsystem {card.subsystem_id}): "
                "the card was swapped or moved, a mapping or hardware change that a power cycle does not fix; compare "
                f"`gpu-pool discover --stack <stack>` with {key} and the PCI mapping (Datacenter > Resource Mappings)"
            )
    return HostCheck(tuple(refusals), tuple(failures), tuple(notes))
