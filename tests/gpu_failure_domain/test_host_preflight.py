"""The Proxmox host preflight: the card is where the config says and alone in its IOMMU group."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from offline.recording import Recording
from tests.proxmox_hardware import answering, device, ms01_host

Run = Callable[..., Recording]


def test_preflight_passes_on_the_articles_hardware_and_is_reported(run_stack_program: Run, prod_config, monitor):
    outputs = run_stack_program(prod_config).stack_outputs
    assert outputs["failureDomains"]["dc1"]["preflight"].startswith("passed: 10de:25b0")
    calls = [i for i in monitor.recording.invocations if i.token == "proxmoxve:hardware/getPci:getPci"]
    assert sorted(c.args["nodeName"] for c in calls) == ["pve-dc1", "pve-dc2", "pve-dc3"]


BAD_HARDWARE = [
    (
        "card missing",
        ms01_host(gpu_at="0000:02:00"),
        "no PCI device at 0000:01:00; NVIDIA devices on this host: 0000:02:00.0",
    ),
    (
        "another vendor's card",
        [device("0000:01:00.0", "1002", "73bf", 14, name="Navi 21")],
        "0000:01:00.0 is 1002:73bf 'Navi 21', not an NVIDIA device",
    ),
    (
        "another NVIDIA card",
        [device("0000:01:00.0", "10de", "2882", 14, name="RTX 4060"), device("0000:01:00.1", "10de", "22be", 14)],
        "is 10de:2882 'RTX 4060', but gpu.vendorDeviceId says 10de:25b0",
    ),
    (
        "shared IOMMU group",
        [*ms01_host(), device("0000:02:00.0", "8086", "125c", 14, subsystem="8086:0000", name="I226-V")],
        "shares IOMMU group 14 with 0000:02:00.0",
    ),
    ("IOMMU off", ms01_host(gpu_group=-1, audio_group=-1), "is in no IOMMU group: IOMMU is off"),
    ("group moved", ms01_host(gpu_group=15, audio_group=15), "is in IOMMU group 15, config says 14"),
]


@pytest.mark.parametrize(("case", "table", "expected"), BAD_HARDWARE, ids=[c[0] for c in BAD_HARDWARE])
def test_preflight_fails_the_plan_naming_domain_node_and_what_was_found(
    case: str, table: list[dict[str, Any]], expected: str, run_stack_program: Run, prod_config, pci_tables, monitor
):
    pci_tables["pve-dc2"] = table
    with pytest.raises(pulumi.RunError) as raised:
        run_stack_program(prod_config)
    message = str(raised.value)
    assert "domain dc2 (node pve-dc2)" in message and expected in message, message
    assert not [r for r in monitor.recording.registrations if r.type.startswith(("proxmoxve:index", "gpu-pool"))]


def test_preflight_host_check_refuses_a_card_not_bound_to_vfio(prod_config, monkeypatch):
    from offline.runner import install_mocks, run_main, set_config, to_engine_config

    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.socket")
    install_mocks("test", invoke=answering(host_check_stdout="nvidia\n24\n"))
    prod_config["gpu-pool:preflight"] = {"hostCheck": True}
    engine, secret_keys = to_engine_config(prod_config, {})
    set_config(engine, secret_keys)
    with pytest.raises(pulumi.RunError, match=r"bound to 'nvidia' on the host, not vfio-pci"):
        run_main()


def test_preflight_can_be_disabled_and_says_so(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu-pool:preflight"] = {"enabled": False}
    outputs = run_stack_program(prod_config).stack_outputs
    assert outputs["failureDomains"]["dc3"]["preflight"] == "skipped: gpu-pool:preflight.enabled is false"
    assert not [i for i in monitor.recording.invocations if "getPci" in i.token]


def test_offline_preview_reports_preflight_skipped_rather_than_passed(tmp_path):
    import json

    from offline.preview import main

    assert main(["--stack", "prod", "--out", str(tmp_path), "--quiet"]) == 0
    outputs = json.loads((tmp_path / "plan.json").read_text())["outputs"]
    assert {d["preflight"] for d in outputs["failureDomains"].values()} == {
        "skipped: the offline preview has no Proxmox API or cluster to ask"
    }


def test_a_pcie_root_port_in_the_cards_iommu_group_is_accepted(run_stack_program: Run, prod_config, pci_tables):
    # vfio-pci takes the endpoints of a group; bridges and root ports may share it (no ACS on the PEG port).
    root_port = device("0000:00:01.0", "8086", "a70d", 14, subsystem="8086:7270", name="Raptor Lake PEG root port")
    root_port["class"] = "0x060400"
    pci_tables["pve-dc1"] = [*ms01_host(), root_port]
    outputs = run_stack_program(prod_config).stack_outputs
    assert outputs["failureDomains"]["dc1"]["preflight"].startswith("passed:")


def test_another_endpoint_in_the_cards_iommu_group_still_fails_the_plan(
    run_stack_program: Run, prod_config, pci_tables, monitor
):
    nic = device("0000:02:00.0", "8086", "125c", 14, subsystem="8086:0000", name="I226-V NIC")
    nic["class"] = "0x020000"
    pci_tables["pve-dc1"] = [*ms01_host(), nic]
    with pytest.raises(pulumi.RunError, match=r"shares IOMMU group 14 with 0000:02:00.0 \(I226-V NIC\)"):
        run_stack_program(prod_config)
    assert [r.type for r in monitor.recording.registrations if not r.type.startswith("pulumi:providers:")] == []


def test_the_host_check_logs_in_on_the_configured_ssh_port():
    from components.gpu_failure_domain.host_preflight import host_check_command
    from components.stack_check import validate_stack
    from offline.runner import read_stack_file

    stack = validate_stack({k.removeprefix("gpu-pool:"): v for k, v in read_stack_file("prod").items()})
    command = host_check_command(stack.failure_domains[0], "root", "10.10.21.5", 2222)
    assert command.startswith("ssh -o BatchMode=yes -o ConnectTimeout=10 -p 2222 root@10.10.21.5 ")
