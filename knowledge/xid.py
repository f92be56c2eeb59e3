"""Xid events node-check names in a GPU worker's kernel log: meaning and what to do in this project's setup.

Source: NVIDIA, "Xid Errors" and its "Xid Catalog" (docs.nvidia.com/deploy/xid-errors/index.html,
docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, columns Mnemonic, Description and Resolution
Bucket (Immediate Action)), read 2026-12; the buckets checked against NVIDIA's own machine-readable copy of it,
NVIDIA/NVSentinel @ e712af97f39114c3ad725bb3db42793922529667,
distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv (code, mnemonic, bucket; its
UNEXPECTED_ERR_REPORT_ISSUE is the catalogue's CONTACT_SUPPORT, RESTART_BM its bare-metal restart). The meanings
are the catalogue's; the `action` column maps its resolution bucket onto a GPU passed through into a Proxmox
VM: a bucket that resets the GPU or restarts the machine means a full power cycle of the VM from Proxmox (`qm
stop` + `qm start`: a reboot inside the guest keeps the VM's PCI state), and a restart of the host where the
card does not come back. Only the codes a PCIe card in a VM meets are listed; any other code is reported as
unknown with the catalogue's address. The rows and buckets are those of NVSentinel @ 6f8b0fcf (the same file):
46 GPU timeout, 109 context-switch timeout, 140 ECC error escape and 143 GPU init error are RESET_GPU there.

Xid 154 carries no action of its own (its bucket is "follow guidance as it applies to another Xid"): the line
names it, `154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)`. NVSentinel's own
parser maps "GPU Reset Required" and "Drain and Reset" to a component reset and "Node Reboot Required" to
RESTART_BM (health-monitors/syslog-health-monitor/pkg/xid/parser/sidecar.go @ 6f8b0fcf). For a card passed
through into a VM, the machine to restart is the Proxmox host: a VM power cycle cannot reset a card its host
cannot reach, so a reboot action is the host's (HOST_RESET), never `gpu-pool repair`'s.

The kernel line is `NVRM: Xid (PCI:0000:00:06): 79, pid=..., GPU has fallen off the bus.`: the address without
the function, and on a MIG-partitioned card (an H100/H200 can be) ` GPU-I:05` or ` GPU-I:05 GPU-CI:01` inside
the parenthesis (NVIDIA/open-gpu-kernel-modules 580, src/nvidia/src/kernel/gpu/rc/kernel_rc.c, krcReportXid's
three portDbgPrintf formats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

CATALOGUE_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

XID_LINE = re.compile(
    r"NVRM: Xid \(PCI:(?P<addr>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?(?: GPU-C?I:\d+)*\): "
    r"(?P<code>\d+)"
)

# Resolution buckets, as the fix a node-check user runs.
RESTART_APP = "restart the application"
IGNORE = "nothing to do for this event alone"
RESET_GPU = "drain the node and power cycle the VM from Proxmox"
POWER_CYCLE = "power cycle the VM from Proxmox; if it recurs, the card, its seating, riser or power on the host"
CONTACT_SUPPORT = "collect nvidia-bug-report.sh output and contact NVIDIA support"
# No "power cycle" in it: node_floors names the VM's power cycle only for the buckets a power cycle fixes.
HOST_RESET = (
    "the card needs its host: reset it on the Proxmox host (PCI remove/rescan, or reboot the host, which takes its "
    "whole failure domain out); stopping and starting the VM cannot reset a card its host cannot reach"
)

# Xid 154's named actions (the text in the last parenthesis of its line), to this table's buckets. A reboot
# names the machine the card sits in: for a passed-through card, the Proxmox host.
_XID_154_LINE = re.compile(
    r"recovery action changed from 0x[0-9a-fA-F]+ \([^)]*\) to 0x[0-9a-fA-F]+ \((?P<action>[^)]*)\)"
)
_XID_154_ACTIONS: MappingProxyType[str, str] = MappingProxyType(
    {
        "none": IGNORE,
        "gpu reset required": RESET_GPU,
        "drain and reset": RESET_GPU,
        "pf flr": RESET_GPU,
        "node reboot required": HOST_RESET,
        "os reboot": HOST_RESET,
    }
)


@dataclass(frozen=True)
class Xid:
    code: int
    meaning: str
    action: str

    @property
    def node_problem(self) -> bool:
        """False for events the application causes and recovers from (the card itself is fine)."""
        return self.action not in (RESTART_APP, IGNORE)

    @property
    def power_cycle_fixes(self) -> bool:
        """The catalogue resets the GPU or restarts the machine: for a card passed into a VM, a power cycle of the
        VM from Proxmox (what `gpu-pool repair` does). Support cases and application faults it does not fix."""
        return self.action in (RESET_GPU, POWER_CYCLE)


XIDS = MappingProxyType(
    {
        x.code: x
        for x in (
            Xid(13, "graphics engine exception (usually the application)", RESTART_APP),
            Xid(31, "GPU memory page fault (usually the application)", RESTART_APP),
            Xid(43, "GPU stopped processing (the application's channel was reset)", IGNORE),
            Xid(45, "preemptive cleanup, due to a previous error or the application being killed", RESTART_APP),
            Xid(46, "GPU stopped responding (GPU timeout)", RESET_GPU),
            Xid(48, "double-bit ECC error (uncorrectable memory error)", RESET_GPU),
            Xid(61, "internal micro-controller breakpoint/warning", CONTACT_SUPPORT),
            Xid(62, "internal micro-controller halt", RESET_GPU),
            # The catalogue's bucket for 63 is IGNORE; the driver's own line says "reset gpu to activate", and a
            # remap stays pending until the card is reset, so a node with one is told to reset it.
            Xid(63, "ECC page retirement or row remapping recorded", RESET_GPU),
            Xid(64, "ECC page retirement or row remapping failure", RESET_GPU),
            Xid(74, "NVLink error", RESET_GPU),
            Xid(79, "GPU has fallen off the bus", POWER_CYCLE),
            Xid(92, "high single-bit ECC error rate", IGNORE),
            Xid(94, "contained ECC error", RESTART_APP),
            Xid(95, "uncontained ECC error", RESET_GPU),
            Xid(109, "context switch timeout", RESET_GPU),
            Xid(119, "GSP RPC timeout", RESET_GPU),
            Xid(120, "GSP error", RESET_GPU),
            Xid(140, "unrecovered ECC error escaped (uncorrectable memory error)", RESET_GPU),
            Xid(143, "GPU initialisation error", RESET_GPU),
            # Without its line the action is unknown: a support case until the line is read (lookup's `line`).
            Xid(154, "GPU recovery action changed (the line names the action)", CONTACT_SUPPORT),
        )
    }
)


def _xid_154(line: str) -> Xid:
    match = _XID_154_LINE.search(line)
    if match is None:
        return XIDS[154]
    named = match["action"].strip()
    action = _XID_154_ACTIONS.get(named.lower(), CONTACT_SUPPORT)
    return Xid(154, f"GPU recovery action changed to {named!r}", action)


def lookup(code: int, line: str = "") -> Xid:
    """The table's row for `code`; for 154, the action its kernel `line` names."""
    if code == 154:
        return _xid_154(line)
    return XIDS.get(code) or Xid(code, f"not in this table: see {CATALOGUE_URL}", CONTACT_SUPPORT)
