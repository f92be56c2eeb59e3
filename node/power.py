"""The power cycle of a domain's VM through Proxmox, the same for the wave (a change Proxmox applies only at a cold
start), `gpu-pool repair` and the watcher (a faulted card): a stop and a start, never a guest reboot.

Right before the stop is posted, the VM's lock and HA state are read again (`/cluster/resources`): a backup that
locked the VM after the repair's own check refuses it, nothing stopped. qemu-server checks the lock inside the
stop's worker, not in the request (`vm_shutdown` forks `qmshutdown`, whose `vm_stop` calls `check_lock`: a POST
answered with a UPID is not acceptance: FIELD-REVIEW-6 W-2), so the power cycle is charged on the Node's repair
record (what `repair.maxPerDay` counts) only once the stop task ended OK and the VM reached `stopped`: a task that
fails with `VM is locked (backup)` charges nothing. The start task's exit status is read too (a card the host lost
ends it with qemu-server's `no pci device info`); an HA-managed VM (allowed by `repair.allowHaManaged`) must run on
the stack's node afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.proxmox import Proxmox, task_ok
from node.turn import Turn, record
from node.waiting import StepFailed

STOP_SECONDS = 240
START_SECONDS = 180


@dataclass(frozen=True)
class Vm:
    vmid: str
    proxmox_node: str

    @property
    def path(self) -> str:
        return f"/nodes/{self.proxmox_node}/qemu/{self.vmid}"

    @property
    def where(self) -> str:
        return f"VM {self.vmid} on {self.proxmox_node}"


@dataclass(frozen=True)
class Charge:
    """What a forced power cycle writes on the Node once the stop is done (None: a change's power cycle, which
    spends no repair budget): the record's reason and who ran it, and the Event's source words."""

    reason: str
    by: str = ""
    said: str = "gpu-pool repair"


def lock_refusal(pve: Proxmox, vm: Vm, allow_ha: bool) -> str:
    """What Proxmox says against a stop right now ('' when nothing): a lock, or an HA-managed VM not allowed."""
    entry = pve.guest(vm.vmid) or {}
    if entry.get("lock"):
        return (
            f"{vm.where} is locked ({entry['lock']}) right before its stop: Proxmox would refuse it; nothing was "
            "stopped and no power cycle was charged; repair again once the lock is gone"
        )
    hastate = entry.get("hastate")
    if hastate and hastate != "ignored" and not allow_ha:
        return f"{vm.where} became HA-managed ({hastate}) before its stop: nothing was stopped"
    return ""


def stop_vm(turn: Turn, pve: Proxmox, vm: Vm, charge: Charge | None, allow_ha: bool) -> None:
    """Shutdown (forced after 180 s), its task's exit status, the VM stopped; then, for a forced cycle, the charge."""
    refused = lock_refusal(pve, vm, allow_ha)
    if refused:
        raise StepFailed(f"{refused} (node {turn.node} stays cordoned)")
    upid = pve.call("POST", f"{vm.path}/status/shutdown", {"timeout": "180", "forceStop": "1"})
    exitstatus = pve.wait_task(str(upid or ""), STOP_SECONDS)
    if exitstatus is not None and not task_ok(exitstatus):
        raise StepFailed(
            f"the stop task of {vm.where} failed: {exitstatus} (nothing stopped, no power cycle charged; node "
            f"{turn.node} stays cordoned)"
        )
    if not pve.wait_status(vm.path, "stopped", STOP_SECONDS):
        raise StepFailed(f"{vm.where} did not stop within {STOP_SECONDS} s (node {turn.node} stays cordoned)")
    if charge is not None and turn.kube.node(turn.node) is not None:
        entry = {"event": "power-cycle", "reason": charge.reason, "vm": vm.where} | (
            {"by": charge.by} if charge.by else {}
        )
        node = record(turn, entry)
        turn.kube.event(node, "Warning", "GpuPoolPowerCycle", f"{charge.said} power-cycles {vm.where}: {charge.reason}")


def start_vm(turn: Turn, pve: Proxmox, vm: Vm, ha: bool) -> None:
    """`status/start` and its task's exit status; an HA-managed VM must then run on the stack's node."""
    upid = pve.call("POST", f"{vm.path}/status/start")
    exitstatus = pve.wait_task(str(upid or ""), START_SECONDS)
    if exitstatus is not None and not task_ok(exitstatus):
        # qemu-server's own reason: `no pci device info for device ...` when the host lost the card (PCI.pm).
        raise StepFailed(
            f"the start task of {vm.where} failed: {exitstatus} (node {turn.node} stays cordoned; a card the host "
            "lost is reset on the host: PCI remove/rescan, or a host reboot)"
        )
    turn.say(f"{vm.where}: start task {exitstatus or 'still running'}")
    if ha:
        # An HA-managed VM's start is a request the CRM places: it may start on another node that has the mapping.
        placed = pve.placed(vm.vmid, START_SECONDS)
        if placed != vm.proxmox_node:
            raise StepFailed(
                f"HA started VM {vm.vmid} on {placed or 'no node'}, not the stack's {vm.proxmox_node}: the failure "
                f"domain is now on another host; migrate it back (ha-manager migrate vm:{vm.vmid} {vm.proxmox_node}) "
                f"and check the HA group's nodes; once it runs where it should, `ha-manager set vm:{vm.vmid} --state "
                f"started` if HA left it stopped (node {turn.node} stays cordoned)"
            )
    elif not pve.wait_status(vm.path, "running", START_SECONDS):
        raise StepFailed(f"VM {vm.vmid} did not start within {START_SECONDS} s (node {turn.node} stays cordoned)")


def power_cycle(
    turn: Turn, pve: Proxmox, vm: Vm, charge: Charge | None, *, ha: bool = False, progress: set[str] | None = None
) -> bool:
    """Stop (unless stopped already: a cold start is all there is to do, and costs no budget) and start. Whether
    the VM was stopped by it; `progress` gets "stopped" as soon as it was (a start that fails after it still
    changed the card's state: the watcher's breaker counts it)."""
    status = pve.status(vm.path)
    cycled = status != "stopped"
    if cycled:
        stop_vm(turn, pve, vm, charge, ha)
        if progress is not None:
            progress.add("stopped")
    else:
        turn.say(f"{vm.where} is stopped: starting it (no stop)")
    start_vm(turn, pve, vm, ha)
    return cycled
