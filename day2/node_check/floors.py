"""The node's own floors, bottom up: pci, link, driver, nvml, health. Pure functions of NodeFacts.

The walk stops at the first broken floor, like doctor's: a card that did not arrive makes every floor above it
look broken. Two exceptions keep the walk honest: a link trained below its maximum still carries everything
above it, so it is reported and the walk goes on; and without NVML the nvml floor is skipped, not failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from day2.node_check.facts import NodeFacts, PciDevice, assignment_failures, enumerated_bars, nvml_gpu, xid_addresses
from knowledge import nvml as nv
from knowledge import pci
from knowledge.gpu_cards import card_facts, driver_listing
from knowledge.xid import XID_LINE, lookup

NOT_CHECKED = "not checked: a floor below is broken"


@dataclass(frozen=True)
class Expected:
    """What the stack says the node should have; empty fields are not checked."""

    ids: tuple[str, ...] = ()  # vendor:device, one per card
    subsystems: tuple[str, ...] = ()  # vendor:device of the subsystem, where the stack names it
    driver: str | None = None  # the pinned driver version, e.g. 580.159.04
    # Where the VM lives, to name the power cycle exactly: `qm stop 301 && qm start 301` on pve-dc1.
    proxmox_node: str | None = None
    vm_id: int | None = None


@dataclass(frozen=True)
class Verdict:
    ok: bool | None  # None: skipped (NVML absent) or not checked
    detail: str
    fix: str | None = None
    # True where a failure does not hide the floors above it (a degraded link).
    walk_on: bool = False
    # True where a power cycle of the VM from Proxmox is the fix (a card off the bus, a driver that cannot
    # initialise the card, an Xid whose catalogue action resets the GPU): what `gpu-pool repair` acts on.
    power_cycle: bool = False


@dataclass(frozen=True)
class Floor:
    """One floor's result, the same for node-check's floors (pci ... health), doctor's (driver ... smoke) and a
    node-check report doctor reads back."""

    name: str
    # None: not checked, because a floor below is broken (or skipped: NVML absent).
    ok: bool | None
    detail: str


@dataclass(frozen=True)
class NodeReport:
    node: str
    floors: tuple[Floor, ...]
    first_broken: str | None
    fix: str | None
    # The first broken floor's fix is a power cycle of the VM (Verdict.power_cycle).
    power_cycle: bool = False
    # What was found, for doctor to re-check against the stack and the cluster's Node: the GPUs (address, id,
    # subsystem), the loaded driver, and which machine and boot the report is from.
    facts: dict[str, object] | None = None

    @property
    def healthy(self) -> bool:
        return self.first_broken is None


def power_cycle(expected: Expected) -> str:
    vm = str(expected.vm_id) if expected.vm_id is not None else "<vmid>"
    where = f" on Proxmox node {expected.proxmox_node}" if expected.proxmox_node else " on the Proxmox host"
    return f"qm stop {vm} && qm start {vm}{where} (a reboot inside the VM keeps the card's state)"


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


class CardMismatch(StrEnum):
    """Why the stack's card is not where it should be, a closed set: only a card that is gone is a power cycle's
    to bring back; a card of another model (a real H100 where the stack says H200) stays that model, and the
    expected model at another address (moved to another slot) needs the mapping changed, not a cold start."""

    NO_DEVICE = "no device"
    OTHER_MODEL = "a device of another model"
    OTHER_ADDRESS = "the expected model at another address"

    @property
    def power_cycle_fixes(self) -> bool:
        return self is CardMismatch.NO_DEVICE


def _cards(facts: NodeFacts, expected: Expected) -> tuple[list[PciDevice], str | None, CardMismatch | None]:
    """The stack's cards among the node's GPUs, or what is missing and why (inside the VM the card's address is
    the guest's, so a missing id beside an NVIDIA GPU of another id is another model, not a card gone)."""
    gpus = list(facts.gpus)
    if not expected.ids:
        if gpus:
            return gpus, None, None
        return gpus, "no NVIDIA display controller (class 03xx, vendor 10de) on the PCI bus", CardMismatch.NO_DEVICE
    chosen: list[PciDevice] = []
    for index, wanted in enumerate(expected.ids):
        subsystem = expected.subsystems[index] if index < len(expected.subsystems) else None
        match = next((g for g in gpus if g not in chosen and g.id == wanted.lower()), None)
        if match is None:
            seen = ", ".join(f"{g.address} {g.id}" for g in gpus) or "no NVIDIA GPU at all"
            others = [g for g in gpus if g not in chosen and g.id not in {i.lower() for i in expected.ids}]
            if others:
                return (
                    chosen,
                    (
                        f"card {index + 1} ({wanted}): {CardMismatch.OTHER_MODEL} is where it should be (seen: "
                        f"{seen}): a power cycle does not change a card's model; correct the stack's card (gpu-pool "
                        "discover) or the hardware"
                    ),
                    CardMismatch.OTHER_MODEL,
                )
            return (
                chosen,
                (f"card {index + 1} ({wanted}) is not on the PCI bus ({CardMismatch.NO_DEVICE}; seen: {seen})"),
                CardMismatch.NO_DEVICE,
            )
        if subsystem and match.subsystem != subsystem.lower():
            return (
                chosen,
                (
                    f"{match.address} {match.id} has subsystem {match.subsystem}, the stack names {subsystem}: "
                    f"{CardMismatch.OTHER_MODEL} (another card model or vendor board than the stack's)"
                ),
                CardMismatch.OTHER_MODEL,
            )
        chosen.append(match)
    return chosen, None, None


def pci_floor(facts: NodeFacts, expected: Expected) -> Verdict:
    cards, missing, why = _cards(facts, expected)
    if missing:
        return Verdict(
            False,
            missing,
            (
                "the card did not arrive in the VM: on the Proxmox host `qm config <vmid> | grep hostpci` and "
                f"`lspci -nnk -s <host address>` (bound to vfio-pci?), then {power_cycle(expected)}"
                if why is CardMismatch.NO_DEVICE
                else "compare the stack's card with the host's (`gpu-pool discover --stack <stack>`) and the VM's "
                "hostpci mapping; correct the stack or the hardware, then `pulumi up`"
            ),
            # A card that vanished from the bus (a host event, Xid 79) comes back with a cold start; another model
            # or board than the stack's does not.
            power_cycle=why is not None and why.power_cycle_fixes,
        )
    parts = []
    for card in cards:
        unassigned = [f"BAR {b.index}" for b in card.bars if b.is_memory and not b.assigned]
        logged = enumerated_bars(facts.kernel_log or (), card.address)
        vanished = [f"BAR {i}" for i in sorted(logged) if i >= len(card.bars) or not card.bars[i].assigned]
        failures = assignment_failures(facts.kernel_log or (), card.address)
        problems = sorted(set(unassigned + vanished)) + failures
        if problems:
            return Verdict(
                False,
                f"{card.address} {card.id}: memory BAR not assigned: {'; '.join(problems)}",
                (
                    "the VM firmware could not map the card's BARs: its 64-bit MMIO window follows the host CPU's "
                    "address width; give the stack the card's barMiB and the host's hostAddressBits, and the preview "
                    f"says which firmware fits (docs/design.md, large BARs), then {power_cycle(expected)}"
                ),
            )
        bars = ", ".join(f"BAR{b.index} {_size(b.size)}" for b in card.bars if b.is_memory)
        name = pci.CLASS_NAMES.get(card.class_code >> 8, f"class {card.class_code:06x}")
        subsystem = f" subsystem {card.subsystem}" if card.subsystem else ""
        table = card_facts(card.id)
        chip = f" ({table.chip}, {table.architecture.name})" if table.chip else ""
        parts.append(f"{card.address} {card.id}{chip}{subsystem} {name}, {bars}")
    return Verdict(True, "; ".join(parts))


def link_floor(facts: NodeFacts, expected: Expected) -> Verdict:
    cards, _, _ = _cards(facts, expected)
    parts, degraded = [], []
    for card in cards:
        speed, top = card.current_link_speed, card.max_link_speed
        width, widest = card.current_link_width, card.max_link_width
        if speed is None or width is None:
            parts.append(f"{card.address}: no link attributes (a conventional PCI slot: use a q35 machine, pcie=1)")
            continue
        text = f"{card.address} {speed} x{width}"
        if widest is not None and width < widest:
            degraded.append(f"{card.address} trained x{width} of x{widest}")
        if top and speed != top and "Unknown" not in (speed, top):
            # GPUs lower their link speed when idle (power saving); only the width is a fault at rest.
            text += f" (max {top}: GPUs lower the speed when idle; compare under load)"
        elif top:
            text += " (= max)"
        parts.append(text)
    if degraded:
        return Verdict(
            False,
            "; ".join(degraded),
            (
                "the link trained narrower than the card: on the Proxmox host `lspci -vv -s <host address> | grep -E "
                "'LnkCap|LnkSta'`; narrow there too: the slot, riser or seating; full width on the host: the VM's PCIe "
                f"root port (q35, hostpci pcie=1), then {power_cycle(expected)}"
            ),
            walk_on=True,
        )
    return Verdict(True, "; ".join(parts))


def driver_floor(facts: NodeFacts, expected: Expected) -> Verdict:
    cards, _, _ = _cards(facts, expected)
    for card in cards:
        if card.driver == "nvidia":
            continue
        if card.driver == "vfio-pci":
            return Verdict(
                False,
                f"{card.address} is bound to vfio-pci inside the VM",
                (
                    "vfio-pci belongs on the Proxmox host, not in the guest: remove the card's id from the guest's "
                    "/etc/modprobe.d (options vfio-pci ids=...) and initramfs (sudo update-initramfs -u), then reboot"
                ),
            )
        if card.driver == "nouveau":
            return Verdict(
                False,
                f"{card.address} is bound to nouveau",
                (
                    "blacklist nouveau in the guest: printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo "
                    "tee /etc/modprobe.d/blacklist-nouveau.conf && sudo update-initramfs -u && sudo reboot"
                ),
            )
        bound = card.driver or "no driver"
        return Verdict(
            False,
            f"{card.address} is bound to {bound}, not nvidia",
            (
                "the GPU Operator's driver container has not loaded nvidia.ko: gpu-pool doctor <node> (its driver "
                "floor), or kubectl -n gpu-operator logs ds/nvidia-driver-daemonset -c nvidia-driver-ctr"
            ),
        )
    module = facts.module
    version = module.sys_version or _proc_version(module.proc_version)
    if version is None:
        return Verdict(
            False,
            "the card is bound to nvidia but no module version is readable",
            (
                "read /sys/module/nvidia/version and /proc/driver/nvidia/version on the node "
                "(copy both for --sysfs-root and --proc-root)"
            ),
        )
    kind = ", open kernel module" if module.proc_version and "Open Kernel Module" in module.proc_version else ""
    where = (
        "from the GPU Operator's driver container"
        if module.container_root
        else "not from the GPU Operator (no /run/nvidia/driver)"
    )
    detail = f"nvidia {version}{kind}, {where}"
    open_module = bool(module.proc_version and "Open Kernel Module" in module.proc_version)
    for card in cards:
        table = card_facts(card.id)
        if table.open_modules == "only" and module.proc_version and not open_module:
            return Verdict(
                False,
                f"{detail}; {card.address} {card.id} is {table.described}, which only the open kernel modules drive",
                (f"load the open flavour: gpuOperator.kernelModuleType open (or auto), then {power_cycle(expected)}"),
            )
        listing = driver_listing(card.id, version)
        if table.open_modules != "never" and listing.verdict in ("later", "never"):
            since = f" (first listed in {listing.first})" if listing.first else ""
            return Verdict(
                False,
                f"{detail}; driver {version} does not list {card.id} ({table.described}){since}",
                (f"pin a driver that lists the card (gpuOperator.driverVersion), then {power_cycle(expected)}"),
            )
    if expected.driver and not _pinned(version, expected.driver):
        return Verdict(
            False,
            f"{detail}; the stack pins {expected.driver}",
            (
                f"the node runs driver {version}, the stack pins {expected.driver}: a driver installed on the node "
                "(dpkg -l | grep -i nvidia) or an image the operator did not replace; remove it or change "
                f"gpuOperator.driverVersion, then {power_cycle(expected)}"
            ),
        )
    return Verdict(True, detail + (f"; = the stack's pin {expected.driver}" if expected.driver else ""))


def _pinned(version: str, pin: str) -> bool:
    """A full pin (580.159.04) is equal; a branch pin (580, with usePrecompiled) is the version's prefix."""
    return version == pin or version.startswith(pin + ".")


def _proc_version(line: str | None) -> str | None:
    """`NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...` -> 580.159.04."""
    if not line:
        return None
    return next((word for word in line.split() if word.count(".") == 2 and word[0].isdigit()), None)


def nvml_floor(facts: NodeFacts, expected: Expected) -> Verdict:
    if facts.nvml is None:
        if facts.nvml_missing and "mismatch" in facts.nvml_missing:
            return Verdict(
                False,
                facts.nvml_missing,
                (
                    "trap 7: the driver's user-space library and the loaded module differ: reboot the node "
                    "so the module matches (or restart the driver container)"
                ),
            )
        return Verdict(None, f"skipped: {facts.nvml_missing or 'NVML not read'}")
    cards, _, _ = _cards(facts, expected)
    parts = []
    version = facts.module.sys_version or _proc_version(facts.module.proc_version)
    nvml_driver = facts.nvml.get("driver")
    if version and nvml_driver and nvml_driver != version:
        return Verdict(
            False,
            f"NVML's driver {nvml_driver}, the kernel module {version}",
            ("trap 7: Failed to initialize NVML: Driver/library version mismatch: reboot the node"),
        )
    for card in cards:
        gpu = nvml_gpu(facts.nvml, card.address)
        if gpu is None:
            return Verdict(
                False,
                f"NVML does not see {card.address} (its GPUs: {_nvml_buses(facts)})",
                (
                    "the kernel sees the card, NVML does not: check dmesg for NVRM errors (RmInitAdapter failed) and "
                    f"nvidia-smi; then {power_cycle(expected)}"
                ),
                power_cycle=True,
            )
        pci_info = gpu.get("pci") or {}
        device_id = pci_info.get("pciDeviceId")
        if isinstance(device_id, int) and (device_id & 0xFFFF, device_id >> 16) != (card.vendor, card.device):
            return Verdict(
                False,
                f"NVML's device id {device_id:08x} at {card.address} is not {card.id}",
                ("NVML and sysfs disagree about the card: run nvidia-smi -q on the node"),
            )
        mode = gpu.get("virtualizationMode")
        if mode in nv.NOT_WHOLE_CARD:
            return Verdict(
                False,
                f"{card.address}: virtualization mode {nv.VIRTUALIZATION_MODES[mode]}",
                (
                    "gpu-pool passes whole cards through: the card must show pass-through; a vGPU or host mode "
                    "means another driver or the hypervisor itself"
                ),
            )
        mode_text = nv.VIRTUALIZATION_MODES.get(mode, "unknown") if isinstance(mode, int) else "unknown"
        persistence = {1: "on", 0: "off"}.get(gpu.get("persistenceMode"), "unknown")  # type: ignore[arg-type]
        parts.append(f"{gpu.get('name') or card.id} at {card.address}: {mode_text}, persistence {persistence}")
    return Verdict(True, f"NVML {nvml_driver}: " + "; ".join(parts))


def _nvml_buses(facts: NodeFacts) -> str:
    gpus = (facts.nvml or {}).get("gpus", [])
    return ", ".join(str((g.get("pci") or {}).get("busId")) for g in gpus) or "none"


def health_floor(facts: NodeFacts, expected: Expected) -> Verdict:
    cards, _, _ = _cards(facts, expected)
    if facts.kernel_log is None and facts.nvml is None:
        # Neither source of this floor was read: an "ok" here would vouch for Xids and ECC nobody looked at.
        return Verdict(
            None, "skipped: no kernel log (pass --kernel-log FILE, e.g. from sudo dmesg) and no NVML reading"
        )
    # (what, what to do, whether a power cycle of the VM is that)
    problems: list[tuple[str, str, bool]] = []
    notes: list[str] = []
    addresses = {xid_addresses(c.address) for c in cards}
    if facts.kernel_log is None:
        notes.append("kernel log not read (pass --kernel-log FILE, e.g. from sudo dmesg)")
    for line in facts.kernel_log or ():
        match = XID_LINE.search(line)
        if not match or match["addr"].lower() not in addresses:
            continue
        xid = lookup(int(match["code"]), line)
        text = f"Xid {xid.code} at {match['addr']}: {xid.meaning}"
        if xid.node_problem:
            action = f"{xid.action}: {power_cycle(expected)}" if "power cycle" in xid.action else xid.action
            problems.append((text, action, xid.power_cycle_fixes))
        else:
            notes.append(f"{text} ({xid.action})")
    for card in cards:
        gpu = nvml_gpu(facts.nvml, card.address) if facts.nvml else None
        if gpu is None:
            continue
        rows = gpu.get("remappedRows") or []
        if len(rows) == 4 and rows[3]:
            problems.append((f"{card.address}: row remapping failed", "the card's memory is failing: RMA", False))
        elif len(rows) == 4 and rows[2]:
            problems.append(
                (f"{card.address}: row remapping pending", "reset the GPU to apply it: " + power_cycle(expected), True)
            )
        if gpu.get("eccVolatileUncorrected"):
            problems.append(
                (
                    f"{card.address}: {gpu['eccVolatileUncorrected']} uncorrectable ECC errors since boot",
                    "drain the node and " + power_cycle(expected),
                    True,
                )
            )
        reasons = gpu.get("throttleReasons")
        if isinstance(reasons, int):
            active = [text for bit, text in nv.EVENT_REASONS.items() if reasons & bit]
            if reasons & nv.HARDWARE_SLOWDOWN:
                problems.append(
                    (f"{card.address}: {', '.join(active)}", "check the host's cooling and power to the card", False)
                )
            elif active:
                notes.append(f"{card.address} clocks: {', '.join(active)}")
        notes.append(
            f"{card.address}: ECC uncorrected since boot {gpu.get('eccVolatileUncorrected', '?')}, "
            f"remapped rows {rows or '?'}"
        )
    if problems:
        details = "; ".join(text for text, _, _ in problems)
        actions = "; ".join(dict.fromkeys(action for _, action, _ in problems))
        # Every problem of the floor, or the power cycle would leave one behind (an RMA, the host's cooling).
        return Verdict(False, details, actions, power_cycle=all(cycles for _, _, cycles in problems))
    xid_text = "no Xid events in the kernel log" if facts.kernel_log is not None else ""
    return Verdict(True, "; ".join([t for t in [xid_text] if t] + notes))


FLOORS: tuple[tuple[str, Callable[[NodeFacts, Expected], Verdict]], ...] = (
    ("pci", pci_floor),
    ("link", link_floor),
    ("driver", driver_floor),
    ("nvml", nvml_floor),
    ("health", health_floor),
)
FLOOR_NAMES = tuple(name for name, _ in FLOORS)


def walk(facts: NodeFacts, expected: Expected, node: str) -> NodeReport:
    floors: list[Floor] = []
    first: tuple[str, Verdict] | None = None
    stopped = False
    for name, check in FLOORS:
        if stopped:
            floors.append(Floor(name, None, NOT_CHECKED))
            continue
        verdict = check(facts, expected)
        floors.append(Floor(name, verdict.ok, verdict.detail))
        if verdict.ok is False:
            first = first or (name, verdict)
            stopped = not verdict.walk_on
    if first is None:
        return NodeReport(node, tuple(floors), None, None, facts=facts_json(facts))
    name, verdict = first
    return NodeReport(node, tuple(floors), name, verdict.fix, verdict.power_cycle, facts_json(facts))


def facts_json(facts: NodeFacts) -> dict[str, object]:
    version = facts.module.sys_version or _proc_version(facts.module.proc_version)

    def name(address: str) -> str | None:
        gpu = nvml_gpu(facts.nvml, address) if facts.nvml else None
        return str(gpu["name"]) if gpu and gpu.get("name") else None

    return {
        "cards": [
            {"address": g.address, "id": g.id, "subsystem": g.subsystem, "name": name(g.address)} for g in facts.gpus
        ],
        "driver": version,
        "machineId": facts.machine_id,
        "bootId": facts.boot_id,
    }


def report_json(report: NodeReport) -> dict[str, object]:
    """doctor's shape: node, floors, firstBroken, fix {traps, command}, and `powerCycle`: whether the fix is a
    power cycle of the VM (what `gpu-pool repair` reads)."""
    traps = (
        ["trap 7: Failed to initialize NVML: Driver/library version mismatch"]
        if report.fix and "trap 7" in report.fix
        else []
    )
    return {
        "node": report.node,
        "floors": [{"name": f.name, "ok": f.ok, "detail": f.detail} for f in report.floors],
        "firstBroken": report.first_broken,
        "fix": None
        if report.fix is None
        else {"traps": traps, "command": report.fix, "powerCycle": report.power_cycle},
        "facts": report.facts,
    }


def table(reports: Sequence[NodeReport]) -> str:
    """The table doctor prints, in plain text (no rich on a node)."""
    lines: list[str] = []
    for report in reports:
        verdict = "healthy" if report.healthy else f"broken at {report.first_broken}"
        lines.append(f"{report.node}: {verdict}")
        rows = [("floor", "state", "detail")] + [
            (f.name, "-" if f.ok is None else "ok" if f.ok else "BROKEN", f.detail) for f in report.floors
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(2)]
        for index, row in enumerate(rows):
            lines.append(f" {row[0]:<{widths[0]}}   {row[1]:<{widths[1]}}   {row[2]}".rstrip())
            if index == 0:
                lines.append("─" * (widths[0] + widths[1] + 8 + max(len(r[2]) for r in rows)))
        if report.fix:
            lines.append(f"  next: {report.fix}")
    return "\n".join(lines) + "\n"
