"""The Xid table against NVIDIA's machine-readable catalogue (NVIDIA/NVSentinel @ 6f8b0fcf,
distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv: code, mnemonic, bucket), and Xid 154's
named action (FIELD-REVIEW-5 H4)."""

from __future__ import annotations

import pytest

from knowledge.xid import CONTACT_SUPPORT, HOST_RESET, IGNORE, RESET_GPU, XIDS, lookup

# The catalogue's rows for the codes FR4 H3 / FR5 H4 found missing, as the csv has them.
CATALOGUE_ROWS = {
    46: ("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU"),
    109: ("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU"),
    143: ("GPU_INIT_ERROR", "RESET_GPU"),
}


@pytest.mark.parametrize("code", sorted(CATALOGUE_ROWS))
def test_a_reset_gpu_row_of_the_catalogue_is_a_power_cycle_of_the_vm(code: int) -> None:
    xid = lookup(code)

    assert code in XIDS
    assert xid.action == RESET_GPU and xid.power_cycle_fixes


def line(action: str) -> str:
    return f"NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 ({action})"


@pytest.mark.parametrize(
    ("named", "action"),
    [
        # NVSentinel's own parser: "GPU Reset Required"/"Drain and Reset" -> COMPONENT_RESET, "Node Reboot
        # Required" -> RESTART_BM (health-monitors/syslog-health-monitor/pkg/xid/parser/sidecar.go).
        ("GPU Reset Required", RESET_GPU),
        ("Drain and Reset", RESET_GPU),
        ("Node Reboot Required", HOST_RESET),
        ("OS Reboot", HOST_RESET),
        ("None", IGNORE),
        ("Something New", CONTACT_SUPPORT),
    ],
)
def test_xid_154_takes_the_action_its_line_names(named: str, action: str) -> None:
    xid = lookup(154, line(named))

    assert xid.action == action
    assert named in xid.meaning


def test_a_reboot_named_by_xid_154_is_the_hosts_not_a_power_cycle_of_the_vm() -> None:
    xid = lookup(154, line("Node Reboot Required"))

    assert xid.node_problem and not xid.power_cycle_fixes
    assert "Proxmox host" in xid.action


def test_xid_154_without_its_line_is_no_reason_to_power_cycle() -> None:
    assert not lookup(154).power_cycle_fixes
